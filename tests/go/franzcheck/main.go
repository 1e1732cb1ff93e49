// Command franzcheck drives franz-go (kgo + kadm) against one Kafka-compatible broker
// and prints one JSON object per line; tests/ecosystem/test_go_clients.py checks every
// line against an oracle computed from the "produced" lines.
//
// Usage: franzcheck BOOTSTRAP PREFIX BASE_MS SEED
package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"chronolog.test/goclients/checkio"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 3
	perPart    = 40
	txnSize    = 3
)

var txnOutcomes = []string{"commit", "abort", "commit"}

var (
	emit = checkio.Emit
	fail = checkio.Fail
)

func main() {
	seeds, prefix, base, seed := checkio.Args("franzcheck")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	topic, txnTopic, group := prefix+"-t", prefix+"-txn", prefix+"-g"
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		fail("client", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range []string{topic, txnTopic} {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, t); err != nil {
			fail("createTopic", err)
		}
	}

	// Produce with explicit, out-of-order CreateTime timestamps (idempotent by default).
	stamps := checkio.Timestamps(seed, base, 600_000, partitions, perPart)
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPart; i++ {
			ts := stamps[int(p)*perPart+i]
			r := &kgo.Record{
				Topic: topic, Partition: p, Timestamp: time.UnixMilli(ts),
				Key: []byte(fmt.Sprintf("k%d-%d", p, i)), Value: []byte(fmt.Sprintf("v%d-%d", p, i)),
			}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				fail("produce", err)
			}
			emit(map[string]any{"event": "produced", "partition": r.Partition, "offset": r.Offset,
				"timestamp": r.Timestamp.UnixMilli(), "key": string(r.Key), "value": string(r.Value)})
		}
	}

	// kadm: offsets by time, for every produced timestamp, one ms after each, and both ends.
	qs := checkio.Queries(stamps, base, 600_000)
	for _, q := range qs {
		listed, err := adm.ListOffsetsAfterMilli(ctx, q, topic)
		if err != nil {
			fail("listOffsetsAfterMilli", err)
		}
		listed.Each(func(o kadm.ListedOffset) {
			e := ""
			if o.Err != nil {
				e = o.Err.Error()
			}
			emit(map[string]any{"event": "afterMilli", "query": q, "partition": o.Partition,
				"offset": o.Offset, "timestamp": o.Timestamp, "error": e})
		})
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		fail("listEndOffsets", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		emit(map[string]any{"event": "endOffset", "partition": o.Partition, "offset": o.Offset})
	})

	consumeFromTimes(ctx, seeds, topic, stamps)
	consumeGroup(ctx, seeds, topic, group, adm)
	transactions(ctx, seeds, txnTopic, prefix)
	emit(map[string]any{"event": "done"})
}

// consumeFromTimes starts direct consumers at kgo.NewOffset().AfterMilli(t) for a few
// produced times that every partition has a record at or after, and prints the first
// record each partition delivers.
func consumeFromTimes(ctx context.Context, seeds, topic string, stamps []int64) {
	reachable := int64(math.MaxInt64) // the smallest per-partition maximum timestamp
	for p := 0; p < partitions; p++ {
		reachable = min(reachable, slices.Max(stamps[p*perPart:(p+1)*perPart]))
	}
	sorted := slices.Sorted(slices.Values(stamps))
	done := map[int64]bool{}
	for _, q := range []int64{sorted[0] - 1, sorted[len(sorted)/3], sorted[len(sorted)/2], reachable} {
		if q > reachable || done[q] {
			continue
		}
		done[q] = true
		offsets := map[int32]kgo.Offset{}
		for p := int32(0); p < partitions; p++ {
			offsets[p] = kgo.NewOffset().AfterMilli(q)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
		if err != nil {
			fail("fromTimeClient", err)
		}
		first := map[int32]bool{}
		for len(first) < partitions {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				fail("fromTimePoll", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if !first[r.Partition] {
					first[r.Partition] = true
					emit(map[string]any{"event": "fromTime", "query": q, "partition": r.Partition,
						"offset": r.Offset, "timestamp": r.Timestamp.UnixMilli()})
				}
			})
		}
		cl.Close()
	}
}

// consumeGroup reads the topic from the start as one member of a classic group, commits,
// and prints what it read and what the group committed.
func consumeGroup(ctx context.Context, seeds, topic, group string, adm *kadm.Client) {
	gc, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		fail("groupClient", err)
	}
	for n := 0; n < partitions*perPart; {
		fs := gc.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			fail("groupPoll", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			emit(map[string]any{"event": "groupConsumed", "partition": r.Partition, "offset": r.Offset,
				"timestamp": r.Timestamp.UnixMilli(), "key": string(r.Key), "value": string(r.Value)})
		})
	}
	if err := gc.CommitUncommittedOffsets(ctx); err != nil {
		fail("groupCommit", err)
	}
	gc.Close() // leaves the group
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		fail("fetchOffsets", err)
	}
	committed.Each(func(o kadm.OffsetResponse) {
		emit(map[string]any{"event": "groupCommitted", "partition": o.Partition, "offset": o.At})
	})
}

// transactions writes len(txnOutcomes) transactions of txnSize records to partition 0,
// committing or aborting each, then reads the partition read_committed and read_uncommitted.
func transactions(ctx context.Context, seeds, topic, prefix string) {
	tc, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.TransactionalID(prefix+"-tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		fail("txnClient", err)
	}
	defer tc.Close()
	lastOf := map[string]int64{"read_committed": -1, "read_uncommitted": -1}
	for t, outcome := range txnOutcomes {
		if err := tc.BeginTransaction(); err != nil {
			fail("beginTransaction", err)
		}
		for i := 0; i < txnSize; i++ {
			r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("txn%d-%d", t, i))}
			if err := tc.ProduceSync(ctx, r).FirstErr(); err != nil {
				fail("txnProduce", err)
			}
			lastOf["read_uncommitted"] = r.Offset
			if outcome == "commit" {
				lastOf["read_committed"] = r.Offset
			}
			emit(map[string]any{"event": "txnProduced", "txn": t, "outcome": outcome,
				"offset": r.Offset, "value": string(r.Value)})
		}
		if err := tc.EndTransaction(ctx, kgo.TransactionEndTry(outcome == "commit")); err != nil {
			fail("endTransaction", err)
		}
	}
	for _, iso := range []struct {
		name  string
		level kgo.IsolationLevel
	}{{"read_committed", kgo.ReadCommitted()}, {"read_uncommitted", kgo.ReadUncommitted()}} {
		rc, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.FetchIsolationLevel(iso.level),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			fail("txnReader", err)
		}
		// Read until the last record this isolation level should see (or time out): a
		// reader that misses records or shows aborted ones both show in the output.
		readCtx, stop := context.WithTimeout(ctx, 20*time.Second)
		var last int64 = -1
		for last < lastOf[iso.name] {
			fs := rc.PollFetches(readCtx)
			if readCtx.Err() != nil {
				break
			}
			if err := fs.Err0(); err != nil {
				fail("txnRead", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				last = r.Offset
				emit(map[string]any{"event": "txnRead", "isolation": iso.name,
					"offset": r.Offset, "value": string(r.Value)})
			})
		}
		stop()
		rc.Close()
	}
}
