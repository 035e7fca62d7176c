"""streamapp's partitioners against the REAL Go clients on 100,000+ random keys per run.

tests/go (built by ``make install`` from the Go module proxy, pinned by its go.sum) calls
Sarama 1.61.1's ``Partitioner.Partition``, kafka-go 0.4.51's ``Balancer.Balance`` and
franz-go 1.22.2's ``TopicPartitioner`` with every key (empty, binary, non-ASCII, up to
2,000 bytes, and nil keys) for each client+partitioner in ``gotools.GO_PARTITIONERS``.
Where the client is deterministic for a key, streamapp's matching partitioner must pick
the same partition; where the client goes random, streamapp's must say so too
(``is_deterministic``), so the NULL and empty key rules are checked as well as the hashes.
"""
from __future__ import annotations

import os
import random

import pytest
from gotools import GO_PARTITIONERS, KAFKA_GO_MAX_PARTITIONS, GoPartitioner, go_names, go_partitions
from oracle_keys import random_keys

from streamapp.partitioners import REFERENCE_PARTITIONERS, get_partitioner

#: 2**31 - 1 and 65,521 (a prime) make sign and mask mistakes show; kafka-go takes counts up to 2**20 only.
COUNTS = (1, 2, 3, 6, 7, 12, 100, 1000, 65_521, 2**31 - 1)
KEY_COUNT = 100_000
NIL_KEYS = 50
#: The pure-Python specification is slow; it is checked against each client on this many keys.
REFERENCE_SAMPLE = 1_000

OracleRun = tuple[int, list[bytes | None], dict[tuple[str, int], list[int]]]


@pytest.fixture(scope="module")
def oracle_run() -> OracleRun:
    """One run of every Go partitioner over the same keys (seed, keys, (name, n) -> partitions)."""
    seed = int.from_bytes(os.urandom(8), "big")
    keys: list[bytes | None] = [*random_keys(random.Random(seed), KEY_COUNT), *[None] * NIL_KEYS]
    return seed, keys, go_partitions(keys, COUNTS)


def counts_for(name: str) -> list[int]:
    return [n for n in COUNTS if not name.startswith("kafka-go/") or n <= KAFKA_GO_MAX_PARTITIONS]


def test_every_go_partitioner_has_a_streamapp_match() -> None:
    assert sorted(go_names()) == sorted(GO_PARTITIONERS)


@pytest.mark.parametrize("name", sorted(GO_PARTITIONERS))
def test_go_client_agrees_on_100k_random_keys(name: str, oracle_run: OracleRun) -> None:
    seed, keys, rows = oracle_run
    spec: GoPartitioner = GO_PARTITIONERS[name]
    for key in (None, b"", b"k"):
        assert spec.partitioner_for(key).is_deterministic(key) == spec.client_deterministic(key), (
            f"{name} is {'deterministic' if spec.client_deterministic(key) else 'random'} for key {key!r}, "
            f"streamapp's {spec.partitioner_for(key).name} is not"
        )
    assert sorted(n for (row_name, n) in rows if row_name == name) == counts_for(name)

    keyed = spec.partitioner_for(b"k")
    deterministic = [spec.client_deterministic(k) for k in keys]
    for n in counts_for(name):
        got = rows[name, n]
        expected = keyed.partition_batch(keys, n)
        if spec.empty_as:
            on_empty = spec.partitioner_for(b"")(b"", n)
            expected = [on_empty if k == b"" else e for k, e in zip(keys, expected)]
        wrong = [(k, g, e) for k, d, g, e in zip(keys, deterministic, got, expected) if d and g != e]
        assert not wrong, f"{name} vs streamapp {keyed.name}, n={n}, seed={seed}: {len(wrong)} keys differ, first " + ", ".join(
            f"{'nil' if k is None else k[:32].hex()}: Go {g}, streamapp {e}" for k, g, e in wrong[:5]
        )
        assert all(0 <= g < n for g in got), f"{name} picked a partition outside 0..{n - 1}"

    sample = keys[:REFERENCE_SAMPLE]
    reference = REFERENCE_PARTITIONERS[keyed.name]
    for n in (7, 65_521):
        expected = reference.partition_batch(sample, n)
        assert all(g == e for k, g, e in zip(sample, rows[name, n], expected) if k != b""), f"pure Python {keyed.name}, n={n}, seed={seed}"


def test_sarama_default_and_reference_hash_disagree(oracle_run: OracleRun) -> None:
    """Switching Sarama to NewReferenceHashPartitioner (or kafka-go Hash to ReferenceHash) moves a third of the keys
    with 6 partitions: those whose FNV-1a is negative as an int32 (half), unless abs and mask agree modulo 6 (a third
    of those: abs + mask = 2**31, so they agree where 2p = 2 mod 6)."""
    _seed, keys, rows = oracle_run
    pairs = [(a, b) for k, a, b in zip(keys, rows["sarama/hash", 6], rows["sarama/reference-hash", 6]) if k is not None]
    moved = sum(a != b for a, b in pairs) / len(pairs)
    assert 0.30 < moved < 0.37, f"expected a third of the keys to move, got {moved:.2%}"
    assert rows["kafka-go/Hash", 6][:KEY_COUNT] == rows["sarama/hash", 6][:KEY_COUNT]
    assert rows["kafka-go/ReferenceHash", 6][:KEY_COUNT] == rows["sarama/reference-hash", 6][:KEY_COUNT]


def test_franz_go_sarama_hasher_is_not_saramas_default(oracle_run: OracleRun) -> None:
    """franz-go's SaramaHasher(fnv1a) is unsigned (Sarama's WithHashUnsigned); SaramaCompatHasher is Sarama's default."""
    _seed, keys, rows = oracle_run
    n = 2**31 - 1
    assert rows["franz-go/sticky-sarama-compat-fnv1a", n][:KEY_COUNT] == rows["sarama/hash", n][:KEY_COUNT]
    assert rows["franz-go/sticky-sarama-fnv1a", n][:KEY_COUNT] == rows["sarama/hash-unsigned", n][:KEY_COUNT]
    differ = sum(a != b for a, b in zip(rows["franz-go/sticky-sarama-fnv1a", n][:KEY_COUNT], rows["sarama/hash", n][:KEY_COUNT]))
    assert differ > KEY_COUNT // 3, "with 2**31-1 partitions the unsigned and abs variants differ for every key with the high bit set"
    assert get_partitioner("sarama").partition_batch(keys[:KEY_COUNT], n) == rows["sarama/hash", n][:KEY_COUNT]
