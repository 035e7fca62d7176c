"""Every client's keyed partitioner by name, and client profiles that name a client's default.

A partitioner maps (key bytes or None, partition count) to a partition:
``key_hash(key) % n`` for keys it hashes, a random partition for the keys its
client places at random.  Names are librdkafka's where librdkafka has the
algorithm, so a name means the same thing here, in ``confluent-kafka``'s
``partitioner`` setting and in the docs.

The C extension ``_fast`` computes the same thing as the pure-Python
specification in ``hashes.py``; it is used when it was built (``FAST``).
"""
from __future__ import annotations

import importlib
import operator
import random as _random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..errors import StreamappError
from . import hashes

try:
    from . import _fast
except ImportError:  # no C compiler when installed: the pure-Python specification is used
    _fast = None

#: True when the C fast path is in use.
FAST = _fast is not None

KeyPartitioner = Callable[[bytes | None, int], int]
BatchPartitioner = Callable[[Sequence[bytes | None], int], list[int]]

MAX_PARTITIONS = 2**31 - 1


class PartitionerError(StreamappError):
    """Unknown partitioner name or path, bad key or partition count, or a partitioner a client cannot use."""


@dataclass(frozen=True)
class Partitioner:
    """A named keyed partitioner.

    ``choose(key, n)`` picks the partition (for hot loops, call ``choose``
    directly: it is the C function when ``FAST``); for keys where the client
    picks at random (a NULL key under most partitioners) it returns a random
    partition, and ``is_deterministic(key)`` is False so analysis can leave the key out.
    """

    name: str
    description: str
    choose: KeyPartitioner
    is_deterministic: Callable[[bytes | None], bool]
    librdkafka_name: str | None = None
    batch: BatchPartitioner | None = None

    def __call__(self, key: bytes | None, num_partitions: int) -> int:
        try:
            return self.choose(key, num_partitions)
        except (TypeError, ValueError) as exc:
            raise PartitionerError(f"partitioner {self.name!r}: {_checked(key, num_partitions) or exc}") from None

    def partition_batch(self, keys: Sequence[bytes | None], num_partitions: int) -> list[int]:
        """The partition of every key, in one call (C loop when ``FAST``)."""
        try:
            if self.batch is not None:
                return self.batch(keys, num_partitions)
            return [self.choose(key, num_partitions) for key in keys]
        except (TypeError, ValueError) as exc:
            raise PartitionerError(f"partitioner {self.name!r}: {_first_problem(keys, num_partitions) or exc}") from None


def _count(num_partitions: object) -> int | None:
    """The partition count as an int (numpy ints too), or None when it is not a usable count."""
    if isinstance(num_partitions, bool):
        return None
    try:
        count = operator.index(num_partitions)
    except TypeError:
        return None
    return count if 1 <= count <= MAX_PARTITIONS else None


def _checked(key: object, num_partitions: object) -> str | None:
    """Why (key, num_partitions) is bad input, in words naming the field; None if it is fine."""
    if _count(num_partitions) is None:
        return f"num_partitions must be an int between 1 and {MAX_PARTITIONS}, got {num_partitions!r}"
    if key is not None and not isinstance(key, (bytes, bytearray, memoryview)):
        return f"key must be bytes or None, got {type(key).__name__} {key!r} (encode text keys, e.g. key.encode())"
    return None


def _first_problem(keys: Iterable[object], num_partitions: object) -> str | None:
    if _count(num_partitions) is None:
        return _checked(None, num_partitions)
    for index, key in enumerate(keys):
        problem = _checked(key, num_partitions)
        if problem:
            return f"keys[{index}]: {problem}"
    return None


@dataclass(frozen=True)
class _Spec:
    """One partitioner: the hash it takes ``% n`` of and when its client goes random instead."""

    name: str
    description: str
    key_hash: Callable[[bytes], int]
    fast_algo: str
    null_random: bool
    empty_random: bool
    librdkafka_name: str | None


def _positive(fn: Callable[[bytes], int]) -> Callable[[bytes], int]:
    return lambda data: hashes.to_positive(fn(data))


_SPECS = (
    _Spec("murmur2", "toPositive(murmur2) % n, NULL and empty keys hashed (librdkafka murmur2, Quix Streams)",
          _positive(hashes.murmur2), "MURMUR2", False, False, "murmur2"),
    _Spec("murmur2_random", "toPositive(murmur2) % n, NULL key random (Java, kafka-python, aiokafka, kafkajs 2, franz-go)",
          _positive(hashes.murmur2), "MURMUR2", True, False, "murmur2_random"),
    _Spec("consistent", "crc32 % n, NULL and empty keys to partition 0 (crc32 of no bytes is 0)",
          hashes.crc32, "CRC32", False, False, "consistent"),
    _Spec("consistent_random", "crc32 % n, NULL and empty keys random (librdkafka's default)",
          hashes.crc32, "CRC32", True, True, "consistent_random"),
    _Spec("fnv1a", "abs(int32 FNV-1a) % n, NULL and empty keys hashed (librdkafka fnv1a)",
          hashes.fnv1a, "FNV1A", False, False, "fnv1a"),
    _Spec("fnv1a_random", "abs(int32 FNV-1a) % n, NULL key random (Sarama NewHashPartitioner, kafka-go Hash)",
          hashes.fnv1a, "FNV1A", True, False, "fnv1a_random"),
    _Spec("fnv1a_reference", "(int32 FNV-1a & 0x7fffffff) % n, NULL key random (Sarama NewReferenceHashPartitioner/WithAbsFirst, kafka-go ReferenceHash)",
          _positive(hashes.fnv1a_raw), "FNV1A_REFERENCE", True, False, None),
    _Spec("fnv1a_unsigned", "uint32 FNV-1a % n, NULL key random (Sarama WithHashUnsigned, franz-go SaramaHasher on 64-bit)",
          hashes.fnv1a_raw, "FNV1A_UNSIGNED", True, False, None),
    _Spec("kafkajs_legacy", "kafkajs LegacyPartitioner: its broken murmur2, toPositive % n, NULL key round robin",
          _positive(hashes.kafkajs_legacy_murmur2), "KAFKAJS_LEGACY", True, False, None),
)


def _random_partition(_key: bytes | None, n: int) -> int:
    return _random.randrange(n)


def _reference_choose(spec: _Spec) -> KeyPartitioner:
    def choose(key: bytes | None, n: int) -> int:
        problem = _checked(key, n)
        if problem:
            raise ValueError(problem)
        count = operator.index(n)
        if (key is None and spec.null_random) or (key is not None and len(key) == 0 and spec.empty_random):
            return _random.randrange(count)
        return spec.key_hash(bytes(key or b"")) % count

    return choose


def _deterministic(spec: _Spec) -> Callable[[bytes | None], bool]:
    def is_deterministic(key: bytes | None) -> bool:
        if key is None:
            return not spec.null_random
        return len(key) > 0 or not spec.empty_random

    return is_deterministic


def _build(spec: _Spec, fast: bool) -> Partitioner:
    if fast and _fast is not None:
        chooser = _fast.Chooser(getattr(_fast, spec.fast_algo), spec.null_random, spec.empty_random, _random.randrange)
        return Partitioner(spec.name, spec.description, chooser, _deterministic(spec), spec.librdkafka_name, chooser.batch)
    return Partitioner(spec.name, spec.description, _reference_choose(spec), _deterministic(spec), spec.librdkafka_name)


def _define(fast: bool) -> dict[str, Partitioner]:
    result = {spec.name: _build(spec, fast) for spec in _SPECS}
    result["random"] = Partitioner(
        "random", "a random partition for every record (librdkafka random)", _random_partition, lambda _k: False, "random"
    )
    return result


PARTITIONERS: dict[str, Partitioner] = _define(fast=True)
#: The same partitioners computed by the pure-Python specification (tests compare the two).
REFERENCE_PARTITIONERS: dict[str, Partitioner] = _define(fast=False)

#: The seven partitioners librdkafka implements, by its names.
LIBRDKAFKA_NAMES = ("murmur2", "murmur2_random", "consistent", "consistent_random", "fnv1a", "fnv1a_random", "random")

#: Client -> the partitioner it uses for keyed records by default.
PROFILES: dict[str, str] = {
    "java": "murmur2_random",
    "kafka-streams": "murmur2_random",
    "ksqldb": "murmur2_random",
    "librdkafka": "consistent_random",
    "confluent-kafka": "consistent_random",
    "sarama": "fnv1a_random",
    "kafka-go": "fnv1a_random",
    "kafkajs": "murmur2_random",
    "kafkajs-legacy": "kafkajs_legacy",
    "kafka-python": "murmur2_random",
    "aiokafka": "murmur2_random",
    "faust": "murmur2_random",
    "franz-go": "murmur2_random",
    "quixstreams": "murmur2",
}

#: What a person should know about a profile beyond its partitioner.
PROFILE_NOTES: dict[str, str] = {
    "java": "DefaultPartitioner/BuiltInPartitioner; NULL key sticky (KIP-480, KIP-794)",
    "kafka-streams": "the Java producer's partitioner on serialized keys",
    "ksqldb": "the Java producer's partitioner on serialized keys (KAFKA format keys are raw bytes)",
    "librdkafka": "default partitioner=consistent_random; sticky for NULL and empty keys",
    "confluent-kafka": "librdkafka's default; set partitioner=murmur2_random to match Java",
    "sarama": "NewHashPartitioner (Config.Producer.Partitioner default); nil key random, empty key hashed",
    "kafka-go": "the Hash balancer; kafka-go's Writer defaults to RoundRobin, which ignores keys",
    "kafkajs": "DefaultPartitioner since 2.0 (Java compatible); NULL key round robin",
    "kafkajs-legacy": "LegacyPartitioner, the default before 2.0: not compatible with Java",
    "kafka-python": "DefaultPartitioner; None key random among available partitions",
    "aiokafka": "DefaultPartitioner; None key random among available partitions",
    "faust": "aiokafka driver (the default): aiokafka's DefaultPartitioner; keys are JSON-serialized by default (b'\"k\"')",
    "franz-go": "kgo's default UniformBytesPartitioner(64 KiB, adaptive, keys, nil): keys by KafkaHasher(murmur2); NULL key sticky (KIP-794)",
    "quixstreams": "librdkafka with partitioner=murmur2; keys are JSON-serialized by default",
}


def clients_of(names: Iterable[str]) -> list[str]:
    """Client profiles whose default partitioner is one of ``names``."""
    wanted = set(names)
    return [client for client, target in PROFILES.items() if target in wanted]


def get_partitioner(spec: str) -> Partitioner:
    """Look a partitioner up by name, client profile, or dotted path ``package.module:callable``.

    A dotted path may name a :class:`Partitioner` or any ``f(key, num_partitions) -> int``.
    """
    if not isinstance(spec, str):
        raise PartitionerError(f"partitioner must be a name, a client profile or package.module:callable, got {spec!r}")
    if spec in PARTITIONERS:
        return PARTITIONERS[spec]
    if spec in PROFILES:
        return PARTITIONERS[PROFILES[spec]]
    if ":" in spec:
        return _import(spec)
    known = ", ".join(sorted(PARTITIONERS) + sorted(PROFILES))
    raise PartitionerError(f"unknown partitioner {spec!r}; known: {known}, or package.module:callable")


def _import(spec: str) -> Partitioner:
    module_name, _, attr = spec.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise PartitionerError(f"partitioner {spec!r} cannot be imported: {exc}") from None
    except Exception as exc:  # the module's own code failed as it was imported (a SyntaxError, its own error)
        raise PartitionerError(f"partitioner {spec!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    if isinstance(target, Partitioner):
        return target
    if not callable(target):
        raise PartitionerError(f"partitioner {spec!r} is not callable (it is a {type(target).__name__})")
    return Partitioner(spec, f"user partitioner {spec}", _user_choose(spec, target), lambda _k: True)


def _user_choose(spec: str, target: Callable[[bytes | None, int], Any]) -> KeyPartitioner:
    """A user's partitioner, held to what a partition is: its failure, or an answer that is not a partition of
    ``n``, is one line naming it and the key (its own traceback would not say which setting chose it)."""
    def choose(key: bytes | None, n: int) -> int:
        try:
            found = target(key, n)
        except Exception as exc:
            raise PartitionerError(f"partitioner {spec!r} failed on key {key!r}: {type(exc).__name__}: {exc}") from None
        try:
            partition = None if isinstance(found, bool) else operator.index(found)  # numpy ints too
        except TypeError:
            partition = None
        if partition is None or not 0 <= partition < n:
            raise PartitionerError(f"partitioner {spec!r} returned {found!r} for key {key!r}: a partition of {n} "
                                   f"partitions is an int from 0 to {n - 1}")
        return partition

    return choose


def partition(spec: str, key: bytes | None, num_partitions: int) -> int:
    """One key's partition; built-in names skip a frame because per-record callers are hot loops."""
    chooser = PARTITIONERS.get(spec) if type(spec) is str else None
    if chooser is None:
        return get_partitioner(spec)(key, num_partitions)
    try:
        return chooser.choose(key, num_partitions)
    except (TypeError, ValueError):
        return chooser(key, num_partitions)


def partition_batch(spec: str, keys: Sequence[bytes | None], num_partitions: int) -> list[int]:
    """Partitions for many keys at once (fingerprinting, reports, Spark); a C loop when ``FAST``."""
    return get_partitioner(spec).partition_batch(keys, num_partitions)

