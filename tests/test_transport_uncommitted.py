"""A partition without a committed offset is read from its start after each seek to the committed offsets.

Deterministic, no broker: the recorder consumer thread of tests/test_transport_seeks.py.
A fetch begun before a rebalance (the long poll of a worker with nothing to read) can
return the new partitions' records while the flow is stopped: they are dropped, and the
seek that follows is to put them back.  aiokafka's ``seek_to_committed`` leaves a
partition without a commit where it is, past them, and nothing read them again: a worker
that took over partitions a killed worker never committed read none of them
(test_survivor_takes_over_at_volume, idle for 15 minutes after its takeover).
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Mapping, Sequence

from faust.types import TP

from test_transport_seeks import U0, U1, USERS, ConsumerThread, consumer_for, fetch_once
from workerkit import fetched


def test_a_fetch_a_rebalance_overtook_is_read_again_from_the_start_of_a_partition_without_a_commit(
        tmp_path: Path) -> None:
    thread = ConsumerThread({U0: 7, U1: None}, {U0, U1})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        consumer.stop_flow()  # a rebalance's revoke while the fetch is under way
        return {U0: fetched(USERS, 0, 7, 8), U1: fetched(USERS, 1, 0, 1, 2)}

    async def scenario() -> None:
        await fetch_once(consumer)  # overtaken by the rebalance: dropped unhandled
        consumer.resume_flow()
        await consumer.perform_seek()  # the rebalance's recovery

    consumer._getmany = fetch
    asyncio.run(scenario())
    assert handled == []
    assert dict(thread.positions) == {U0: 7, U1: 0}  # where each ends: U1 at its start, not past the records dropped
    assert consumer._read_offset[U1] is None
