package io.streamapp.ksql;

import io.streamapp.ksql.JsonRow.Column;
import io.streamapp.ksql.JsonRow.Type;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyConfig;
import org.apache.kafka.streams.errors.DeserializationExceptionHandler;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.processor.internals.assignment.CopartitionedTopicsEnforcer;
import org.apache.kafka.streams.state.KeyValueStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * ksqlDB's five demo statements executed by Kafka Streams, the engine ksqlDB compiles them to.
 * Not ksqlDB: no SQL, no REST API, only the topology and ksqlDB's serialization.
 *
 * <pre>
 *   DEMO_USER                  table over the users topic (KAFKA STRING key, JSON NAME, AGE)
 *   DEMO_USER_REPARTITION      that table written through the default (murmur2) partitioner, read back
 *   orders                     stream, record timestamp from ts
 *   two LEFT JOINs             orders x each table, JSON NAME, AGE, PRODUCT_ID, QTY, UNIT_PRICE, CHANNEL, TS
 * </pre>
 *
 * <p>Usage: {@code KsqlEquivalent <properties>}: Kafka Streams settings plus the topic names
 * {@code streamapp.topic.*}. Prints {@value #RUNNING} once running; a fatal error is one line
 * starting with {@value #FAILED}, exit status 2.
 */
public final class KsqlEquivalent {

    static final String RUNNING = "ksql-equivalent RUNNING";
    static final String FAILED = "ksql-equivalent FAILED: ";
    private static final Logger LOG = LoggerFactory.getLogger(KsqlEquivalent.class);

    static final JsonRow USER = new JsonRow(List.of(
        new Column("NAME", Type.VARCHAR), new Column("AGE", Type.BIGINT)));
    static final JsonRow ORDER = new JsonRow(List.of(
        new Column("TS", Type.BIGINT), new Column("PRODUCT_ID", Type.BIGINT), new Column("QTY", Type.BIGINT),
        new Column("UNIT_PRICE", Type.DOUBLE), new Column("CHANNEL", Type.VARCHAR)));
    static final JsonRow MERGED = new JsonRow(List.of(
        new Column("NAME", Type.VARCHAR), new Column("AGE", Type.BIGINT), new Column("PRODUCT_ID", Type.BIGINT),
        new Column("QTY", Type.BIGINT), new Column("UNIT_PRICE", Type.DOUBLE), new Column("CHANNEL", Type.VARCHAR),
        new Column("TS", Type.BIGINT)));

    private KsqlEquivalent() { }

    /** ksqlDB's CREATE STREAM ... AS SELECT of the join: the user's columns, then the order's, TS last. */
    static Object[] joined(Object[] order, Object[] user) {
        return new Object[] {
            user == null ? null : user[0], user == null ? null : user[1],
            order[1], order[2], order[3], order[4], order[0],
        };
    }

    static Topology topology(Properties topics, StreamsConfig config) {
        Serde<String> key = Serdes.String();
        StreamsBuilder builder = new StreamsBuilder(new TopologyConfig(config));
        KTable<String, Object[]> users = builder.table(
            topic(topics, "users"), Consumed.with(key, USER), store("DEMO_USER"));
        users.toStream().to(topic(topics, "users_repartition"), Produced.with(key, USER));
        KTable<String, Object[]> repartitioned = builder.table(
            topic(topics, "users_repartition"), Consumed.with(key, USER), store("DEMO_USER_REPARTITION"));
        KStream<String, Object[]> orders = builder.stream(
            topic(topics, "orders"), Consumed.with(key, ORDER).withTimestampExtractor(new OrderTimestamp()));
        orders.leftJoin(users, KsqlEquivalent::joined, Joined.with(key, ORDER, USER))
            .to(topic(topics, "merged"), Produced.with(key, MERGED));
        orders.leftJoin(repartitioned, KsqlEquivalent::joined, Joined.with(key, ORDER, USER))
            .to(topic(topics, "merged_repartition"), Produced.with(key, MERGED));
        return builder.build();
    }

    private static Materialized<String, Object[], KeyValueStore<Bytes, byte[]>> store(String name) {
        return Materialized.<String, Object[], KeyValueStore<Bytes, byte[]>>as(name)
            .withKeySerde(Serdes.String()).withValueSerde(USER);
    }

    private static String topic(Properties topics, String name) {
        String value = topics.getProperty("streamapp.topic." + name);
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException("streamapp.topic." + name + " is not set");
        }
        return value;
    }

    /**
     * Kafka Streams' own co-partitioning check (its CopartitionedTopicsEnforcer), run before start.
     * Kafka Streams runs it only for topologies that have repartition topics (RepartitionTopics.setup),
     * and this one has none, so unequal partition counts would otherwise join silently wrong.
     */
    static void checkCopartitioned(StreamsConfig config, Set<String> joined)
            throws InterruptedException, TimeoutException {
        List<PartitionInfo> partitions = new ArrayList<>();
        try (Admin admin = Admin.create(config.getAdminConfigs("ksql-equivalent-check"))) {
            Map<String, KafkaFuture<TopicDescription>> found = admin.describeTopics(joined).topicNameValues();
            for (String topic : joined) {
                int count;
                try {
                    count = found.get(topic).get(60, TimeUnit.SECONDS).partitions().size();
                } catch (ExecutionException e) {
                    throw new IllegalStateException("topic " + topic + ": " + e.getCause().getMessage());
                }
                for (int p = 0; p < count; p++) {
                    partitions.add(new PartitionInfo(topic, p, null, new Node[0], new Node[0]));
                }
            }
        }
        Cluster cluster = new Cluster("ksql-equivalent", List.of(), partitions, Set.of(), Set.of());
        new CopartitionedTopicsEnforcer("").enforce(joined, Map.of(), cluster);
    }

    @SuppressWarnings("deprecation") // PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, a transition flag
    public static void main(String[] args) throws IOException, InterruptedException {
        if (args.length != 1) {
            System.err.println("usage: KsqlEquivalent <properties file>");
            System.exit(2);
        }
        Properties config = new Properties();
        try (Reader reader = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            config.load(reader);
        }
        Properties topics = new Properties();
        for (String name : config.stringPropertyNames()) {
            if (name.startsWith("streamapp.")) {
                topics.setProperty(name, (String) config.remove(name));
            }
        }
        // ksqlDB's processing log: an unreadable record is logged and skipped, never fatal.
        config.putIfAbsent(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG, ProcessingLog.class.getName());
        // Every table update reaches the join and the repartition topic (the demo runs ksqlDB with caching off).
        config.putIfAbsent(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        config.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        // No global tables here; set only so that Kafka Streams 4.3 does not warn about its future default.
        config.putIfAbsent(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, "true");
        StreamsConfig streamsConfig = new StreamsConfig(config);
        Topology topology;
        try {
            topology = topology(topics, streamsConfig);
            checkCopartitioned(streamsConfig,
                Set.of(topic(topics, "users"), topic(topics, "orders"), topic(topics, "users_repartition")));
        } catch (RuntimeException | TimeoutException e) {
            LOG.error(FAILED + oneLine(e));
            System.exit(2);
            return;
        }

        KafkaStreams streams = new KafkaStreams(topology, streamsConfig);
        AtomicReference<String> failure = new AtomicReference<>();
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean announced = new AtomicBoolean();
        streams.setUncaughtExceptionHandler(error -> {
            failure.compareAndSet(null, oneLine(error));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            // each transition with the tasks this instance runs: a task missing after a rebalance stalls its partitions
            LOG.info("state {} -> {}, active tasks {}", before, now, activeTasks(streams, now));
            if (now == KafkaStreams.State.RUNNING && announced.compareAndSet(false, true)) {
                LOG.info("{} application.id={}", RUNNING, config.getProperty(StreamsConfig.APPLICATION_ID_CONFIG));
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(15))));
        streams.start();
        stopped.await();
        if (failure.get() != null) {
            LOG.error(FAILED + failure.get());
            streams.close(Duration.ofSeconds(15));
            System.exit(2);
        }
    }

    /** The ids of the active tasks of this instance's threads, sorted; "unknown" outside RUNNING and REBALANCING. */
    static String activeTasks(KafkaStreams streams, KafkaStreams.State state) {
        if (state != KafkaStreams.State.RUNNING && state != KafkaStreams.State.REBALANCING) {
            return "unknown";
        }
        try {
            return streams.metadataForLocalThreads().stream()
                .flatMap(thread -> thread.activeTasks().stream())
                .map(task -> task.taskId().toString())
                .sorted()
                .toList()
                .toString();
        } catch (RuntimeException e) {  // the state moved on meanwhile
            return "unknown";
        }
    }

    /** The deepest message of a chain on one line: Kafka Streams wraps the cause several times. */
    static String oneLine(Throwable error) {
        String message = error.toString();
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause.getMessage() != null && !cause.getMessage().isBlank()) {
                message = cause.getClass().getSimpleName() + ": " + cause.getMessage();
            }
        }
        return message.replaceAll("\\s+", " ").trim();
    }

    /** ksqlDB's timestamp='ts': an order without a usable ts gets -1, which Kafka Streams skips and logs. */
    public static final class OrderTimestamp implements TimestampExtractor {
        @Override
        public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
            Object[] order = (Object[]) record.value();
            return order == null || order[0] == null ? -1L : (Long) order[0];
        }
    }

    /** ksqlDB's processing log: one WARN line per unreadable record, which is skipped. */
    public static final class ProcessingLog implements DeserializationExceptionHandler {
        private static final Logger PROCESSING = LoggerFactory.getLogger("io.streamapp.ksql.processing");

        @Override
        public Response handleError(ErrorHandlerContext context, ConsumerRecord<byte[], byte[]> record, Exception error) {
            PROCESSING.warn("skipped unreadable record topic={} partition={} offset={}: {}",
                record.topic(), record.partition(), record.offset(), oneLine(error));
            return Response.resume();
        }

        @Override
        public void configure(java.util.Map<String, ?> configs) { }
    }
}
