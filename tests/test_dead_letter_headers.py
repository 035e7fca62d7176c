"""Dead letters keep the whole record, as Kafka Connect's dead-letter queue: its headers and its timestamp.

Pure parts first (names, read-back, cutting to fit), then a real worker on the
session's broker: bad orders with headers, timestamps and a forged
``streamapp.reason`` header become dead letters that keep all of it, under
streamapp's own headers, and 600 of them are not 600 WARNING lines.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from streamapp.kafka.admin import admin_client
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.kafka.limits import record_size
from streamapp.model.dead_letters import (
    HEADERS_DROPPED, REASON, SOURCE_TIMESTAMP, DeadLetter, from_record, letter_header_name, source_header_name,
)
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import isolated, wait_until, worker_settings

#: A source record's headers: a tracing id, a repeated name, a null value, and three that look like streamapp's.
HEADERS = (
    ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ("schema-id", b"\x00\x00\x00\x07"),
    ("hop", b"1"),
    ("hop", b"2"),
    ("empty", None),
    ("streamapp.reason", b"forged: all is well"),
    ("original.streamapp.reason", b"forged twice"),
    ("original.note", b"a producer's own original.* header"),
)


def test_a_source_header_named_like_streamapps_is_renamed_and_comes_back() -> None:
    assert letter_header_name("traceparent") == "traceparent"
    assert letter_header_name("streamapp.reason") == "original.streamapp.reason"
    assert letter_header_name("original.streamapp.reason") == "original.original.streamapp.reason"
    for name, _ in HEADERS:
        assert source_header_name(letter_header_name(name)) == name


def test_the_letter_carries_streamapps_headers_then_the_records_own_and_reads_back() -> None:
    letter = DeadLetter("orders", 2, 41, b"u1", b"{oops", "value is not valid JSON", "value",
                        original_headers=HEADERS, timestamp=1_700_000_000_123)
    headers = letter.record_headers()
    ours = list(letter.headers().items())
    assert headers[: len(ours)] == ours
    assert all(name.startswith("streamapp.") for name, _ in ours)
    assert headers[len(ours):] == [(letter_header_name(n), v) for n, v in HEADERS]
    assert not any(name.startswith("streamapp.") for name, _ in headers[len(ours):])
    assert dict(ours)[SOURCE_TIMESTAMP] == b"1700000000123"
    back = from_record(b"u1", b"{oops", headers)
    assert back == letter
    assert back.reason == "value is not valid JSON" and back.original_headers == HEADERS


def test_headers_too_large_for_the_topic_are_dropped_last_and_counted() -> None:
    big = (("blob", b"h" * 50_000), ("trace", b"t"))
    letter = DeadLetter("orders", 0, 7, b"k", b"v" * 10_000, "too large", "value", original_headers=big,
                        timestamp=5)
    small = letter.fitted(70_000, record_size)
    assert small is letter  # fits: nothing cut
    cut = letter.fitted(55_000, record_size)  # the value's prefix is enough: the headers stay
    assert cut.truncated == ("value",) and cut.original_headers == big and cut.headers_dropped == 0
    bare = letter.fitted(20_000, record_size)  # even no payload is too large with them: they go, counted
    assert bare.original_headers == () and bare.headers_dropped == 2
    assert bare.value == b"v" * 10_000 and bare.truncated == ()  # ... and the payload is kept again
    assert record_size(bare.key, bare.value, bare.record_headers()) <= 20_000
    assert bare.headers()[HEADERS_DROPPED] == b"2"
    assert from_record(bare.key, bare.value, bare.record_headers()) == bare


# -- on the broker ----------------------------------------------------------------------------------------------

#: Bad orders with headers: enough to show that a burst is summarised, not logged one by one.
BAD_ORDERS = 600
#: The dead-letter topic takes records at most this old, so an older record's letter gets the broker's time.
DEAD_LETTER_BEFORE_MAX_MS = 3_600_000


def read_letters(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 120.0) -> list:
    """Every record of the dead-letter topic, with its headers as written (a list: names may repeat)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-headers", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records.append(msg)
    finally:
        consumer.close()
    return records


@pytest.fixture
def settings(broker: EmbeddedBroker, tmp_path: Path) -> Settings:
    base = broker.settings(Settings()).replace(data_dir=str(tmp_path / "data"), broker_session_timeout=10.0)
    return isolated(base, "dlqh")


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_dead_letters_keep_headers_and_timestamp_and_a_burst_is_summarised(settings: Settings, tmp_path: Path,
                                                                         guarantee: str) -> None:
    """Under exactly_once the letters go through the source partition's transaction: the same record."""
    settings = settings.replace(processing_guarantee=guarantee)
    n = settings.partitions
    admin = admin_client(settings.bootstrap_servers)
    dead = NewTopic(settings.dead_letter_topic, n, 1,
                    config={"message.timestamp.before.max.ms": str(DEAD_LETTER_BEFORE_MAX_MS)})
    for future in admin.create_topics([dead], operation_timeout=30).values():
        future.result(30)
    now = int(time.time() * 1000)
    recent, old = now - 600_000, now - 2 * DEAD_LETTER_BEFORE_MAX_MS  # the source topic takes both
    sent: dict[bytes, tuple[int, tuple]] = {}
    worker = WorkerProcess(worker_settings(settings, tmp_path, "w"), tmp_path / "worker.log").start(timeout=180)
    try:
        producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "linger.ms": 5})
        for i in range(BAD_ORDERS):
            key = f"user-{i}".encode()
            headers = (*HEADERS, ("seq", str(i).encode()))
            stamp = old if i == 0 else recent + i
            producer.produce(settings.orders_topic, key=key, value=b"{not json " + key, headers=list(headers),
                             timestamp=stamp)
            sent[key] = (stamp, headers)
        producer.flush(30)
        records = read_letters(settings.bootstrap_servers, settings.dead_letter_topic, n, BAD_ORDERS)
        assert len(records) == BAD_ORDERS, worker.tail()
        wait_until(lambda: f"dead letters {BAD_ORDERS:,}" in worker.log(), 60,  # the counters line counts every one
                   lambda: f"no counters line with {BAD_ORDERS} dead letters: {worker.tail()}")
        log = worker.log()
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()

    for record in records:
        letter = from_record(record.key(), record.value(), record.headers())
        stamp, headers = sent[letter.key]
        assert letter.value == b"{not json " + letter.key and letter.source_topic == settings.orders_topic
        assert letter.original_headers == headers  # every one, in order, under its own name
        assert letter.timestamp == stamp
        assert "not valid JSON" in letter.reason and "forged" not in letter.reason  # streamapp's, not the forger's
        names = [name for name, _ in record.headers()]
        ours = [name for name in names if name.startswith("streamapp.")]
        assert names[: len(ours)] == ours and names.count(REASON) == 1  # streamapp's first, never repeated
        written = record.timestamp()[1]
        if stamp == old:  # the dead-letter topic refuses it: the broker's time (the header keeps the original)
            assert now <= written <= int(time.time() * 1000)  # written since the test began
        else:  # the record's own
            assert written == stamp

    lines = [line for line in log.splitlines() if "Dead letter from" in line]
    assert 1 <= len(lines) < BAD_ORDERS // 10, lines[:5]
