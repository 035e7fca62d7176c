package io.streamapp.ksql;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A table-table join on the primary key as ksqlDB builds it (its recorded topologies): both tables materialized
 * ({@code KafkaTopic_Left-Reduce}, {@code KafkaTopic_Right-Reduce}, or the right re-keyed into the left's key format
 * through {@code RightSourceKeyed-SelectKey-repartition} into {@code RightSourceKeyed-Materialize}), then
 * {@code KTable.join / leftJoin / outerJoin}, a RIGHT join being the right table's {@code leftJoin} of the left (as
 * ksqlDB builds it), the WHERE as a {@code KTable.filter}, and the projection materialized in {@code Project-Last}.
 * Kafka Streams decides what is forwarded (updates, tombstones) and the time: the later of the two rows'.
 */
final class TableTableJoin {

    static final String LEFT_STORE = "KafkaTopic_Left-Reduce";
    static final String PROJECT_STORE = "Project-Last";

    private TableTableJoin() { }

    /** The join's rows as a stream of updates (a null value: a tombstone), ready for the sink. */
    static KStream<Object, Object[]> build(StreamsBuilder builder, Plan plan, Plan.Query query) {
        Plan.Source left = plan.source(query.left());
        Plan.Source right = plan.source(query.right());
        if (left.keyColumns().size() != 1 || right.keyColumns().size() != 1) {
            throw new IllegalArgumentException("plan: query " + query.name() + " joins tables without one key "
                + "column each");
        }
        KTable<Object, Row> leftTable = Sources.table(builder, left, LEFT_STORE);
        KTable<Object, Row> rightTable = query.repartitionRight()
            ? Sources.rekeyedTable(builder, right, KeyFormat.of(left.keyFormat(), right.keyColumn()))
            : Sources.table(builder, right, PlanTopology.TABLE_STORE);
        KTable<Object, JoinedRows> joined = switch (query.joinType()) {
            case "INNER" -> leftTable.join(rightTable, JoinedRows::new);
            case "LEFT" -> leftTable.leftJoin(rightTable, JoinedRows::new);
            case "RIGHT" -> rightTable.leftJoin(leftTable, (r, l) -> new JoinedRows(l, r));
            case "FULL" -> leftTable.outerJoin(rightTable, JoinedRows::new);
            default -> throw new IllegalArgumentException("plan: join type " + query.joinType()
                + " is not a table-table join");
        };
        Projector projector = new Projector(plan, query);
        if (query.where() != null) {
            joined = joined.filter((key, rows) -> projector.keeps(rows.left(), rows.right()),
                Named.as("WhereFilter-Filter"));
        }
        Plan.Source sink = plan.source(query.sink());
        Serde<Object[]> values = ValueFormat.of(sink);
        return joined.mapValues(pair -> projector.value(pair.left(), pair.right()), Named.as("Project"),
                Materialized.<Object, Object[], KeyValueStore<Bytes, byte[]>>as(PROJECT_STORE)
                    .withKeySerde(KeyFormat.of(sink)).withValueSerde(values))
            .toStream();
    }
}
