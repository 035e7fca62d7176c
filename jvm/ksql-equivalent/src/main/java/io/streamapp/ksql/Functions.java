package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;

/**
 * The functions and operators a stream-stream join's ON or SELECT computes (the plan's {@code apply}), by ksqlDB's
 * rules: NULL in, NULL out; Java's integer arithmetic (INT stays INT, a BIGINT or DOUBLE operand widens, integer
 * division truncates, division by zero is NULL); SUBSTRING 1-based, a negative position counting from the end.
 * ARRAY and STRUCT values travel as their JSON (ColumnType), so a subscript or a field is a JSON node: the sink's
 * column type reads it when it is written, and a join key is read by the key column's type ({@link
 * StreamStreamJoin}).
 */
final class Functions {

    private Functions() { }

    static BiFunction<Row, Row, Object> apply(String op, String detail, List<BiFunction<Row, Row, Object>> args) {
        return switch (op) {
            case "CASE" -> caseWhen(detail, args);
            case "SUBSTRING" -> (l, r) -> substring(values(args, l, r));
            case "ABS" -> strict(args, v -> abs(v.get(0)));
            case "NEGATE" -> strict(args, v -> negate(v.get(0)));
            case "CAST" -> strict(args, v -> cast(v.get(0), detail));
            case "+", "-", "*", "/", "%" -> strict(args, v -> arithmetic(op, v.get(0), v.get(1)));
            case "FIELD" -> strict(args, v -> field(v.get(0), detail));
            case "SUBSCRIPT" -> strict(args, v -> subscript(v.get(0), v.get(1)));
            default -> throw new IllegalArgumentException("plan: " + op + " (an ON or SELECT expression) is not "
                + "supported by the Kafka Streams program yet");
        };
    }

    private static List<Object> values(List<BiFunction<Row, Row, Object>> args, Row l, Row r) {
        List<Object> values = new ArrayList<>(args.size());
        for (BiFunction<Row, Row, Object> arg : args) {
            values.add(arg.apply(l, r));
        }
        return values;
    }

    private static BiFunction<Row, Row, Object> strict(List<BiFunction<Row, Row, Object>> args,
                                                       java.util.function.Function<List<Object>, Object> function) {
        return (l, r) -> {
            List<Object> values = values(args, l, r);
            return values.contains(null) ? null : function.apply(values);
        };
    }

    /** CASE WHEN c1 THEN v1 ... [ELSE e] END: the first condition that is TRUE (NULL is not) picks its value. */
    private static BiFunction<Row, Row, Object> caseWhen(String detail, List<BiFunction<Row, Row, Object>> args) {
        boolean hasElse = "ELSE".equals(detail);
        int pairs = (args.size() - (hasElse ? 1 : 0)) / 2;
        return (l, r) -> {
            for (int i = 0; i < pairs; i++) {
                if (Boolean.TRUE.equals(args.get(2 * i).apply(l, r))) {
                    return args.get(2 * i + 1).apply(l, r);
                }
            }
            return hasElse ? args.get(args.size() - 1).apply(l, r) : null;
        };
    }

    /** {@code struct->name}: the field of that name, else the one whose upper-cased name it is; NULL if none. */
    private static Object field(Object struct, String name) {
        if (!(struct instanceof JsonNode node) || !node.isObject()) {
            throw new IllegalArgumentException("plan: a field of " + struct + ", which is not a STRUCT");
        }
        JsonNode value = node.get(name);
        if (value == null) {
            for (var fields = node.fields(); fields.hasNext() && value == null; ) {
                var entry = fields.next();
                value = entry.getKey().toUpperCase(java.util.Locale.ROOT).equals(name) ? entry.getValue() : null;
            }
        }
        return value == null || value.isNull() ? null : value;
    }

    /** {@code array[i]}: 1-based, a negative index counting from the end; NULL out of range. */
    private static Object subscript(Object array, Object index) {
        if (!(array instanceof JsonNode node) || !node.isArray()) {
            throw new IllegalArgumentException("plan: a subscript of " + array + ", which is not an ARRAY");
        }
        int i = ((Number) index).intValue();
        if (i == 0 || Math.abs(i) > node.size()) {
            return null;
        }
        JsonNode value = node.get(i > 0 ? i - 1 : node.size() + i);
        return value.isNull() ? null : value;
    }

    private static Object substring(List<Object> values) {
        if (values.size() < 2 || values.get(0) == null || values.get(1) == null) {
            return null;
        }
        String text = values.get(0).toString();
        int position = ((Number) values.get(1)).intValue();
        int start = position > 0 ? Math.min(position - 1, text.length()) : Math.max(text.length() + position, 0);
        if (values.size() < 3 || values.get(2) == null) {
            return text.substring(start);
        }
        int length = Math.max(((Number) values.get(2)).intValue(), 0);
        return text.substring(start, Math.min(text.length(), start + length));
    }

    private static Object abs(Object v) {
        if (v instanceof Integer i) {
            return Math.abs(i);
        }
        if (v instanceof Long i) {
            return Math.abs(i);
        }
        if (v instanceof BigDecimal d) {
            return d.abs();
        }
        return Math.abs(number(v).doubleValue());
    }

    private static Object negate(Object v) {
        if (v instanceof Integer i) {
            return -i;
        }
        if (v instanceof Long i) {
            return -i;
        }
        if (v instanceof BigDecimal d) {
            return d.negate();
        }
        return -number(v).doubleValue();
    }

    private static Object cast(Object v, String target) {
        return switch (target) {
            case "INT" -> v instanceof String s ? Integer.valueOf(s.strip()) : Integer.valueOf(number(v).intValue());
            case "BIGINT" -> v instanceof String s ? Long.valueOf(s.strip()) : Long.valueOf(number(v).longValue());
            case "DOUBLE" -> v instanceof String s ? Double.valueOf(s.strip()) : Double.valueOf(number(v).doubleValue());
            case "STRING" -> ColumnType.writeText(v);
            default -> throw new IllegalArgumentException("plan: CAST to " + target + " is not supported by the "
                + "Kafka Streams program yet");
        };
    }

    /**
     * {@code a op b}: DOUBLE if either is, else exact, then narrowed to the wider operand (BIGINT, else INT) as Java
     * narrows, so an overflow wraps and integer division truncates toward zero as in Java; NULL for a division by 0.
     */
    private static Object arithmetic(String op, Object a, Object b) {
        Number x = number(a);
        Number y = number(b);
        if (x instanceof Double || y instanceof Double) {
            double p = x.doubleValue();
            double q = y.doubleValue();
            if (q == 0 && (op.equals("/") || op.equals("%"))) {
                return null;
            }
            return switch (op) {
                case "+" -> p + q;
                case "-" -> p - q;
                case "*" -> p * q;
                case "/" -> p / q;
                default -> p % q;
            };
        }
        BigDecimal p = new BigDecimal(x.toString());
        BigDecimal q = new BigDecimal(y.toString());
        boolean decimal = x instanceof BigDecimal || y instanceof BigDecimal;
        if (q.signum() == 0 && (op.equals("/") || op.equals("%"))) {
            return null;
        }
        BigDecimal exact = switch (op) {
            case "+" -> p.add(q);
            case "-" -> p.subtract(q);
            case "*" -> p.multiply(q);
            case "/" -> decimal ? p.divide(q, MathContext.DECIMAL64) : p.divideToIntegralValue(q);
            default -> p.remainder(q);
        };
        if (decimal) {
            return exact;
        }
        return x instanceof Long || y instanceof Long ? (Object) exact.longValue() : (Object) exact.intValue();
    }

    private static Number number(Object v) {
        if (v instanceof Number n) {
            return n;
        }
        throw new IllegalArgumentException("plan: arithmetic on " + v.getClass().getSimpleName() + ", not a number");
    }
}
