"""End offsets as a Fetch reports them, for brokers whose ListOffsets(latest) is wrong.

The embedded broker answers ListOffsets(latest) with the last stored batch's base
offset + 1: too low whenever that batch held more than one record.  Faust builds
its changelog recovery on those end offsets, so on that broker it would stop a
restore one batch short, or refuse to start (``ConsistencyError``: persisted
offset higher than the highwater).  The high watermark in a Fetch response is
right, so :func:`fetched_highwaters` fetches at the listed end and keeps what the
response says.
"""
from __future__ import annotations

import asyncio
import time
from typing import Mapping

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from .errors import StreamappError

FETCH_TIMEOUT = 30.0


class HighwaterError(StreamappError):
    """A partition's high watermark could not be read from a Fetch in time."""


async def fetched_highwaters(
    bootstrap_servers: str, listed: Mapping[TopicPartition, int], timeout: float = FETCH_TIMEOUT
) -> dict[TopicPartition, int]:
    """The true end offset of every partition in ``listed`` (its ListOffsets(latest) answer).

    An empty partition (listed end 0) is taken as it is: a Fetch could only confirm it.
    """
    ends = {tp: end for tp, end in listed.items() if not end}
    probe = {tp: end for tp, end in listed.items() if end}
    if not probe:
        return ends
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False,
        fetch_max_wait_ms=50, max_partition_fetch_bytes=1024,
    )
    await consumer.start()
    try:
        consumer.assign(list(probe))
        for tp, end in probe.items():
            consumer.seek(tp, end - 1)
        deadline = time.monotonic() + timeout
        while True:
            pending = [tp for tp in probe if consumer.highwater(tp) is None]
            if not pending:
                break
            if time.monotonic() > deadline:
                names = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in pending)
                raise HighwaterError(f"no Fetch answer within {timeout:.0f}s for {names}")
            await consumer.getmany(*pending, timeout_ms=100)
        ends.update({tp: max(consumer.highwater(tp), end) for tp, end in probe.items()})
        return ends
    finally:
        await asyncio.shield(consumer.stop())
