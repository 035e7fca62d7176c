"""A fetch handled call by call keeps aiokafka's poll interval from running out while every call progresses.

aiokafka leaves the group once no fetch has ended for ``max.poll.interval`` (Faust's
``broker_max_poll_interval``), and Faust then never fetches again to rejoin
(faust-streaming/faust#138): a 1 MiB-a-partition fetch handled under load outlasted
it (benchmarks/README.md, "Windowed join").  No broker: a real app's consumer whose
consumer thread is a recorder holding a real aiokafka consumer, not started.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from aiokafka import AIOKafkaConsumer
from faust.types import TP

from streamapp.worker.transport import Handler
from test_transport_seeks import U0, USERS, ConsumerThread, consumer_for, fetch_once
from workerkit import fetched


def test_each_handler_call_of_a_fetch_counts_as_a_poll_for_aiokafka(tmp_path: Path) -> None:
    """The fetch ended longer ago than the poll interval (its earlier calls took that long): after each call
    aiokafka's own idle time starts again, so its heartbeat routine does not leave the group while calls progress;
    one call longer than the interval still does (the time is marked after a call, not before)."""
    thread = ConsumerThread({U0: None}, {U0})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)
    interval = consumer.app.conf.broker_max_poll_interval
    idle_at_call: list[float] = []

    async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
        idle_at_call.append(subscription.fetcher_idle_time)
        subscription._last_fetch_ended = time.monotonic() - 2 * interval  # this call took twice the interval

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        subscription._last_fetch_ended = time.monotonic() - 2 * interval
        return {U0: fetched(USERS, 0, *range(6))}

    async def scenario() -> None:
        thread._consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")  # built on a loop, as aiokafka asks

    asyncio.run(scenario())
    subscription = thread._consumer._subscription
    consumer.app.batch_handlers = {USERS: Handler(handle, table=True, call_size=2)}
    consumer._getmany = fetch

    asyncio.run(fetch_once(consumer))
    assert len(idle_at_call) == 3
    assert idle_at_call[0] >= 2 * interval  # the fetch's first call: nothing polled since the fetch ended
    assert all(idle < interval for idle in idle_at_call[1:]), idle_at_call  # the calls before it counted
    assert subscription.fetcher_idle_time < interval
