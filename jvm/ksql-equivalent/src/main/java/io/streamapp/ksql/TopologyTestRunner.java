package io.streamapp.ksql;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.test.TestRecord;

/**
 * A plan's queries run under Kafka Streams' own TopologyTestDriver, without a broker, fed as ksqlDB's QTT executor
 * feeds a query ({@code TestExecutor}): one driver per query, started at the epoch and never advanced, record caches
 * off; each input piped one record at a time in file order to every query that reads its topic, in statement order,
 * the sink drained after each record, and what a query wrote piped at once to the queries that read it (as the
 * Python runner does; ksqlDB's executor pipes derived topics after all direct inputs, which no stream-table case of
 * its tests tells apart).
 *
 * <p>Reads from stdin a JSON list of cases, {@code {"plan": <Plan.to_json()>, "inputs": [{"topic", "key_b64",
 * "value_b64", "timestamp"}...]}}, one after the other (the list may arrive case by case), and prints one JSON line
 * per case: {@code {"outputs": [...], "skipped": [...], "topologies": {query: {"stores", "repartitions"}}}} or
 * {@code {"error": "one line"}}. Log lines go to stderr: stdout is the protocol.
 */
public final class TopologyTestRunner {

    private TopologyTestRunner() { }

    private record Input(String topic, byte[] key, byte[] value, long timestamp) { }

    public static void main(String[] args) throws IOException {
        PrintStream protocol = System.out;
        System.setOut(System.err);  // before any logger starts: log4j's console appender then writes to stderr
        Path stateDir = Files.createTempDirectory("streamapp-topology-test-");
        try (JsonParser parser = ColumnType.JSON.createParser(System.in)) {
            if (parser.nextToken() != JsonToken.START_ARRAY) {
                protocol.println(error("stdin: expected a JSON list of cases"));
                System.exit(2);
            }
            while (parser.nextToken() == JsonToken.START_OBJECT) {
                JsonNode testCase = parser.readValueAsTree();
                protocol.println(ColumnType.JSON.writeValueAsString(runCase(testCase, stateDir)));
                protocol.flush();
            }
        } catch (IOException e) {
            protocol.println(error("stdin: " + ProcessingLog.oneLine(e)));
            System.exit(2);
        } finally {
            delete(stateDir);
        }
    }

    static ObjectNode runCase(JsonNode testCase, Path stateDir) {
        List<Driven> drivers = new ArrayList<>();
        try {
            Plan plan = Plan.parse(testCase.get("plan"));
            List<Input> inputs = inputs(testCase.get("inputs"));
            ObjectNode result = ColumnType.JSON.createObjectNode();
            ArrayNode outputs = result.putArray("outputs");
            List<String> skipped = new ArrayList<>();
            ObjectNode topologies = ColumnType.JSON.createObjectNode();
            for (Plan.Query query : plan.queries()) {
                Topology topology = PlanTopology.build(plan, query);
                topologies.set(query.name(), wiring(topology));
                drivers.add(new Driven(query, PlanTopology.inputTopics(plan, query), plan.source(query.sink()).topic(),
                                       new TopologyTestDriver(topology, config(query, stateDir), Instant.EPOCH)));
            }
            for (Input record : inputs) {
                feed(record, drivers, outputs, skipped);
            }
            ArrayNode reasons = result.putArray("skipped");
            skipped.forEach(reasons::add);
            result.set("topologies", topologies);
            return result;
        } catch (IllegalArgumentException e) {  // this program's own refusals: their message is the line
            return error(e.getMessage());
        } catch (RuntimeException e) {
            return error(ProcessingLog.oneLine(e));
        } finally {
            drivers.forEach(Driven::close);
        }
    }

    /** One query under its own driver, with its input topics and its sink. */
    private record Driven(Plan.Query query, List<String> topics, String sinkTopic, TopologyTestDriver driver,
                          Map<String, TestInputTopic<byte[], byte[]>> in, TestOutputTopic<byte[], byte[]> out) {

        Driven(Plan.Query query, List<String> topics, String sinkTopic, TopologyTestDriver driver) {
            this(query, topics, sinkTopic, driver, new LinkedHashMap<>(),
                 driver.createOutputTopic(sinkTopic, new ByteArrayDeserializer(), new ByteArrayDeserializer()));
        }

        /** Pipe one record in; what the sink received for it. */
        List<Input> pipe(Input record, List<String> skipped) {
            SkippedRecords.collect(query.name(), skipped);
            try {
                in.computeIfAbsent(record.topic(), topic -> driver.createInputTopic(
                        topic, new ByteArraySerializer(), new ByteArraySerializer()))
                    .pipeInput(record.key(), record.value(), record.timestamp());
            } finally {
                SkippedRecords.stop();
            }
            List<Input> written = new ArrayList<>();
            for (TestRecord<byte[], byte[]> out : out.readRecordsToList()) {
                written.add(new Input(sinkTopic, out.key(), out.value(), out.timestamp()));
            }
            return written;
        }

        void close() {
            driver.close();
        }
    }

    /**
     * One record to every query that reads its topic, in statement order; what a query writes goes at once to the
     * queries that read it (the Python runner's order: a copied table holds a row as soon as its source is read).
     */
    private static void feed(Input record, List<Driven> drivers, ArrayNode outputs, List<String> skipped) {
        for (Driven driven : drivers) {
            if (!driven.topics().contains(record.topic())) {
                continue;
            }
            for (Input out : driven.pipe(record, skipped)) {
                outputs.add(record(out));
                feed(out, drivers, outputs, skipped);
            }
        }
    }

    /** The base config of ksqlDB's QTT executor: every table update forwarded (no cache), its processing log. */
    private static Properties config(Plan.Query query, Path stateDir) {
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, "streamapp-" + query.name().replaceAll("[^A-Za-z0-9._-]", "_"));
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "topology-test-driver:9092");
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        config.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        config.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG, SkippedRecords.class.getName());
        return config;
    }

    /** The topology's stores and repartition topics: what ksqlDB's recorded topology is compared on. */
    private static ObjectNode wiring(Topology topology) {
        TreeSet<String> stores = new TreeSet<>();
        TreeSet<String> repartitions = new TreeSet<>();
        for (TopologyDescription.Subtopology sub : topology.describe().subtopologies()) {
            for (TopologyDescription.Node node : sub.nodes()) {
                if (node instanceof TopologyDescription.Processor processor) {
                    stores.addAll(processor.stores());
                } else if (node instanceof TopologyDescription.Sink sink && sink.topic() != null
                        && sink.topic().endsWith("-repartition")) {
                    repartitions.add(sink.topic());
                }
            }
        }
        ObjectNode wiring = ColumnType.JSON.createObjectNode();
        stores.forEach(wiring.putArray("stores")::add);
        repartitions.forEach(wiring.putArray("repartitions")::add);
        return wiring;
    }

    private static List<Input> inputs(JsonNode raw) {
        if (raw == null || !raw.isArray()) {
            throw new IllegalArgumentException("case: inputs must be a list");
        }
        List<Input> inputs = new ArrayList<>();
        for (JsonNode r : raw) {
            if (!r.path("topic").isTextual() || !r.path("timestamp").canConvertToLong()) {
                throw new IllegalArgumentException("case: an input needs a topic and a timestamp: " + r);
            }
            inputs.add(new Input(r.get("topic").textValue(), bytes(r.get("key_b64")), bytes(r.get("value_b64")),
                r.get("timestamp").longValue()));
        }
        return inputs;
    }

    private static byte[] bytes(JsonNode base64) {
        return base64 == null || base64.isNull() ? null : Base64.getDecoder().decode(base64.textValue());
    }

    private static ObjectNode record(Input out) {
        ObjectNode node = ColumnType.JSON.createObjectNode().put("topic", out.topic());
        node.put("key_b64", out.key() == null ? null : Base64.getEncoder().encodeToString(out.key()));
        node.put("value_b64", out.value() == null ? null : Base64.getEncoder().encodeToString(out.value()));
        return node.put("timestamp", out.timestamp());
    }

    private static ObjectNode error(String message) {
        return ColumnType.JSON.createObjectNode().put("error", message.replaceAll("\\s+", " ").trim());
    }

    private static void delete(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        } catch (IOException e) {
            // a temporary directory: left behind at worst
        }
    }
}
