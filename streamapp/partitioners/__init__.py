"""Keyed partitioners of every Kafka client: pure functions, a registry, and client adapters."""
from .hashes import crc32, fnv1a, fnv1a_raw, kafkajs_legacy_murmur2, murmur2, to_positive
from .registry import (
    FAST,
    KeyPartitioner,
    LIBRDKAFKA_NAMES,
    PARTITIONERS,
    PROFILE_NOTES,
    PROFILES,
    REFERENCE_PARTITIONERS,
    Partitioner,
    PartitionerError,
    clients_of,
    get_partitioner,
    partition,
    partition_batch,
)

__all__ = [
    "FAST", "KeyPartitioner", "LIBRDKAFKA_NAMES", "PARTITIONERS", "PROFILES", "PROFILE_NOTES", "Partitioner", "PartitionerError",
    "REFERENCE_PARTITIONERS", "clients_of", "crc32", "fnv1a", "fnv1a_raw", "get_partitioner", "kafkajs_legacy_murmur2", "murmur2",
    "partition", "partition_batch", "to_positive",
]
