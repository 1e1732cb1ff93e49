// What Kafka's Java AdminClient reports as authorized operations and group configs, one JSON line each.
//
//   java -cp "$CP" AuthorizedOps.java <bootstrap> <topic> <group>
// The topic must exist; the group is created here by a consumer that commits an offset.
// tests/ecosystem/test_admin_differences.py runs it against Chronolog and the real Kafka.

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.serialization.StringDeserializer;

public class AuthorizedOps {
    static String names(Set<AclOperation> ops) {
        if (ops == null) return "null";
        Set<String> sorted = new TreeSet<>();
        for (AclOperation op : ops) sorted.add("\"" + op.name() + "\"");
        return "[" + String.join(",", sorted) + "]";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(0)));
        }
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            Set<AclOperation> cluster = admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get();
            System.out.println("{\"resource\":\"cluster\",\"operations\":" + names(cluster) + "}");
            Set<AclOperation> t = admin.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true))
                    .allTopicNames().get().get(topic).authorizedOperations();
            System.out.println("{\"resource\":\"topic\",\"operations\":" + names(t) + "}");
            Set<AclOperation> g = admin.describeConsumerGroups(List.of(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                    .all().get().get(group).authorizedOperations();
            System.out.println("{\"resource\":\"group\",\"operations\":" + names(g) + "}");
        }
    }
}
