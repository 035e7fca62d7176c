package io.streamapp.ksql;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serializer;

/**
 * A row of ksqlDB's JSON value format: the behaviour of ksqlDB's KsqlJsonDeserializer and
 * JsonSerdeUtils (reading) and of Kafka Connect's JsonConverter without schemas (writing),
 * for the three column types the demo uses.
 *
 * <p>Reading: the value must be a JSON object (JSON {@code null} is a tombstone); a column is
 * the field of exactly its (upper-case) name, else the last field whose upper-cased name equals
 * it; a missing field or JSON null is NULL. BIGINT takes any JSON number (truncated, as
 * {@code JsonNode.asLong}) or a string {@code Long.parseLong} accepts; DOUBLE any number or a
 * string {@code Double.parseDouble} accepts; VARCHAR any value: an object as compact JSON, an
 * array as {@code [a, b]}, anything else as its text. Anything else throws, and the record is
 * skipped by the deserialization handler, as ksqlDB's processing log does.
 *
 * <p>Writing: a compact JSON object, the columns in order, upper-case names, explicit nulls.
 */
final class JsonRow implements Serde<Object[]> {

    enum Type { BIGINT, DOUBLE, VARCHAR }

    record Column(String name, Type type) { }

    /** Floats are read as exact decimals (trailing zeros kept), as ksqlDB's reader does, before a column coerces them. */
    private static final ObjectMapper READER = new ObjectMapper()
        .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
        .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);
    private static final ObjectMapper WRITER = new ObjectMapper();

    private final List<Column> columns;

    JsonRow(List<Column> columns) {
        this.columns = List.copyOf(columns);
    }

    Object[] read(byte[] bytes) {
        if (bytes == null) {
            return null;
        }
        JsonNode root;
        try {
            root = READER.readTree(bytes);
        } catch (JsonProcessingException e) {
            throw new SerializationException("not JSON: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw new SerializationException("not JSON: " + e);
        }
        if (root.isNull()) {
            return null;
        }
        if (!root.isObject()) {
            throw new SerializationException("value is not a JSON object: " + root.getNodeType());
        }
        Map<String, JsonNode> upperCased = new HashMap<>();
        root.properties().forEach(field -> upperCased.put(field.getKey().toUpperCase(Locale.ROOT), field.getValue()));
        Object[] row = new Object[columns.size()];
        for (int i = 0; i < row.length; i++) {
            Column column = columns.get(i);
            JsonNode node = root.has(column.name()) ? root.get(column.name()) : upperCased.get(column.name());
            try {
                row[i] = coerce(column.type(), node);
            } catch (IllegalArgumentException e) {
                throw new SerializationException("field " + column.name() + " = " + node + ": " + e.getMessage());
            }
        }
        return row;
    }

    private static Object coerce(Type type, JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        switch (type) {
            case BIGINT:
                if (node.isNumber()) {
                    return node.asLong();
                }
                if (node.isTextual()) {
                    return Long.parseLong(node.textValue());
                }
                throw new IllegalArgumentException("cannot be a BIGINT");
            case DOUBLE:
                if (node.isNumber()) {
                    return node.doubleValue();
                }
                if (node.isTextual()) {
                    return Double.parseDouble(node.textValue());
                }
                throw new IllegalArgumentException("cannot be a DOUBLE");
            default:
                return varchar(node);
        }
    }

    private static String varchar(JsonNode node) {
        if (node.isObject()) {
            try {
                return READER.writeValueAsString(READER.treeToValue(node, Object.class));
            } catch (JsonProcessingException e) {
                throw new IllegalArgumentException(e.getOriginalMessage());
            }
        }
        if (node.isArray()) {
            List<String> items = new ArrayList<>();
            node.forEach(item -> items.add(item.isNull() ? "null" : varchar(item)));
            return "[" + String.join(", ", items) + "]";
        }
        return node.asText();
    }

    byte[] write(Object[] row) {
        if (row == null) {
            return null;
        }
        ObjectNode out = WRITER.createObjectNode();
        for (int i = 0; i < row.length; i++) {
            String name = columns.get(i).name();
            Object value = row[i];
            if (value == null) {
                out.putNull(name);
            } else if (value instanceof Long number) {
                out.put(name, number);
            } else if (value instanceof Double number) {
                out.put(name, number);
            } else {
                out.put(name, (String) value);
            }
        }
        try {
            return WRITER.writeValueAsBytes(out);
        } catch (JsonProcessingException e) {
            throw new SerializationException(e);
        }
    }

    @Override
    public Serializer<Object[]> serializer() {
        return (topic, row) -> write(row);
    }

    @Override
    public Deserializer<Object[]> deserializer() {
        return (topic, bytes) -> read(bytes);
    }
}
