"""Keyed partitioners of every Kafka client: pure functions, a registry, and client adapters."""
from .hashes import crc32, fnv1a, fnv1a_raw, murmur2, to_positive
from .registry import (
    LIBRDKAFKA_NAMES,
    PARTITIONERS,
    PROFILES,
    Partitioner,
    PartitionerError,
    get_partitioner,
    partition,
    partition_batch,
)

__all__ = [
    "LIBRDKAFKA_NAMES", "PARTITIONERS", "PROFILES", "Partitioner", "PartitionerError",
    "crc32", "fnv1a", "fnv1a_raw", "get_partitioner", "murmur2", "partition", "partition_batch", "to_positive",
]
