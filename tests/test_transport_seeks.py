"""The batch path and Faust's seek to the committed offsets: a batch a seek overtakes goes back where the seek put it.

Deterministic, no broker: a real app's consumer, not started, whose consumer thread
(the aiokafka side: the committed offsets, the position, the assignment) is a
recorder, and whose fetch returns the records the test gives.  The interleavings
are the ones a rebalance's recovery makes with the fetch loop: its
``perform_seek`` runs beside it and ends whenever the consumer thread answers.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest
from faust.types import TP

from streamapp.settings import Settings
from streamapp.worker.app import create_app
from streamapp.worker.transport import Consumer, Handler
from workerkit import fetched

USERS = "users"
U0, U1, U2 = TP(USERS, 0), TP(USERS, 1), TP(USERS, 2)


class ConsumerThread:
    """The consumer thread's side of a seek: the committed offsets it answers, and each position it is given."""

    _consumer: Any = None  # no aiokafka consumer started (faust_internals.polled)

    def __init__(self, committed: Mapping[TP, int | None], assigned: set[TP]) -> None:
        self.committed = dict(committed)
        self.assigned = assigned
        self.positions: list[tuple[TP, int]] = []

    async def seek_to_committed(self) -> Mapping[TP, int | None]:
        for tp, offset in self.committed.items():
            if offset:
                self.positions.append((tp, offset))
        return dict(self.committed)

    def seek(self, tp: TP, offset: int) -> None:
        self.positions.append((tp, offset))

    def assignment(self) -> set[TP]:
        return set(self.assigned)

    def highwater(self, tp: TP) -> int:
        return 2000


def consumer_for(tmp_path: Path, thread: ConsumerThread, handled: list[Mapping[TP, Sequence[Any]]]) -> Consumer:
    consumer = create_app(Settings(data_dir=str(tmp_path / "data"))).consumer
    consumer._thread = thread

    async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
        handled.append(batches)

    consumer.app.batch_handlers = {USERS: Handler(handle, table=True)}
    consumer.app.topics.acks_enabled_for = lambda topic: True
    consumer._get_active_partitions = lambda: set(thread.assigned)
    return consumer


async def unanswered() -> Mapping[TP, int | None]:
    """A seek's question the consumer thread never answers: the seek ends only when it is cancelled."""
    await asyncio.Event().wait()
    raise AssertionError("the consumer thread never answers")


async def fetch_once(consumer: Consumer) -> None:
    """One turn of the fetch loop: Faust's getmany, then the batch path."""
    async for _ in consumer.getmany(1.0):
        raise AssertionError("the users are a batch topic: Faust delivers none of their messages")


def test_a_seek_that_ends_while_a_fetch_is_accepted_puts_its_partitions_back_where_the_seek_put_them(
        tmp_path: Path) -> None:
    """Faust records each gap in a fetched partition (a transaction's markers) with an ``asyncio.sleep(0)``; a seek
    of a rebalance's recovery can end there, in the middle of a fetch being accepted. The partitions accepted after
    it end with the fetch's last offset as their read offset, yet the seek moved them back: the batch is dropped
    and sought again, and must go where the seek put it (the committed offset; the start when nothing was
    committed), not where the fetch ended, or the records in between are never handled."""
    thread = ConsumerThread({U0: 10, U1: None}, {U0, U1})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)
    consumer._read_offset[U0] = 10  # where an earlier seek put it
    faust_add_gap = consumer._add_gap
    seeks: list[asyncio.Task[None]] = []

    async def add_gap(tp: TP, start: int, end: int) -> None:
        await faust_add_gap(tp, start, end)
        if not seeks:  # the recovery's seek ends during this gap's sleep(0)
            seeks.append(asyncio.ensure_future(consumer.perform_seek()))
            await asyncio.wait(seeks)

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        return {U0: fetched(USERS, 0, 10, 12, 13), U1: fetched(USERS, 1, 0, 1, 2, 3, 4)}

    consumer._add_gap = add_gap
    consumer._getmany = fetch

    asyncio.run(fetch_once(consumer))
    assert seeks and seeks[0].done()
    assert handled == []  # overtaken: dropped, to be fetched again
    # the seek's own positions (U0 to 10; U1 to its start, nothing committed), then the batch's again
    assert thread.positions == [(U0, 10), (U1, 0), (U0, 10), (U1, 0)]
    assert {tp: consumer._read_offset[tp] for tp in (U0, U1)} == {U0: 10, U1: None}


def test_a_seek_under_way_when_the_fetch_returns_sends_only_assigned_partitions_back_once_it_ends(
        tmp_path: Path) -> None:
    """A fetch that returns while a seek is under way is not handled: once the seek ends, each of its partitions
    still assigned is sought where the seek put it (the start without a commit); one no longer assigned is left
    alone, and its read offset untouched."""
    thread = ConsumerThread({U0: 1518, U1: None}, {U0, U1})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)
    consumer._read_offset[U2] = 40
    answer = asyncio.Event()
    faust_seek_to_committed = thread.seek_to_committed
    seeks: list[asyncio.Task[None]] = []

    async def slow_seek_to_committed() -> Mapping[TP, int | None]:
        await answer.wait()
        return await faust_seek_to_committed()

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        seeks.append(asyncio.ensure_future(consumer.perform_seek()))
        await asyncio.sleep(0)  # the seek has begun: it waits for the consumer thread
        asyncio.get_running_loop().call_later(0.05, answer.set)
        return {U0: fetched(USERS, 0, 1518, 1519), U1: fetched(USERS, 1, 0), U2: fetched(USERS, 2, 40, 41)}

    thread.seek_to_committed = slow_seek_to_committed
    consumer._getmany = fetch
    consumer._get_active_partitions = lambda: {U0, U1, U2}

    asyncio.run(fetch_once(consumer))
    assert seeks and seeks[0].done()
    assert handled == []
    assert thread.positions == [(U0, 1518), (U1, 0), (U0, 1518), (U1, 0)]
    assert {tp: consumer._read_offset[tp] for tp in (U0, U1, U2)} == {U0: 1518, U1: None, U2: 40}


def test_a_seek_cancelled_before_the_consumer_thread_answered_leaves_the_batch_at_its_first_record(
        tmp_path: Path) -> None:
    """A recovery's seek can time out (it is awaited with Faust's ``broker_request_timeout``) before the consumer
    thread answers: it moved nothing, so a fetch it overtook goes back to its first record."""
    thread = ConsumerThread({U0: 1518}, {U0})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)
    consumer._read_offset[U0] = 7
    seeks: list[asyncio.Task[None]] = []

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        seeks.append(asyncio.ensure_future(consumer.perform_seek()))
        await asyncio.sleep(0)
        asyncio.get_running_loop().call_later(0.05, seeks[0].cancel)
        return {U0: fetched(USERS, 0, 8, 9)}

    thread.seek_to_committed = unanswered
    consumer._getmany = fetch

    asyncio.run(fetch_once(consumer))
    assert seeks and seeks[0].cancelled()
    assert handled == []
    assert thread.positions == [(U0, 8)]
    assert consumer._read_offset[U0] == 8


def test_a_seek_cancelled_while_a_batch_is_handled_sends_its_partitions_back_to_the_batchs_first_record(
        tmp_path: Path) -> None:
    """A batch handled in several calls, overtaken after the first by a seek that moved nothing: the rest is
    dropped, and the partition goes back to the batch's first record (handled again, at least once), not to its
    read offset, which accepting the batch moved past the records not yet handled."""
    thread = ConsumerThread({U0: 1518}, {U0})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)
    consumer._read_offset[U0] = 4

    async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
        handled.append(batches)
        seek = asyncio.ensure_future(consumer.perform_seek())
        await asyncio.sleep(0)
        seek.cancel()
        await asyncio.wait([seek])

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        return {U0: fetched(USERS, 0, 5, 6, 7, 8)}

    thread.seek_to_committed = unanswered
    consumer.app.batch_handlers = {USERS: Handler(handle, table=True, call_size=2)}
    consumer._getmany = fetch

    asyncio.run(fetch_once(consumer))
    assert [[r.offset for r in records] for call in handled for records in call.values()] == [[5, 6]]
    assert thread.positions == [(U0, 5)]
    assert consumer._read_offset[U0] == 5

ORDERS, SHIPMENTS = "orders", "shipments"
O0, S0 = TP(ORDERS, 0), TP(SHIPMENTS, 0)


@pytest.mark.parametrize("committed, cancelled, again", [
    (None, True, 3),  # nothing moved: where the held records begin
    (None, False, 0),  # no commit: aiokafka leaves the partition where it is; the seek's position is its start
    (2, False, 2),  # the committed offset, as the seek put it
], ids=["cancelled", "nothing-committed", "committed"])
def test_records_held_back_when_a_seek_begins_are_fetched_again_from_where_it_put_their_partition(
        tmp_path: Path, committed: int | None, cancelled: bool, again: int) -> None:
    """A windowed join's records held back for the next fetch (:class:`HeldBack`) are dropped when a seek to the
    committed offsets begins, though the partition's position and read offset are past them.  A seek that moves
    nothing (cancelled before the consumer thread answered, or of a partition without a commit, which aiokafka
    leaves where it is) would skip them: the partition is sought again before the next fetch, as a batch the seek
    overtook is."""
    thread = ConsumerThread({O0: None, S0: committed}, {O0, S0})
    handled: list[Mapping[TP, Sequence[Any]]] = []
    consumer = consumer_for(tmp_path, thread, handled)

    async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
        handled.append(batches)

    consumer.app.batch_handlers = {topic: Handler(handle, joint="join") for topic in (ORDERS, SHIPMENTS)}
    fetches = iter([{O0: fetched(ORDERS, 0, 0, 1, 2), S0: fetched(SHIPMENTS, 0, *range(10))}, {}])

    async def fetch(active_partitions: set[TP], timeout: float) -> dict[TP, list[Any]]:
        return next(fetches)

    async def scenario() -> None:
        await fetch_once(consumer)  # shipments 3..9 are later than the last order fetched: held
        assert consumer.held.records.keys() == {S0}
        seek = asyncio.ensure_future(consumer.perform_seek())
        if cancelled:
            thread.seek_to_committed = unanswered
            await asyncio.sleep(0)
            seek.cancel()
        await asyncio.wait([seek])
        thread.positions.clear()
        await fetch_once(consumer)

    consumer._getmany = fetch
    asyncio.run(scenario())
    assert [[(tp, [r.offset for r in records]) for tp, records in call.items()] for call in handled] == [
        [(O0, [0]), (S0, [0]), (O0, [1]), (S0, [1]), (O0, [2]), (S0, [2])]]
    assert consumer.held.records == {}
    assert thread.positions == [(S0, again)]
    assert consumer._read_offset[S0] == (again or None)
