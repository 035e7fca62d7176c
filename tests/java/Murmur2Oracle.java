import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HexFormat;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

/**
 * The Java Kafka client as an oracle for streamapp's murmur2 partitioner.
 *
 * Usage: Murmur2Oracle KEYS_FILE PARTITION_COUNTS OUT_FILE
 * KEYS_FILE has one hex-encoded key per line (an empty line is the empty key);
 * PARTITION_COUNTS is comma separated. For each key OUT_FILE gets one line:
 * Utils.murmur2(key) (signed), then for each count n
 * "Utils.toPositive(Utils.murmur2(key)) % n" and "BuiltInPartitioner.partitionForKey(key, n)"
 * (what KafkaProducer really calls), space separated.
 */
public final class Murmur2Oracle {
    public static void main(String[] args) throws IOException {
        HexFormat hex = HexFormat.of();
        String[] countText = args[1].split(",");
        int[] counts = new int[countText.length];
        for (int i = 0; i < counts.length; i++) {
            counts[i] = Integer.parseInt(countText[i]);
        }
        try (BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.US_ASCII);
             BufferedWriter out = Files.newBufferedWriter(Paths.get(args[2]), StandardCharsets.US_ASCII)) {
            String line;
            StringBuilder row = new StringBuilder();
            while ((line = in.readLine()) != null) {
                byte[] key = hex.parseHex(line);
                int hash = Utils.murmur2(key);
                row.setLength(0);
                row.append(hash);
                for (int n : counts) {
                    row.append(' ').append(Utils.toPositive(hash) % n);
                    row.append(' ').append(BuiltInPartitioner.partitionForKey(key, n));
                }
                out.write(row.toString());
                out.newLine();
            }
        }
    }
}
