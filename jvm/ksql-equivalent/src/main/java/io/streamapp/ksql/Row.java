package io.streamapp.ksql;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.util.List;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;

/**
 * A source's row inside the topology: the key column copied into the row beside the value columns, and ROWTIME
 * (the record's event time), as ksqlDB's source step adds them, so a join's projection reads both sides' columns
 * and times from the two rows alone.
 */
final class Row {

    /** The source's columns in plan order: key columns first, then value columns. */
    final Object[] columns;
    final long rowtime;
    /** Where the record was read (ROWPARTITION, ROWOFFSET); -1 where the row step does not know it (a table's). */
    final int partition;
    final long offset;

    Row(Object[] columns, long rowtime, int partition, long offset) {
        this.columns = columns;
        this.rowtime = rowtime;
        this.partition = partition;
        this.offset = offset;
    }

    /**
     * A source record as a row: its key (for a source with a key column; the {@code Object[]} of a key of several
     * columns, {@link KeyFormat}) and its value columns.
     */
    static Row of(Plan.Source source, Object key, Object[] values, long rowtime, int partition, long offset) {
        int keys = source.keyColumns().size();
        Object[] columns = new Object[keys + values.length];
        if (keys == 1) {
            columns[0] = key;
        } else if (keys > 1 && key instanceof Object[] parts) {
            System.arraycopy(parts, 0, columns, 0, keys);
        }
        System.arraycopy(values, 0, columns, keys, values.length);
        return new Row(columns, rowtime, partition, offset);
    }

    /**
     * The serde of a source's rows in internal topics and stores (a repartition topic, a table's store):
     * {@code [rowtime, partition, offset, column...]} in JSON, each column written and read back by its type, so a row
     * round-trips (a re-keyed row keeps where it was first read, as ksqlDB's row does).
     */
    /** rowtime, partition, offset: before the columns in an internal row. */
    private static final int HEADER = 3;

    static Serde<Row> serde(List<ColumnType> types) {
        return Serdes.serdeFrom(
            (topic, row) -> {
                if (row == null) {
                    return null;
                }
                ArrayNode out = ColumnType.JSON.createArrayNode().add(row.rowtime).add(row.partition).add(row.offset);
                for (int i = 0; i < row.columns.length; i++) {
                    out.add(types.get(i).write(row.columns[i]));
                }
                return KeyFormat.json(out);
            },
            (topic, bytes) -> {
                if (bytes == null) {
                    return null;
                }
                JsonNode in = KeyFormat.parse(bytes);
                if (!in.isArray() || in.size() != types.size() + HEADER) {
                    throw new SerializationException("an internal row of " + types.size() + " columns expected");
                }
                Object[] columns = new Object[types.size()];
                for (int i = 0; i < columns.length; i++) {
                    columns[i] = types.get(i).read(in.get(i + HEADER), "#" + i);
                }
                return new Row(columns, in.get(0).longValue(), in.get(1).intValue(), in.get(2).longValue());
            });
    }
}
