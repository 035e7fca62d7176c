"""Read a sample of keyed records with their partitions, spread over the partitions of a topic.

Fingerprinting needs keys from every partition, not the first thousand of
partition 0, and must stop at each partition's end: the end is where the
Fetch response's high watermark says (partition EOF), as in
:mod:`streamapp.topic_reader`.  A partition that reaches its share is paused,
so a sample of a large topic does not read the whole topic.
"""
from __future__ import annotations

import math
import time
import uuid
from typing import Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from ..errors import StreamappError
from ..kafka.admin import describe

READ_TIMEOUT = 30.0

Sample = tuple[bytes | None, int]


class SampleError(StreamappError):
    """The topic is missing or could not be sampled; the message names it."""


def fair_shares(available: Sequence[int], limit: int) -> list[int]:
    """How many records to take from each partition: equal shares, a short partition's rest going to the others."""
    shares = [0] * len(available)
    remaining = limit
    open_parts = [i for i, count in enumerate(available) if count > 0]
    while remaining > 0 and open_parts:
        step = max(1, remaining // len(open_parts))
        for i in list(open_parts):
            take = min(step, available[i] - shares[i], remaining)
            shares[i] += take
            remaining -= take
            if shares[i] == available[i]:
                open_parts.remove(i)
            if remaining == 0:
                break
    return shares


def read_keyed_sample(
    bootstrap: str, topic: str, limit: int, timeout: float = READ_TIMEOUT
) -> tuple[list[Sample], int]:
    """Up to ``limit`` (key, partition) pairs of records with a non-NULL key, and the partition count.

    NULL-keyed records met on the way are passed on too, as ``(None, partition)`` (at most
    ``limit`` of them), so a topic of NULL keys is reported as such rather than as empty.

    Fails naming the topic when it does not exist, instead of letting a client
    auto-create it with the broker's default count.
    """
    if limit < 1:
        raise SampleError(f"sample={limit}: must be at least 1")
    info = describe(bootstrap, [topic])
    if topic not in info:
        raise SampleError(f"topic {topic!r} does not exist on {bootstrap} (it was not created)")
    count = info[topic].partitions
    keys, nulls = _read(bootstrap, topic, count, limit, timeout)
    shares = fair_shares([len(k) for k in keys], limit)
    samples: list[Sample] = [(key, part) for part, share in enumerate(shares) for key in keys[part][:share]]
    return samples + nulls[:limit], count


def _read(bootstrap: str, topic: str, count: int, limit: int, timeout: float) -> tuple[list[list[bytes]], list[Sample]]:
    keys: list[list[bytes]] = [[] for _ in range(count)]
    nulls: list[Sample] = []
    cap = [math.ceil(limit / count)] * count
    at_end: set[int] = set()
    paused: set[int] = set()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"streamapp-fingerprint-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "allow.auto.create.topics": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])
        deadline = time.monotonic() + timeout
        while len(at_end | paused) < count or _grow(cap, keys, at_end, paused, limit, consumer, topic):
            if time.monotonic() > deadline:
                waiting = sorted(set(range(count)) - at_end - paused)
                raise SampleError(f"topic {topic!r}: partitions {waiting} did not reach their end within {timeout:.0f}s")
            for msg in consumer.consume(num_messages=5_000, timeout=0.2):
                part = msg.partition()
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise SampleError(f"topic {topic!r}: {error.str()}")
                    at_end.add(part)
                    continue
                if msg.key() is not None:
                    keys[part].append(msg.key())
                elif len(nulls) < limit:
                    nulls.append((None, part))
                if len(keys[part]) >= cap[part] and part not in paused and part not in at_end:
                    consumer.pause([TopicPartition(topic, part)])
                    paused.add(part)
    finally:
        consumer.close()
    return keys, nulls


def _grow(
    cap: list[int], keys: list[list[bytes]], at_end: set[int], paused: set[int], limit: int,
    consumer: Consumer, topic: str,
) -> bool:
    """Every partition is at its end or share: resume the paused ones with bigger shares if still short."""
    short = limit - sum(len(k) for k in keys)
    waiting = sorted(paused - at_end)
    if short <= 0 or not waiting:
        return False
    extra = math.ceil(short / len(waiting))
    for part in waiting:
        cap[part] = len(keys[part]) + extra
    paused.clear()
    consumer.resume([TopicPartition(topic, part) for part in waiting])
    return True
