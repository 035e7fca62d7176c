package io.streamapp.ksql;

import java.math.BigDecimal;
import java.util.List;
import java.util.function.BiFunction;

/**
 * A WHERE's comparisons and logic over the (left, right) rows, in SQL's three-valued logic: a comparison with a
 * NULL side, or of two values that cannot be compared, is NULL (unknown); AND / OR decide on one operand when it
 * can, else are NULL when any operand is.
 */
final class Predicates {

    private Predicates() { }

    static BiFunction<Row, Row, Object> compare(String op, BiFunction<Row, Row, Object> left,
                                                BiFunction<Row, Row, Object> right) {
        return (l, r) -> {
            Object a = left.apply(l, r);
            Object b = right.apply(l, r);
            Integer order = order(a, b);
            if (order == null) {
                return null;
            }
            return switch (op) {
                case "=" -> order == 0;
                case "!=", "<>" -> order != 0;
                case "<" -> order < 0;
                case "<=" -> order <= 0;
                case ">" -> order > 0;
                case ">=" -> order >= 0;
                default -> throw new IllegalArgumentException("plan: unknown comparison " + op);
            };
        };
    }

    static BiFunction<Row, Row, Object> logical(String op, List<BiFunction<Row, Row, Object>> args) {
        if ("NOT".equals(op)) {
            if (args.size() != 1) {
                throw new IllegalArgumentException("plan: NOT takes one argument, not " + args.size());
            }
            BiFunction<Row, Row, Object> arg = args.get(0);
            return (l, r) -> arg.apply(l, r) instanceof Boolean b ? !b : null;
        }
        if (!"AND".equals(op) && !"OR".equals(op)) {
            throw new IllegalArgumentException("plan: unknown logical operator " + op);
        }
        boolean decisive = "OR".equals(op);  // the value that decides an OR (true) or an AND (false) alone
        return (l, r) -> {
            boolean unknown = false;
            for (BiFunction<Row, Row, Object> arg : args) {
                if (!(arg.apply(l, r) instanceof Boolean value)) {
                    unknown = true;
                } else if (value == decisive) {
                    return decisive;
                }
            }
            return unknown ? null : !decisive;
        };
    }

    /** The order of two values of comparable kinds (numbers of any width, text, booleans); null: not comparable. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static Integer order(Object a, Object b) {
        if (a == null || b == null) {
            return null;
        }
        if (a instanceof Number x && b instanceof Number y) {
            if (x instanceof Double || x instanceof Float || y instanceof Double || y instanceof Float) {
                return Double.compare(x.doubleValue(), y.doubleValue());  // NaN and infinities have no BigDecimal
            }
            return new BigDecimal(x.toString()).compareTo(new BigDecimal(y.toString()));
        }
        if (a.getClass() == b.getClass() && a instanceof Comparable c) {
            return c.compareTo(b);
        }
        return null;
    }
}
