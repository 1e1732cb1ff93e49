// Kafka's AdminClient (kafka-clients 4.x) through what an operator does, one JSON line per answer.
//
// Run without a build (JEP 330):
//   java -cp "$CP" AdminCheck.java <bootstrap> <prefix> [client.properties|-] [scram-login-properties]
// client.properties: extra client settings (security.protocol, SASL, truststore), "-" for none.
// scram-login-properties: when given, the SCRAM user this program creates also logs in with
// these settings (its username and password filled in here) and lists topics.
// tests/ecosystem/test_java_admin.py checks every line against an oracle and, under
// make test-ecosystem, against the same run on the real Kafka. The broker needs an
// authorizer (ACLs); everything else works with the default one-node settings.

import java.io.FileReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AdminCheck {
    static String bootstrap;
    static Properties security = new Properties();

    static String q(Object o) {
        if (o == null) return "null";
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        if (o instanceof Collection<?> c) {
            return c.stream().map(AdminCheck::q).collect(Collectors.joining(",", "[", "]"));
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

    /** The simple name of the exception a future failed with, or "ok". */
    static String outcome(org.apache.kafka.common.KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }

    /** Kafka applies a change when its metadata log reaches the broker, a moment after the
     *  answer: describe until ``done`` holds, or give the last answer after 10 s. */
    static <T> T settled(java.util.concurrent.Callable<T> describe, java.util.function.Predicate<T> done)
            throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            T got = describe.call();
            if (done.test(got) || System.currentTimeMillis() > deadline) return got;
            Thread.sleep(100);
        }
    }

    static Map<String, Object> configView(Config cfg, String... names) {
        Map<String, Object> m = new TreeMap<>();
        for (String n : names) {
            ConfigEntry e = cfg.get(n);
            m.put(n, e == null ? null : e.value() + " (" + e.source() + ")");
        }
        return m;
    }

    static List<String> aclView(Collection<AclBinding> bindings, String prefix) {
        List<String> out = new ArrayList<>();
        for (AclBinding b : bindings) {
            if (!b.pattern().name().startsWith(prefix)) continue;  // other tests' ACLs
            out.add(b.pattern().resourceType() + ":" + b.pattern().patternType() + ":" + b.pattern().name()
                    + " " + b.entry().principal() + "@" + b.entry().host() + " " + b.entry().operation()
                    + " " + b.entry().permissionType());
        }
        out.sort(null);
        return out;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String prefix = args[1];
        if (args.length > 2 && !args[2].equals("-")) {
            try (FileReader r = new FileReader(args[2])) { security.load(r); }
        }
        String topic = prefix + "-t", other = prefix + "-u";

        try (Admin admin = Admin.create(props())) {
            int node = admin.describeCluster().nodes().get().iterator().next().id();

            // Topics and partitions.
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1), new NewTopic(other, 1, (short) 1)))
                    .all().get();
            emit("createAgain", "outcome", outcome(admin.createTopics(
                    List.of(new NewTopic(topic, 2, (short) 1))).all()));
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            emit("shrinkPartitions", "outcome", outcome(admin.createPartitions(
                    Map.of(topic, NewPartitions.increaseTo(3))).all()));
            TopicDescription td = settled(
                    () -> admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic),
                    d -> d.partitions().size() == 4);
            emit("describeTopic", "partitions", td.partitions().stream().map(p -> p.partition()).toList(),
                    "leadersAreTheNode", td.partitions().stream().allMatch(p -> p.leader().id() == node),
                    "replicas", td.partitions().stream().map(p -> p.replicas().size()).toList(),
                    "isr", td.partitions().stream().map(p -> p.isr().size()).toList(),
                    "internal", td.isInternal());

            // One record in each of the first three partitions (none in the fourth).
            try (KafkaProducer<String, String> p = new KafkaProducer<>(props(
                    "key.serializer", StringSerializer.class.getName(),
                    "value.serializer", StringSerializer.class.getName()))) {
                for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>(topic, i, "k" + i, "v" + i)).get();
            }

            // Configs: SET, APPEND/SUBTRACT on a list, DELETE, an invalid value; the broker's.
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all().get();
            String[] names = {"retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes"};
            Config cfg = settled(() -> admin.describeConfigs(List.of(res)).all().get().get(res),
                    c -> "2000000".equals(c.get("max.message.bytes").value()));
            emit("configsSet", "configs", configView(cfg, names));
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT))))
                    .all().get();
            cfg = settled(() -> admin.describeConfigs(List.of(res)).all().get().get(res),
                    c -> !"2000000".equals(c.get("max.message.bytes").value()));
            emit("configsDeleted", "configs", configView(cfg, names));
            emit("invalidConfig", "outcome", outcome(admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all()));
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node));
            Config bc = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            emit("brokerConfig", "configs", configView(bc, "log.segment.bytes", "log.retention.hours",
                    "message.max.bytes", "log.message.timestamp.type"));

            // Groups: a simple group's commits, a subscribed (classic) group, offsets altered and
            // deleted, a group deleted.
            String simple = prefix + "-simple", classic = prefix + "-classic";
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < 4; i++) tps.add(new TopicPartition(topic, i));
            Properties cp = props("key.deserializer", StringDeserializer.class.getName(),
                    "value.deserializer", StringDeserializer.class.getName(),
                    "enable.auto.commit", "false", "auto.offset.reset", "earliest");
            cp.put("group.id", simple);
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.assign(tps);
                c.commitSync(Map.of(tps.get(0), new OffsetAndMetadata(1), tps.get(1), new OffsetAndMetadata(1, "m")));
            }
            cp.put("group.id", classic);
            cp.put("group.protocol", "classic");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(topic));
                int seen = 0;
                long deadline = System.currentTimeMillis() + 60_000;
                while (seen < 3 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) seen++;
                }
                c.commitSync();
                ConsumerGroupDescription live = admin.describeConsumerGroups(List.of(classic))
                        .all().get().get(classic);
                emit("describeLiveGroup", "state", live.groupState().toString(), "members", live.members().size(),
                        "assignor", live.partitionAssignor(), "simple", live.isSimpleConsumerGroup(),
                        "type", live.type().toString(),
                        "assigned", live.members().stream().flatMap(m -> m.assignment().topicPartitions().stream())
                                .map(TopicPartition::partition).sorted().toList());
            }
            Collection<GroupListing> listed = admin.listGroups().all().get();
            emit("listGroups", "groups", listed.stream().map(GroupListing::groupId)
                    .filter(g -> g.startsWith(prefix)).sorted().toList());
            ConsumerGroupDescription empty = admin.describeConsumerGroups(List.of(classic)).all().get().get(classic);
            emit("describeEmptyGroup", "state", empty.groupState().toString(), "members", empty.members().size(),
                    "type", empty.type().toString());
            emit("groupOffsets", "group", simple, "offsets", offsets(admin, simple));
            emit("groupOffsets", "group", classic, "offsets", offsets(admin, classic));
            admin.alterConsumerGroupOffsets(simple, Map.of(tps.get(0), new OffsetAndMetadata(0),
                    tps.get(2), new OffsetAndMetadata(1))).all().get();
            emit("groupOffsetsAltered", "offsets", offsets(admin, simple));
            admin.deleteConsumerGroupOffsets(simple, Set.of(tps.get(1))).all().get();
            emit("groupOffsetsDeleted", "offsets", offsets(admin, simple));
            admin.deleteConsumerGroups(List.of(simple)).all().get();
            emit("groupDeleted", "groups", admin.listGroups().all().get().stream().map(GroupListing::groupId)
                    .filter(g -> g.startsWith(prefix)).sorted().toList(),
                    "describe", outcome(admin.describeConsumerGroups(List.of(simple)).all()),
                    "deleteAgain", outcome(admin.deleteConsumerGroups(List.of(simple)).all()));

            // ACLs, on names nothing else here uses (a topic with ACLs denies everyone else).
            String aclTopic = prefix + "-acl";
            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, aclTopic, PatternType.LITERAL),
                    new AccessControlEntry("User:dora", "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding write = new AclBinding(new ResourcePattern(ResourceType.TOPIC, aclTopic + "-", PatternType.PREFIXED),
                    new AccessControlEntry("User:dora", "*", AclOperation.WRITE, AclPermissionType.ALLOW));
            AclBinding deny = new AclBinding(new ResourcePattern(ResourceType.GROUP, aclTopic + "-g", PatternType.LITERAL),
                    new AccessControlEntry("User:eve", "127.0.0.1", AclOperation.READ, AclPermissionType.DENY));
            admin.createAcls(List.of(read, write, deny)).all().get();
            emit("acls", "bindings", aclView(settled(() -> admin.describeAcls(AclBindingFilter.ANY).values().get(),
                    b -> aclView(b, aclTopic).size() == 3), aclTopic));
            AclBindingFilter dora = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, aclTopic + "-x", PatternType.MATCH),
                    new AccessControlEntryFilter("User:dora", null, AclOperation.ANY, AclPermissionType.ANY));
            emit("aclsMatching", "bindings", aclView(admin.describeAcls(dora).values().get(), aclTopic));
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.ANY, aclTopic + "-", PatternType.PREFIXED),
                    AccessControlEntryFilter.ANY))).all().get();
            emit("aclsDeleted", "deleted", aclView(deleted, aclTopic),
                    "left", aclView(settled(() -> admin.describeAcls(AclBindingFilter.ANY).values().get(),
                            b -> aclView(b, aclTopic).size() == 2), aclTopic));
            admin.deleteAcls(List.of(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.ANY, aclTopic, PatternType.PREFIXED),
                    AccessControlEntryFilter.ANY))).all().get();

            // SCRAM users: upsert two mechanisms, describe, (log in), delete one, delete the other.
            String user = prefix + "-carol", password = "carol-Secret-3";
            UserScramCredentialUpsertion sha256 = new UserScramCredentialUpsertion(
                    user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), password);
            UserScramCredentialUpsertion sha512 = new UserScramCredentialUpsertion(
                    user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password);
            // Kafka's controller refuses two alterations of one user in one request, whatever
            // the mechanisms: one request per mechanism.
            emit("scramTwiceInOneRequest", "outcome", outcome(admin.alterUserScramCredentials(
                    List.of(sha256, sha512)).all()));
            admin.alterUserScramCredentials(List.of(sha256)).all().get();
            admin.alterUserScramCredentials(List.of(sha512)).all().get();
            emit("scramUsers", "credentials", scram(admin, user, 2));
            if (args.length > 3) {
                Properties login = new Properties();
                try (FileReader r = new FileReader(args[3])) { login.load(r); }
                login.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        + "username=\"" + user + "\" password=\"" + password + "\";");
                login.put("bootstrap.servers", bootstrap);
                try (Admin as = Admin.create(login)) {
                    emit("scramLogin", "mechanism", login.getProperty("sasl.mechanism"),
                            "seesTopic", as.listTopics().names().get().contains(topic));
                }
            }
            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)))
                    .all().get();
            emit("scramDeletedOne", "credentials", scram(admin, user, 1));
            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)))
                    .all().get();
            emit("scramDeletedAll", "describe", settled(
                    () -> outcome(admin.describeUserScramCredentials(List.of(user)).description(user)), o -> !o.equals("ok")));

            // Log dirs: one dir on one node, holding every partition with its size.
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node);
            Map<String, Object> sizes = new TreeMap<>();
            boolean totals = true;
            for (LogDirDescription d : dirs.values()) {
                totals &= d.error() == null && d.totalBytes().isPresent() && d.usableBytes().isPresent();
                for (Map.Entry<TopicPartition, ReplicaInfo> e : d.replicaInfos().entrySet()) {
                    if (!e.getKey().topic().startsWith(prefix)) continue;
                    ReplicaInfo ri = e.getValue();
                    sizes.put(e.getKey().toString(), (ri.size() > 0 ? "data" : "empty") + ",lag=" + ri.offsetLag()
                            + ",future=" + ri.isFuture());
                }
            }
            emit("logDirs", "dirs", dirs.size(), "totalsAndNoError", totals, "partitions", sizes);

            admin.deleteTopics(List.of(other)).all().get();
            emit("topicDeleted", "listed", settled(() -> admin.listTopics().names().get(),
                    n -> !n.contains(other)).stream().filter(n -> n.startsWith(prefix)).sorted().toList());
        }
        emit("done");
    }

    static Map<String, Object> offsets(Admin admin, String group) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
            out.put(e.getKey().toString(), e.getValue() == null ? null
                    : e.getValue().offset() + ":" + e.getValue().metadata());
        }
        return out;
    }

    static List<String> scram(Admin admin, String user, int want) throws Exception {
        UserScramCredentialsDescription d = settled(
                () -> admin.describeUserScramCredentials(List.of(user)).description(user).get(),
                x -> x.credentialInfos().size() == want);
        return d.credentialInfos().stream().map(i -> i.mechanism() + "/" + i.iterations()).sorted().toList();
    }
}
