"""Every client's keyed partitioner by name, and client profiles that name a client's default.

A partitioner maps (key bytes or None, partition count) to a partition.  Names
are librdkafka's where librdkafka has the algorithm, so a name means the same
thing here, in ``confluent-kafka``'s ``partitioner`` setting and in the docs.
"""
from __future__ import annotations

import importlib
import random as _random
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..errors import StreamappError
from . import hashes

KeyPartitioner = Callable[[bytes | None, int], int]


class PartitionerError(StreamappError):
    """Unknown partitioner name or path, or a partitioner a client cannot use."""


@dataclass(frozen=True)
class Partitioner:
    """A named keyed partitioner.

    ``choose(key, n)`` picks the partition; for keys where the client picks at
    random (a NULL key under most partitioners) it returns a random partition,
    and ``is_deterministic(key)`` is False so that analysis can leave the key out.
    """

    name: str
    description: str
    choose: KeyPartitioner
    is_deterministic: Callable[[bytes | None], bool]
    librdkafka_name: str | None = None

    def __call__(self, key: bytes | None, num_partitions: int) -> int:
        return self.choose(key, num_partitions)


def _random_partition(_key: bytes | None, n: int) -> int:
    return _random.randrange(n)


def _hashing(hash_fn: Callable[[bytes], int], *, null: str, empty: str) -> tuple[KeyPartitioner, Callable[[bytes | None], bool]]:
    """Build choose/is_deterministic from a hash and librdkafka's NULL/empty key rules.

    ``null``/``empty`` are ``"hash"`` (hash the empty byte string), ``"zero"``
    (partition of hash 0) or ``"random"``.
    """

    def rule_for(key: bytes | None) -> str:
        if key is None:
            return null
        if len(key) == 0:
            return empty
        return "hash"

    def choose(key: bytes | None, n: int) -> int:
        rule = rule_for(key)
        if rule == "random":
            return _random.randrange(n)
        if rule == "zero":
            return 0
        return hash_fn(key or b"") % n

    return choose, lambda key: rule_for(key) != "random"


def _java_murmur2(data: bytes) -> int:
    return hashes.to_positive(hashes.murmur2(data))


def _reference_fnv1a(data: bytes) -> int:
    return hashes.to_positive(hashes.fnv1a_raw(data))


def _define() -> dict[str, Partitioner]:
    table: list[tuple[str, str, Callable[[bytes], int], str, str, str | None]] = [
        ("murmur2", "Java-compatible murmur2; NULL and empty keys hashed", _java_murmur2, "hash", "hash", "murmur2"),
        ("murmur2_random", "Java-compatible murmur2; NULL key random", _java_murmur2, "random", "hash", "murmur2_random"),
        ("consistent", "crc32; NULL and empty keys to partition 0", hashes.crc32, "zero", "zero", "consistent"),
        ("consistent_random", "crc32; NULL and empty keys random (librdkafka's default)", hashes.crc32, "random", "random", "consistent_random"),
        ("fnv1a", "FNV-1a (librdkafka, Sarama default); NULL and empty keys hashed", hashes.fnv1a, "hash", "hash", "fnv1a"),
        ("fnv1a_random", "FNV-1a; NULL key random", hashes.fnv1a, "random", "hash", "fnv1a_random"),
        ("fnv1a_reference", "FNV-1a masked positive (Sarama ReferenceHash/AbsFirst, kafka-go ReferenceHash)", _reference_fnv1a, "random", "hash", None),
        ("java", "Java producer default: toPositive(murmur2) % n; NULL key sticky", _java_murmur2, "random", "hash", "murmur2_random"),
    ]
    result = {}
    for name, description, fn, null, empty, rdk in table:
        choose, deterministic = _hashing(fn, null=null, empty=empty)
        result[name] = Partitioner(name, description, choose, deterministic, rdk)
    result["random"] = Partitioner("random", "random partition for every record", _random_partition, lambda _k: False, "random")
    return result


PARTITIONERS: dict[str, Partitioner] = _define()

#: The seven partitioners librdkafka implements, by its names.
LIBRDKAFKA_NAMES = ("murmur2", "murmur2_random", "consistent", "consistent_random", "fnv1a", "fnv1a_random", "random")

#: Client -> the partitioner it uses for keyed records by default.
PROFILES: dict[str, str] = {
    "java": "java",
    "kafka-streams": "java",
    "ksqldb": "java",
    "librdkafka": "consistent_random",
    "confluent-kafka": "consistent_random",
    "sarama": "fnv1a",
    "kafka-go": "fnv1a",
    "kafkajs": "java",
    "kafka-python": "murmur2_random",
    "aiokafka": "murmur2_random",
    "franz-go": "murmur2_random",
    "quixstreams": "murmur2",
}


def get_partitioner(spec: str) -> Partitioner:
    """Look a partitioner up by name, client profile, or dotted path ``package.module:callable``.

    A dotted path may name a :class:`Partitioner` or any ``f(key, num_partitions) -> int``.
    """
    if spec in PARTITIONERS:
        return PARTITIONERS[spec]
    if spec in PROFILES:
        return PARTITIONERS[PROFILES[spec]]
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise PartitionerError(f"partitioner {spec!r} cannot be imported: {exc}") from None
        if isinstance(target, Partitioner):
            return target
        if not callable(target):
            raise PartitionerError(f"partitioner {spec!r} is not callable")
        return Partitioner(spec, f"user partitioner {spec}", target, lambda _k: True)
    known = ", ".join(sorted(PARTITIONERS) + sorted(PROFILES))
    raise PartitionerError(f"unknown partitioner {spec!r}; known: {known}, or package.module:callable")


def partition(spec: str, key: bytes | None, num_partitions: int) -> int:
    return get_partitioner(spec)(key, num_partitions)


def partition_batch(spec: str, keys: Sequence[bytes | None], num_partitions: int) -> list[int]:
    """Partitions for many keys at once (fingerprinting, reports, Spark)."""
    chooser = get_partitioner(spec)
    return [chooser(key, num_partitions) for key in keys]


def names() -> Iterable[str]:
    return PARTITIONERS.keys()
