package io.streamapp.ksql;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.streams.errors.DeserializationExceptionHandler;
import org.apache.kafka.streams.errors.ErrorHandlerContext;

/**
 * ksqlDB's processing log under the TopologyTestDriver: a record ksqlDB cannot read (its key, its value, its
 * event time) is skipped, never fatal, and the reason is kept for the run's report. The driver runs the topology in
 * the caller's thread, so the run in progress is a thread-local.
 */
public final class SkippedRecords implements DeserializationExceptionHandler {

    private record Run(String query, List<String> reasons) { }

    private static final ThreadLocal<Run> CURRENT = new ThreadLocal<>();

    /** Start collecting this thread's skipped records for {@code query}, into {@code reasons}. */
    static void collect(String query, List<String> reasons) {
        CURRENT.set(new Run(query, reasons));
    }

    static List<String> stop() {
        Run run = CURRENT.get();
        CURRENT.remove();
        return run == null ? new ArrayList<>() : run.reasons();
    }

    /** One skipped record: "QUERY: a TOPIC record was skipped: REASON", the Python engine's wording. */
    static void skipped(String topic, String reason) {
        Run run = CURRENT.get();
        if (run != null) {
            run.reasons().add(run.query() + ": a " + topic + " record was skipped: " + reason);
        }
    }

    @Override
    public Response handleError(ErrorHandlerContext context, ConsumerRecord<byte[], byte[]> record, Exception error) {
        String line = ProcessingLog.oneLine(error);
        int named = line.indexOf(": ");  // the deepest message, without its exception's class name
        skipped(record.topic(), named < 0 ? line : line.substring(named + 2));
        return Response.resume();
    }

    @Override
    public void configure(Map<String, ?> configs) { }
}
