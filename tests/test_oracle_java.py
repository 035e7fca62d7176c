"""streamapp's murmur2 against the REAL Java Kafka client on 100,000+ random keys.

tests/java/Murmur2Oracle.java is compiled at test time against kafka-clients.jar
(from Maven Central through jvm/clients/pom.xml, see tests/javatools.py) and
computes ``Utils.toPositive(Utils.murmur2(key)) % n`` and
``BuiltInPartitioner.partitionForKey(key, n)`` (what ``KafkaProducer`` calls for
a keyed record) with Kafka's own code.  Keys travel hex-encoded in a file.
"""
from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from javatools import compile_java
from oracle_keys import random_keys

from streamapp.partitioners import PARTITIONERS, REFERENCE_PARTITIONERS, get_partitioner, hashes, registry

COUNTS = (1, 2, 3, 6, 7, 12, 100, 1000, 2**31 - 1)
KEY_COUNT = 100_000
#: The pure-Python specification is slow; it is checked against Java on this many of the keys.
REFERENCE_SAMPLE = 10_000


def run_oracle(java_build_dir: Path, tmp_path: Path, keys: list[bytes]) -> list[list[int]]:
    cp = compile_java(java_build_dir, "Murmur2Oracle")
    keys_file, out_file = tmp_path / "keys.hex", tmp_path / "java.out"
    keys_file.write_text("".join(k.hex() + "\n" for k in keys), encoding="ascii")
    subprocess.run(
        ["java", "-cp", cp, "Murmur2Oracle", str(keys_file), ",".join(map(str, COUNTS)), str(out_file)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return [list(map(int, line.split())) for line in out_file.read_text(encoding="ascii").splitlines()]


def test_java_client_agrees_on_100k_random_keys(java_build_dir: Path, tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(8), "big")
    keys = random_keys(random.Random(seed), KEY_COUNT)
    rows = run_oracle(java_build_dir, tmp_path, keys)
    assert len(rows) == len(keys), f"seed={seed}"

    java_hashes = [row[0] for row in rows]
    assert registry._fast is not None, "the C fast path is not built"
    fast = registry._fast.murmur2
    assert [hashes.to_signed32(fast(k)) for k in keys] == java_hashes, f"seed={seed}"
    sample = keys[:REFERENCE_SAMPLE]
    assert [hashes.to_signed32(hashes.murmur2(k)) for k in sample] == java_hashes[:REFERENCE_SAMPLE], f"seed={seed}"

    for i, n in enumerate(COUNTS):
        to_positive = [row[1 + 2 * i] for row in rows]
        producer = [row[2 + 2 * i] for row in rows]
        assert to_positive == producer, f"Kafka's own two code paths disagree for n={n}"
        assert PARTITIONERS["murmur2_random"].partition_batch(keys, n) == producer, f"n={n} seed={seed}"
        assert get_partitioner("java").partition_batch(keys, n) == producer, f"n={n} seed={seed}"
        assert REFERENCE_PARTITIONERS["murmur2"].partition_batch(sample, n) == producer[:REFERENCE_SAMPLE]


def test_java_client_disagrees_with_librdkafka_default(java_build_dir: Path, tmp_path: Path) -> None:
    """The reason streamapp exists: the Java producer and librdkafka's default put most keys apart."""
    keys = [f"user_{i}".encode() for i in range(2000)]
    rows = run_oracle(java_build_dir, tmp_path, keys)
    n_index = COUNTS.index(6)
    java = [row[2 + 2 * n_index] for row in rows]
    crc = PARTITIONERS["consistent_random"].partition_batch(keys, 6)
    agree = sum(a == b for a, b in zip(java, crc)) / len(keys)
    assert 0.10 < agree < 0.25, f"expected ~1/6 agreement by chance, got {agree:.2%}"

