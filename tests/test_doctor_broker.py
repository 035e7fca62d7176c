"""The whole doctor on the session's Apache Kafka broker, over topics the real clients wrote, each with its own default.

Writers: the Java producer (kafka-clients, murmur2), librdkafka through
confluent-kafka (its default consistent_random, crc32), Sarama's default hash
partitioner and kafka-go's Murmur2Balancer (tests/go, from the Go module proxy),
aiokafka (Faust's driver) with the keys a Faust table writes by default (JSON), and
confluent-kafka with Confluent's own AvroSerializer keys.  Where each record
landed is the broker's word.  The doctor must name each topic's writer family and
encoding, find every broken pair, predict the miss rate a real partition-local
join measures, and each fix it prints, applied, must make the pair sound.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from aiokafka import AIOKafkaProducer
import faust

from doctorkit import confluent_keys
from gotools import go_produce
from javatools import compile_java
from streamapp.cli import main
from streamapp.copartition.doctor import JoinedPair, diagnose, sample_topics
from streamapp.copartition.doctor_pairs import diagnose_worker
from streamapp.copartition.key_encoding import classify, normalized
from streamapp.kafka.admin import add_partitions, ensure_topics
from streamapp.kafka.reader import read_topic
from workerkit import produce

N = 6
COUNT = 1200
#: Smaller than a topic, so the miss rate is a prediction from a sample, not a count of everything.
SAMPLE = 500
USERS = [f"u{i}" for i in range(COUNT)]
RAW = [u.encode() for u in USERS]


def aio_produce(bootstrap: str, topic: str, keys: list[bytes]) -> None:
    """aiokafka, Faust's driver, with its default partitioner."""
    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for future in [await producer.send(topic, key=key, value=b"{}") for key in keys]:
                await future
        finally:
            await producer.stop()

    asyncio.run(send())


def faust_table_keys(users: list[str]) -> list[bytes]:
    """The keys a Faust table writes to its changelog: its default key serializer is JSON (an app's topics default to raw)."""
    table = faust.App("doctor-test", broker="kafka://localhost:9092").Table("users", key_type=str, value_type=bytes)
    return [table.changelog_topic.prepare_key(user, None)[0] for user in users]


def java_produce(bootstrap: str, topic: str, build_dir: Path) -> None:
    """The Java producer with its default partitioner, keys u0..u{COUNT-1}."""
    classpath = compile_java(build_dir, "JavaProducer")
    run = subprocess.run(["java", "-cp", classpath, "JavaProducer", bootstrap, topic, str(COUNT), "u"],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]


@dataclass(frozen=True)
class Cluster:
    bootstrap: str
    topics: dict[str, str]

    def __getitem__(self, role: str) -> str:
        return self.topics[role]


#: Role -> how the real client writes it.
WRITERS = ("java", "librdkafka", "sarama", "kafka_go_murmur2", "faust", "avro")


def write(bootstrap: str, role: str, topic: str, build_dir: Path) -> None:
    values = [(key, b"{}") for key in RAW]
    if role == "java":
        java_produce(bootstrap, topic, build_dir)
    elif role == "librdkafka":
        produce(bootstrap, topic, values, partitioner="consistent_random")  # librdkafka's default
    elif role == "sarama":
        go_produce(bootstrap, topic, "sarama/hash", values)
    elif role == "kafka_go_murmur2":
        go_produce(bootstrap, topic, "kafka-go/Murmur2Balancer", values)
    elif role == "faust":
        aio_produce(bootstrap, topic, faust_table_keys(USERS))
    elif role == "avro":
        produce(bootstrap, topic, [(k, b"{}") for k in confluent_keys("avro-string", USERS)], "murmur2_random")


@pytest.fixture(scope="module")
def cluster(bootstrap: str, java_build_dir: Path) -> Iterator[Cluster]:
    run = uuid.uuid4().hex[:6]
    topics = {role: f"doc_{role}_{run}" for role in WRITERS}
    ensure_topics(bootstrap, {t: N for t in topics.values()})
    for role, topic in topics.items():
        write(bootstrap, role, topic, java_build_dir)
    yield Cluster(bootstrap, topics)


def doctor(bootstrap: str, topics: list[str], pairs: list[tuple[str, str]]):
    return diagnose(sample_topics(bootstrap, topics, SAMPLE), [JoinedPair(a, b, "test") for a, b in pairs])


def measured_miss_rate(bootstrap: str, stream: str, table: str) -> float:
    """A real partition-local join: each stream record whose key the table holds looks it up by bytes in its own partition."""
    def logical(topic: str) -> list[tuple[int, bytes, str]]:
        records = read_topic(bootstrap, topic)
        keys = [r.key for r in records]
        return [(r.partition, r.key, value) for r, value in zip(records, normalized(keys, classify(keys)))]

    table_records = logical(table)
    index = {(part, key) for part, key, _ in table_records}
    known = {value for _, _, value in table_records}
    looked_up = [(part, key) for part, key, value in logical(stream) if value in known]
    return sum((part, key) not in index for part, key in looked_up) / len(looked_up)


def test_each_topic_is_named_by_its_writer_family_and_key_encoding(cluster: Cluster) -> None:
    report = doctor(cluster.bootstrap, list(cluster.topics.values()), [])
    by_role = {role: next(t for t in report.topics if t.name == topic) for role, topic in cluster.topics.items()}
    expected = {
        "java": ("murmur2_random", "java", "utf8_string"),
        "kafka_go_murmur2": ("murmur2_random", "java", "utf8_string"),
        "librdkafka": ("consistent_random", "librdkafka", "utf8_string"),
        "sarama": ("fnv1a_random", "sarama", "utf8_string"),
        "faust": ("murmur2_random", "faust", "json_string"),
        "avro": ("murmur2_random", "java", "confluent_avro"),
    }
    for role, (partitioner, writer, encoding) in expected.items():
        topic = by_role[role]
        assert partitioner in topic.family and writer in topic.writers, (role, topic.verdict)
        assert topic.encoding.encoding == encoding and topic.encoding.share == 1.0, role
    assert by_role["sarama"].writers == ["sarama", "kafka-go"]
    assert by_role["avro"].encoding.schema_ids == (1,)
    # u1, "u1" and Avro u1 are one key: every topic is in one key space
    assert list(report.key_spaces) == [tuple(sorted(cluster.topics.values()))]


def test_every_broken_pair_is_found_with_the_miss_rate_a_real_join_measures(cluster: Cluster) -> None:
    report = doctor(cluster.bootstrap, list(cluster.topics.values()), [])
    role = {topic: r for r, topic in cluster.topics.items()}
    statuses = {frozenset((role[p.left], role[p.right])): p for p in report.pairs}
    assert len(statuses) == 15  # all 6 topics share keys: every pair is diagnosed
    sound = {pair for pair, p in statuses.items() if p.status == "sound"}
    assert sound == {frozenset(("java", "kafka_go_murmur2"))}
    for pair, diagnosis in statuses.items():
        measured = measured_miss_rate(cluster.bootstrap, diagnosis.left, diagnosis.right)
        assert diagnosis.miss_rate == pytest.approx(measured, abs=0.05), (pair, diagnosis.miss_rate, measured)
        assert diagnosis.shared > 100
    assert statuses[frozenset(("java", "faust"))].miss_rate == 1.0


#: A fix's producer setting -> the real client configured with it (the Go program's names).
GO_CLIENTS = {
    ("sarama", "config.Producer.Partitioner = sarama.NewMurmur2Partitioner"): "sarama/murmur2",
    ("kafka-go", "Writer.Balancer = &kafka.Murmur2Balancer{}"): "kafka-go/Murmur2Balancer",
}


def apply(cluster: Cluster, fix, bootstrap: str) -> str:
    """Re-write the fixed topic's keys into a new topic as the fix says; return the new topic."""
    topic = f"{fix.topic}_fixed_{uuid.uuid4().hex[:4]}"
    ensure_topics(bootstrap, {topic: N})
    values = [(key, b"{}") for key in RAW]
    if fix.client in ("librdkafka", "confluent-kafka"):
        name, _, value = fix.setting.partition("=")
        assert name == "partitioner"
        produce(bootstrap, topic, values, partitioner=value)
    elif (fix.client, fix.setting) in GO_CLIENTS:
        go_produce(bootstrap, topic, GO_CLIENTS[fix.client, fix.setting], values)
    elif fix.kind == "serializer":
        aio_produce(bootstrap, topic, RAW)  # the same writer, keys as raw bytes (Faust key_serializer="raw")
    else:
        raise AssertionError(f"no way to apply {fix}")
    return topic


@pytest.mark.parametrize("role, client", [
    ("librdkafka", "librdkafka"), ("sarama", "sarama"), ("sarama", "kafka-go"), ("faust", None), ("avro", None),
])
def test_each_printed_fix_applied_makes_the_pair_sound(cluster: Cluster, role: str, client: str | None) -> None:
    java, odd = cluster["java"], cluster[role]
    broken = doctor(cluster.bootstrap, [java, odd], [(java, odd)]).pairs[0]
    assert broken.status == "broken"
    if client is None:
        fix = next(f for f in broken.fixes if f.kind == "serializer")
    else:
        fix = next(f for f in broken.fixes if f.client == client)
    assert fix.topic == odd
    fixed = apply(cluster, fix, cluster.bootstrap)
    after = doctor(cluster.bootstrap, [java, fixed], [(java, fixed)])
    assert after.ok and after.pairs[0].status == "sound" and after.pairs[0].miss_rate == 0.0, after.pairs[0].checks


def test_cli_json_html_and_exit_status(cluster: Cluster, tmp_path: Path, capsys) -> None:
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"{cluster['java']} {cluster['kafka_go_murmur2']}\n")
    run = cluster["java"].rsplit("_", 1)[1]
    common = ["--bootstrap-servers", cluster.bootstrap, "--topics", f"doc_.*_{run}", "--sample", str(SAMPLE), "--no-worker"]
    assert main(["doctor", *common, "--pairs", str(pairs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and len(data["topics"]) == 6 and data["sources"]["pairs file"].startswith("1 pairs")
    pairs.write_text(f"{cluster['java']} {cluster['librdkafka']}\n{cluster['java']} doc_nowhere_{run}\n")
    page = tmp_path / "doctor.html"
    assert main(["doctor", *common, "--pairs", str(pairs), "--html", str(page)]) == 1
    out = capsys.readouterr().out
    assert "partitioner=murmur2_random" in out and "BROKEN" in out and f"doc_nowhere_{run}" in out
    html = page.read_text()
    assert html.count("<svg") == 1 and cluster["librdkafka"] in html and "Confluent wire format, Avro" in html
    assert 'stroke="#c62828"' in html  # the broken joined pair, drawn in the broken color


def test_bad_options_are_one_line_errors(cluster: Cluster, tmp_path: Path, capsys) -> None:
    base = ["doctor", "--bootstrap-servers", cluster.bootstrap]
    cases = [
        (["--topics", "("], "streamapp doctor: topics='(': not a regular expression"),
        (["--sample", "0"], "streamapp doctor: sample=0: must be at least 1"),
        (["--pairs", str(tmp_path / "none.txt")], "streamapp doctor: pairs="),
        (["--html", str(tmp_path / "no" / "x.html")], "streamapp doctor: html="),
        (["--ksqldb-endpoint", "localhost:8088"], "streamapp doctor: ksqldb_endpoint='localhost:8088'"),
    ]
    for extra, start in cases:
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith(start) and err.count("\n") == 1 and "Traceback" not in err, err


def test_the_partition_count_fix_applied_makes_the_pair_sound(cluster: Cluster, new_topic) -> None:
    java, four = cluster["java"], new_topic("doc_four", 4)
    produce(cluster.bootstrap, four, [(key, b"{}") for key in RAW], "murmur2_random")
    broken = doctor(cluster.bootstrap, [java, four], [(java, four)]).pairs[0]
    assert [c.name for c in broken.checks if c.ok is False] == ["partition counts", "shared keys"]
    grow = next(f for f in broken.fixes if f.kind == "partitions")
    assert grow.topic == four and f"--count {N}" in grow.text
    fixed = new_topic("doc_four_fixed", N)  # "or a new topic of 6", its records re-written by the same client
    produce(cluster.bootstrap, fixed, [(key, b"{}") for key in RAW], "murmur2_random")
    after = doctor(cluster.bootstrap, [java, fixed], [(java, fixed)])
    assert after.ok and after.pairs[0].status == "sound"
    # the other way, partitions added: the share of keys whose new records land elsewhere is what the fix said
    add_partitions(cluster.bootstrap, four, N)
    produce(cluster.bootstrap, four, [(key, b"{}") for key in RAW], "murmur2_random")
    placed: dict[bytes, list[int]] = defaultdict(list)
    for record in sorted(read_topic(cluster.bootstrap, four), key=lambda r: r.timestamp):
        placed[record.key].append(record.partition)
    moved = sum(before != after for before, after in placed.values()) / len(placed)
    assert grow.moved_share == pytest.approx(moved, abs=0.05), (grow.moved_share, moved)


def test_the_worker_findings_cover_its_own_joins(cluster: Cluster, broker_settings) -> None:
    settings = broker_settings.replace(orders_topic=cluster["librdkafka"], users_topic=cluster["java"],
                                       users_repartition_topic=cluster["kafka_go_murmur2"])
    report = diagnose_worker(settings, sample=SAMPLE)
    by_join = {p.joined_by: p for p in report.pairs if p.joined}
    assert by_join[("worker:demo_user_orders_merged",)].status == "broken"
    assert by_join[("worker:demo_user_orders_merged_repartition",)].status == "broken"
    assert {t.name for t in report.topics} == {cluster["librdkafka"], cluster["java"], cluster["kafka_go_murmur2"]}
    assert not report.ok
