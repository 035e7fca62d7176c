package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.function.BiFunction;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.StreamJoined;

/**
 * A windowed stream-stream join as ksqlDB builds it ({@code StreamStreamJoinBuilder}): either side re-keyed by its ON
 * expression ({@code LeftSourceKeyed-SelectKey}, {@code RightSourceKeyed-SelectKey}) when the plan says so, which
 * Kafka Streams repartitions through {@code Join-left-repartition} / {@code Join-right-repartition}; the window
 * {@code JoinWindows.of(before).after(after)} without a GRACE PERIOD (the legacy join: eager LEFT/OUTER results) or
 * {@code ofTimeDifferenceAndGrace(before, grace).after(after)} with one; {@code KStream.join / leftJoin /
 * outerJoin} with {@code StreamJoined} named "Join", RIGHT being the right stream's {@code leftJoin} of the left with
 * the same window; then the WHERE and the projection. Kafka Streams sets the output time: the later record's.
 */
final class StreamStreamJoin {

    static final String JOIN = "Join";

    private StreamStreamJoin() { }

    @SuppressWarnings("deprecation")  // JoinWindows.of: the legacy window ksqlDB still builds without a GRACE PERIOD
    static KStream<Object, Object[]> build(StreamsBuilder builder, Plan plan, Plan.Query query) {
        Plan.Source left = plan.source(query.left());
        Plan.Source right = plan.source(query.right());
        Plan.Source sink = plan.source(query.sink());
        if (query.withinBefore() == null || query.withinAfter() == null || query.leftKey() == null
                || query.rightKey() == null) {
            throw new IllegalArgumentException("plan: query " + query.name() + " is a stream-stream join without "
                + "its window or its ON keys");
        }
        if (sink.keyColumn() == null) {
            throw new IllegalArgumentException("plan: query " + query.name() + " writes a sink without a key column");
        }
        Projector projector = new Projector(plan, query);
        Plan.Column keyColumn = sink.keyColumn();
        KStream<Object, Row> leftRows = keyed(Sources.stream(builder, left), query.repartition(),
            Projector.compile(query.leftKey(), left, right), true, keyColumn, "LeftSourceKeyed-SelectKey");
        KStream<Object, Row> rightRows = keyed(Sources.stream(builder, right), query.repartitionRight(),
            Projector.compile(query.rightKey(), left, right), false, keyColumn, "RightSourceKeyed-SelectKey");

        JoinWindows windows = query.grace() == null
            ? JoinWindows.of(Duration.ofMillis(query.withinBefore()))
            : JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(query.withinBefore()),
                Duration.ofMillis(query.grace()));
        windows = windows.after(Duration.ofMillis(query.withinAfter()));
        // The join key's serde for the repartition topics and the window stores: the sink's key column's type.
        Serde<Object> key = KeyFormat.of("JSON", sink.keyColumn());
        Serde<Row> leftSerde = Row.serde(left.columnTypes());
        Serde<Row> rightSerde = Row.serde(right.columnTypes());
        KStream<Object, JoinedRows> joined = switch (query.joinType()) {
            case "INNER" -> leftRows.join(rightRows, JoinedRows::new, windows,
                StreamJoined.with(key, leftSerde, rightSerde).withName(JOIN));
            case "LEFT" -> leftRows.leftJoin(rightRows, JoinedRows::new, windows,
                StreamJoined.with(key, leftSerde, rightSerde).withName(JOIN));
            case "FULL" -> leftRows.outerJoin(rightRows, JoinedRows::new, windows,
                StreamJoined.with(key, leftSerde, rightSerde).withName(JOIN));
            case "RIGHT" -> rightRows.leftJoin(leftRows, (r, l) -> new JoinedRows(l, r), windows,
                StreamJoined.with(key, rightSerde, leftSerde).withName(JOIN));
            default -> throw new IllegalArgumentException("plan: join type " + query.joinType()
                + " is not a stream-stream join");
        };
        if (query.where() != null) {
            joined = joined.filter((k, rows) -> projector.keeps(rows.left(), rows.right()), Named.as("WhereFilter"));
        }
        return joined.mapValues(rows -> projector.value(rows.left(), rows.right()), Named.as("Project"));
    }

    /**
     * A side keyed by its ON expression when the plan re-keys it (a null value keeps a null key: it is dropped); a
     * key that is a JSON node (a STRUCT field, an ARRAY element) is read by the join key column's type.
     */
    private static KStream<Object, Row> keyed(KStream<Object, Row> rows, boolean rekey, BiFunction<Row, Row, Object> key,
                                              boolean isLeft, Plan.Column column, String name) {
        if (!rekey) {
            return rows;
        }
        return rows.selectKey((k, row) -> {
            Object value = row == null ? null : isLeft ? key.apply(row, null) : key.apply(null, row);
            return value instanceof JsonNode node && column.type().base != ColumnType.Base.OTHER
                ? column.type().read(node, column.name()) : value;
        }, Named.as(name));
    }
}
