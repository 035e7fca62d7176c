package io.streamapp.ksql;

import java.util.List;
import java.util.function.BiFunction;

/**
 * A query's expressions compiled against its sources' rows (ksqlDB's Project step): each output value column, and
 * the join key, as a function of the left row and the right row (an outer join's miss reads the other side as NULL).
 */
final class Projector {

    /** A table's key, which both rows of a table-table join hold as their first column (the key is copied in). */
    private static final BiFunction<Row, Row, Object> TABLE_KEY =
        (l, r) -> l != null ? l.columns[0] : r == null ? null : r.columns[0];
    private static final List<String> WHERE_READ = List.of("ROWPARTITION", "ROWOFFSET");

    private final List<BiFunction<Row, Row, Object>> values;
    private final BiFunction<Row, Row, Object> where;

    Projector(Plan plan, Plan.Query query) {
        Plan.Source left = plan.source(query.left());
        Plan.Source right = query.right() == null ? null : plan.source(query.right());
        BiFunction<Row, Row, Object> joinKey = joinKey(query, left, right);
        this.values = query.value().stream().map(p -> compile(p.expression(), left, right, joinKey)).toList();
        this.where = query.where() == null ? null : compile(query.where(), left, right, joinKey);
    }

    /** The sink's value columns, in order, for a left row and the right row it found (null: none). */
    Object[] value(Row left, Row right) {
        Object[] out = new Object[values.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = values.get(i).apply(left, right);
        }
        return out;
    }

    /** Whether the WHERE keeps a joined pair (TRUE only: NULL drops it); true without a WHERE. */
    boolean keeps(Row left, Row right) {
        return where == null || Boolean.TRUE.equals(where.apply(left, right));
    }

    /**
     * The join key as the rows give it: a stream-stream join's is its ON expression of whichever side is there (a
     * re-keyed side's key is computed, not a column); a table-table join's is the primary key.
     */
    private static BiFunction<Row, Row, Object> joinKey(Plan.Query query, Plan.Source left, Plan.Source right) {
        if (!Plan.STREAM_STREAM_JOIN.equals(query.kind())) {
            return TABLE_KEY;
        }
        BiFunction<Row, Row, Object> leftKey = compile(query.leftKey(), left, right);
        BiFunction<Row, Row, Object> rightKey = compile(query.rightKey(), left, right);
        return (l, r) -> l != null ? leftKey.apply(l, null) : r == null ? null : rightKey.apply(null, r);
    }

    /** An expression as a function of the (left, right) rows. */
    static BiFunction<Row, Row, Object> compile(Plan.Expression expression, Plan.Source left, Plan.Source right) {
        return compile(expression, left, right, TABLE_KEY);
    }

    private static BiFunction<Row, Row, Object> compile(Plan.Expression expression, Plan.Source left,
                                                        Plan.Source right, BiFunction<Row, Row, Object> joinKey) {
        if (expression == null) {
            throw new IllegalArgumentException("plan: an expression is missing");
        }
        if (expression instanceof Plan.AsValue asValue) {
            return compile(asValue.argument(), left, right, joinKey);
        }
        if (expression instanceof Plan.JoinKey) {
            return joinKey;
        }
        if (expression instanceof Plan.Literal literal) {
            Object value = literal.value();
            return (l, r) -> value;
        }
        if (expression instanceof Plan.Compare compare) {
            return Predicates.compare(compare.op(), compile(compare.left(), left, right, joinKey),
                compile(compare.right(), left, right, joinKey));
        }
        if (expression instanceof Plan.Logical logical) {
            return Predicates.logical(logical.op(),
                logical.args().stream().map(a -> compile(a, left, right, joinKey)).toList());
        }
        if (expression instanceof Plan.Apply apply) {
            return Functions.apply(apply.op(), apply.detail(),
                apply.args().stream().map(a -> compile(a, left, right, joinKey)).toList());
        }
        if (expression instanceof Plan.RowTime rowTime) {
            boolean isLeft = Plan.LEFT.equals(rowTime.side());
            return (l, r) -> {
                Row row = isLeft ? l : r;
                return row == null ? null : (Object) row.rowtime;
            };
        }
        Plan.ColumnOf column = (Plan.ColumnOf) expression;
        boolean isLeft = Plan.LEFT.equals(column.side());
        Plan.Source side = isLeft ? left : right;
        if (side == null) {
            throw new IllegalArgumentException("plan: column " + column.name() + " of a side the query does not have");
        }
        if (WHERE_READ.contains(column.name())) {  // a stream's pseudo columns: where its record was read
            boolean partition = column.name().equals(WHERE_READ.get(0));
            return (l, r) -> {
                Row row = isLeft ? l : r;
                return row == null ? null : partition ? (Object) row.partition : (Object) row.offset;
            };
        }
        int index = side.index(column.name());
        return (l, r) -> {
            Row row = isLeft ? l : r;
            return row == null ? null : row.columns[index];
        };
    }
}
