package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;

/**
 * ksqlDB's key formats for a source's one key column, as Kafka Streams serdes of the column's Java value
 * ({@code KafkaSerdeFactory}, the JSON and DELIMITED formats in the ksql repository):
 * KAFKA INT is 4 bytes big-endian, BIGINT 8, DOUBLE an 8-byte IEEE-754, STRING UTF-8, BYTES as they are;
 * JSON is the bare JSON value (a key of several columns an object of them); DELIMITED its text; NONE (or no key
 * column) no key at all.
 * A key that cannot be read throws, and the record is skipped (the deserialization handler).
 */
final class KeyFormat {

    private KeyFormat() { }

    /** The key serde of a source (or sink): its key format and key column (or columns, in JSON). */
    static Serde<Object> of(Plan.Source source) {
        if (source.keyColumns().size() > 1) {
            return columns(source);
        }
        return of(source.keyFormat(), source.keyColumn());
    }

    /**
     * A JSON key of several columns (ksqlDB's STRUCT key) as their values in order, an {@code Object[]}: an object
     * whose fields are read as a JSON value's are (case-insensitively, a missing one NULL); JSON null is every column
     * NULL. Written as an object of every column, named as in the plan.
     */
    private static Serde<Object> columns(Plan.Source source) {
        List<Plan.Column> columns = source.keyColumns();
        if (!source.keyFormat().equals("JSON")) {
            throw new IllegalArgumentException("plan: " + source.name() + " has a key of " + columns.size()
                + " columns in " + source.keyFormat() + ": only JSON reads one");
        }
        return Serdes.serdeFrom(
            (topic, key) -> key == null ? null : json(ValueFormat.writeJson(columns, false, (Object[]) key)),
            (topic, bytes) -> {
                if (bytes == null) {
                    return null;
                }
                JsonNode root = parse(bytes);
                Object[] key = new Object[columns.size()];
                if (root.isNull()) {
                    return key;
                }
                if (!root.isObject()) {
                    throw new SerializationException("key is " + root.getNodeType() + ": a key of the columns "
                        + columns.stream().map(Plan.Column::name).toList() + " is a JSON object");
                }
                for (int i = 0; i < key.length; i++) {
                    Plan.Column column = columns.get(i);
                    key[i] = column.type().read(ValueFormat.field(root, column.name()), column.name());
                }
                return key;
            });
    }

    /** A key serde for {@code format} and {@code column} (null: a source without a key). */
    static Serde<Object> of(String format, Plan.Column column) {
        if (column == null || format.equals("NONE")) {
            return Serdes.serdeFrom((topic, key) -> null, (topic, bytes) -> null);
        }
        return switch (format) {
            case "KAFKA" -> kafka(column);
            case "JSON" -> Serdes.serdeFrom(
                (topic, key) -> key == null ? null : json(column.type().write(key)),
                (topic, bytes) -> bytes == null ? null : column.type().read(parse(bytes), column.name()));
            case "DELIMITED" -> Serdes.serdeFrom(
                (topic, key) -> key == null ? null : ColumnType.writeText(key).getBytes(StandardCharsets.UTF_8),
                (topic, bytes) -> bytes == null ? null
                    : column.type().readText(new String(bytes, StandardCharsets.UTF_8), column.name()));
            default -> throw new IllegalArgumentException("plan: unknown key format " + format);
        };
    }

    private static Serde<Object> kafka(Plan.Column column) {
        ColumnType type = column.type();
        int size = switch (type.base) {
            case INT -> 4;
            case BIGINT, DOUBLE -> 8;
            case STRING, BYTES -> -1;
            default -> throw new IllegalArgumentException(
                "the KAFKA key format has no " + type.text + " (key column " + column.name() + ")");
        };
        Serializer<Object> serializer = (topic, key) -> {
            if (key == null) {
                return null;
            }
            return switch (type.base) {
                case INT -> ByteBuffer.allocate(4).putInt(((Number) key).intValue()).array();
                case BIGINT -> ByteBuffer.allocate(8).putLong(((Number) key).longValue()).array();
                case DOUBLE -> ByteBuffer.allocate(8).putDouble(((Number) key).doubleValue()).array();
                case BYTES -> (byte[]) key;
                default -> key.toString().getBytes(StandardCharsets.UTF_8);
            };
        };
        Deserializer<Object> deserializer = (topic, bytes) -> {
            if (bytes == null) {
                return null;
            }
            if (size > 0 && bytes.length != size) {
                throw new SerializationException("key is " + bytes.length + " bytes: a KAFKA-format " + type.text
                    + " key " + column.name() + " is " + size);
            }
            ByteBuffer buffer = ByteBuffer.wrap(bytes);
            return switch (type.base) {
                case INT -> Integer.valueOf(buffer.getInt());
                case BIGINT -> Long.valueOf(buffer.getLong());
                case DOUBLE -> Double.valueOf(buffer.getDouble());
                case BYTES -> bytes;
                default -> new String(bytes, StandardCharsets.UTF_8);
            };
        };
        return Serdes.serdeFrom(serializer, deserializer);
    }

    static JsonNode parse(byte[] bytes) {
        try {
            return ColumnType.JSON.readTree(bytes);
        } catch (IOException e) {
            throw new SerializationException("not JSON: " + ProcessingLog.oneLine(e));
        }
    }

    static byte[] json(JsonNode node) {
        try {
            return ColumnType.JSON.writeValueAsBytes(node);
        } catch (IOException e) {
            throw new SerializationException(e);
        }
    }
}
