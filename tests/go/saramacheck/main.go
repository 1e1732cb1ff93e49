// Command saramacheck drives IBM/sarama against one Kafka-compatible broker and prints
// one JSON object per line; tests/ecosystem/test_go_clients.py checks every line against
// an oracle computed from the "produced" lines.
//
// Usage: saramacheck BOOTSTRAP PREFIX BASE_MS SEED
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"chronolog.test/goclients/checkio"
	"github.com/IBM/sarama"
)

const (
	partitions = 2
	perPart    = 30
)

var (
	emit = checkio.Emit
	fail = checkio.Fail
)

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = "saramacheck"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	return cfg
}

func main() {
	bootstrap, prefix, base, seed := checkio.Args("saramacheck")
	addrs := []string{bootstrap}
	topic, group := prefix+"-t", prefix+"-g"

	client, err := sarama.NewClient(addrs, config())
	if err != nil {
		fail("client", err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		fail("admin", err)
	}
	detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}
	if err := admin.CreateTopic(topic, detail, false); err != nil {
		fail("createTopic", err)
	}

	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		fail("producer", err)
	}
	stamps := checkio.Timestamps(seed, base, 300_000, partitions, perPart)
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPart; i++ {
			ts := stamps[int(p)*perPart+i]
			key, value := fmt.Sprintf("k%d-%d", p, i), fmt.Sprintf("v%d-%d", p, i)
			msg := &sarama.ProducerMessage{Topic: topic, Partition: p, Timestamp: time.UnixMilli(ts),
				Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)}
			gotP, offset, err := producer.SendMessage(msg)
			if err != nil {
				fail("produce", err)
			}
			emit(map[string]any{"event": "produced", "partition": gotP, "offset": offset,
				"timestamp": ts, "key": key, "value": value})
		}
	}
	if err := producer.Close(); err != nil {
		fail("producerClose", err)
	}

	// GetOffset by time (ListOffsets, READ_UNCOMMITTED) and the two special values.
	qs := checkio.Queries(stamps, base, 300_000)
	for p := int32(0); p < partitions; p++ {
		for _, q := range append(qs, sarama.OffsetNewest, sarama.OffsetOldest) {
			offset, err := client.GetOffset(topic, p, q)
			if err != nil {
				fail("getOffset", err)
			}
			emit(map[string]any{"event": "getOffset", "query": q, "partition": p, "offset": offset})
		}
	}

	consumeGroup(addrs, topic, group)
	committed, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
	if err != nil {
		fail("listConsumerGroupOffsets", err)
	}
	for p := int32(0); p < partitions; p++ {
		block := committed.GetBlock(topic, p)
		if block == nil {
			fail("listConsumerGroupOffsets", fmt.Errorf("no block for partition %d", p))
		}
		emit(map[string]any{"event": "groupCommitted", "partition": p, "offset": block.Offset})
	}
	emit(map[string]any{"event": "done"})
}

// handler prints every record it is given and marks it; the session commits on exit.
type handler struct {
	mu     sync.Mutex
	seen   int
	want   int
	cancel context.CancelFunc
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		emit(map[string]any{"event": "groupConsumed", "partition": m.Partition, "offset": m.Offset,
			"timestamp": m.Timestamp.UnixMilli(), "key": string(m.Key), "value": string(m.Value)})
		s.MarkMessage(m, "")
		h.seen++
		if h.seen == h.want {
			s.Commit()
			h.cancel()
		}
		h.mu.Unlock()
	}
	return nil
}

// consumeGroup reads the topic from the oldest offset in a classic consumer group,
// commits, and leaves.
func consumeGroup(addrs []string, topic, group string) {
	cg, err := sarama.NewConsumerGroup(addrs, group, config())
	if err != nil {
		fail("consumerGroup", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &handler{want: partitions * perPart, cancel: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil {
			fail("consume", err)
		}
	}
	if err := cg.Close(); err != nil {
		fail("consumerGroupClose", err)
	}
	if h.seen != h.want {
		fail("consume", fmt.Errorf("read %d of %d records before the deadline", h.seen, h.want))
	}
}
