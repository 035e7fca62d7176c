package io.streamapp.ksql;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.node.DecimalNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.TextNode;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.errors.SerializationException;

/**
 * A column's SQL type (ksqlDB's type text, as the plan writes it) and how ksqlDB reads and writes a value of it.
 * Reading follows JsonSerdeUtils / KsqlJsonDeserializer, the rules {@code streamapp/model/records.py} states:
 * INT and BIGINT from any JSON number (truncated, low 32/64 bits) or a string Integer/Long.parseInt reads, DOUBLE
 * from a number or a string Double.parseDouble reads, STRING from anything as its text, BOOLEAN from a boolean or
 * "true"/"false" in any case, DECIMAL(p, s) at its scale (half up) when it fits. Other types (ARRAY, MAP, STRUCT,
 * BYTES, DATE, TIME, TIMESTAMP) travel as their JSON, unread, as the Python engine carries them.
 */
final class ColumnType {

    enum Base { INT, BIGINT, DOUBLE, STRING, BOOLEAN, DECIMAL, BYTES, OTHER }

    /** Floats are read as exact decimals (trailing zeros kept), as ksqlDB's reader does, before a column coerces. */
    static final ObjectMapper JSON = new ObjectMapper()
        .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
        .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final Pattern DECIMAL = Pattern.compile("DECIMAL\\(\\s*(\\d+)\\s*,\\s*(\\d+)\\s*\\)");

    final Base base;
    final String text;
    private final int precision;
    private final int scale;

    private ColumnType(Base base, String text, int precision, int scale) {
        this.base = base;
        this.text = text;
        this.precision = precision;
        this.scale = scale;
    }

    static ColumnType parse(String text) {
        Matcher decimal = DECIMAL.matcher(text);
        if (decimal.matches()) {
            return new ColumnType(Base.DECIMAL, text, Integer.parseInt(decimal.group(1)),
                Integer.parseInt(decimal.group(2)));
        }
        for (Base base : Base.values()) {
            if (base.name().equals(text) && base != Base.DECIMAL && base != Base.OTHER) {
                return new ColumnType(base, text, 0, 0);
            }
        }
        return new ColumnType(Base.OTHER, text, 0, 0);
    }

    /** A JSON node as this column's value (null for a missing field or JSON null); a node ksqlDB refuses throws. */
    Object read(JsonNode node, String column) {
        if (node == null || node.isNull()) {
            return null;
        }
        try {
            Object value = switch (base) {
                case INT -> node.isNumber() ? Integer.valueOf((int) truncated(node))
                    : node.isTextual() ? Integer.valueOf(Integer.parseInt(node.textValue())) : null;
                case BIGINT -> node.isNumber() ? Long.valueOf(truncated(node))
                    : node.isTextual() ? Long.valueOf(Long.parseLong(node.textValue())) : null;
                case DOUBLE -> node.isNumber() ? Double.valueOf(node.doubleValue())
                    : node.isTextual() ? Double.valueOf(Double.parseDouble(node.textValue())) : null;
                case BOOLEAN -> node.isBoolean() ? Boolean.valueOf(node.booleanValue()) : bool(node);
                case DECIMAL -> decimal(node);
                case STRING -> varchar(node);
                default -> node;
            };
            if (value != null) {
                return value;
            }
        } catch (NumberFormatException | ArithmeticException e) {
            // refused below, as every other node this type cannot take
        }
        throw new SerializationException("field '" + column + "' is " + shown(node) + ", expected a " + text);
    }

    /** A DELIMITED field (text; empty is NULL) as this column's value. */
    Object readText(String field, String column) {
        return field.isEmpty() ? null : read(TextNode.valueOf(field), column);
    }

    /** A value as ksqlDB's JSON format writes it. */
    JsonNode write(Object value) {
        if (value == null) {
            return NODES.nullNode();
        }
        if (value instanceof JsonNode node) {
            return node;
        }
        if (value instanceof Integer number) {
            return NODES.numberNode(number);
        }
        if (value instanceof Long number) {
            return NODES.numberNode(number);
        }
        if (value instanceof Double number) {
            return NODES.numberNode(number);
        }
        if (value instanceof BigDecimal number) {
            return DecimalNode.valueOf(number);  // as it is: the factory may strip trailing zeros
        }
        if (value instanceof Boolean bool) {
            return NODES.booleanNode(bool);
        }
        return NODES.textNode(value.toString());
    }

    /** A value as a DELIMITED field (NULL is empty). */
    static String writeText(Object value) {
        if (value == null) {
            return "";
        }
        return value instanceof BigDecimal number ? number.toString() : value.toString();
    }

    /** JsonNode.asLong: the integer part, its low 64 bits (a decimal times 10^64 or more has none left). */
    private static long truncated(JsonNode node) {
        if (node.isIntegralNumber()) {
            return node.bigIntegerValue().longValue();
        }
        BigDecimal value = node.decimalValue();
        return value.scale() <= -64 ? 0L : value.toBigInteger().longValue();
    }

    private static Boolean bool(JsonNode node) {
        String text = node.isTextual() ? node.textValue() : "";
        if (text.equalsIgnoreCase("true") || text.equalsIgnoreCase("false")) {
            return text.equalsIgnoreCase("true");
        }
        return null;
    }

    private BigDecimal decimal(JsonNode node) {
        BigDecimal value = node.isNumber() ? node.decimalValue()
            : node.isTextual() ? new BigDecimal(node.textValue().strip()) : null;
        if (value == null) {
            return null;
        }
        BigDecimal fitted = value.setScale(scale, RoundingMode.HALF_UP);
        if (fitted.precision() > precision && fitted.signum() != 0) {
            throw new ArithmeticException("does not fit " + text);
        }
        return fitted;
    }

    /** KsqlJsonDeserializer.processString: an object as compact JSON, an array as {@code [a, b]}, else its text. */
    private static String varchar(JsonNode node) {
        if (node.isObject()) {
            try {
                return JSON.writeValueAsString(JSON.treeToValue(node, Object.class));
            } catch (JsonProcessingException e) {
                throw new SerializationException(e.getOriginalMessage());
            }
        }
        if (node.isArray()) {
            List<String> items = new ArrayList<>();
            node.forEach(item -> items.add(item.isNull() ? "null" : varchar(item)));
            return "[" + String.join(", ", items) + "]";
        }
        return node.asText();
    }

    private static String shown(JsonNode node) {
        String text = node.toString();
        return text.length() > 60 ? text.substring(0, 60) + "..." : text;
    }
}
