package io.streamapp.ksql;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.ValueTransformerWithKey;
import org.apache.kafka.streams.kstream.ValueTransformerWithKeySupplier;
import org.apache.kafka.streams.processor.ProcessorContext;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A plan's sources as ksqlDB's source step builds them: the topic read with the source's key and value serdes and
 * its TIMESTAMP column as the TimestampExtractor, then each record turned into a {@link Row} (key copied in, ROWTIME
 * added). A stream is {@code builder.stream}; a table is {@code builder.table}, materialized in the row step's store
 * as ksqlDB does (KTABLE-SOURCE without a store, then KTABLE-TRANSFORMVALUES with it).
 */
final class Sources {

    static final String RIGHT_KEYED = "RightSourceKeyed";

    private Sources() { }

    static KStream<Object, Row> stream(StreamsBuilder builder, Plan.Source source) {
        KStream<Object, Row> rows = builder.stream(source.topic(), consumed(source))
            .processValues(() -> new StreamRows(source));
        // ksqlDB's source step also peeks at each row (its metrics), a leaf of the topology: a no-op here, kept so
        // that the names Kafka Streams generates later (a windowed join's stores) are numbered as in ksqlDB's
        rows.peek((key, row) -> { });
        return rows;
    }

    /** A table; {@code store} names its state store, or null when a later step materializes it (a re-keyed table). */
    static KTable<Object, Row> table(StreamsBuilder builder, Plan.Source source, String store) {
        KTable<Object, Object[]> table = builder.table(source.topic(), consumed(source));
        ValueTransformerWithKeySupplier<Object, Object[], Row> rows = () -> new TableRows(source);
        if (store == null) {
            return table.transformValues(rows);
        }
        return table.transformValues(rows, Materialized.<Object, Row, KeyValueStore<Bytes, byte[]>>as(store)
            .withKeySerde(KeyFormat.of(source)).withValueSerde(Row.serde(source.columnTypes())));
    }

    /**
     * A table re-keyed into another key format (ksqlDB's {@code RightSourceKeyed}): its rows through
     * {@code RightSourceKeyed-SelectKey-repartition}, written with {@code joinKey}, into
     * {@code RightSourceKeyed-Materialize}.
     */
    static KTable<Object, Row> rekeyedTable(StreamsBuilder builder, Plan.Source source, Serde<Object> joinKey) {
        return table(builder, source, null).toStream()
            .map(KeyValue::pair, Named.as(RIGHT_KEYED + "-SelectKey-Mapper"))
            .toTable(Named.as(RIGHT_KEYED + "-SelectKey"),
                Materialized.<Object, Row, KeyValueStore<Bytes, byte[]>>as(RIGHT_KEYED + "-Materialize")
                    .withKeySerde(joinKey).withValueSerde(Row.serde(source.columnTypes())));
    }

    private static Consumed<Object, Object[]> consumed(Plan.Source source) {
        Consumed<Object, Object[]> consumed = Consumed.with(KeyFormat.of(source), ValueFormat.of(source));
        if (source.timestamp() == null) {
            return consumed;
        }
        int index = source.valueColumns().indexOf(
            source.valueColumns().stream().filter(c -> c.name().equals(source.timestamp())).findFirst()
                .orElseThrow(() -> new IllegalArgumentException(
                    "plan: TIMESTAMP column " + source.timestamp() + " is not a value column of " + source.name())));
        return consumed.withTimestampExtractor(new ColumnTimestamp(source.timestamp(), index));
    }

    /**
     * ksqlDB's TIMESTAMP='column' (LongTimestampExtractor behind LoggingTimestampExtractor): the column's BIGINT is
     * the event time; a null value, a NULL or negative column gives -1, and Kafka Streams drops the record. A table's
     * tombstone therefore never reaches a table that has a TIMESTAMP column, in ksqlDB as here.
     */
    static final class ColumnTimestamp implements TimestampExtractor {
        private final String column;
        private final int index;

        ColumnTimestamp(String column, int index) {
            this.column = column;
            this.index = index;
        }

        @Override
        public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
            Object[] values = (Object[]) record.value();
            Object time = values == null ? null : values[index];
            if (time instanceof Number number && number.longValue() >= 0) {
                return number.longValue();
            }
            SkippedRecords.skipped(record.topic(), values == null
                ? "a null value has no " + column + " for its event time (Kafka Streams drops it)"
                : "field '" + column + "' is " + time + ": the record's event time must be epoch milliseconds >= 0 "
                    + "(Kafka Streams drops the record)");
            return -1L;
        }
    }

    /** A stream record's row (KSTREAM-PROCESSVALUES in ksqlDB's topology). */
    private static final class StreamRows implements FixedKeyProcessor<Object, Object[], Row> {
        private final Plan.Source source;
        private FixedKeyProcessorContext<Object, Row> context;

        StreamRows(Plan.Source source) {
            this.source = source;
        }

        @Override
        public void init(FixedKeyProcessorContext<Object, Row> context) {
            this.context = context;
        }

        @Override
        public void process(FixedKeyRecord<Object, Object[]> record) {
            Object[] values = record.value();
            var read = context.recordMetadata();  // where the record was read, for ROWPARTITION and ROWOFFSET
            context.forward(record.withValue(values == null ? null : Row.of(source, record.key(), values,
                record.timestamp(), read.map(m -> m.partition()).orElse(-1), read.map(m -> m.offset()).orElse(-1L))));
        }
    }

    /** A table record's row (KTABLE-TRANSFORMVALUES in ksqlDB's topology); a tombstone stays null. */
    private static final class TableRows implements ValueTransformerWithKey<Object, Object[], Row> {
        private final Plan.Source source;
        private ProcessorContext context;

        TableRows(Plan.Source source) {
            this.source = source;
        }

        @Override
        public void init(ProcessorContext context) {
            this.context = context;
        }

        @Override
        public Row transform(Object key, Object[] values) {
            return values == null ? null : Row.of(source, key, values, context.timestamp(), -1, -1L);
        }

        @Override
        public void close() { }
    }
}
