// A share group (KIP-932) consumer of Kafka 4.x, run by the tests as a single source file:
// java -cp '<kafka jars>/*' tests/kafka/ShareClient.java BOOTSTRAP GROUP TOPIC RECORDS MEMBERS
// Sets the group's share.auto.offset.reset to earliest, then MEMBERS share consumers of GROUP
// (threads) consume TOPIC until RECORDS records were received between them, acknowledging each
// (accept) and committing; a member leaves halfway, the others go on. Prints one JSON line.
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareClient {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int records = Integer.parseInt(args[3]), members = Integer.parseInt(args[4]);
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
        }
        AtomicInteger received = new AtomicInteger();
        Thread[] threads = new Thread[members];
        for (int m = 0; m < members; m++) {
            final boolean leaver = m == members - 1 && members > 1;
            final int id = m;
            threads[m] = new Thread(() -> {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("client.id", group + "-" + id);
                p.put("share.acknowledgement.mode", "explicit");
                p.put("key.deserializer", StringDeserializer.class.getName());
                p.put("value.deserializer", StringDeserializer.class.getName());
                long deadline = System.currentTimeMillis() + 90000;
                try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
                    consumer.subscribe(List.of(topic));
                    while (received.get() < records && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                            received.incrementAndGet();
                        }
                        consumer.commitSync();
                        if (leaver && received.get() >= records / 2) break;
                    }
                }
            });
            threads[m].start();
        }
        for (Thread t : threads) t.join();
        System.out.println("{\"received\":" + received.get() + "}");
    }
}
