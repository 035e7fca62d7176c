package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTimeout keeps a broken broker from hanging the caller; the clients retry within it.
const produceTimeout = 2 * time.Minute

type record struct {
	key, value []byte
}

// placed is where the client says a record went.
type placed struct {
	partition int32
	offset    int64
}

// produceMode produces every record of recordsPath to topic with the named oracle's client
// and partitioner, acks=all, and prints "PARTITION OFFSET" per record, in input order, as the
// client reported them.
func produceMode(name, bootstrap, topic, recordsPath string) error {
	o, ok := findOracle(name)
	if !ok {
		var known []string
		for _, k := range oracles() {
			known = append(known, k.name)
		}
		return fmt.Errorf("unknown client/partitioner %q; known: %s", name, strings.Join(known, ", "))
	}
	rows, err := readLines(recordsPath)
	if err != nil {
		return err
	}
	records := make([]record, len(rows))
	for i, row := range rows {
		if len(row) != 2 {
			return fmt.Errorf("%s line %d: want KEYHEX VALUEHEX", recordsPath, i+1)
		}
		if records[i].key, err = decodeKey(row[0]); err != nil {
			return fmt.Errorf("%s line %d: key: %v", recordsPath, i+1, err)
		}
		if records[i].value, err = decodeKey(row[1]); err != nil {
			return fmt.Errorf("%s line %d: value: %v", recordsPath, i+1, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout)
	defer cancel()
	var result []placed
	switch {
	case o.sarama != nil:
		result, err = produceSarama(o, bootstrap, topic, records)
	case o.kafkago != nil:
		result, err = produceKafkaGo(ctx, o, bootstrap, topic, records)
	default:
		result, err = produceFranz(ctx, o, bootstrap, topic, records)
	}
	if err != nil {
		return fmt.Errorf("%s to %s at %s: %v", name, topic, bootstrap, err)
	}
	for _, p := range result {
		fmt.Printf("%d %d\n", p.partition, p.offset)
	}
	return nil
}

// produceSarama uses a SyncProducer with Sarama's default Kafka version (2.8.0: every
// request it sends is a version Apache Kafka 4 still accepts after KIP-896).
func produceSarama(o oracle, bootstrap, topic string, records []record) ([]placed, error) {
	config := sarama.NewConfig()
	config.ClientID = "streamapp-tests-sarama"
	config.Producer.Partitioner = o.sarama
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Return.Successes = true
	config.Producer.Timeout = produceTimeout
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, config)
	if err != nil {
		return nil, err
	}
	msgs := make([]*sarama.ProducerMessage, len(records))
	for i, r := range records {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: -1}
		if r.key != nil {
			msgs[i].Key = sarama.ByteEncoder(r.key)
		}
		if r.value != nil {
			msgs[i].Value = sarama.ByteEncoder(r.value)
		}
	}
	sendErr := producer.SendMessages(msgs)
	if err := producer.Close(); sendErr == nil {
		sendErr = err
	}
	if sendErr != nil {
		return nil, sendErr
	}
	result := make([]placed, len(msgs))
	for i, m := range msgs {
		result[i] = placed{m.Partition, m.Offset}
	}
	return result, nil
}

// produceKafkaGo uses a Writer with the balancer; its Completion callback reports where each
// message went (WriterData carries the input index).
func produceKafkaGo(ctx context.Context, o oracle, bootstrap, topic string, records []record) ([]placed, error) {
	result := make([]placed, len(records))
	w := &kafka.Writer{
		Addr:         kafka.TCP(bootstrap),
		Topic:        topic,
		Balancer:     o.kafkago,
		RequiredAcks: kafka.RequireAll,
		BatchSize:    len(records) + 1,
		BatchTimeout: 10 * time.Millisecond,
		Completion: func(messages []kafka.Message, err error) {
			if err != nil {
				return
			}
			for _, m := range messages {
				result[m.WriterData.(int)] = placed{int32(m.Partition), m.Offset}
			}
		},
	}
	msgs := make([]kafka.Message, len(records))
	for i, r := range records {
		msgs[i] = kafka.Message{Key: r.key, Value: r.value, WriterData: i}
	}
	writeErr := w.WriteMessages(ctx, msgs...)
	if err := w.Close(); writeErr == nil {
		writeErr = err
	}
	return result, writeErr
}

// produceFranz uses a kgo.Client; franz-go/default sets no partitioner so kgo's own default runs.
func produceFranz(ctx context.Context, o oracle, bootstrap, topic string, records []record) ([]placed, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic), kgo.ClientID("streamapp-tests-franz-go")}
	if !o.franzDefault {
		opts = append(opts, kgo.RecordPartitioner(o.franz))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	rs := make([]*kgo.Record, len(records))
	for i, r := range records {
		rs[i] = &kgo.Record{Key: r.key, Value: r.value}
	}
	results := client.ProduceSync(ctx, rs...)
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	// results come in completion order; each record carries where it went.
	result := make([]placed, len(rs))
	for i, r := range rs {
		result[i] = placed{r.Partition, r.Offset}
	}
	return result, nil
}
