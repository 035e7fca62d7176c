import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The real Java producer with its default partitioner, as a fingerprinting oracle.
 *
 * Usage: JavaProducer BOOTSTRAP TOPIC COUNT PREFIX [CLIENT_PROPERTIES]
 * Writes COUNT records keyed PREFIX0..PREFIX{COUNT-1} (UTF-8) and prints "key partition" per record,
 * as the broker acknowledged it, so the test can compare against what it reads back.
 * CLIENT_PROPERTIES (a file, deleted once read: it may hold a password) adds client settings, e.g. security.
 */
public final class JavaProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 4 && args.length != 5) {
            System.err.println("usage: JavaProducer BOOTSTRAP TOPIC COUNT PREFIX [CLIENT_PROPERTIES]");
            System.exit(2);
        }
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        props.put(ProducerConfig.ACKS_CONFIG, "1");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        if (args.length == 5) {
            java.nio.file.Path file = java.nio.file.Path.of(args[4]);
            try (java.io.Reader reader = java.nio.file.Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
                props.load(reader);
            }
            java.nio.file.Files.delete(file);
        }
        StringBuilder out = new StringBuilder();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            java.util.List<java.util.concurrent.Future<RecordMetadata>> sent = new java.util.ArrayList<>();
            for (int i = 0; i < count; i++) {
                byte[] key = (args[3] + i).getBytes(StandardCharsets.UTF_8);
                sent.add(producer.send(new ProducerRecord<>(topic, key, ("value-" + i).getBytes(StandardCharsets.UTF_8))));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                out.append(args[3]).append(i).append(' ').append(sent.get(i).get().partition()).append('\n');
            }
        }
        System.out.print(out);
    }
}
