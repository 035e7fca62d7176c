package io.streamapp.ksql;

import java.util.List;
import java.util.function.BiFunction;

/**
 * A query's expressions compiled against its sources' rows (ksqlDB's Project step): each output value column, and
 * the join key, as a function of the left row and the right row (a LEFT join's miss reads the right side as NULL).
 */
final class Projector {

    private final List<BiFunction<Row, Row, Object>> values;

    Projector(Plan plan, Plan.Query query) {
        Plan.Source left = plan.source(query.left());
        Plan.Source right = query.right() == null ? null : plan.source(query.right());
        this.values = query.value().stream().map(p -> compile(p.expression(), left, right)).toList();
    }

    /** The sink's value columns, in order, for a left row and the right row it found (null: none). */
    Object[] value(Row left, Row right) {
        Object[] out = new Object[values.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = values.get(i).apply(left, right);
        }
        return out;
    }

    /** An expression as a function of the (left, right) rows. */
    static BiFunction<Row, Row, Object> compile(Plan.Expression expression, Plan.Source left, Plan.Source right) {
        if (expression instanceof Plan.AsValue asValue) {
            return compile(asValue.argument(), left, right);
        }
        if (expression instanceof Plan.JoinKey) {
            // the key both rows share: each row holds it as its first column (a table's key is copied in)
            return (l, r) -> l != null ? l.columns[0] : r == null ? null : r.columns[0];
        }
        if (expression instanceof Plan.Literal literal) {
            Object value = literal.value();
            return (l, r) -> value;
        }
        if (expression instanceof Plan.Compare compare) {
            return Predicates.compare(compare.op(), compile(compare.left(), left, right),
                compile(compare.right(), left, right));
        }
        if (expression instanceof Plan.Logical logical) {
            return Predicates.logical(logical.op(),
                logical.args().stream().map(a -> compile(a, left, right)).toList());
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
        int index = side.index(column.name());
        return (l, r) -> {
            Row row = isLeft ? l : r;
            return row == null ? null : row.columns[index];
        };
    }
}
