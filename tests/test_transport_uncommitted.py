"""A partition without a committed offset is read from its start after each seek to the committed offsets.

Against the session's broker, as tests/test_transport_seeks.py: a real app's consumer whose aiokafka consumer
thread is started in the app's group, real records, an offset committed on the broker.  A fetch begun before a
rebalance (the long poll of a worker with nothing to read) can return the new partitions' records while the flow is
stopped: they are dropped, and the seek that follows is to put them back.  aiokafka's ``seek_to_committed`` leaves a
partition without a commit where it is, past them, and nothing read them again: a worker that took over partitions
a killed worker never committed read none of them (test_survivor_takes_over_at_volume, idle for 15 minutes after
its takeover).  The rebalance's revoke is the flow stopped (Faust's ``stop_flow``, as its revoke does) once the real
fetch has its records and before the consumer takes them (the fetch wrapped, not replaced).
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from faust.types import TP

from streamapp.settings import Settings
from streamapp.worker.transport import Handler
from test_transport_seeks import Handled, positions, read_until
from workerkit import commit_group, consumer_on_broker, fetch_once, group_committed, write_records


def test_a_fetch_a_rebalance_overtook_is_read_again_from_the_start_of_a_partition_without_a_commit(
        broker_settings: Settings, new_topic: Callable[..., str]) -> None:
    """users[0]: 0-8 committed at 7; users[1]: 0-2, nothing committed."""
    users = new_topic("users", partitions=2)
    u0, u1 = TP(users, 0), TP(users, 1)
    write_records(broker_settings.bootstrap_servers, users, 0, 9)
    write_records(broker_settings.bootstrap_servers, users, 1, 3)
    commit_group(broker_settings, {u0: 7})
    handled = Handled()

    async def scenario() -> dict[str, Any]:
        async with consumer_on_broker(broker_settings, [u0, u1], {users: Handler(handled, table=True)}) as consumer:
            faust_getmany = consumer._getmany
            fetched: list[dict[TP, list[int]]] = []

            async def getmany(active_partitions: set[TP], timeout: float) -> Any:
                records = await faust_getmany(active_partitions=active_partitions, timeout=timeout)
                fetched.append({tp: [r.offset for r in rs] for tp, rs in records.items()})
                consumer.stop_flow()  # a rebalance's revoke while the fetch was under way
                return records

            consumer._getmany = getmany  # type: ignore[method-assign]
            await fetch_once(consumer)  # overtaken by the rebalance: dropped unhandled
            consumer._getmany = faust_getmany  # type: ignore[method-assign]
            consumer.resume_flow()
            await consumer.perform_seek()  # the rebalance's recovery
            seen = {"fetched": fetched, "handled": list(handled.calls),
                    "positions": await positions(consumer, (u0, u1)), "read": consumer._read_offset[u1]}
            await read_until(consumer, handled, {u0: [7, 8], u1: [0, 1, 2]})
            return seen

    seen = asyncio.run(scenario())
    assert seen["fetched"] == [{u0: [7, 8], u1: [0, 1, 2]}]
    assert seen["handled"] == []
    assert seen["positions"] == {u0: 7, u1: 0}  # where each ends: users[1] at its start, not past the records dropped
    assert seen["read"] is None
    assert group_committed(broker_settings, [u0, u1]) == {u0: 7, u1: None}
    assert handled.offsets() == {u0: [7, 8], u1: [0, 1, 2]}  # read again, each once
