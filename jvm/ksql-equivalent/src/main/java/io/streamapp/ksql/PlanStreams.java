package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.processor.internals.assignment.CopartitionedTopicsEnforcer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A declared plan's queries run by Kafka Streams on a real cluster, as ksqlDB runs them: one Kafka Streams
 * application per persistent query (application id {@code <application.id>-<QUERY>}), each built by
 * {@link PlanTopology} from the plan the Python side parsed (there is no SQL parser here).
 *
 * <p>Usage: {@code PlanStreams <properties>}: Kafka Streams settings plus {@code streamapp.plan}, the path of the
 * plan's JSON ({@code Plan.to_json()}, its topics the cluster's). Before any query starts, each join whose two
 * topics are read as they are (no repartition) is held to Kafka Streams' own co-partitioning check. Prints
 * {@value #RUNNING} once every query runs; a fatal error is one line starting with
 * {@value #FAILED}, exit status 2.
 */
public final class PlanStreams {

    static final String RUNNING = "ksql-equivalent RUNNING";
    static final String FAILED = "ksql-equivalent FAILED: ";
    private static final Logger LOG = LoggerFactory.getLogger(PlanStreams.class);

    private PlanStreams() { }

    @SuppressWarnings("deprecation") // PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, a transition flag
    public static void main(String[] args) throws IOException, InterruptedException {
        if (args.length != 1) {
            System.err.println("usage: PlanStreams <properties file>");
            System.exit(2);
        }
        Properties config = new Properties();
        try (Reader reader = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            config.load(reader);
        }
        String planPath = (String) config.remove("streamapp.plan");
        String base = config.getProperty(StreamsConfig.APPLICATION_ID_CONFIG);
        String stateDir = config.getProperty(StreamsConfig.STATE_DIR_CONFIG);
        config.putIfAbsent(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG,
            ProcessingLog.class.getName());
        config.putIfAbsent(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        config.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.putIfAbsent(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, "true");

        List<KafkaStreams> running = new ArrayList<>();
        List<String> names = new ArrayList<>();
        List<Topology> topologies = new ArrayList<>();
        List<StreamsConfig> configs = new ArrayList<>();
        try {
            if (planPath == null || planPath.isBlank()) {
                throw new IllegalArgumentException("streamapp.plan is not set");
            }
            JsonNode json = ColumnType.JSON.readTree(Files.readString(Path.of(planPath), StandardCharsets.UTF_8));
            Plan plan = Plan.parse(json);
            for (Plan.Query query : plan.queries()) {
                Properties own = new Properties();
                own.putAll(config);
                String id = base + "-" + query.name().replaceAll("[^A-Za-z0-9._-]", "_");
                own.put(StreamsConfig.APPLICATION_ID_CONFIG, id);
                if (stateDir != null) {
                    own.put(StreamsConfig.STATE_DIR_CONFIG, Path.of(stateDir, id).toString());
                }
                StreamsConfig streamsConfig = new StreamsConfig(own);
                if (query.isJoin() && !query.repartition() && !query.repartitionRight()) {
                    checkCopartitioned(streamsConfig, new LinkedHashSet<>(
                        PlanTopology.inputTopics(plan, query)));
                }
                names.add(query.name());
                topologies.add(PlanTopology.build(plan, query));
                configs.add(streamsConfig);
            }
        } catch (RuntimeException | IOException | TimeoutException e) {
            LOG.error(FAILED + ProcessingLog.oneLine(e));
            System.exit(2);
            return;
        }

        AtomicReference<String> failure = new AtomicReference<>();
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicInteger up = new AtomicInteger();
        Set<String> announced = new LinkedHashSet<>();
        for (int i = 0; i < topologies.size(); i++) {
            String name = names.get(i);
            KafkaStreams streams = new KafkaStreams(topologies.get(i), configs.get(i));
            streams.setUncaughtExceptionHandler(error -> {
                failure.compareAndSet(null, name + ": " + ProcessingLog.oneLine(error));
                stopped.countDown();
                return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.setStateListener((now, before) -> {
                LOG.info("{}: state {} -> {}, active tasks {}", name, before, now,
                    activeTasks(streams, now));
                if (now == KafkaStreams.State.RUNNING) {
                    synchronized (announced) {
                        if (announced.add(name) && up.incrementAndGet() == topologies.size()) {
                            LOG.info("{} application.id={} queries={}", RUNNING, base, names);
                        }
                    }
                }
                if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                    stopped.countDown();
                }
            });
            running.add(streams);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> running.forEach(s -> s.close(Duration.ofSeconds(15)))));
        running.forEach(KafkaStreams::start);
        stopped.await();
        if (failure.get() != null) {
            LOG.error(FAILED + failure.get());
            running.forEach(s -> s.close(Duration.ofSeconds(15)));
            System.exit(2);
        }
    }

    /**
     * Kafka Streams' own co-partitioning check (its CopartitionedTopicsEnforcer), run before start.
     * Kafka Streams runs it only for topologies that have repartition topics (RepartitionTopics.setup),
     * and a join that reads both its topics as they are has none, so unequal partition counts would
     * otherwise join silently wrong.
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
}
