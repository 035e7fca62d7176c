"""A fetch handled call by call keeps aiokafka's poll interval from running out while every call progresses.

aiokafka leaves the group once no fetch has ended for ``max.poll.interval`` (Faust's
``broker_max_poll_interval``), and Faust then never fetches again to rejoin
(faust-streaming/faust#138): a 1 MiB-a-partition fetch handled under load outlasted
it (benchmarks/README.md, "Windowed join").  Against the session's broker: a real app's
consumer whose aiokafka consumer thread is started with a real partition assigned
(:func:`workerkit.consumer_on_broker`), a real fetch of real records; what the test reads
is aiokafka's own state: the subscription's ``_last_fetch_ended`` (set by the fetch's
``fetch_context`` as it ends, and by the worker after each handler call) and its
``fetcher_idle_time``, which the group coordinator's heartbeat routine compares with
the poll interval.  No time is faked and none is bounded: only the order of the marks.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Mapping, Sequence

from faust.types import TP

from streamapp.settings import Settings
from streamapp.worker.transport import Handler
from workerkit import consumer_on_broker, fetch_once, write_records


def test_each_handler_call_of_a_fetch_counts_as_a_poll_for_aiokafka(broker_settings: Settings,
                                                                    new_topic: Callable[..., str]) -> None:
    """The idle time aiokafka's heartbeat routine leaves the group on starts again after each call of a fetch's
    records, so it does not run out while calls progress; it counts from the end of the call, so one call longer
    than the interval still does (the time is marked after a call, not before).  users[0]: 0-5, in calls of 2."""
    users = new_topic("users", partitions=1)
    u0 = TP(users, 0)
    write_records(broker_settings.bootstrap_servers, users, 0, 6)
    calls: list[dict[str, Any]] = []

    async def scenario() -> dict[str, Any]:
        subscription: Any = None
        consumer: Any = None

        async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
            call: dict[str, Any] = {"start": time.monotonic(), "mark": subscription._last_fetch_ended,
                                    "fetching": subscription._fetch_count,
                                    "offsets": [r.offset for records in batches.values() for r in records]}
            await consumer.position(u0)  # the call's work: a round trip to the consumer thread
            call["before idle"] = time.monotonic()
            call["idle"] = subscription.fetcher_idle_time  # the call's own time so far
            call["end"] = time.monotonic()
            calls.append(call)

        async with consumer_on_broker(broker_settings, [u0], {users: Handler(handle, table=True, call_size=2)}
                                      ) as consumer:
            aiokafka = consumer._thread._consumer
            subscription = aiokafka._subscription
            before_fetch = time.monotonic()
            await fetch_once(consumer)
            return {"before fetch": before_fetch, "after": subscription._last_fetch_ended,
                    "interval": aiokafka._coordinator._max_poll_interval,
                    "setting": consumer.app.conf.broker_max_poll_interval}

    seen = asyncio.run(scenario())
    assert [call["offsets"] for call in calls] == [[0, 1], [2, 3], [4, 5]]
    assert seen["interval"] == seen["setting"]  # what the heartbeat routine compares the idle time with
    assert all(call["fetching"] == 0 for call in calls)  # no fetch under way: the idle time counts
    # the first call: nothing polled since the real fetch ended (aiokafka's mark as its fetch_context closed)
    assert seen["before fetch"] <= calls[0]["mark"] <= calls[0]["start"]
    for previous, call in zip(calls, calls[1:]):  # each later call: the idle time counts from the call before's end
        assert previous["end"] <= call["mark"] <= call["start"]
    for call in calls:  # not marked as a call begins: its own time is idle time
        assert call["idle"] >= call["before idle"] - call["start"]
    assert seen["after"] >= calls[-1]["end"]  # the last call counted too
