package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The plan streamapp's Python planner wrote ({@code streamapp/sql/plan.py}, {@code Plan.to_json()}), read from its
 * JSON. There is no SQL parser on this side: what Python planned is exactly what Kafka Streams runs.
 */
record Plan(List<Source> sources, List<Query> queries) {

    /** The plan format this program reads ({@code streamapp.sql.plan.VERSION}). */
    static final int VERSION = 1;
    static final String TABLE = "table";
    static final String SELECT = "select";
    static final String STREAM_TABLE_JOIN = "stream_table_join";
    static final String TABLE_TABLE_JOIN = "table_table_join";
    static final String STREAM_STREAM_JOIN = "stream_stream_join";
    static final String LEFT = "left";
    /** The query kinds {@link PlanTopology} builds ({@code streams_runner.KINDS} on the Python side). */
    static final Set<String> KINDS = Set.of(SELECT, STREAM_TABLE_JOIN, TABLE_TABLE_JOIN, STREAM_STREAM_JOIN);

    record Column(String name, ColumnType type) { }

    /** A stream or table: its topic, columns (key first, as ksqlDB copies the key into the row) and formats. */
    record Source(String name, String kind, String topic, List<Column> keyColumns, List<Column> valueColumns,
                  String keyFormat, String valueFormat, boolean unwrapped, String timestamp) {

        boolean isTable() {
            return TABLE.equals(kind);
        }

        /** The key column, or null for a source without one (NONE, or no KEY column). */
        Column keyColumn() {
            return keyColumns.isEmpty() ? null : keyColumns.get(0);
        }

        List<Column> columns() {
            List<Column> all = new ArrayList<>(keyColumns);
            all.addAll(valueColumns);
            return all;
        }

        List<ColumnType> columnTypes() {
            return columns().stream().map(Column::type).toList();
        }

        /** The position of a column in {@link #columns()}; a plan naming an unknown column is refused. */
        int index(String column) {
            List<Column> all = columns();
            for (int i = 0; i < all.size(); i++) {
                if (all.get(i).name().equals(column)) {
                    return i;
                }
            }
            throw new IllegalArgumentException("plan: source " + name + " has no column " + column);
        }
    }

    /** What a projection or a join key computes from the left and right rows. */
    sealed interface Expression permits ColumnOf, RowTime, AsValue, JoinKey, Literal, Compare, Logical, Apply { }

    record ColumnOf(String side, String name) implements Expression { }

    record RowTime(String side) implements Expression { }

    record AsValue(Expression argument) implements Expression { }

    /** A table-table join's key: the primary key both rows share, whichever side holds a row. */
    record JoinKey() implements Expression { }

    /** A constant of a WHERE (text, a number, a boolean or null), as Jackson reads it. */
    record Literal(Object value) implements Expression { }

    /** {@code left op right}, NULL when either side is NULL. */
    record Compare(String op, Expression left, Expression right) implements Expression { }

    /** AND / OR of its args, or NOT of its one, in SQL's three-valued logic. */
    record Logical(String op, List<Expression> args) implements Expression { }

    /** A function or operator of a stream-stream join's ON or SELECT ({@link Functions}); detail: CAST's type... */
    record Apply(String op, List<Expression> args, String detail) implements Expression { }

    record Projection(String name, ColumnType type, Expression expression, boolean key) { }

    /** One persistent query: a copy ({@link #SELECT}) or a stream-table join, with ksqlDB's repartition decisions. */
    record Query(String name, String kind, String sink, String left, String right, String joinType,
                 Expression leftKey, boolean repartition, boolean repartitionRight, List<Projection> projection,
                 Expression where, Expression rightKey, Long withinBefore, Long withinAfter, Long grace) {

        /** A join of two sources (whose topics must then be co-partitioned unless one side is re-keyed). */
        boolean isJoin() {
            return right != null;
        }

        List<Projection> value() {
            return projection.stream().filter(p -> !p.key()).toList();
        }
    }

    Source source(String name) {
        return sources.stream().filter(s -> s.name().equals(name)).findFirst()
            .orElseThrow(() -> new IllegalArgumentException("plan: no source " + name));
    }

    /** The plan from its JSON; a plan of another version, or missing a field, is refused in one line. */
    static Plan parse(JsonNode json) {
        if (json == null || !json.isObject()) {
            throw new IllegalArgumentException("plan: expected a JSON object");
        }
        int version = json.path("version").asInt(-1);
        if (version != VERSION) {
            throw new IllegalArgumentException("plan version " + json.get("version") + ": this program reads version "
                + VERSION);
        }
        List<Source> sources = new ArrayList<>();
        for (JsonNode raw : required(json, "sources")) {
            sources.add(new Source(text(raw, "name"), text(raw, "kind"), text(raw, "topic"),
                columns(required(raw, "key_columns")), columns(required(raw, "value_columns")),
                text(raw, "key_format"), text(raw, "value_format"),
                raw.path("wrap_single_value").isBoolean() && !raw.get("wrap_single_value").booleanValue(),
                raw.path("timestamp").isTextual() ? raw.get("timestamp").textValue() : null));
        }
        List<Query> queries = new ArrayList<>();
        for (JsonNode raw : required(json, "queries")) {
            // a kind this program does not build is refused by name, before fields or expressions only it has
            if (!KINDS.contains(text(raw, "kind"))) {
                throw new IllegalArgumentException("plan: query " + text(raw, "name") + " is a " + text(raw, "kind")
                    + ", which this program does not build");
            }
            List<Projection> projection = new ArrayList<>();
            for (JsonNode p : required(raw, "projection")) {
                projection.add(new Projection(text(p, "name"), ColumnType.parse(text(p, "type")),
                    expression(p.get("expression")), p.path("key").asBoolean(false)));
            }
            queries.add(new Query(text(raw, "name"), text(raw, "kind"), text(raw, "sink"), text(raw, "left"),
                raw.path("right").textValue(), raw.path("join_type").textValue(),
                raw.path("left_key").isObject() ? expression(raw.get("left_key")) : null,
                raw.path("repartition").asBoolean(false), raw.path("repartition_right").asBoolean(false),
                List.copyOf(projection), raw.path("where").isObject() ? expression(raw.get("where")) : null,
                raw.path("right_key").isObject() ? expression(raw.get("right_key")) : null,
                millis(raw, "within_before"), millis(raw, "within_after"), millis(raw, "grace")));
        }
        return new Plan(List.copyOf(sources), List.copyOf(queries));
    }

    private static List<Column> columns(JsonNode raw) {
        List<Column> columns = new ArrayList<>();
        for (JsonNode c : raw) {
            columns.add(new Column(text(c, "name"), ColumnType.parse(text(c, "type"))));
        }
        return List.copyOf(columns);
    }

    private static Expression expression(JsonNode raw) {
        String kind = raw == null ? "" : raw.path("kind").asText();
        return switch (kind) {
            case "column" -> new ColumnOf(text(raw, "side"), text(raw, "name"));
            case "rowtime" -> new RowTime(text(raw, "side"));
            case "as_value" -> new AsValue(expression(raw.get("argument")));
            case "join_key" -> new JoinKey();
            case "literal" -> new Literal(literal(raw.get("value")));
            case "compare" -> new Compare(text(raw, "op"), expression(raw.get("left")), expression(raw.get("right")));
            case "logical" -> new Logical(text(raw, "op"), arguments(raw));
            case "apply" -> new Apply(text(raw, "op"), arguments(raw), raw.path("detail").asText(""));
            default -> throw new IllegalArgumentException("plan: unknown expression " + raw);
        };
    }

    /** A stream-stream join's window field in milliseconds; null when absent (no GRACE PERIOD, or another kind). */
    private static Long millis(JsonNode query, String field) {
        JsonNode value = query.get(field);
        if (value == null || value.isNull()) {
            return null;
        }
        if (!value.canConvertToLong() || value.longValue() < 0) {
            throw new IllegalArgumentException("plan: " + field + " must be milliseconds >= 0 in " + query);
        }
        return value.longValue();
    }

    private static List<Expression> arguments(JsonNode raw) {
        List<Expression> args = new ArrayList<>();
        required(raw, "args").forEach(a -> args.add(expression(a)));
        return List.copyOf(args);
    }

    private static Object literal(JsonNode value) {
        if (value == null || value.isNull()) {
            return null;
        }
        if (value.isTextual()) {
            return value.textValue();
        }
        if (value.isBoolean()) {
            return value.booleanValue();
        }
        if (value.isIntegralNumber()) {
            return value.longValue();
        }
        if (value.isNumber()) {
            return value.doubleValue();
        }
        throw new IllegalArgumentException("plan: a literal must be text, a number, a boolean or null: " + value);
    }

    private static JsonNode required(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || !value.isArray()) {
            throw new IllegalArgumentException("plan: " + field + " must be a list");
        }
        return value;
    }

    private static String text(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || !value.isTextual()) {
            throw new IllegalArgumentException("plan: " + field + " must be text in " + node);
        }
        return value.textValue();
    }
}
