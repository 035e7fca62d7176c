"""Fingerprinting topics written by real producers on the session's Apache Kafka broker.

Producers: librdkafka (confluent-kafka with each of its seven ``partitioner``
settings) and the real Java ``KafkaProducer`` (tests/java/JavaProducer.java,
compiled at test time against kafka-clients.jar).  Where a record landed is
the broker's word (delivery reports / Java's RecordMetadata), not ours.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from javatools import compile_java
from streamapp.cli import main
from streamapp.copartition.fingerprint import fingerprint_topic, score
from streamapp.copartition.keyed_sample import SampleError, fair_shares, read_keyed_sample
from streamapp.kafka.admin import describe
from streamapp.partitioners import LIBRDKAFKA_NAMES, PROFILES, hashes

N = 6


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, int | None]], partitioner: str = "murmur2_random") -> list[tuple[bytes | None, int]]:
    """Write (key, explicit partition or None) records; return (key, partition) as the broker acknowledged them."""
    acked: list[tuple[bytes | None, int]] = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        acked.append((msg.key(), msg.partition()))

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": partitioner, "linger.ms": 5})
    for i, (key, part) in enumerate(records):
        extra = {} if part is None else {"partition": part}
        producer.produce(topic, key=key, value=f"v{i}".encode(), on_delivery=on_delivery, **extra)
    assert producer.flush(30) == 0
    return acked


def user_keys(count: int, prefix: str = "user") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


@pytest.mark.parametrize("partitioner", LIBRDKAFKA_NAMES)
def test_topic_written_by_librdkafka_is_fingerprinted(bootstrap, new_topic, partitioner) -> None:
    topic = new_topic("fp_rdk", N)
    records = [(k, None) for k in user_keys(240)] + [(b"", None)] * 4 + [(None, None)] * 6
    acked = produce(bootstrap, topic, records, partitioner)
    result = fingerprint_topic(bootstrap, topic, sample=1000)
    assert (result.num_partitions, result.keyed) == (N, 244)
    assert sorted(read_keyed_sample(bootstrap, topic, 1000)[0], key=repr) == sorted(acked, key=repr)
    if partitioner == "random":
        assert result.stored.explaining == [] and result.quoted.explaining == [] and result.families == []
        assert "explains 100%" not in result.verdict and "random" in result.verdict
        return
    assert partitioner in result.stored.explaining, result.verdict
    assert not result.ambiguous
    assert "explains 100% of" in result.verdict and partitioner in result.verdict
    assert set(result.stored.explaining) == set(result.families[0])


def test_topic_written_by_the_java_producer_is_murmur2(bootstrap, new_topic, java_build_dir) -> None:
    topic = new_topic("fp_java", N)
    classpath = compile_java(java_build_dir, "JavaProducer")
    run = subprocess.run(
        ["java", "-cp", classpath, "JavaProducer", bootstrap, topic, "400", "order-"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    acked = {line.split()[0].encode(): int(line.split()[1]) for line in run.stdout.splitlines()}
    assert len(acked) == 400
    samples, count = read_keyed_sample(bootstrap, topic, 1000)
    assert count == N and dict(samples) == acked
    result = score(samples, count)
    assert PROFILES["java"] in result.stored.explaining and "murmur2" in result.stored.explaining
    assert not result.ambiguous
    assert "java" in result.verdict


def test_json_quoted_keys_written_by_murmur2_name_the_key_format(bootstrap, new_topic) -> None:
    topic = new_topic("fp_json", N)
    produce(bootstrap, topic, [(json.dumps(k.decode()).encode(), None) for k in user_keys(300)], "murmur2")
    result = fingerprint_topic(bootstrap, topic)
    assert result.json_keys and "murmur2" in result.stored.explaining
    assert "JSON-quoted" in result.verdict


def test_raw_keys_placed_by_their_json_form_are_a_key_format_mismatch(bootstrap, new_topic) -> None:
    topic = new_topic("fp_mismatch", N)
    records = [
        (k, hashes.to_positive(hashes.murmur2(json.dumps(k.decode()).encode())) % N) for k in user_keys(300)
    ]
    produce(bootstrap, topic, records)
    result = fingerprint_topic(bootstrap, topic)
    assert result.stored.explaining == [] and "murmur2" in result.quoted.explaining
    assert "Key-format mismatch" in result.verdict


def test_sample_is_spread_over_skewed_partitions(bootstrap, new_topic) -> None:
    topic = new_topic("fp_skew", N)
    records = [(f"hot{i}".encode(), 0) for i in range(600)] + [
        (f"cold{p}-{i}".encode(), p) for p in range(1, N) for i in range(8)
    ]
    produce(bootstrap, topic, records)
    samples, count = read_keyed_sample(bootstrap, topic, 100)
    per_partition = Counter(p for _, p in samples)
    assert len(samples) == 100 and count == N
    assert per_partition == {0: 100 - 8 * (N - 1), **{p: 8 for p in range(1, N)}}
    assert [k for k, p in samples if p == 0] == [f"hot{i}".encode() for i in range(per_partition[0])]


def test_partitions_ending_exactly_at_their_share_do_not_stall_the_sample(bootstrap, new_topic) -> None:
    topic = new_topic("fp_edge", 3)
    produce(bootstrap, topic, [(f"k{p}-{i}".encode(), p) for p, count in ((0, 2), (1, 4), (2, 100)) for i in range(count)])
    for limit in (11, 12, 13, 500):
        samples, _ = read_keyed_sample(bootstrap, topic, limit, timeout=20)  # a stall is a SampleError
        assert Counter(p for _, p in samples) == {0: 2, 1: 4, 2: min(limit, 106) - 6}


def test_fair_shares_give_short_partitions_rest_to_the_others() -> None:
    shares = fair_shares([100, 3, 0, 50], 60)
    assert shares[1:3] == [3, 0] and sum(shares) == 60 and abs(shares[0] - shares[3]) <= 1
    assert fair_shares([5, 5], 100) == [5, 5]
    assert fair_shares([10, 10, 10], 7) in ([3, 2, 2], [2, 3, 2], [2, 2, 3])


def test_empty_topic_says_it_is_empty(bootstrap, new_topic) -> None:
    result = fingerprint_topic(bootstrap, new_topic("fp_empty", 3))  # reaching no partition's end is a SampleError
    assert result.sample_size == 0 and result.ambiguous
    assert result.verdict == "The topic holds no records: nothing to fingerprint."


def test_cli_prints_verdict_and_table(bootstrap, new_topic, capsys) -> None:
    topic = new_topic("fp_cli", N)
    produce(bootstrap, topic, [(k, None) for k in user_keys(200)], "fnv1a")
    assert main(["fingerprint", "--topic", topic, "--sample", "150", "--bootstrap-servers", bootstrap]) == 0
    out = capsys.readouterr().out
    assert "Verdict:" in out and "fnv1a" in out and "100.00%" in out and "150 keyed" in out
    assert main(["fingerprint", "--topic", topic, "--json", "--bootstrap-servers", bootstrap]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["topic"] == topic and data["keyed"] == 200 and "fnv1a" in data["explaining"]


def test_cli_unknown_topic_is_one_line_and_not_created(bootstrap) -> None:
    topic = f"fp_missing_{time.time_ns()}"
    run = subprocess.run(
        [sys.executable, "-m", "streamapp", "fingerprint", "--topic", topic, "--bootstrap-servers", bootstrap],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and topic in run.stderr and "Traceback" not in run.stderr
    assert topic not in describe(bootstrap)
    with pytest.raises(SampleError, match="sample=0"):
        read_keyed_sample(bootstrap, topic, 0)


def test_cli_scores_a_user_partitioner_and_rejects_a_bad_one(bootstrap, new_topic, capsys) -> None:
    topic = new_topic("fp_user", 5)
    produce(bootstrap, topic, [(bytes([b]) + b"-key", b % 5) for b in range(40, 140)])
    assert main(["fingerprint", "--topic", topic, "--json", "--partitioner", "test_fingerprint:first_byte",
                 "--bootstrap-servers", bootstrap]) == 0
    assert json.loads(capsys.readouterr().out)["explaining"] == ["test_fingerprint:first_byte"]
    assert main(["fingerprint", "--topic", topic, "--partitioner", "no_such_module:f", "--bootstrap-servers", bootstrap]) == 2
    assert "no_such_module:f" in capsys.readouterr().err


@pytest.mark.slow
def test_topic_of_null_keys_says_why_nothing_is_fingerprinted(bootstrap, new_topic, capsys) -> None:
    """It used to print '0 records sampled' and no reason."""
    from streamapp.cli import main

    topic = new_topic("fp_nulls", N)
    produce(bootstrap, topic, [(None, None)] * 40)
    result = fingerprint_topic(bootstrap, topic)
    assert (result.sample_size, result.keyed) == (40, 0)
    assert result.verdict.startswith("No keyed records: every record read has a NULL key")
    assert "40 records with NULL keys were left out" in " ".join(result.notes)
    assert main(["fingerprint", "--topic", topic, "--bootstrap-servers", bootstrap]) == 0
    out = capsys.readouterr().out
    assert "40 records sampled, 0 keyed" in out and "NULL key" in out

