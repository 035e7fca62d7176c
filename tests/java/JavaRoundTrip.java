import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The real Java producer and consumer, one after the other, on one connection's settings (the security tests' oracle).
 *
 * Usage: JavaRoundTrip TOPIC COUNT PREFIX CLIENT_PROPERTIES
 * CLIENT_PROPERTIES (bootstrap.servers and the security; deleted once read: it may hold a password).
 * Writes COUNT records keyed PREFIX0.. (UTF-8, acknowledged by the broker), then reads the topic from the
 * beginning of every partition (assigned, no group) until it has COUNT records; prints "key partition" per
 * record read. Exits 3 if it did not read them all within 60 s of polling.
 */
public final class JavaRoundTrip {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: JavaRoundTrip TOPIC COUNT PREFIX CLIENT_PROPERTIES");
            System.exit(2);
        }
        String topic = args[0];
        int count = Integer.parseInt(args[1]);
        Properties client = new Properties();
        java.nio.file.Path file = java.nio.file.Path.of(args[3]);
        try (java.io.Reader reader = java.nio.file.Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            client.load(reader);
        }
        java.nio.file.Files.delete(file);

        Properties producerProps = new Properties();
        producerProps.putAll(client);
        producerProps.put("key.serializer", ByteArraySerializer.class.getName());
        producerProps.put("value.serializer", ByteArraySerializer.class.getName());
        producerProps.put("acks", "all");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                byte[] key = (args[2] + i).getBytes(StandardCharsets.UTF_8);
                sent.add(producer.send(new ProducerRecord<>(topic, key, ("value-" + i).getBytes(StandardCharsets.UTF_8))));
            }
            producer.flush();
            for (java.util.concurrent.Future<?> future : sent) {
                future.get();
            }
        }

        Properties consumerProps = new Properties();
        consumerProps.putAll(client);
        consumerProps.put("key.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps.put("value.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps.put("enable.auto.commit", "false");
        TreeMap<String, Integer> read = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (read.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    read.put(new String(record.key(), StandardCharsets.UTF_8), record.partition());
                }
            }
        }
        StringBuilder out = new StringBuilder();
        read.forEach((key, partition) -> out.append(key).append(' ').append(partition).append('\n'));
        System.out.print(out);
        System.exit(read.size() == count ? 0 : 3);
    }
}
