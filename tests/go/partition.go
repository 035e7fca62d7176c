package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaGoMaxPartitions bounds the counts asked of kafka-go: its Balance takes the list of
// partitions itself, so a count of 2^31-1 would need a 16 GiB slice.
const kafkaGoMaxPartitions = 1 << 20

// partitionFunc is one client's choice for one key among n partitions.
type partitionFunc func(key []byte, n int) (int, error)

// noBackup is franz-go's view of buffered records, all empty: keyed records never read it,
// and a nil key under the default partitioner needs something to iterate.
type noBackup struct{ next, n int }

func (b *noBackup) Next() (int, int64) { b.next++; return b.next - 1, 0 }
func (b *noBackup) Rem() int           { return b.n - b.next }

// chooser calls the client's own partitioner: Sarama's Partition on a ProducerMessage,
// kafka-go's Balance on a Message with partitions 0..n-1 (what its Writer passes), and
// franz-go's TopicPartitioner on a Record (PartitionByBackup when it has one, as kgo does).
func (o oracle) chooser(partitions []int) (partitionFunc, int) {
	switch {
	case o.sarama != nil:
		p := o.sarama("oracle")
		msg := &sarama.ProducerMessage{Topic: "oracle"}
		return func(key []byte, n int) (int, error) {
			msg.Key = nil
			if key != nil {
				msg.Key = sarama.ByteEncoder(key)
			}
			got, err := p.Partition(msg, int32(n))
			return int(got), err
		}, math.MaxInt32
	case o.kafkago != nil:
		return func(key []byte, n int) (int, error) {
			return o.kafkago.Balance(kafka.Message{Key: key}, partitions[:n]...), nil
		}, len(partitions)
	default:
		tp := o.franz.ForTopic("oracle")
		r := &kgo.Record{}
		return func(key []byte, n int) (int, error) {
			r.Key = key
			if bp, ok := tp.(kgo.TopicBackupPartitioner); ok {
				return bp.PartitionByBackup(r, n, &noBackup{n: n}), nil
			}
			return tp.Partition(r, n), nil
		}, math.MaxInt32
	}
}

// partitionMode writes, for each oracle and each count it can take, one line
// "NAME N P1 P2 ..." with the partition the client picked for every key, in key order.
func partitionMode(keysPath, countsArg, outPath string) error {
	rows, err := readLines(keysPath)
	if err != nil {
		return err
	}
	keys := make([][]byte, len(rows))
	for i, row := range rows {
		if keys[i], err = decodeKey(row[0]); err != nil {
			return fmt.Errorf("%s line %d: %v", keysPath, i+1, err)
		}
	}
	var counts []int
	for _, field := range strings.Split(countsArg, ",") {
		n, err := strconv.Atoi(field)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return fmt.Errorf("partition count %q is not between 1 and %d", field, math.MaxInt32)
		}
		counts = append(counts, n)
	}
	partitions := make([]int, kafkaGoMaxPartitions)
	for i := range partitions {
		partitions[i] = i
	}

	out, err := os.Create(outPath)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	var line []byte
	for _, o := range oracles() {
		choose, maxCount := o.chooser(partitions)
		for _, n := range counts {
			if n > maxCount {
				continue
			}
			line = append(line[:0], o.name...)
			line = append(line, ' ')
			line = strconv.AppendInt(line, int64(n), 10)
			for _, key := range keys {
				p, err := choose(key, n)
				if err != nil {
					return fmt.Errorf("%s, %d partitions, key %x: %v", o.name, n, key, err)
				}
				line = append(line, ' ')
				line = strconv.AppendInt(line, int64(p), 10)
			}
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return out.Close()
}
