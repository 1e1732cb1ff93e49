// A small Kafka Streams app (kafka-streams 4.x): a windowed count by event time, exactly once.
//
// Run without a build (JEP 330):
//   java -cp "$CP" StreamsCheck.java <bootstrap> <application.id> <input> <output> <state.dir> <window-ms> <grace-ms>
//
// Input: key = sensor, value = room, record timestamp = event time. The app re-keys by room
// (groupBy: a repartition topic), counts per room in tumbling event-time windows
// (TimeWindows, a windowed store with a changelog topic) and writes every update as
// key "room@windowStart", value "count" to <output>, with processing.guarantee=exactly_once_v2.
// The record cache is off, so each counted record makes exactly one update.
// It runs until its standard input closes (or says "stop"), then closes cleanly.
// One JSON line per event on stdout: its topology's topics, its state changes, "closed".
// tests/ecosystem/test_kafka_streams.py drives it and checks the output against an oracle.

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

public class StreamsCheck {
    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        long windowMs = Long.parseLong(args[5]), graceMs = Long.parseLong(args[6]);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((sensor, room) -> room, Grouped.with("by-room", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(windowMs), Duration.ofMillis(graceMs)))
                .count(Materialized.as("counts"))
                .toStream()
                .map((w, n) -> KeyValue.pair(w.key() + "@" + w.window().start(), String.valueOf(n)))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        Topology topology = builder.build();

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);  // one update per counted record
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);  // purge (DeleteRecords) often
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // A broker restart should be ridden out, not end the app: retry for long enough.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 20_000);
        p.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), 60_000);

        KafkaStreams streams = new KafkaStreams(topology, p);
        CountDownLatch dead = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            emit("{\"event\":\"state\",\"from\":\"" + before + "\",\"to\":\"" + now + "\"}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) dead.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"event\":\"uncaught\",\"error\":\"" + String.valueOf(e).replace("\"", "'")
                    .replace("\\", "/").replace("\n", " ") + "\"}");
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();

        Thread stdin = new Thread(() -> {
            try (java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (java.io.IOException ignored) { }
            dead.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        dead.await();
        boolean closed = streams.close(Duration.ofSeconds(30));
        emit("{\"event\":\"closed\",\"clean\":" + closed + ",\"state\":\"" + streams.state() + "\"}");
    }
}
