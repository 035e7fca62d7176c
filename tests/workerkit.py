"""Helpers for the worker's integration tests: isolated settings, real producers, reading outputs, log counters.

Everything talks to the session's real Apache Kafka broker; the worker is the real
``faust -A streamapp worker`` child process.
"""
from __future__ import annotations

import json
import random
import re
import time
import uuid
from typing import Callable, Iterable, Sequence

from confluent_kafka import Consumer, Producer, TopicPartition

from streamapp.kafka.broker import free_port
from streamapp.kafka.reader import Record, TopicReader
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

COUNTERS = re.compile(r"Counters: users ([\d,]+) · repartitioned users ([\d,]+) · orders ([\d,]+)")
CHANNELS = ("store", "web", "partner", "catalog")


def isolated(settings: Settings, **changes: object) -> Settings:
    """Settings with topic names private to one test and a free web port."""
    tag = uuid.uuid4().hex[:8]
    names = {
        f: f"{getattr(settings, f)}_{tag}"
        for f in ("users_topic", "orders_topic", "users_repartition_topic", "merged_topic",
                  "merged_repartition_topic", "dead_letter_topic")
    }
    return settings.replace(web_port=free_port(), **names, **changes)


def make_users(count: int, seed: int) -> dict[str, dict[str, object]]:
    rng = random.Random(seed)
    return {
        uuid.UUID(int=rng.getrandbits(128)).hex: {"name": f"User {i}", "age": rng.randint(18, 90)}
        for i in range(count)
    }


def make_order(user_id: str, rng: random.Random) -> dict[str, object]:
    return {
        "ts": 1_677_844_000_000 + rng.randint(0, 10**8),
        "product_id": rng.randint(1, 5000),
        "qty": rng.randint(1, 9),
        "unit_price": round(rng.uniform(1, 100), 2),
        "channel": rng.choice(CHANNELS),
    }


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]], partitioner: str) -> None:
    """Produce with real librdkafka and the named librdkafka partitioner."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": partitioner, "linger.ms": 5})
    for key, value in records:
        producer.produce(topic, value=value, key=key)
        producer.poll(0)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> list[Record]:
    """Follow ``topic`` from the beginning until ``expected`` records arrived (or the timeout), then read it to its end.

    What is written by then is all there, so an extra (duplicate or stray) record shows without a grace period.
    """
    with TopicReader(bootstrap, topic, range(partitions)) as reader:
        records = reader.read_to_end()
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            records += reader.read(0.5)
        return records + reader.read_to_end()


def counters_from_log(text: str) -> tuple[int, int, int]:
    """(users, repartitioned users, orders) from the last counters line of one worker's log."""
    matches = COUNTERS.findall(text)
    if not matches:
        return (0, 0, 0)
    return tuple(int(n.replace(",", "")) for n in matches[-1])  # type: ignore[return-value]


def wait_until(condition: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what()}")


def wait_for_users(workers: Sequence[WorkerProcess], count: int, timeout: float = 90.0) -> None:
    """Until the workers together loaded ``count`` users into both tables."""
    def totals() -> tuple[int, int]:
        per = [counters_from_log(w.log()) for w in workers]
        return sum(p[0] for p in per), sum(p[1] for p in per)

    wait_until(lambda: totals() == (count, count), timeout,
               lambda: f"{count} users in both tables, have {totals()}: {workers[0].tail(5)}")


def to_json(value: dict[str, object]) -> bytes:
    return json.dumps(value).encode()


def committed_offsets(settings: Settings, topic: str) -> dict[int, int]:
    """The worker group's committed offset of each partition of ``topic`` (negative: none committed)."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": settings.app_id})
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(settings.partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        consumer.close()
