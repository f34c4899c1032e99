// Kafka's own Java producer, driven by the tests (run as a single source file:
// java -cp '<kafka jars>/*' tests/kafka/TxnClient.java BOOTSTRAP TOPIC TXN_ID TIMEOUT_MS STEP...).
// The Java client of the broker's own release is the one that speaks transactions V2 with a 4.x broker.
//
// Steps, run in order, each printing one JSON line of what the client saw:
//   commit:N   begin, send N records, commit
//   abort:N    begin, send N records (flushed, so they reach the log), abort
//   fence:N    begin, send N records (flushed); a second producer with the same transactional.id
//              initialises (fencing this one); this one then sends once more and commits: refused
//   hang:N     begin, send N records (flushed), then halt the JVM without ending the transaction
//              (the coordinator aborts it after TIMEOUT_MS)
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnClient {
    static KafkaProducer<String, String> producer(String bootstrap, String txnId, String timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("transaction.timeout.ms", timeoutMs);
        p.put("client.id", "segaudit-tests-" + txnId);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static String send(KafkaProducer<String, String> producer, String topic, String txnId, int step, int n)
            throws InterruptedException, ExecutionException {
        StringBuilder offsets = new StringBuilder();
        for (int i = 0; i < n; i++) {
            RecordMetadata m = producer.send(new ProducerRecord<>(topic, txnId + "-" + step + "-" + i, "v" + i)).get();
            offsets.append(offsets.length() == 0 ? "" : ",").append(m.offset());
        }
        return "[" + offsets + "]";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2], timeoutMs = args[3];
        KafkaProducer<String, String> producer = producer(bootstrap, txnId, timeoutMs);
        for (int step = 4; step < args.length; step++) {
            String[] parts = args[step].split(":");
            String kind = parts[0];
            int n = Integer.parseInt(parts[1]);
            producer.beginTransaction();
            String offsets = send(producer, topic, txnId, step, n);
            switch (kind) {
                case "commit" -> producer.commitTransaction();
                case "abort" -> producer.abortTransaction();
                case "hang" -> {
                    System.out.println("{\"step\":\"hang\",\"offsets\":" + offsets + "}");
                    System.out.flush();
                    Runtime.getRuntime().halt(0);
                }
                case "fence" -> {
                    KafkaProducer<String, String> successor = producer(bootstrap, txnId, timeoutMs);
                    String error = "none";
                    try {
                        producer.send(new ProducerRecord<>(topic, txnId + "-zombie", "z")).get();
                        producer.commitTransaction();
                    } catch (Exception e) {
                        Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
                        error = cause.getClass().getSimpleName();
                    }
                    producer.close();
                    producer = successor;
                    System.out.println("{\"step\":\"fence\",\"offsets\":" + offsets + ",\"zombie_error\":\"" + error + "\"}");
                    continue;
                }
                default -> throw new IllegalArgumentException("unknown step " + kind);
            }
            System.out.println("{\"step\":\"" + kind + "\",\"offsets\":" + offsets + "}");
        }
        producer.close();
    }
}
