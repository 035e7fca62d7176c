"""The worker's record limits and cut-down dead letters: pure parts, then the parts that ask Apache Kafka.

What the limits must match is what the real producer and broker refuse, so the
boundary cases are checked against aiokafka's own refusal and a real broker's.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidTimestampError, MessageSizeTooLargeError
from confluent_kafka.admin import NewTopic

from streamapp.kafka.admin import admin_client, wait_listed
from streamapp.kafka.limits import RecordLimits, TimestampWindow, read_limits, record_size
from streamapp.model.dead_letters import PREFIX_BYTES, DeadLetter, from_record
from streamapp.partitioners import get_partitioner
from streamapp.worker.batch_sender import BatchSender


def size_with_headers(letter: DeadLetter) -> int:
    return record_size(letter.key, letter.value, list(letter.headers().items()))


def test_a_dead_letter_that_fits_is_unchanged() -> None:
    letter = DeadLetter("t", 1, 2, b"k", b"v" * 1000, "bad", "value")
    assert letter.fitted(10_000, record_size) is letter


def test_a_dead_letter_too_large_keeps_a_prefix_its_size_and_sha256_and_reads_back() -> None:
    value = bytes(range(256)) * 4000
    letter = DeadLetter("demo_user_orders", 3, 77, b"u1", value, "value is not valid JSON", "value")
    cut = letter.fitted(200_000, record_size)
    assert cut.truncated == ("value",) and cut.key == b"u1"
    assert cut.value == value[:PREFIX_BYTES]
    assert cut.original_sizes == {"value": len(value)}
    assert cut.sha256 == {"value": hashlib.sha256(value).hexdigest()}
    assert size_with_headers(cut) <= 200_000
    back = from_record(cut.key, cut.value, list(cut.headers().items()))
    assert back == cut
    assert (back.source_topic, back.source_partition, back.source_offset) == ("demo_user_orders", 3, 77)


def test_a_huge_key_is_cut_too_and_at_the_smallest_limit_only_headers_are_left() -> None:
    letter = DeadLetter("t", 0, 5, b"k" * 2_000_000, b"v" * 10, "too large", "value")
    cut = letter.fitted(1_000_000, record_size)
    assert cut.truncated == ("key",) and cut.value == b"v" * 10 and len(cut.key) == PREFIX_BYTES
    bare = letter.fitted(0, record_size)
    assert (bare.key, bare.value, bare.truncated) == (b"", b"", ("key", "value"))
    assert bare.original_sizes == {"key": 2_000_000, "value": 10}
    assert from_record(bare.key, bare.value, bare.headers()) == bare


def test_a_reason_is_one_line_of_bounded_length_in_the_header() -> None:
    letter = DeadLetter("t", 0, 5, None, None, "line one\nline two " + "x" * 2000)
    reason = letter.headers()["streamapp.reason"].decode()
    assert "\n" not in reason and len(reason) <= 500


def test_limit_is_the_smallest_and_names_its_setting() -> None:
    limits = RecordLimits(1_000_000, 1_048_588, {"small": 150_000, "big": 5_000_000})
    assert limits.limit("small") == (150_000, "max.message.bytes of topic small")
    assert limits.limit("big") == (1_000_000, "the producer's max_request_size")
    assert limits.limit("unknown") == (1_000_000, "the producer's max_request_size")
    assert RecordLimits(2_000_000, 1_048_588).limit("x") == (1_048_588, "the broker's message.max.bytes")


async def test_too_large_agrees_with_aiokafkas_refusal_at_the_boundary(bootstrap: str, new_topic) -> None:
    """One byte below the producer's limit is sent, the limit plus one is refused, by aiokafka and by the check."""
    topic = new_topic("lim", partitions=1)
    limits = RecordLimits(100_000)
    key = b"k"
    fits = b"v" * max(n for n in range(99_800, 100_000) if record_size(key, b"v" * n) <= 100_000)
    assert record_size(key, fits) == 100_000
    assert limits.too_large(topic, key, fits) is None
    assert "100,001 bytes, above the limit of 100,000" in (limits.too_large(topic, key, fits + b"v") or "")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=100_000)
    await producer.start()
    try:
        await (await producer.send(topic, fits, key=key))
        with pytest.raises(MessageSizeTooLargeError):
            await producer.send(topic, fits + b"v", key=key)
    finally:
        await producer.stop()


def test_timestamp_window_with_its_margin_and_reasons() -> None:
    hour = 3_600_000
    limits = RecordLimits(1_000_000, timestamps={"out": TimestampWindow(None, hour)},
                          broker_timestamps=TimestampWindow(None, None))
    now = 1_800_000_000_000
    assert limits.bad_timestamp("out", now + hour - 60_000, now) is None
    reason = limits.bad_timestamp("out", now + 2 * hour, now, "ts") or ""
    assert "2 h ahead of now" in reason and "message.timestamp.after.max.ms" in reason and "'ts'" in reason
    assert limits.bad_timestamp("out", 0, now) is None  # no lower bound
    assert limits.bad_timestamp("elsewhere", 2**63 - 1, now) is None  # the broker's window: unbounded here
    low, high = TimestampWindow(7 * 24 * hour, hour).bounds(now)
    assert (low, high) == (now - 7 * 24 * hour + 30_000, now + hour - 30_000)


def test_read_limits_from_apache_kafka(bootstrap: str) -> None:
    """Topic overrides, the broker's defaults for the rest, and Kafka 4's one hour ahead for timestamps."""
    small, plain = f"lim_small_{uuid.uuid4().hex[:6]}", f"lim_plain_{uuid.uuid4().hex[:6]}"
    admin = admin_client(bootstrap)
    topics = [NewTopic(small, 1, 1, config={"max.message.bytes": "123456", "message.timestamp.type": "LogAppendTime"}),
              NewTopic(plain, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    wait_listed(bootstrap, [small, plain])
    limits = read_limits(bootstrap, [small, plain, "never_created_topic"], 1_000_000)
    assert limits.broker_max_message_bytes == 1_048_588
    assert limits.topic_max_message_bytes == {small: 123_456, plain: 1_048_588}
    assert limits.limit(small) == (123_456, f"max.message.bytes of topic {small}")
    assert limits.limit("never_created_topic")[0] == 1_000_000
    assert limits.window(small) == TimestampWindow()  # the broker stamps it: anything goes
    assert limits.window(plain).after_max_ms == 3_600_000 == limits.broker_timestamps.after_max_ms
    assert "Record limits:" in limits.summary() and "123,456" in limits.summary()


async def test_batch_sender_hands_back_the_sources_of_a_batch_the_broker_refuses(bootstrap: str, new_topic) -> None:
    """Kafka 4 refuses a batch stamped two hours ahead; its records' sources reach on_failure, the others' do not."""
    topic = new_topic("bsfail", partitions=1)
    failed: list[tuple[str, int, list[str], BaseException]] = []
    done = asyncio.Event()

    def on_failure(t: str, p: int, sources: list[str], error: BaseException) -> None:
        failed.append((t, p, sources, error))
        done.set()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        now = int(time.time() * 1000)
        good = BatchSender(producer, get_partitioner("murmur2"), {topic: 1}, on_failure=on_failure)
        good.add(topic, b"k", b"fine", now, "order-1")
        await good.send()
        bad = BatchSender(producer, get_partitioner("murmur2"), {topic: 1}, on_failure=on_failure)
        bad.add(topic, b"k", b"ahead", now + 2 * 3_600_000, "order-2")
        bad.add(topic, b"k", b"its neighbour", now, "order-3")
        await bad.send()
        await producer.flush()
        await asyncio.wait_for(done.wait(), 30)
    finally:
        await producer.stop()
    assert [(t, p, s) for t, p, s, _ in failed] == [(topic, 0, ["order-2", "order-3"])]
    assert isinstance(failed[0][3], InvalidTimestampError)
