// Kafka's Java client (kafka-clients 4.x) doing what a Java user does, one JSON line per answer.
//
// Run without a build (JEP 330):
//   java -cp "$CP" ClientCheck.java <bootstrap> <prefix> <base-ts-ms> [client.properties]
// client.properties: extra settings for every client (security.protocol, SASL, truststore).
// tests/ecosystem/test_java_client.py checks every line against an oracle computed from the
// "produced" lines, and (under make test-ecosystem) against the same run on the real Kafka.
// Default producer settings throughout: idempotent, acks=all.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ClientCheck {
    // Out of order on purpose; partition = index % 2.
    static final long[] DELTAS = {500, 100, 900, 100, 300, 700, 200, 800, 50, 400, 650, 350};

    static String bootstrap;
    static String topic;
    static String txTopic;
    static long base;
    static Properties security = new Properties();

    static String q(Object o) {
        if (o == null) return "null";
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        if (o instanceof Collection<?> c) {
            return c.stream().map(ClientCheck::q).collect(Collectors.joining(",", "[", "]"));
        }
        if (o instanceof Map<?, ?> m) {
            return m.entrySet().stream().map(e -> q(String.valueOf(e.getKey())) + ":" + q(e.getValue()))
                    .collect(Collectors.joining(",", "{", "}"));
        }
        return "\"" + o.toString().replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static void emit(String event, Object... kv) {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        System.out.println(q(m));
        System.out.flush();
    }

    static Properties props(Object... kv) {
        Properties p = new Properties();
        p.putAll(security);
        p.put("bootstrap.servers", bootstrap);
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    static Properties consumerProps(Object... kv) {
        Properties p = props("key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName(),
                "enable.auto.commit", "false", "auto.offset.reset", "earliest");
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    static Map<String, Object> rec(ConsumerRecord<String, String> r) {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        m.put("partition", r.partition());
        m.put("offset", r.offset());
        m.put("timestamp", r.timestamp());
        m.put("key", r.key());
        m.put("value", r.value());
        return m;
    }

    /** Order across partitions is the client's choice (fetch sessions rotate them): sort. */
    static List<Map<String, Object>> byPartitionAndOffset(List<Map<String, Object>> records) {
        records.sort(java.util.Comparator.comparingInt((Map<String, Object> r) -> (Integer) r.get("partition"))
                .thenComparingLong(r -> (Long) r.get("offset")));
        return records;
    }

    /** Poll assigned partitions until each position reaches its end offset (isolation-aware). */
    static List<Map<String, Object>> drain(KafkaConsumer<String, String> c) {
        List<Map<String, Object>> out = new ArrayList<>();
        Map<TopicPartition, Long> end = c.endOffsets(c.assignment());
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline) {
            boolean done = true;
            for (TopicPartition tp : c.assignment()) done &= c.position(tp) >= end.get(tp);
            if (done) break;
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) out.add(rec(r));
        }
        return byPartitionAndOffset(out);
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1] + "-data";
        txTopic = args[1] + "-txn";
        base = Long.parseLong(args[2]);
        if (args.length > 3) {
            try (java.io.FileReader r = new java.io.FileReader(args[3])) { security.load(r); }
        }
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        List<TopicPartition> tps = List.of(p0, p1);

        try (Admin admin = Admin.create(props())) {
            admin.createTopics(List.of(
                    new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "86400000")),
                    new NewTopic(txTopic, 1, (short) 1))).all().get();
            DescribeClusterResult dc = admin.describeCluster();
            Collection<Node> nodes = dc.nodes().get();
            Node controller = dc.controller().get();
            emit("cluster", "nodes", nodes.size(), "clusterIdSet", dc.clusterId().get() != null,
                    "controllerIsTheNode", nodes.iterator().next().id() == controller.id(),
                    "host", nodes.iterator().next().host());
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
            emit("topicConfig", "retention.ms", cfg.get("retention.ms").value(),
                    "retention.ms.source", cfg.get("retention.ms").source().toString(),
                    "message.timestamp.type", cfg.get("message.timestamp.type").value(),
                    "cleanup.policy", cfg.get("cleanup.policy").value());
        }

        // Producer with explicit CreateTime timestamps, default (idempotent) settings.
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props(
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName()))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < DELTAS.length; i++) {
                sent.add(p.send(new ProducerRecord<>(topic, i % 2, base + DELTAS[i], "k" + i, "v" + i)));
            }
            for (int i = 0; i < sent.size(); i++) {
                RecordMetadata md = sent.get(i).get();
                emit("produced", "partition", md.partition(), "offset", md.offset(),
                        "timestamp", md.timestamp(), "key", "k" + i, "value", "v" + i);
            }
        }

        List<Long> probes = new ArrayList<>();
        probes.add(base - 1);
        for (long d : DELTAS) probes.add(base + d);
        probes.add(base + 1000);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps())) {
            c.assign(tps);
            for (long probe : probes) {
                Map<TopicPartition, Long> query = new HashMap<>();
                for (TopicPartition tp : tps) query.put(tp, probe);
                Map<TopicPartition, OffsetAndTimestamp> got = c.offsetsForTimes(query);
                for (TopicPartition tp : tps) {
                    OffsetAndTimestamp ot = got.get(tp);
                    emit("offsetsForTimes", "probe", probe, "partition", tp.partition(),
                            "offset", ot == null ? null : ot.offset(),
                            "timestamp", ot == null ? null : ot.timestamp());
                }
            }
            long from = base + 300;
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : tps) query.put(tp, from);
            Map<TopicPartition, OffsetAndTimestamp> got = c.offsetsForTimes(query);
            for (TopicPartition tp : tps) {
                if (got.get(tp) == null) c.seekToEnd(List.of(tp));
                else c.seek(tp, got.get(tp).offset());
            }
            emit("seekPoll", "probe", from, "records", drain(c));
            emit("ends", "beginning", c.beginningOffsets(tps).values(), "end", c.endOffsets(tps).values());
        }

        for (String protocol : List.of("classic", "consumer")) {
            String group = args[1] + "-group-" + protocol;
            List<Map<String, Object>> seen = new ArrayList<>();
            Map<String, Object> committed = new TreeMap<>();
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(
                    "group.id", group, "group.protocol", protocol))) {
                c.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                while (seen.size() < DELTAS.length && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) seen.add(rec(r));
                }
                c.commitSync();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(new HashSet<>(tps)).entrySet()) {
                    committed.put(String.valueOf(e.getKey().partition()),
                            e.getValue() == null ? null : e.getValue().offset());
                }
            }
            emit("group", "protocol", protocol, "records", byPartitionAndOffset(seen), "committed", committed);
        }

        // Transactions: commit, abort, commit; read back under both isolation levels.
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props(
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName(),
                "transactional.id", args[1] + "-tx"))) {
            p.initTransactions();
            int n = 0;
            for (String outcome : List.of("commit", "abort", "commit")) {
                p.beginTransaction();
                for (int i = 0; i < 3; i++, n++) {
                    p.send(new ProducerRecord<>(txTopic, 0, base + n, "t" + n, outcome + n));
                }
                p.flush();
                if (outcome.equals("commit")) p.commitTransaction();
                else p.abortTransaction();
            }
        }
        TopicPartition tx0 = new TopicPartition(txTopic, 0);
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(
                    "isolation.level", isolation))) {
                c.assign(List.of(tx0));
                c.seekToBeginning(List.of(tx0));
                List<Map<String, Object>> got = drain(c);
                emit("txnRead", "isolation", isolation, "records", got,
                        "end", c.endOffsets(List.of(tx0)).get(tx0));
            }
        }

        // An open transaction: read_committed stops at its first offset (the LSO).
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props(
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName(),
                "transactional.id", args[1] + "-open"))) {
            p.initTransactions();
            // Its records are stamped a minute ahead (within message.timestamp.after.max.ms),
            // above the markers already written (they carry their write time).
            long ahead = System.currentTimeMillis() + 60_000;
            p.beginTransaction();
            for (int i = 0; i < 2; i++) p.send(new ProducerRecord<>(txTopic, 0, ahead + i, "o" + i, "open" + i));
            p.flush();
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(
                        "isolation.level", isolation))) {
                    c.assign(List.of(tx0));
                    OffsetAndTimestamp old = c.offsetsForTimes(Map.of(tx0, base + 50)).get(tx0);
                    OffsetAndTimestamp open = c.offsetsForTimes(Map.of(tx0, ahead - 30_000)).get(tx0);
                    emit("openTxn", "isolation", isolation, "end", c.endOffsets(List.of(tx0)).get(tx0),
                            "offsetForOldTime", old == null ? null : old.offset(),
                            "offsetForOpenTime", open == null ? null : open.offset());
                }
            }
            try (Admin admin = Admin.create(props())) {
                for (IsolationLevel level : IsolationLevel.values()) {
                    ListOffsetsResultInfo i = admin.listOffsets(Map.of(tx0, OffsetSpec.latest()),
                            new ListOffsetsOptions(level)).all().get().get(tx0);
                    emit("openTxnAdminLatest", "isolation", level.toString(), "offset", i.offset());
                }
            }
            p.abortTransaction();
        }

        try (Admin admin = Admin.create(props())) {
            for (long probe : probes) {
                Map<TopicPartition, OffsetSpec> q = new HashMap<>();
                for (TopicPartition tp : tps) q.put(tp, OffsetSpec.forTimestamp(probe));
                Map<TopicPartition, ListOffsetsResultInfo> r = admin.listOffsets(q).all().get();
                for (TopicPartition tp : tps) {
                    emit("adminListOffsets", "spec", probe, "partition", tp.partition(),
                            "offset", r.get(tp).offset(), "timestamp", r.get(tp).timestamp());
                }
            }
            Map<String, OffsetSpec> specs = new java.util.LinkedHashMap<>();
            specs.put("latest", OffsetSpec.latest());
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
            for (Map.Entry<String, OffsetSpec> s : specs.entrySet()) {
                for (TopicPartition tp : tps) {
                    ListOffsetsResultInfo i = admin.listOffsets(Map.of(tp, s.getValue())).all().get().get(tp);
                    emit("adminListOffsets", "spec", s.getKey(), "partition", tp.partition(),
                            "offset", i.offset(), "timestamp", i.timestamp());
                }
            }
            for (IsolationLevel level : IsolationLevel.values()) {
                ListOffsetsResultInfo i = admin.listOffsets(Map.of(tx0, OffsetSpec.latest()),
                        new ListOffsetsOptions(level)).all().get().get(tx0);
                emit("adminTxnLatest", "isolation", level.toString(), "offset", i.offset());
            }
            long cut = 2;
            long low = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(cut)))
                    .lowWatermarks().get(p0).get().lowWatermark();
            long earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all().get().get(p0).offset();
            emit("deleteRecords", "before", cut, "lowWatermark", low, "earliestAfter", earliest);
        }
        emit("done");
    }
}
