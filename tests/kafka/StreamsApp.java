// A stateful Kafka Streams application under exactly_once_v2, run by the tests as a single source file:
// java -cp '<kafka-streams jars>/*' tests/kafka/StreamsApp.java BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR REPLICATION COMMIT_MS
// Input values are "word:n"; the topology re-keys each record by its word (the repartition topic
// <APP_ID>-by-word-repartition), counts per word in a state store (the changelog
// <APP_ID>-counts-changelog) and writes each new count to OUTPUT. Prints {"state":"RUNNING"} once
// running; SIGTERM closes it cleanly (SIGKILL is the crash the tests make).
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Integer.parseInt(args[5]));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(args[6]));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, appId + "-client");
        p.put("statestore.cache.max.bytes", 0);  // every count update reaches the changelog and the output
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((key, value) -> value.split(":")[0])
            .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(Object::toString)
            .to(output, Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("{\"state\":\"RUNNING\"}");
                System.out.flush();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(30))));
        streams.start();
        Thread.sleep(Long.MAX_VALUE);
    }
}
