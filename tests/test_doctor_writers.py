"""The doctor names the writer of topics written by every real client and partitioner it knows, on the session broker.

librdkafka (confluent-kafka) with each of its hashing partitioners; from the Go
module proxy, Sarama (hash, reference hash), kafka-go (Hash, ReferenceHash,
CRC32Balancer, Murmur2Balancer) and franz-go (StickyKeyPartitioner with the Kafka
and Sarama hashers); kafkajs from npm with its default and legacy partitioners
(tests/kafkajs/produce.js).  One doctor run over all of them; each topic's
partitioner family must hold the client's partitioner, and its writers the client.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from gotools import go_produce
from streamapp.copartition.doctor import diagnose, sample_topics
from streamapp.kafka.admin import ensure_topics
from workerkit import produce

N = 6
KEYS = [f"k{i}".encode() for i in range(300)] + ["é-key".encode(), bytes(range(1, 40))]
KAFKAJS = Path(__file__).parent / "kafkajs"

#: topic suffix -> (how to write it, the partitioner the doctor must name, a client profile it must list or None).
WRITERS: dict[str, tuple[tuple[str, str], str, str | None]] = {
    **{f"rdk_{name}": (("librdkafka", name), name, "librdkafka" if name == "consistent_random" else None)
       for name in ("murmur2", "murmur2_random", "consistent", "consistent_random", "fnv1a", "fnv1a_random")},
    "sarama_hash": (("go", "sarama/hash"), "fnv1a_random", "sarama"),
    "sarama_reference": (("go", "sarama/reference-hash"), "fnv1a_reference", None),
    "kafkago_hash": (("go", "kafka-go/Hash"), "fnv1a_random", "kafka-go"),
    "kafkago_reference": (("go", "kafka-go/ReferenceHash"), "fnv1a_reference", None),
    "kafkago_crc32": (("go", "kafka-go/CRC32Balancer"), "consistent_random", "librdkafka"),
    "kafkago_murmur2": (("go", "kafka-go/Murmur2Balancer"), "murmur2_random", "java"),
    "franz_sticky_kafka": (("go", "franz-go/sticky-key"), "murmur2_random", "franz-go"),
    "franz_sticky_sarama": (("go", "franz-go/sticky-sarama-fnv1a"), "fnv1a_unsigned", None),
    "kafkajs_default": (("kafkajs", "default"), "murmur2_random", "kafkajs"),
    "kafkajs_legacy": (("kafkajs", "legacy"), "kafkajs_legacy", "kafkajs-legacy"),
}


def kafkajs_produce(bootstrap: str, topic: str, which: str, records: list[tuple[bytes, bytes]]) -> None:
    node = shutil.which("node")
    assert node and (KAFKAJS / "node_modules" / "kafkajs").is_dir(), "Node.js and kafkajs are required: run 'make install'"
    with tempfile.TemporaryDirectory(prefix="kafkajs-") as tmp:
        path = Path(tmp) / "records.hex"
        path.write_text("".join(f"{k.hex()} {v.hex()}\n" for k, v in records), encoding="ascii")
        done = subprocess.run([node, str(KAFKAJS / "produce.js"), bootstrap, topic, which, str(path)],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.split("\n")) - 1 == len(records)


def write(bootstrap: str, topic: str, how: tuple[str, str]) -> None:
    kind, name = how
    records = [(key, b"{}") for key in KEYS]
    if kind == "librdkafka":
        produce(bootstrap, topic, records, partitioner=name)
    elif kind == "go":
        go_produce(bootstrap, topic, name, records)
    else:
        kafkajs_produce(bootstrap, topic, name, records)


@pytest.fixture(scope="module")
def written(bootstrap: str) -> dict[str, str]:
    run = uuid.uuid4().hex[:6]
    topics = {suffix: f"writer_{suffix}_{run}" for suffix in WRITERS}
    ensure_topics(bootstrap, {t: N for t in topics.values()})
    for suffix, topic in topics.items():
        write(bootstrap, topic, WRITERS[suffix][0])
    return topics


def test_the_doctor_names_every_clients_partitioner(bootstrap: str, written: dict[str, str]) -> None:
    report = diagnose(sample_topics(bootstrap, list(written.values())))
    by_name = {t.name: t for t in report.topics}
    wrong = []
    for suffix, (_, partitioner, client) in WRITERS.items():
        topic = by_name[written[suffix]]
        if partitioner not in topic.family or (client is not None and client not in topic.writers):
            wrong.append(f"{suffix}: {topic.partitioner_label} ({', '.join(topic.writers)}): {topic.verdict}")
        assert topic.encoding.encoding == "utf8_string" and topic.encoding.mixed, suffix  # one binary key in 302
    assert wrong == []
    # one key space: they all hold k0..k299; a pair is sound exactly when the two partitioners place every key alike
    assert len(report.key_spaces) == 1
    for pair in report.pairs:
        a, b = by_name[pair.left], by_name[pair.right]
        assert (pair.status == "sound") == bool(set(a.family) & set(b.family)), (pair.left, pair.right, pair.checks)
