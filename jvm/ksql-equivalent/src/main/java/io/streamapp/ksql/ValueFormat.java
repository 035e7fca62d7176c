package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;

/**
 * ksqlDB's value formats for a source's value columns, as a serde of the columns' values in order.
 *
 * <p>JSON: an object; a column is the field of exactly its name, else of its upper-cased name, else the last
 * field whose upper-cased name equals it; a missing field is NULL; JSON {@code null} is a null value (a table's
 * tombstone); an empty value is no JSON at all, and is skipped. With WRAP_SINGLE_VALUE=false the one column is the bare value. Written as a compact object of every
 * column in order, named as in the plan, with explicit nulls. DELIMITED: comma-separated fields (double quotes
 * around a field with a comma or a quote), one per column, empty is NULL.
 */
final class ValueFormat {

    private ValueFormat() { }

    static Serde<Object[]> of(Plan.Source source) {
        List<Plan.Column> columns = source.valueColumns();
        return switch (source.valueFormat()) {
            case "JSON" -> Serdes.serdeFrom(
                (topic, row) -> row == null ? null : KeyFormat.json(writeJson(columns, source.unwrapped(), row)),
                (topic, bytes) -> bytes == null ? null : readJson(columns, source.unwrapped(), bytes));
            case "DELIMITED" -> Serdes.serdeFrom(
                (topic, row) -> row == null ? null : writeDelimited(row).getBytes(StandardCharsets.UTF_8),
                (topic, bytes) -> bytes == null ? null : readDelimited(columns, bytes));
            default -> throw new IllegalArgumentException("plan: unknown value format " + source.valueFormat());
        };
    }

    static Object[] readJson(List<Plan.Column> columns, boolean unwrapped, byte[] bytes) {
        JsonNode root = KeyFormat.parse(bytes);
        if (root.isMissingNode()) {  // no JSON document at all (empty or blank): unreadable, as the worker reads it
            throw new SerializationException("value is empty: not JSON");
        }
        if (root.isNull()) {
            return null;
        }
        Object[] row = new Object[columns.size()];
        if (unwrapped) {
            row[0] = columns.get(0).type().read(root, columns.get(0).name());
            return row;
        }
        if (!root.isObject()) {
            throw new SerializationException("value is " + root.getNodeType() + ", expected a JSON object");
        }
        for (int i = 0; i < row.length; i++) {
            Plan.Column column = columns.get(i);
            row[i] = column.type().read(field(root, column.name()), column.name());
        }
        return row;
    }

    /** ksqlDB's case-insensitive lookup: the exact name, else the upper-cased name, else the last equal upper-cased. */
    static JsonNode field(JsonNode object, String name) {
        if (object.has(name)) {
            return object.get(name);
        }
        String upper = name.toUpperCase(Locale.ROOT);
        if (object.has(upper)) {
            return object.get(upper);
        }
        JsonNode found = null;
        for (Map.Entry<String, JsonNode> field : object.properties()) {
            if (field.getKey().toUpperCase(Locale.ROOT).equals(upper)) {
                found = field.getValue();
            }
        }
        return found;
    }

    static JsonNode writeJson(List<Plan.Column> columns, boolean unwrapped, Object[] row) {
        if (unwrapped) {
            return columns.get(0).type().write(row[0]);
        }
        ObjectNode out = ColumnType.JSON.createObjectNode();
        for (int i = 0; i < row.length; i++) {
            out.set(columns.get(i).name(), columns.get(i).type().write(row[i]));
        }
        return out;
    }

    private static Object[] readDelimited(List<Plan.Column> columns, byte[] bytes) {
        String text = new String(bytes, StandardCharsets.UTF_8);
        List<String> fields = fields(text);
        if (fields.size() != columns.size()) {
            throw new SerializationException("value '" + text + "' has " + fields.size() + " fields, the source has "
                + columns.size() + " value columns");
        }
        Object[] row = new Object[columns.size()];
        for (int i = 0; i < row.length; i++) {
            row[i] = columns.get(i).type().readText(fields.get(i), columns.get(i).name());
        }
        return row;
    }

    /** The fields of one CSV line (RFC 4180 quoting); an empty line has none. */
    private static List<String> fields(String text) {
        List<String> fields = new ArrayList<>();
        if (text.isEmpty()) {
            return fields;
        }
        StringBuilder field = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (quoted) {
                if (c == '"' && i + 1 < text.length() && text.charAt(i + 1) == '"') {
                    field.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                } else {
                    field.append(c);
                }
            } else if (c == ',') {
                fields.add(field.toString());
                field.setLength(0);
            } else if (c == '"' && field.length() == 0) {
                quoted = true;
            } else {
                field.append(c);
            }
        }
        fields.add(field.toString());
        return fields;
    }

    private static String writeDelimited(Object[] row) {
        List<String> fields = new ArrayList<>();
        for (Object value : row) {
            String text = ColumnType.writeText(value);
            boolean quote = text.indexOf(',') >= 0 || text.indexOf('"') >= 0 || text.indexOf('\n') >= 0
                || text.indexOf('\r') >= 0;
            fields.add(quote ? '"' + text.replace("\"", "\"\"") + '"' : text);
        }
        return String.join(",", fields);
    }
}
