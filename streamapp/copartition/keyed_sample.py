"""Read a sample of keyed records with their partitions, spread over the partitions of a topic.

Fingerprinting needs keys from every partition, not the first thousand of
partition 0, and must stop at each partition's end (the one topic reader,
:class:`~streamapp.kafka.reader.TopicReader`).  A partition that reaches its
share is paused, so a sample of a large topic does not read the whole topic.
"""
from __future__ import annotations

import math
from typing import Sequence

from ..errors import StreamappError
from ..kafka.reader import READ_TIMEOUT, TopicReader

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
    with TopicReader(bootstrap, topic, error=SampleError) as reader:
        count = len(reader.partitions)
        keys, nulls = _read(reader, count, limit, timeout)
    shares = fair_shares([len(k) for k in keys], limit)
    samples: list[Sample] = [(key, part) for part, share in enumerate(shares) for key in keys[part][:share]]
    return samples + nulls[:limit], count


def _read(reader: TopicReader, count: int, limit: int, timeout: float) -> tuple[list[list[bytes]], list[Sample]]:
    """Keys per partition, each partition paused at its share; shares grow while the sample is short."""
    keys: list[list[bytes]] = [[] for _ in range(count)]
    nulls: list[Sample] = []
    cap = [math.ceil(limit / count)] * count
    while True:
        for batch in reader.batches(timeout=timeout):
            for record in batch:
                if record.key is not None:
                    keys[record.partition].append(record.key)
                elif len(nulls) < limit:
                    nulls.append((None, record.partition))
            reader.pause(p for p in range(count) if len(keys[p]) >= cap[p])
        short = limit - sum(len(k) for k in keys)
        paused = sorted(p for p in range(count) if len(keys[p]) >= cap[p])
        if short <= 0 or not paused:
            return keys, nulls
        extra = math.ceil(short / len(paused))  # the others reached their end: the paused ones take their share
        for part in paused:
            cap[part] = len(keys[part]) + extra
        reader.resume(paused)
