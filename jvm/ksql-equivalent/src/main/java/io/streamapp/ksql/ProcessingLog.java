package io.streamapp.ksql;

import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.streams.errors.DeserializationExceptionHandler;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * ksqlDB's processing log on a real cluster: one WARN line per record ksqlDB cannot read, which is skipped, never
 * fatal. {@link #oneLine} is also how every error of this module becomes the one line the Python side shows.
 */
public final class ProcessingLog implements DeserializationExceptionHandler {

    private static final Logger PROCESSING = LoggerFactory.getLogger("io.streamapp.ksql.processing");

    /** The deepest message of a chain on one line: Kafka Streams wraps the cause several times. */
    static String oneLine(Throwable error) {
        String message = error.toString();
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause.getMessage() != null && !cause.getMessage().isBlank()) {
                message = cause.getClass().getSimpleName() + ": " + cause.getMessage();
            }
        }
        return message.replaceAll("\\s+", " ").trim();
    }

    @Override
    public Response handleError(ErrorHandlerContext context, ConsumerRecord<byte[], byte[]> record, Exception error) {
        PROCESSING.warn("skipped unreadable record topic={} partition={} offset={}: {}",
            record.topic(), record.partition(), record.offset(), oneLine(error));
        return Response.resume();
    }

    @Override
    public void configure(Map<String, ?> configs) { }
}
