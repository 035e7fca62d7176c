"""The batch path and Faust's seek to the committed offsets: a batch a seek overtakes goes back where the seek put it.

Against the session's broker: a real app's consumer whose aiokafka consumer thread is started in the app's group
with the test's partitions assigned (:func:`workerkit.consumer_on_broker`), over real topics holding real records,
with offsets committed on the broker.  Its seeks ask the broker for the committed offsets, its fetches bring the
records, and what the tests read back (positions, committed offsets) is aiokafka's and the broker's.  The
interleavings are the ones a rebalance's recovery makes with the fetch loop (its ``perform_seek`` runs beside it and
ends whenever the consumer thread answers); each is made by wrapping the real methods, never replacing them: the
consumer thread's ``seek_to_committed`` answers once a gate opens (or never, for a seek cancelled first), and the
fetch, a gap's bookkeeping or the seek again after a fetch start or end the seek at the point the test names.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

import pytest
from faust.types import TP

from streamapp.settings import Settings
from streamapp.worker.transport import Consumer, Handler
from workerkit import (RECORD_TS, commit_group, consumer_on_broker, fetch_once, group_committed, write_records,
                       write_transactions)

#: The most fetches :func:`read_until` makes, and how long each waits for records (it returns once some come): a
#: patience for a busy machine, never a bound on the time the reads take.
READS, READ_WAIT_S = 20, 1.0


class Handled:
    """A batch handler recording what it is handed: each call's (partition, offsets) in the order handed."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[TP, list[int]]]] = []

    async def __call__(self, batches: Mapping[TP, Sequence[Any]]) -> None:
        self.calls.append([(tp, [record.offset for record in records]) for tp, records in batches.items()])

    def offsets(self, since: int = 0) -> dict[TP, list[int]]:
        """Each partition's offsets handed in the calls from the ``since``-th on, in the order handed."""
        by_partition: dict[TP, list[int]] = {}
        for call in self.calls[since:]:
            for tp, offsets in call:
                by_partition.setdefault(tp, []).extend(offsets)
        return by_partition


async def read_until(consumer: Consumer, handled: Handled, wanted: Mapping[TP, Iterable[int]]) -> None:
    """Fetch until the handlers were handed every offset of ``wanted`` (real fetches: a partition sought again may
    come back a fetch later than another)."""
    for _ in range(READS):
        got = handled.offsets()
        if all(set(offsets) <= set(got.get(tp, ())) for tp, offsets in wanted.items()):
            return
        await fetch_once(consumer, READ_WAIT_S)
    raise AssertionError(f"after {READS} fetches the handlers have {handled.offsets()}, not all of {wanted}")


def recorded_seeks(consumer: Consumer) -> list[tuple[TP, int]]:
    """Each seek the consumer gives its thread from now on, recorded on its way to aiokafka (Faust's
    ``AIOKafkaConsumerThread.seek`` wrapped): the streamapp consumer's own seeks, not aiokafka's inside
    ``seek_to_committed``, whose result the test reads as positions."""
    thread = consumer._thread
    faust_seek = thread.seek
    sought: list[tuple[TP, int]] = []

    def seek(tp: TP, offset: int) -> None:
        sought.append((tp, offset))
        faust_seek(tp, offset)

    thread.seek = seek  # type: ignore[method-assign]
    return sought


class GatedSeek:
    """The consumer thread's ``seek_to_committed`` (Faust's, asking aiokafka, which asks the broker) answered only
    once :attr:`answer` is set: :attr:`asked` is set when a seek has begun and waits for it.  ``before_answer`` runs
    first (a change of the consumer thread's state while the seek waited)."""

    def __init__(self, consumer: Consumer, before_answer: Callable[[], Awaitable[None]] | None = None) -> None:
        thread = consumer._thread
        faust_seek_to_committed = thread.seek_to_committed
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

        async def seek_to_committed() -> Mapping[TP, int]:
            self.asked.set()
            await self.answer.wait()
            if before_answer is not None:
                await before_answer()
            return await faust_seek_to_committed()

        thread.seek_to_committed = seek_to_committed  # type: ignore[method-assign]


async def positions(consumer: Consumer, tps: Iterable[TP]) -> dict[TP, int]:
    """Each partition's position in the aiokafka consumer (the next offset it fetches), asked in its thread."""
    return {tp: await consumer.position(tp) for tp in tps}


def read_offsets(consumer: Consumer, tps: Iterable[TP]) -> dict[TP, int | None]:
    return {tp: consumer._read_offset[tp] for tp in tps}


def users_topic(new_topic: Callable[..., str], partitions: int) -> tuple[str, list[TP]]:
    name = new_topic("users", partitions=partitions)
    return name, [TP(name, p) for p in range(partitions)]


def test_a_seek_that_ends_while_a_fetch_is_accepted_puts_its_partitions_back_where_the_seek_put_them(
        broker_settings: Settings, new_topic: Callable[..., str]) -> None:
    """Faust records each gap in a fetched partition (a transaction's markers) with an ``asyncio.sleep(0)``; a seek
    of a rebalance's recovery can end there, in the middle of a fetch being accepted. The partitions accepted after
    it end with the fetch's last offset as their read offset, yet the seek moved them back: the batch is dropped
    and sought again, and must go where the seek put it (the committed offset; the start when nothing was
    committed), not where the fetch ended, or the records in between are never handled.

    users[0]: three transactions, of 0 (its commit marker 1: a fetch ends before a partition's first marker), 2-10
    (marker 11) and 12-13 (marker 14), committed at 10; users[1]: 0-4, nothing committed."""
    users, (u0, u1) = users_topic(new_topic, 2)
    bootstrap = broker_settings.bootstrap_servers
    write_transactions(bootstrap, users, 0, [1, 9, 2])
    write_records(bootstrap, users, 1, 5)
    commit_group(broker_settings, {u0: 10})
    handled = Handled()

    async def scenario() -> dict[str, Any]:
        async with consumer_on_broker(broker_settings, [u0, u1], {users: Handler(handled, table=True)}) as consumer:
            before = read_offsets(consumer, (u0, u1))  # where the recovery's seek put them
            sought = recorded_seeks(consumer)
            faust_add_gap = consumer._add_gap
            gaps: list[tuple[TP, int, int]] = []
            seeks: list[asyncio.Task[None]] = []

            async def add_gap(tp: TP, start: int, end: int) -> None:
                await faust_add_gap(tp, start, end)
                gaps.append((tp, start, end))
                if not seeks:  # the recovery's seek ends during this gap's sleep(0)
                    seeks.append(asyncio.ensure_future(consumer.perform_seek()))
                    await asyncio.wait(seeks)

            consumer._add_gap = add_gap  # type: ignore[method-assign]
            await fetch_once(consumer)
            seen = {"before": before, "gaps": list(gaps), "seek": seeks[0].done() and seeks[0].exception() is None,
                    "handled": list(handled.calls), "sought": list(sought), "answered": dict(consumer._sought),
                    "positions": await positions(consumer, (u0, u1)), "read": read_offsets(consumer, (u0, u1))}
            await read_until(consumer, handled, {u0: [10, 12, 13], u1: range(5)})
            return seen

    seen = asyncio.run(scenario())
    assert seen["before"] == {u0: 10, u1: None}
    assert seen["gaps"] == [(u0, 11, 12)]  # the second transaction's commit marker
    assert seen["seek"]
    assert seen["handled"] == []  # overtaken: dropped, to be fetched again
    assert seen["answered"] == {u0: 10, u1: None}  # the broker's committed offsets, as the seek took them
    # the seek's own (users[1] to its start: nothing committed, aiokafka left it past the fetch), then the batch's again
    assert seen["sought"] == [(u1, 0), (u0, 10), (u1, 0)]
    assert seen["positions"] == {u0: 10, u1: 0}
    assert seen["read"] == {u0: 10, u1: None}  # not 13 and 4, where the fetch ended
    assert handled.offsets() == {u0: [10, 12, 13], u1: [0, 1, 2, 3, 4]}  # read again, each once


def test_a_seek_under_way_when_the_fetch_returns_sends_only_assigned_partitions_back_once_it_ends(
        broker_settings: Settings, new_topic: Callable[..., str]) -> None:
    """A fetch that returns while a seek is under way is not handled: once the seek ends, each of its partitions
    still assigned is sought where the seek put it (the start without a commit); one no longer assigned is left
    alone, and its read offset untouched.

    users[0]: 0-1519 committed at 1518; users[1]: 0, nothing committed; users[2]: 0-41 committed at 40, taken out of
    the consumer thread's assignment while the seek waits for it."""
    users, (u0, u1, u2) = users_topic(new_topic, 3)
    bootstrap = broker_settings.bootstrap_servers
    write_records(bootstrap, users, 0, 1520)
    write_records(bootstrap, users, 1, 1)
    write_records(bootstrap, users, 2, 42)
    commit_group(broker_settings, {u0: 1518, u2: 40})
    handled = Handled()

    async def scenario() -> dict[str, Any]:
        async with consumer_on_broker(broker_settings, [u0, u1, u2], {users: Handler(handled, table=True)}) as consumer:
            from aiokafka import TopicPartition as AioTopicPartition

            thread = consumer._thread
            before = read_offsets(consumer, (u0, u1, u2))
            sought = recorded_seeks(consumer)

            async def unassign_u2() -> None:
                async def assign() -> None:
                    thread._consumer.assign([AioTopicPartition(users, 0), AioTopicPartition(users, 1)])
                await thread.call_thread(assign)

            gate = GatedSeek(consumer, before_answer=unassign_u2)
            seeks: list[asyncio.Task[None]] = []
            fetched: list[dict[TP, list[int]]] = []
            seeking_when_back: list[int] = []
            faust_getmany, faust_seek_again = consumer._getmany, consumer._seek_again

            async def getmany(active_partitions: set[TP], timeout: float) -> Any:
                seeks.append(asyncio.ensure_future(consumer.perform_seek()))
                await gate.asked.wait()  # the seek has begun: it waits for the consumer thread
                records = await faust_getmany(active_partitions=active_partitions, timeout=timeout)
                fetched.append({tp: [r.offset for r in rs] for tp, rs in records.items()})
                return records

            async def seek_again(generation: int | None) -> None:
                seeking_when_back.append(consumer._seeking)
                gate.answer.set()  # the consumer thread answers once the fetch is back
                await faust_seek_again(generation)

            consumer._getmany = getmany  # type: ignore[method-assign]
            consumer._seek_again = seek_again  # type: ignore[method-assign]
            await fetch_once(consumer)
            consumer._getmany = faust_getmany  # type: ignore[method-assign]
            seen = {"before": before, "fetched": list(fetched), "seeking": list(seeking_when_back),
                    "seek": seeks[0].done() and seeks[0].exception() is None, "handled": list(handled.calls),
                    "sought": list(sought), "assigned": consumer.assignment(),
                    "positions": await positions(consumer, (u0, u1)), "read": read_offsets(consumer, (u0, u1, u2))}
            await read_until(consumer, handled, {u0: [1518, 1519], u1: [0]})
            return seen

    seen = asyncio.run(scenario())
    assert seen["before"] == {u0: 1518, u1: None, u2: 40}
    assert seen["fetched"] == [{u0: [1518, 1519], u1: [0], u2: [40, 41]}]
    assert seen["seeking"] == [1]  # the fetch came back while the seek was under way
    assert seen["seek"]
    assert seen["handled"] == []
    assert seen["assigned"] == {u0, u1}
    # the seek's own (users[1] to its start), then the assigned partitions again, where the seek put them
    assert seen["sought"] == [(u1, 0), (u0, 1518), (u1, 0)]
    assert seen["positions"] == {u0: 1518, u1: 0}
    assert seen["read"] == {u0: 1518, u1: None, u2: 40}
    assert handled.offsets() == {u0: [1518, 1519], u1: [0]}  # read again; users[2] no more


def test_a_seek_cancelled_before_the_consumer_thread_answered_leaves_the_batch_at_its_first_record(
        broker_settings: Settings, new_topic: Callable[..., str]) -> None:
    """A recovery's seek can time out (it is awaited with Faust's ``broker_request_timeout``) before the consumer
    thread answers: it moved nothing, so a fetch it overtook goes back to its first record.

    users[0] committed at 2: 2-5 read and handled, then 6-9 written and fetched while the seek waits; it is
    cancelled when the fetch is back.  Neither the committed offset (2) nor the position after the fetch (10)."""
    users, (u0,) = users_topic(new_topic, 1)
    bootstrap = broker_settings.bootstrap_servers
    write_records(bootstrap, users, 0, 6)
    commit_group(broker_settings, {u0: 2})
    handled = Handled()

    async def scenario() -> dict[str, Any]:
        async with consumer_on_broker(broker_settings, [u0], {users: Handler(handled, table=True)}) as consumer:
            await fetch_once(consumer)
            first = handled.offsets()
            read = consumer._read_offset[u0]
            await asyncio.to_thread(write_records, bootstrap, users, 0, 4, RECORD_TS + 6)
            sought = recorded_seeks(consumer)
            gate = GatedSeek(consumer)  # never answered
            seeks: list[asyncio.Task[None]] = []
            faust_getmany, faust_seek_again = consumer._getmany, consumer._seek_again

            async def getmany(active_partitions: set[TP], timeout: float) -> Any:
                seeks.append(asyncio.ensure_future(consumer.perform_seek()))
                await gate.asked.wait()
                return await faust_getmany(active_partitions=active_partitions, timeout=timeout)

            async def seek_again(generation: int | None) -> None:
                seeks[0].cancel()  # the recovery's timeout, while the fetch it overtook waits for it
                await faust_seek_again(generation)

            consumer._getmany = getmany  # type: ignore[method-assign]
            consumer._seek_again = seek_again  # type: ignore[method-assign]
            calls = len(handled.calls)
            await fetch_once(consumer)
            consumer._getmany = faust_getmany  # type: ignore[method-assign]
            seen = {"first": first, "read": read, "cancelled": seeks[0].cancelled(),
                    "handled": handled.calls[calls:], "sought": list(sought),
                    "position": await consumer.position(u0), "read after": consumer._read_offset[u0]}
            await read_until(consumer, handled, {u0: range(6, 10)})
            seen["again"] = handled.offsets(calls)
            return seen

    seen = asyncio.run(scenario())
    assert (seen["first"], seen["read"]) == ({u0: [2, 3, 4, 5]}, 5)
    assert seen["cancelled"]
    assert seen["handled"] == []
    assert seen["sought"] == [(u0, 6)]
    assert (seen["position"], seen["read after"]) == (6, 6)
    assert group_committed(broker_settings, [u0]) == {u0: 2}  # what an answered seek would have gone back to
    assert seen["again"] == {u0: [6, 7, 8, 9]}


def test_a_seek_cancelled_while_a_batch_is_handled_sends_its_partitions_back_to_the_batchs_first_record(
        broker_settings: Settings, new_topic: Callable[..., str]) -> None:
    """A batch handled in several calls, overtaken after the first by a seek that moved nothing: the rest is
    dropped, and the partition goes back to the batch's first record (handled again, at least once), not to its
    read offset, which accepting the batch moved past the records not yet handled.

    users[0] committed at 1: 1-4 read and handled, then 5-8 written and fetched; the seek begins during the call
    of 5-6 and is cancelled before the consumer thread answered it."""
    users, (u0,) = users_topic(new_topic, 1)
    bootstrap = broker_settings.bootstrap_servers
    write_records(bootstrap, users, 0, 5)
    commit_group(broker_settings, {u0: 1})
    handled = Handled()
    seeks: list[asyncio.Task[None]] = []
    during: list[Callable[[], Awaitable[None]]] = []

    async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
        await handled(batches)
        if during:
            await during.pop()()

    async def scenario() -> dict[str, Any]:
        async with consumer_on_broker(broker_settings, [u0], {users: Handler(handle, table=True, call_size=2)}
                                      ) as consumer:
            await fetch_once(consumer)
            first = handled.offsets()
            await asyncio.to_thread(write_records, bootstrap, users, 0, 4, RECORD_TS + 5)
            sought = recorded_seeks(consumer)
            gate = GatedSeek(consumer)  # never answered

            async def seek_cancelled() -> None:
                seeks.append(asyncio.ensure_future(consumer.perform_seek()))
                await gate.asked.wait()
                seeks[0].cancel()
                await asyncio.wait(seeks)

            during.append(seek_cancelled)
            calls = len(handled.calls)
            await fetch_once(consumer)
            seen = {"first": first, "cancelled": seeks[0].cancelled(), "handled": handled.calls[calls:],
                    "sought": list(sought), "position": await consumer.position(u0),
                    "read": consumer._read_offset[u0]}
            await read_until(consumer, handled, {u0: range(5, 9)})
            seen["again"] = handled.offsets(calls)
            return seen

    seen = asyncio.run(scenario())
    assert seen["first"] == {u0: [1, 2, 3, 4]}
    assert seen["cancelled"]
    assert seen["handled"] == [[(u0, [5, 6])]]
    assert seen["sought"] == [(u0, 5)]
    assert (seen["position"], seen["read"]) == (5, 5)  # not 9 and 8, where the fetch and its acceptance ended
    assert group_committed(broker_settings, [u0]) == {u0: 1}
    assert seen["again"] == {u0: [5, 6, 5, 6, 7, 8]}  # 5 and 6 handled again: at least once


@pytest.mark.parametrize("committed, cancelled, again", [
    (None, True, 3),  # nothing moved: where the held records begin
    (None, False, 0),  # no commit: aiokafka leaves the partition where it is; the seek's position is its start
    (2, False, 2),  # the committed offset, as the seek put it
], ids=["cancelled", "nothing-committed", "committed"])
def test_records_held_back_when_a_seek_begins_are_fetched_again_from_where_it_put_their_partition(
        broker_settings: Settings, new_topic: Callable[..., str], committed: int | None, cancelled: bool,
        again: int) -> None:
    """A windowed join's records held back for the next fetch (:class:`HeldBack`) are dropped when a seek to the
    committed offsets begins, though the partition's position and read offset are past them.  A seek that moves
    nothing (cancelled before the consumer thread answered, or of a partition without a commit, which aiokafka
    leaves where it is) would skip them: the partition is sought again before the next fetch, as a batch the seek
    overtook is.

    orders[0]: 3 records at 5, 15, 25 ms; shipments[0]: 10 at 0, 10, ... 90 ms, nothing committed; the first fetch
    holds back shipments 3-9 (later than the last order); ``committed``: the worker then commits that shipments
    offset."""
    orders, shipments = new_topic("orders", partitions=1), new_topic("shipments", partitions=1)
    o0, s0 = TP(orders, 0), TP(shipments, 0)
    bootstrap = broker_settings.bootstrap_servers
    write_records(bootstrap, orders, 0, 3, first_ts=RECORD_TS + 5, step_ms=10)
    write_records(bootstrap, shipments, 0, 10, step_ms=10)
    handled = Handled()
    handlers = {topic: Handler(handled, joint="join") for topic in (orders, shipments)}

    async def scenario() -> dict[str, Any]:
        async with consumer_on_broker(broker_settings, [o0, s0], handlers) as consumer:
            await fetch_once(consumer)  # shipments 3..9 are later than the last order fetched: held
            seen: dict[str, Any] = {"handled": list(handled.calls),
                                    "held": {tp: [r.offset for r in rs] for tp, rs in consumer.held.records.items()}}
            if committed is not None:
                assert await consumer._commit({s0: committed})  # the worker's own commit, to the group
            gate = GatedSeek(consumer)
            if not cancelled:
                gate.answer.set()
            seek = asyncio.ensure_future(consumer.perform_seek())
            if cancelled:
                await gate.asked.wait()
                seek.cancel()
            await asyncio.wait([seek])
            seen["held after"] = dict(consumer.held.records)
            sought = recorded_seeks(consumer)
            faust_seek_again = consumer._seek_again

            async def seek_again(generation: int | None) -> None:  # before the next fetch
                await faust_seek_again(generation)
                seen.setdefault("sought again", (list(sought), await consumer.position(s0), consumer._read_offset[s0]))

            consumer._seek_again = seek_again  # type: ignore[method-assign]
            calls = len(handled.calls)
            await read_until(consumer, handled, {s0: range(again, 10)})
            seen["again"] = handled.offsets(calls)[s0]
            return seen

    seen = asyncio.run(scenario())
    assert seen["handled"] == [[(s0, [0]), (o0, [0]), (s0, [1]), (o0, [1]), (s0, [2]), (o0, [2])]]
    assert seen["held"] == {s0: [3, 4, 5, 6, 7, 8, 9]}
    assert seen["held after"] == {}
    assert seen["sought again"] == ([(s0, again)], again, again or None)
    assert seen["again"] == list(range(again, 10))  # fetched again from there, each once
    assert group_committed(broker_settings, [o0, s0]) == {o0: None, s0: committed}
