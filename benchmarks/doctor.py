"""``streamapp doctor`` on a cluster of 200 topics × 6 partitions, as a ratio to a bare read of the same samples.

The cluster: 200 topics on a fresh Apache Kafka node, 1,000 keyed records each
(the default sample reads all of them), in 40 key spaces of 5 topics (keys
``ks<k>-user<i>``), each key space written by a mix of clients' defaults
(librdkafka's consistent_random, Java's murmur2, JSON-quoted keys as Faust writes
them).  The baseline is the bare read: every topic's keyed sample read as the
doctor reads it (:func:`~streamapp.copartition.doctor.sample_topics`), nothing
scored.  The doctor's time is the whole command short of printing: list the
topics, read the samples and score each topic in the thread that read it
(:func:`~streamapp.copartition.doctor.examine_topics`), find the key spaces,
diagnose every pair that shares keys (with its fixes), render the HTML.  The
scoring alone (run over the bare read's samples) shows what overlapping it with
the reads saves.
Rounds interleave the two so that load from other work hits both alike.

Run: ``.venv/bin/python benchmarks/doctor.py [--topics 200] [--rounds 3]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from streamapp.copartition.doctor import (
    DEFAULT_SAMPLE, TopicSample, cluster_topics, diagnose, diagnose_reports, examine_topics, sample_topics,
)
from streamapp.copartition.doctor_report import render_html
from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker

PARTITIONS = 6
SPACE = 5
WRITERS = ("consistent_random", "murmur2_random", "json")


def seed(bootstrap: str, topics: int, records: int) -> list[str]:
    from confluent_kafka import Producer

    names = [f"bench_{i:03d}" for i in range(topics)]
    ensure_topics(bootstrap, {name: PARTITIONS for name in names})
    producers = {p: Producer({"bootstrap.servers": bootstrap, "partitioner": p, "linger.ms": 20})
                 for p in ("consistent_random", "murmur2_random")}
    for index, name in enumerate(names):
        writer = WRITERS[index % len(WRITERS)]
        producer = producers["murmur2_random" if writer == "json" else writer]
        for i in range(records):
            key = f"ks{index // SPACE}-user{i}"
            encoded = json.dumps(key).encode() if writer == "json" else key.encode()
            while True:
                try:
                    producer.produce(name, key=encoded, value=b"{}")
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
    for producer in producers.values():
        assert producer.flush(120) == 0
    return names


def bare_read(bootstrap: str, topics: list[str]) -> tuple[float, list[TopicSample]]:
    started = time.perf_counter()
    samples = sample_topics(bootstrap, topics, DEFAULT_SAMPLE)
    assert all(len(s.samples) == DEFAULT_SAMPLE for s in samples)
    return time.perf_counter() - started, samples


def doctor(bootstrap: str) -> tuple[float, int]:
    """(the whole doctor, pairs diagnosed): list, read and score together, find key spaces, diagnose, render."""
    started = time.perf_counter()
    report = diagnose_reports(examine_topics(bootstrap, cluster_topics(bootstrap, "bench_.*"), DEFAULT_SAMPLE))
    render_html(report)
    return time.perf_counter() - started, len(report.pairs)


def scoring_alone(samples: list[TopicSample]) -> float:
    """What scoring would add if it ran after the reads instead of beside them."""
    started = time.perf_counter()
    render_html(diagnose(samples))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with EmbeddedBroker(heap="1g") as broker:
        bootstrap = broker.bootstrap
        started = time.perf_counter()
        topics = seed(bootstrap, args.topics, DEFAULT_SAMPLE)
        print(f"seeded {len(topics)} topics × {PARTITIONS} partitions × {DEFAULT_SAMPLE} records "
              f"in {time.perf_counter() - started:.1f} s")
        bare_read(bootstrap, topics)  # warm: the broker's page cache, the client library
        reads, doctors, scoring = [], [], []
        for _ in range(args.rounds):
            read, samples = bare_read(bootstrap, topics)
            reads.append(read)
            whole, pairs = doctor(bootstrap)
            doctors.append(whole)
            scoring.append(scoring_alone(samples))
        read, whole, score = statistics.median(reads), statistics.median(doctors), statistics.median(scoring)
        print(f"| what | seconds (median of {args.rounds}) | × bare read |")
        print("|---|---:|---:|")
        print(f"| bare read of {len(topics)} samples (baseline) | {read:.2f} | 1.00× |")
        print(f"| doctor, whole ({pairs} pairs diagnosed) | {whole:.2f} | {whole / read:.2f}× |")
        print(f"| scoring, diagnosing, HTML alone, after a read (not what the doctor does) | {score:.2f} | {score / read:.2f}× |")


if __name__ == "__main__":
    main()
