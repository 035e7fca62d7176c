"""The real Go clients (Sarama, kafka-go, franz-go) as test oracles and producers.

``make install`` builds tests/go (modules pinned by its go.sum, from the Go module
proxy) into tests/go/bin/goclients.  Each name below is one client configured with
one of its partitioners, with the streamapp partitioner that must place its keyed
records identically.  The doctor's tests seed topics with :func:`go_produce`.
"""
from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from streamapp.partitioners import Partitioner, get_partitioner

GOCLIENTS = Path(__file__).parent / "go" / "bin" / "goclients"
#: kafka-go's Balance takes the partition list itself; goclients skips larger counts for it.
KAFKA_GO_MAX_PARTITIONS = 1 << 20


@dataclass(frozen=True)
class GoPartitioner:
    """What one Go client+partitioner does, read from its source.

    ``nil_random``/``empty_random``: the client places a nil / empty key at random (or
    round robin, or sticky), so only the other keys are compared.  ``streamapp`` is the
    partitioner (or client profile) that must agree wherever the client is deterministic;
    ``empty_as`` names another one for empty keys where the client hashes an empty key
    but ``streamapp``'s partitioner treats it as random.
    """

    streamapp: str
    nil_random: bool = True
    empty_random: bool = False
    empty_as: str | None = None
    note: str = ""

    def client_deterministic(self, key: bytes | None) -> bool:
        if key is None:
            return not self.nil_random
        return len(key) > 0 or not self.empty_random

    def partitioner_for(self, key: bytes | None) -> Partitioner:
        """The streamapp partitioner that must place ``key`` as the client does."""
        return get_partitioner(self.empty_as if key == b"" and self.empty_as else self.streamapp)


#: goclients' names (``goclients list``) -> the streamapp partitioner each must match.
GO_PARTITIONERS: dict[str, GoPartitioner] = {
    "sarama/hash": GoPartitioner("sarama", note="NewHashPartitioner, Config.Producer.Partitioner's default"),
    "sarama/custom-hash-fnv1a": GoPartitioner("fnv1a_random", note="NewCustomHashPartitioner(fnv.New32a)"),
    "sarama/reference-hash": GoPartitioner("fnv1a_reference", note="NewReferenceHashPartitioner"),
    "sarama/abs-first": GoPartitioner("fnv1a_reference", note="NewCustomPartitioner(WithAbsFirst())"),
    "sarama/hash-unsigned": GoPartitioner("fnv1a_unsigned", note="NewCustomPartitioner(WithHashUnsigned())"),
    # crc32 of no bytes is 0: Sarama hashes an empty non-nil key to partition 0, as librdkafka's
    # `consistent` does; librdkafka's `consistent_random` (the match for every other key) goes random.
    "sarama/consistent-crc": GoPartitioner("consistent_random", empty_as="consistent", note="NewConsistentCRCHashPartitioner"),
    "sarama/crc32-unsigned": GoPartitioner(
        "consistent_random", empty_as="consistent", note="NewCustomPartitioner(WithCustomHashFunction(crc32.NewIEEE), WithHashUnsigned())"
    ),
    "sarama/murmur2": GoPartitioner("murmur2_random", note="NewMurmur2Partitioner"),
    "kafka-go/Hash": GoPartitioner("kafka-go", note="Hash{}: nil key round robin"),
    "kafka-go/ReferenceHash": GoPartitioner("fnv1a_reference", note="ReferenceHash{}"),
    "kafka-go/CRC32Balancer": GoPartitioner("consistent_random", empty_random=True, note="CRC32Balancer{}: nil and empty keys random"),
    "kafka-go/CRC32Balancer-consistent": GoPartitioner("consistent", nil_random=False, note="CRC32Balancer{Consistent: true}"),
    "kafka-go/Murmur2Balancer": GoPartitioner("murmur2_random", note="Murmur2Balancer{}"),
    "kafka-go/Murmur2Balancer-consistent": GoPartitioner("murmur2", nil_random=False, note="Murmur2Balancer{Consistent: true}"),
    "franz-go/default": GoPartitioner("franz-go", note="no RecordPartitioner: UniformBytesPartitioner(64 KiB, adaptive, keys, nil)"),
    "franz-go/sticky-key": GoPartitioner("murmur2_random", note="StickyKeyPartitioner(nil) = KafkaHasher(murmur2)"),
    "franz-go/sticky-kafka-fnv1a": GoPartitioner("fnv1a_reference", note="StickyKeyPartitioner(KafkaHasher(fnv1a))"),
    "franz-go/sticky-sarama-fnv1a": GoPartitioner("fnv1a_unsigned", note="StickyKeyPartitioner(SaramaHasher(fnv1a)), 64-bit"),
    "franz-go/sticky-sarama-compat-fnv1a": GoPartitioner("fnv1a_random", note="StickyKeyPartitioner(SaramaCompatHasher(fnv1a))"),
    "franz-go/sticky-sarama-crc32": GoPartitioner("consistent_random", empty_as="consistent", note="StickyKeyPartitioner(SaramaHasher(crc32.ChecksumIEEE))"),
}


def goclients() -> str:
    """The built program's path; a missing build names the command that makes it."""
    assert GOCLIENTS.is_file(), f"{GOCLIENTS} is not built: run 'make install' (it needs Go and the Go module proxy)"
    return str(GOCLIENTS)


def _hex(data: bytes | None) -> str:
    return "-" if data is None else data.hex()


def go_names() -> list[str]:
    """Every client+partitioner goclients knows, in its order."""
    return subprocess.run([goclients(), "list"], check=True, capture_output=True, text=True).stdout.split()


def go_partitions(keys: Sequence[bytes | None], counts: Iterable[int]) -> dict[tuple[str, int], list[int]]:
    """(name, count) -> the partition the real client's own partitioner picks for each key."""
    with tempfile.TemporaryDirectory(prefix="goclients-") as tmp:
        keys_file, out_file = Path(tmp) / "keys.hex", Path(tmp) / "partitions.out"
        keys_file.write_text("".join(_hex(k) + "\n" for k in keys), encoding="ascii")
        subprocess.run(
            [goclients(), "partition", str(keys_file), ",".join(map(str, counts)), str(out_file)],
            check=True, capture_output=True, text=True, timeout=600,
        )
        result: dict[tuple[str, int], list[int]] = {}
        with out_file.open(encoding="ascii") as lines:
            for line in lines:
                name, count, *partitions = line.split()
                result[name, int(count)] = list(map(int, partitions))
    return result


def go_produce(bootstrap: str, topic: str, name: str, records: Sequence[tuple[bytes | None, bytes | None]]) -> list[tuple[int, int]]:
    """Produce ``records`` (key, value) to ``topic`` with the named Go client+partitioner, acks=all.

    Returns (partition, offset) per record, in order, as the client reported them.
    """
    with tempfile.TemporaryDirectory(prefix="goclients-") as tmp:
        records_file = Path(tmp) / "records.hex"
        records_file.write_text("".join(f"{_hex(k)} {_hex(v)}\n" for k, v in records), encoding="ascii")
        done = subprocess.run(
            [goclients(), "produce", name, bootstrap, topic, str(records_file)],
            capture_output=True, text=True, timeout=300,
        )
    assert done.returncode == 0, f"goclients produce {name}: {done.stderr.strip()}"
    placed = [tuple(map(int, line.split())) for line in done.stdout.splitlines()]
    assert len(placed) == len(records), f"goclients produce {name}: {len(placed)} results for {len(records)} records"
    return placed  # type: ignore[return-value]
