package io.streamapp.ksql;

import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

/**
 * The Kafka Streams topology ksqlDB builds for one query of a plan; ksqlDB's recorded topologies
 * ({@code historical_plans/<case>/<version>/topology} in the ksql repository) are the reference, and the names of
 * the steps that make internal topics and stores are theirs:
 * <ul>
 *   <li>a copy ({@code CREATE TABLE t2 AS SELECT ... FROM t}): the source, the projection, {@code toStream().to(sink)}
 *       through the default (murmur2) partitioner;</li>
 *   <li>a stream-table join: the table, materialized in {@code KafkaTopic_Right-Reduce}, or, when its key format is
 *       not the join's, re-keyed through {@code RightSourceKeyed-SelectKey-repartition} into
 *       {@code RightSourceKeyed-Materialize}; the stream, re-keyed by the join expression
 *       ({@code LeftSourceKeyed-SelectKey}) and repartitioned through {@code Join-repartition} when the plan says so;
 *       then {@code join} / {@code leftJoin}, the projection, and the sink's TIMESTAMP column as the output time;</li>
 *   <li>a table-table join: {@link TableTableJoin}; a stream-stream join: {@link StreamStreamJoin}.</li>
 * </ul>
 */
final class PlanTopology {

    static final String TABLE_STORE = "KafkaTopic_Right-Reduce";
    static final String LEFT_KEYED = "LeftSourceKeyed-SelectKey";
    static final String JOIN = "Join";

    private final Plan plan;
    private final Plan.Query query;
    private final StreamsBuilder builder = new StreamsBuilder();

    private PlanTopology(Plan plan, Plan.Query query) {
        this.plan = plan;
        this.query = query;
    }

    static Topology build(Plan plan, Plan.Query query) {
        PlanTopology topology = new PlanTopology(plan, query);
        if (Plan.STREAM_TABLE_JOIN.equals(query.kind())) {
            topology.join();
        } else if (Plan.TABLE_TABLE_JOIN.equals(query.kind())) {
            topology.sink(TableTableJoin.build(topology.builder, plan, query));
        } else if (Plan.STREAM_STREAM_JOIN.equals(query.kind())) {
            topology.sink(StreamStreamJoin.build(topology.builder, plan, query));
        } else if (Plan.SELECT.equals(query.kind())) {
            topology.select();
        } else {
            throw new IllegalArgumentException("plan: query " + query.name() + " is a " + query.kind()
                + ", which this program does not build");
        }
        return topology.builder.build();
    }

    /** The topics a query reads, the table's first: the order the runner feeds what earlier queries wrote. */
    static List<String> inputTopics(Plan plan, Plan.Query query) {
        List<String> topics = new ArrayList<>();
        if (query.right() != null) {
            topics.add(plan.source(query.right()).topic());
        }
        topics.add(plan.source(query.left()).topic());
        return topics;
    }

    private void select() {
        Plan.Source source = plan.source(query.left());
        Projector projector = new Projector(plan, query);
        KStream<Object, Object[]> rows;
        if (source.isTable()) {
            rows = Sources.table(builder, source, null)
                .mapValues(row -> row == null ? null : projector.value(row, null))
                .toStream();
        } else {
            // a stream's null value is dropped, as the pure engine drops it
            rows = Sources.stream(builder, source)
                .filter((key, row) -> row != null)
                .mapValues(row -> projector.value(row, null));
        }
        sink(rows);
    }

    private void join() {
        Plan.Source left = plan.source(query.left());
        Plan.Source right = plan.source(query.right());
        Plan.Column tableKey = right.keyColumn();
        if (tableKey == null || right.keyColumns().size() != 1 || left.keyColumns().size() > 1) {
            throw new IllegalArgumentException("plan: query " + query.name() + " joins on a table without one key "
                + "column, or a stream of several");
        }
        // The join's key format: the table's when the stream is re-keyed, else the stream's (the planner's rule).
        String joinKeyFormat = query.repartition() ? right.keyFormat() : left.keyFormat();
        Serde<Object> joinKey = KeyFormat.of(joinKeyFormat, tableKey);

        KTable<Object, Row> table = query.repartitionRight()
            ? Sources.rekeyedTable(builder, right, joinKey)
            : Sources.table(builder, right, TABLE_STORE);

        KStream<Object, Row> stream = Sources.stream(builder, left);
        if (query.repartition()) {
            var key = Projector.compile(query.leftKey(), left, right);
            stream = stream.selectKey((k, row) -> row == null ? null : key.apply(row, null), Named.as(LEFT_KEYED));
        }
        Projector projector = new Projector(plan, query);
        ValueJoiner<Row, Row, Object[]> joiner = projector::value;
        // Kafka Streams repartitions a re-keyed stream itself, through "Join-repartition", with these serdes.
        Joined<Object, Row, Row> joined = Joined.<Object, Row, Row>with(joinKey, Row.serde(left.columnTypes()), null)
            .withName(JOIN);
        KStream<Object, Object[]> rows = switch (query.joinType()) {
            case "INNER" -> stream.join(table, joiner, joined);
            case "LEFT" -> stream.leftJoin(table, joiner, joined);
            default -> throw new IllegalArgumentException("plan: join type " + query.joinType()
                + " is not a stream-table join");
        };
        sink(rows);
    }

    /** The sink: its TIMESTAMP column as the record's time (ApplyTimestampTransform), its key and value formats. */
    private void sink(KStream<Object, Object[]> rows) {
        Plan.Source sink = plan.source(query.sink());
        KStream<Object, Object[]> out = rows;
        if (sink.timestamp() != null) {
            int index = sink.valueColumns().stream().map(Plan.Column::name).toList().indexOf(sink.timestamp());
            if (index < 0) {
                throw new IllegalArgumentException("plan: the sink's TIMESTAMP column " + sink.timestamp()
                    + " is not one of its value columns");
            }
            out = out.processValues(() -> new OutputTime(sink, index),
                Named.as("ApplyTimestampTransform-" + query.name()));
        }
        out.to(sink.topic(), Produced.with(KeyFormat.of(sink), ValueFormat.of(sink)));
    }

    /**
     * ksqlDB's sink TimestampProcessor: the output column's BIGINT is the record's time; a tombstone takes the stream
     * time. A NULL or negative time is skipped and logged (ksqlDB logs a NULL; Kafka Streams' sink would refuse a
     * negative one).
     */
    private static final class OutputTime implements FixedKeyProcessor<Object, Object[], Object[]> {
        private final Plan.Source sink;
        private final int index;
        private FixedKeyProcessorContext<Object, Object[]> context;

        OutputTime(Plan.Source sink, int index) {
            this.sink = sink;
            this.index = index;
        }

        @Override
        public void init(FixedKeyProcessorContext<Object, Object[]> context) {
            this.context = context;
        }

        @Override
        public void process(FixedKeyRecord<Object, Object[]> record) {
            if (record.value() == null) {
                context.forward(record.withTimestamp(context.currentStreamTimeMs()));
                return;
            }
            Object time = record.value()[index];
            if (time instanceof Number number && number.longValue() >= 0) {
                context.forward(record.withTimestamp(number.longValue()));
            } else {
                SkippedRecords.skipped(sink.topic(), "output column '" + sink.timestamp() + "' is " + time
                    + ": the output's event time must be epoch milliseconds >= 0");
            }
        }
    }
}
