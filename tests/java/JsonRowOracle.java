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
import java.util.Base64;

/**
 * Test oracle: the Kafka Streams program's own reader (JsonRow, as its topology reads users and
 * orders) on values given one per stdin line as {@code user|order <base64 or ->}; prints one
 * JSON line each: {@code {"row":[...]}} (a DOUBLE as its Double.toString text), {@code {"tombstone":true}}
 * or {@code {"skip":"<why>"}}. Non-ASCII is escaped, so lone surrogates reach the test intact.
 */
public final class JsonRowOracle {
    public static void main(String[] args) throws Exception {
        ObjectMapper out = JsonMapper.builder().enable(JsonWriteFeature.ESCAPE_NON_ASCII).build();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream print = new PrintStream(System.out, false, StandardCharsets.US_ASCII);
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 2);
            JsonRow reader = parts[0].equals("user") ? KsqlEquivalent.USER : KsqlEquivalent.ORDER;
            byte[] value = parts[1].equals("-") ? null : Base64.getDecoder().decode(parts[1]);
            ObjectNode result = out.createObjectNode();
            try {
                Object[] row = reader.read(value);
                if (row == null) {
                    result.put("tombstone", true);
                } else {
                    ArrayNode cells = result.putArray("row");
                    for (Object cell : row) {
                        if (cell == null) {
                            cells.addNull();
                        } else if (cell instanceof Long number) {
                            cells.add(number);
                        } else if (cell instanceof Double number) {
                            cells.add(Double.toString(number));
                        } else {
                            cells.add((String) cell);
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
