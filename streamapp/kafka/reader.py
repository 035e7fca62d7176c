"""Read a whole topic up to its end, for reports that must see every record.

The end is where each partition's Fetch reports end-of-partition (the high
watermark in the Fetch response).  That needs no ListOffsets round trip and
needs no care for a log whose last offsets are transaction markers, which a
consumer never receives, so a reader waiting for offset ``end - 1`` would hang.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from ..errors import StreamappError
from . import CLIENT_LOGGER

READ_TIMEOUT = 30.0


class TopicReadError(StreamappError):
    """A topic is missing, or could not be read to its end in time."""


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def read_topic(bootstrap: str, topic: str, timeout: float = READ_TIMEOUT) -> list[Record]:
    """Every record of ``topic``, from the beginning to each partition's end.

    Fails (naming the topic) when it does not exist rather than let the client
    auto-create it with the broker's default count.
    """
    return read_partitions(bootstrap, topic, range(partition_count(bootstrap, topic, TopicReadError)), timeout)


def partition_count(bootstrap: str, topic: str, error: type[StreamappError], timeout: float = 15.0) -> int:
    """The topic's partition count from the brokers' metadata; ``error`` naming the topic when it does not exist."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamapp-metadata", "logger": CLIENT_LOGGER})
    try:
        metadata = consumer.list_topics(timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        raise error(f"cannot reach the Kafka brokers at {bootstrap}: {exc.args[0].str()}") from None
    finally:
        consumer.close()
    if metadata is None or metadata.error is not None:
        raise error(f"topic {topic} does not exist on {bootstrap}")
    return len(metadata.partitions)


def read_partitions(bootstrap: str, topic: str, partitions: Iterable[int], timeout: float = READ_TIMEOUT) -> list[Record]:
    pending = set(partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"streamapp-reader-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TopicReadError(
                    f"topic {topic}: partitions {sorted(pending)} did not reach their end within {timeout:.0f}s"
                )
            for msg in consumer.consume(num_messages=10_000, timeout=0.2):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise TopicReadError(f"topic {topic}: {error.str()}")
                records.append(
                    Record(topic, msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1])
                )
    finally:
        consumer.close()
    return records


def key_partitions(records: Iterable[Record]) -> dict[str, int]:
    """UTF-8 key -> partition of its latest record (what a table sees); NULL keys left out."""
    result: dict[str, int] = {}
    for record in sorted(records, key=lambda r: (r.timestamp, r.offset)):
        if record.key is not None:
            result[record.key.decode("utf-8", "replace")] = record.partition
    return result
