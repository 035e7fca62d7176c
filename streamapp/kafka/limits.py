"""What a topic will take from the worker, known before it sends: the record-level half of "never die of one record".

Kafka refuses a record batch larger than the topic's ``max.message.bytes``
(which defaults to the broker's ``message.max.bytes``), and aiokafka refuses,
before sending, a record larger than the producer's ``max_request_size``.  Kafka
also refuses a record whose CreateTime is more than
``message.timestamp.after.max.ms`` ahead of the broker's clock (one hour by
default since Kafka 4.0) or ``...before.max.ms`` behind it, and the join's outputs
carry the order's ``ts``.  Each refusal used to reach the worker as an exception
in its producer, which killed it, or as a failed batch, which lost every order
in it.  The worker reads these limits once at start (admin client,
DescribeConfigs) and checks every record against them before handing it over,
so a record that cannot be written is dead-lettered with a reason instead.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable, Sequence

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from .admin import ADMIN_TIMEOUT, admin_client

logger = logging.getLogger(__name__)

#: Kafka's default ``message.max.bytes`` (1 MiB + 12): assumed when the broker will not say.
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588

#: Per-topic settings read at start (topic-level names; each defaults to the broker's ``log.`` one).
MAX_MESSAGE_BYTES = "max.message.bytes"
TIMESTAMP_TYPE = "message.timestamp.type"
TIMESTAMP_AFTER_MAX_MS = "message.timestamp.after.max.ms"
TIMESTAMP_BEFORE_MAX_MS = "message.timestamp.before.max.ms"
#: Time a record may take from the check to the broker (linger, batching, a slow round trip).
TIMESTAMP_MARGIN_MS = 30_000

Headers = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True)
class TimestampWindow:
    """The CreateTime a topic accepts, relative to the broker's clock (taken to be ours)."""

    before_max_ms: int | None = None  # None: no bound (LogAppendTime, or the setting unknown)
    after_max_ms: int | None = None

    def bounds(self, now_ms: int) -> tuple[float, float]:
        """(lowest, highest) timestamp safe to send now, with a margin for the time to the broker."""
        low, high = -float("inf"), float("inf")
        if self.before_max_ms is not None:
            low = now_ms - self.before_max_ms + min(TIMESTAMP_MARGIN_MS, self.before_max_ms // 2)
        if self.after_max_ms is not None:
            high = now_ms + self.after_max_ms - min(TIMESTAMP_MARGIN_MS, self.after_max_ms // 2)
        return low, high


def record_size(key: bytes | None, value: bytes | None, headers: Headers = ()) -> int:
    """Upper bound of the bytes one record takes in a batch of its own: aiokafka's own estimate.

    It is what aiokafka compares with ``max_request_size`` and bounds the batch the
    broker compares with ``max.message.bytes`` (batch header and record overhead included).
    """
    return DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers))


@dataclass(frozen=True)
class RecordLimits:
    """The producer's ``max_request_size``, and each topic's ``max.message.bytes`` and timestamp window.

    A topic not read at start (a changelog Faust has not created yet) has the
    broker's values, which is what it will be created with.
    """

    producer_max_request_size: int
    broker_max_message_bytes: int = KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    topic_max_message_bytes: dict[str, int] = field(default_factory=dict)
    timestamps: dict[str, TimestampWindow] = field(default_factory=dict)
    broker_timestamps: TimestampWindow = TimestampWindow()

    def window(self, topic: str) -> TimestampWindow:
        return self.timestamps.get(topic, self.broker_timestamps)

    def timestamp_bounds(self, topic: str, now_ms: int | None = None) -> tuple[float, float]:
        """(lowest, highest) record timestamp ``topic`` takes now; unbounded when unknown."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return self.window(topic).bounds(now)

    def bad_timestamp(self, topic: str, timestamp_ms: int, now_ms: int | None = None,
                      field: str = "timestamp") -> str | None:
        """None when ``topic`` takes a record stamped ``timestamp_ms`` now; otherwise the reason, which names
        ``field``, where the timestamp came from (a ``TIMESTAMP`` column, or the input record's timestamp)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        low, high = self.timestamp_bounds(topic, now)
        if low <= timestamp_ms <= high:
            return None
        window = self.window(topic)
        if timestamp_ms > high:
            return (f"field {field!r} is {timestamp_ms} ({_iso(timestamp_ms)}), {_ago(timestamp_ms - now)} ahead of now: "
                    f"{topic} takes record timestamps up to {_ago(window.after_max_ms or 0)} ahead "
                    f"({TIMESTAMP_AFTER_MAX_MS})")
        return (f"field {field!r} is {timestamp_ms} ({_iso(timestamp_ms)}), {_ago(now - timestamp_ms)} ago: "
                f"{topic} takes record timestamps up to {_ago(window.before_max_ms or 0)} old "
                f"({TIMESTAMP_BEFORE_MAX_MS})")

    def limit(self, topic: str) -> tuple[int, str]:
        """The largest record ``topic`` takes from this worker, and the setting that says so."""
        topic_limit = self.topic_max_message_bytes.get(topic)
        broker_says = (topic_limit, f"max.message.bytes of topic {topic}") if topic_limit is not None else (
            self.broker_max_message_bytes, "the broker's message.max.bytes")
        producer_says = (self.producer_max_request_size, "the producer's max_request_size")
        return min(producer_says, broker_says, key=lambda pair: pair[0])

    def too_large(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = (),
                  what: str = "record") -> str | None:
        """None when the record fits ``topic``; otherwise the reason, naming sizes and the limit."""
        limit, source = self.limit(topic)
        size = record_size(key, value, headers)
        if size <= limit:
            return None
        return f"the {what} for {topic} would be {size:,} bytes, above the limit of {limit:,} ({source})"

    def summary(self) -> str:
        """One log line: what the worker will check its records against."""
        topics = ", ".join(f"{name} {size:,}" for name, size in sorted(self.topic_max_message_bytes.items()))
        windows = sorted({(w.before_max_ms, w.after_max_ms)
                          for w in (self.broker_timestamps, *self.timestamps.values())}, key=str)
        stamps = "; ".join(f"{_ago(after) if after is not None else 'any time'} ahead, "
                           f"{_ago(before) if before is not None else 'any time'} back" for before, after in windows)
        return (f"Record limits: producer max_request_size {self.producer_max_request_size:,} bytes; "
                f"broker message.max.bytes {self.broker_max_message_bytes:,}; "
                f"max.message.bytes by topic: {topics or 'none read'}; "
                f"record timestamps accepted: {stamps}")


def _iso(timestamp_ms: int) -> str:
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "beyond the calendar"


def _ago(ms: int) -> str:
    """A duration for people: ``1 h``, ``7 d``, ``90 s``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0 or ms >= 10 * size:
            return f"{ms // size:,} {unit}"
    return f"{ms:,} ms"


def read_limits(bootstrap: str, topics: Iterable[str], producer_max_request_size: int,
                timeout: float = ADMIN_TIMEOUT) -> RecordLimits:
    """Ask the cluster (DescribeConfigs) for the brokers' and the topics' limits.

    A topic that does not exist yet (Faust creates its changelogs itself) gets the
    brokers' value, which is what it will be created with; if the cluster will not
    describe its brokers, Kafka's default is assumed and said in the log.
    """
    admin = admin_client(bootstrap)
    broker_limit = KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    broker_window = TimestampWindow()
    try:
        brokers = sorted(admin.list_topics(timeout=timeout).brokers)
        described = _describe(admin, [ConfigResource(ResourceType.BROKER, str(b)) for b in brokers], timeout)
        values = [int(c["message.max.bytes"]) for c in described.values() if c.get("message.max.bytes", "").isdigit()]
        if values:
            broker_limit = min(values)
        if described:
            broker_window = _window(next(iter(described.values())), prefix="log.")
    except KafkaException as exc:
        logger.warning("Could not read the brokers' message.max.bytes (%s); assuming Kafka's default %d",
                       exc.args[0].str() if exc.args else exc, KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
    configs = _describe(admin, [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))], timeout)
    sizes = {topic: int(config[MAX_MESSAGE_BYTES]) for topic, config in configs.items()
             if config.get(MAX_MESSAGE_BYTES, "").isdigit()}
    return RecordLimits(producer_max_request_size, broker_limit, sizes,
                        {topic: _window(config) for topic, config in configs.items()}, broker_window)


def _window(config: dict[str, str], prefix: str = "") -> TimestampWindow:
    """A topic's window from its configs (``prefix="log."`` for the broker's defaults)."""
    if config.get(prefix + TIMESTAMP_TYPE, "CreateTime") == "LogAppendTime":
        return TimestampWindow()  # the broker stamps the record itself

    def bound(name: str) -> int | None:
        raw = config.get(prefix + name, "")
        return int(raw) if raw.isdigit() and int(raw) < 2**63 - 1 else None

    return TimestampWindow(bound(TIMESTAMP_BEFORE_MAX_MS), bound(TIMESTAMP_AFTER_MAX_MS))


def _describe(admin: object, resources: list[ConfigResource], timeout: float) -> dict[str, dict[str, str]]:
    """Every config value of each resource that could be described (a missing topic is left out)."""
    if not resources:
        return {}
    found: dict[str, dict[str, str]] = {}
    futures = admin.describe_configs(resources, request_timeout=timeout)  # type: ignore[attr-defined]
    for resource, future in futures.items():
        try:
            entries = future.result(timeout)
        except KafkaException:
            continue
        found[resource.name] = {name: entry.value for name, entry in entries.items() if entry.value is not None}
    return found
