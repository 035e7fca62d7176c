package main

import (
	"hash/crc32"
	"hash/fnv"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// oracle is one real client configured with one of its partitioners. Exactly one of
// sarama, kafkago and franz is set, except for franz-go's default (franzDefault), which
// produces with no RecordPartitioner option so the client's own default is what runs.
type oracle struct {
	name         string
	sarama       sarama.PartitionerConstructor
	kafkago      kafka.Balancer
	franz        kgo.Partitioner
	franzDefault bool
}

// fnv32a is the FNV-1a hash franz-go's documentation tells Sarama users to pass to its hashers.
func fnv32a(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}

// oracles names every client+partitioner pair; the names are the test's vocabulary.
func oracles() []oracle {
	return []oracle{
		{name: "sarama/hash", sarama: sarama.NewHashPartitioner}, // Config.Producer.Partitioner's default
		{name: "sarama/custom-hash-fnv1a", sarama: sarama.NewCustomHashPartitioner(fnv.New32a)},
		{name: "sarama/reference-hash", sarama: sarama.NewReferenceHashPartitioner},
		{name: "sarama/abs-first", sarama: sarama.NewCustomPartitioner(sarama.WithAbsFirst())},
		{name: "sarama/hash-unsigned", sarama: sarama.NewCustomPartitioner(sarama.WithHashUnsigned())},
		{name: "sarama/consistent-crc", sarama: sarama.NewConsistentCRCHashPartitioner},
		{name: "sarama/crc32-unsigned", sarama: sarama.NewCustomPartitioner(sarama.WithCustomHashFunction(crc32.NewIEEE), sarama.WithHashUnsigned())},
		{name: "sarama/murmur2", sarama: sarama.NewMurmur2Partitioner},
		{name: "kafka-go/Hash", kafkago: &kafka.Hash{}},
		{name: "kafka-go/ReferenceHash", kafkago: &kafka.ReferenceHash{}},
		{name: "kafka-go/CRC32Balancer", kafkago: kafka.CRC32Balancer{}},
		{name: "kafka-go/CRC32Balancer-consistent", kafkago: kafka.CRC32Balancer{Consistent: true}},
		{name: "kafka-go/Murmur2Balancer", kafkago: kafka.Murmur2Balancer{}},
		{name: "kafka-go/Murmur2Balancer-consistent", kafkago: kafka.Murmur2Balancer{Consistent: true}},
		// kgo's default partitioner (config.go: UniformBytesPartitioner(64<<10, true, true, nil)).
		{name: "franz-go/default", franz: kgo.UniformBytesPartitioner(64<<10, true, true, nil), franzDefault: true},
		{name: "franz-go/sticky-key", franz: kgo.StickyKeyPartitioner(nil)},
		{name: "franz-go/sticky-kafka-fnv1a", franz: kgo.StickyKeyPartitioner(kgo.KafkaHasher(fnv32a))},
		{name: "franz-go/sticky-sarama-fnv1a", franz: kgo.StickyKeyPartitioner(kgo.SaramaHasher(fnv32a))},
		{name: "franz-go/sticky-sarama-compat-fnv1a", franz: kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))},
		{name: "franz-go/sticky-sarama-crc32", franz: kgo.StickyKeyPartitioner(kgo.SaramaHasher(crc32.ChecksumIEEE))},
	}
}

func findOracle(name string) (oracle, bool) {
	for _, o := range oracles() {
		if o.name == name {
			return o, true
		}
	}
	return oracle{}, false
}
