package io.streamapp.ksql;

import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;

/**
 * Test oracle: the Kafka Streams program's own value reader (ValueFormat, as PlanTopology reads a source) for the
 * sources of a plan (its JSON file, the first argument), on values given one per stdin line as
 * {@code <SOURCE> <base64 or ->}; prints one JSON line each: {@code {"row":[...]}} (a DOUBLE as its Double.toString
 * text, a DECIMAL as its plain text), {@code {"tombstone":true}} or {@code {"skip":"<why>"}}. Non-ASCII is escaped,
 * so lone surrogates reach the test intact.
 */
public final class ValueFormatOracle {
    public static void main(String[] args) throws Exception {
        Plan plan = Plan.parse(ColumnType.JSON.readTree(Files.readString(Path.of(args[0]), StandardCharsets.UTF_8)));
        ObjectMapper out = JsonMapper.builder().enable(JsonWriteFeature.ESCAPE_NON_ASCII).build();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream print = new PrintStream(System.out, false, StandardCharsets.US_ASCII);
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 2);
            Plan.Source source = plan.source(parts[0]);
            byte[] value = parts[1].equals("-") ? null : Base64.getDecoder().decode(parts[1]);
            ObjectNode result = out.createObjectNode();
            try {
                Object[] row = value == null ? null
                    : ValueFormat.readJson(source.valueColumns(), source.unwrapped(), value);
                if (row == null) {
                    result.put("tombstone", true);
                } else {
                    ArrayNode cells = result.putArray("row");
                    for (Object cell : row) {
                        if (cell == null) {
                            cells.addNull();
                        } else if (cell instanceof Long number) {
                            cells.add(number);
                        } else if (cell instanceof Integer number) {
                            cells.add(number);
                        } else if (cell instanceof Boolean flag) {
                            cells.add(flag);
                        } else if (cell instanceof Double number) {
                            cells.add(Double.toString(number));
                        } else if (cell instanceof java.math.BigDecimal number) {
                            cells.add(number.toPlainString());
                        } else {
                            cells.add(cell.toString());
                        }
                    }
                }
            } catch (RuntimeException e) {
                result.put("skip", String.valueOf(e.getMessage()));
            }
            print.println(out.writeValueAsString(result));
        }
        print.flush();
    }
}
