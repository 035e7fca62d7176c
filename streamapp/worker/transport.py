"""The Faust transport the worker runs on: Faust's aiokafka driver plus batch delivery.

Faust's per-message path costs the join more than the join itself, so a topic with a batch
handler (:meth:`streamapp.worker.app.StreamappApp.batch_agent`) gets each fetch's records at once,
by partition, inline in the fetch loop (:meth:`Consumer.getmany`), table updates before stream
records by event time, as Kafka Streams takes them (:func:`event_time_runs`, :func:`rounds`).
The consumer subscribes only once the broker lists every topic.
See docs/explanation/worker-internals.md#batch-delivery and the two sections after it.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import math
import time
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from aiokafka.structs import ConsumerRecord  # a fetched record as aiokafka returns it (timestamp in ms)
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message

from ..kafka.admin import TopicError, wait_listed
from . import faust_internals

logger = logging.getLogger(__name__)

#: Handles one fetch's records of a topic, by partition in offset order; acks them once it is done with them.
BatchHandler = Callable[[Mapping[TP, Sequence[ConsumerRecord]]], Awaitable[None]]
T = TypeVar("T")
K = TypeVar("K")
#: Most messages handed to a handler in one call: between calls the event loop runs (the web views, heartbeats),
#: where a whole fetch (up to 1 MiB per partition, tens of thousands of users) would hold it for seconds.
CALL_SIZE = 4096
#: Longest a joint handler's partition waits for a partner topic that has records to fetch but brings none (Kafka
#: Streams waits as long as the lag says so; a partition stuck on the broker would fill memory here).
PARTNER_WAIT_S = 30.0
#: Most records a partition holds back (:class:`HeldBack`) before its fetches pause until its partner catches up, as
#: Kafka Streams pauses a partition above ``buffered.records.per.partition`` (1,000): a fetch here brings up to 1 MiB
#: a partition, about 10,000 small records, so two fetches' worth.
MAX_HELD = 20_000
#: Longest a fetch waits for records while :class:`HeldBack` holds some (Faust waits 1 s): a fetch that tells a
#: partner's end brings no record, and the records held for it are looked at again only when the wait ends.
HELD_RECHECK_S = 0.05


def record_time(record: ConsumerRecord) -> int:
    """A record's timestamp in milliseconds, as the broker stored it."""
    return record.timestamp


@dataclass(frozen=True)
class Handler:
    """A batch handler and what orders its records among the other batch topics' (see the module's docstring).

    ``table``: the topic is a table's source, whose updates go before a stream's
    records of the same event time.  ``event_time``: a message's event time in ms,
    the record timestamp unless the stream takes it from its value (ksqlDB's
    ``TIMESTAMP`` column); asked only when a fetch holds several topics' records
    of one partition.
    """

    handle: BatchHandler
    table: bool = False
    event_time: Callable[[ConsumerRecord], int] = record_time
    #: Handlers of several stream topics sharing a ``joint`` name take a fetch's records of them all in one call
    #: (to the handler of the topic met first), each partition's merged in event-time order (an :class:`InOrder`):
    #: a windowed join's two sides interleaved in time would otherwise be calls of one or two records, each waiting
    #: a broker round trip for its outputs.  Named, not the same object: the metrics wrap each topic's handler.
    joint: str | None = None
    #: Most records a call takes (:data:`CALL_SIZE` unless the handler's records cost much more than a lookup).
    call_size: int = CALL_SIZE

    async def __call__(self, batches: Mapping[TP, Sequence[ConsumerRecord]]) -> None:
        await self.handle(batches)


class InOrder:
    """A joint handler's call (:attr:`Handler.joint`): (partition, records of it) runs in processing order, where a
    partition comes again for each run; read as a batch is (:meth:`items`, :meth:`values`)."""

    def __init__(self, runs: list[tuple[TP, Sequence[ConsumerRecord]]]) -> None:
        self.runs = runs

    def items(self) -> list[tuple[TP, Sequence[ConsumerRecord]]]:
        return self.runs

    def values(self) -> list[Sequence[ConsumerRecord]]:
        return [records for _, records in self.runs]

    def __len__(self) -> int:
        return len(self.runs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InOrder) and other.runs == self.runs

    def __repr__(self) -> str:
        return f"InOrder({self.runs!r})"


def event_time_runs(queues: Sequence[tuple[K, Sequence[T]]], time_of: Callable[[K, T], int],
                    is_table: Callable[[K], bool]) -> list[tuple[K, list[T]]]:
    """One partition's queues merged as Kafka Streams takes them: runs of one queue, in processing order.

    Each queue keeps its own (offset) order; the next record is always the head
    with the lowest event time, a table's before a stream's on a tie, then the
    queue listed first.  Consecutive records of one queue make one run.
    """
    live = [(key, items) for key, items in queues if items]
    if len(live) == 1:
        return [(live[0][0], list(live[0][1]))]
    # heapq.merge keeps one head per queue and always yields the least, then that queue's next: exactly the heads'
    # minimum even where a queue's times go back (it never looks past a head); one step a record, not a min()
    merged = heapq.merge(*(_heads(key, items, 0 if is_table(key) else 1, order, time_of)
                           for order, (key, items) in enumerate(live)))
    runs: list[tuple[K, list[T]]] = []
    for order, heads in groupby(merged, key=itemgetter(2)):
        key, items = live[order]
        runs.append((key, [items[head[3]] for head in heads]))
    return runs


def _heads(key: K, items: Sequence[T], rank: int, order: int, time_of: Callable[[K, T], int]
           ) -> Iterator[tuple[int, int, int, int]]:
    """A queue's records as (time, 0 for a table else 1, the queue's place, the record's place) for the merge."""
    for i, item in enumerate(items):
        yield time_of(key, item), rank, order, i


def pieces(by_partition: Mapping[TP, Sequence[T]] | InOrder, size: int = CALL_SIZE
           ) -> Iterator[dict[TP, Sequence[T]] | InOrder]:
    """``by_partition`` cut into calls of at most ``size`` messages, each partition's in order (an
    :class:`InOrder`'s in its order, as InOrders)."""
    wrap: Callable[[list[tuple[TP, Sequence[T]]]], dict[TP, Sequence[T]] | InOrder] = \
        InOrder if isinstance(by_partition, InOrder) else dict  # type: ignore[assignment]
    piece: list[tuple[TP, Sequence[T]]] = []
    room = size
    for tp, messages in by_partition.items():
        start = 0
        while start < len(messages):
            taken = messages[start:start + room]
            piece.append((tp, taken))
            start += len(taken)
            room -= len(taken)
            if room == 0:
                yield wrap(piece)
                piece, room = [], size
    if piece:
        yield wrap(piece)


class HeldBack:
    """A joint handler's records held from one fetch to the next (:attr:`Handler.joint`), so that a partition's
    topics are joined in event-time order across fetches, not only within one, as Kafka Streams' task waits for a
    partition that has records still to fetch (``max.task.idle.ms``, KIP-695).

    A fetch holds up to 1 MiB a partition: a topic of smaller records (shipments) covers more event time a fetch
    than its partner (orders), and handled whole, fetch after fetch, it ran hours of event time ahead: at
    1,000,000 orders its records left the window store (the retention) before their orders came, which then joined
    nothing (issue 37: 267 rows missing).  So a partition's records later than the last one known of a topic that
    has more to fetch (:meth:`take`'s ``lag``) wait for its next fetch; and all of them wait while a partner topic
    has none at hand but more to fetch, or its lag is not known yet (a fetch that brought one side's partition
    before the other's ran that side hours ahead: its orders left unjoined, 150-350 of 3,300 rows).  A partner at
    its end holds nothing back; one that keeps the others waiting longer than :data:`PARTNER_WAIT_S` is not waited
    for any more (a warning says so), so that a partition stuck on the broker cannot fill memory.  A partition holding
    more than :data:`MAX_HELD` records is paused until it holds fewer (:meth:`flow`): a topic far ahead of its partner
    (a catch-up) waits on the broker, not in memory.  A lag of 0 counts as a partner at its end only when the broker
    told it after the partner's last records came (:func:`~streamapp.worker.faust_internals.fetch_lag`): the end told
    with them reads 0 once they are drained, though more may have been written since (orders written unjoined as well
    as joined at 3,000 orders, the producer far ahead of the worker).
    """

    def __init__(self) -> None:
        self.records: dict[TP, list[ConsumerRecord]] = {}
        #: (joint, partition) -> when its records began waiting for a partner with none at hand (monotonic seconds).
        self.waiting: dict[tuple[str, int], float] = {}
        #: The groups whose wait :meth:`_waited_out` gave up, warned of once until their partner shows up.
        self.warned: set[tuple[str, int]] = set()
        #: The partitions :meth:`flow` paused.
        self.paused: set[TP] = set()
        #: When the consumer's end of each partition was last told as its records came: a 0 lag told no later is stale.
        self.brought: dict[TP, float] = {}

    def take(self, fetched: Mapping[TP, Sequence[ConsumerRecord]], handlers: Mapping[str, BatchHandler],
             lag: Callable[[TP], tuple[int | None, float]], now: float | None = None) -> dict[TP, Sequence[ConsumerRecord]]:
        """``fetched`` with the records held before it, less those held now; ``lag(tp)``: how many offsets of
        ``tp`` a fetch can still bring (0: at its end or not assigned here; None: not known yet) and when that was
        told (comparable with itself only)."""
        now = time.monotonic() if now is None else now
        merged: dict[TP, Sequence[ConsumerRecord]] = {  # a fetch's records copied only where some were held before them
            tp: [*self.records.pop(tp), *fetched.get(tp, ())] if tp in self.records else fetched[tp]
            for tp in dict.fromkeys([*self.records, *fetched])}
        topics: dict[str, list[str]] = {}
        for topic, handler in handlers.items():
            joint = getattr(handler, "joint", None)
            if joint is not None:
                topics.setdefault(joint, []).append(topic)
        groups = {(joint, tp.partition) for tp in merged
                  if (joint := getattr(handlers.get(tp.topic), "joint", None)) is not None}
        lags = {tp: lag(tp) for joint, partition in groups for tp in (TP(t, partition) for t in topics[joint])}
        for tp, records in fetched.items():  # a joint partition's records came: its end as told with them
            if records and tp in lags:
                self.brought[tp] = lags[tp][1]
        for joint, partition in groups:
            tps = [TP(topic, partition) for topic in topics[joint]]
            time_of = {tp: getattr(handlers[tp.topic], "event_time", record_time) for tp in tps}
            ends, empty = [], []
            for tp in tps:
                behind, told = lags[tp]
                if behind is not None and behind <= 0 and told > self.brought.get(tp, -math.inf):
                    continue  # at its end, as told since its last records came
                if merged.get(tp):
                    ends.append(time_of[tp](merged[tp][-1]))
                else:  # a stale 0 is not known either
                    empty.append((tp, behind or None))
            if empty:
                if not self._waited_out((joint, partition), empty, now):
                    ends.append(-(2**63))
            else:  # every partner at hand or at its end: a later wait starts its own 30 s
                self.waiting.pop((joint, partition), None)
                self.warned.discard((joint, partition))
            if not ends:
                continue
            limit = min(ends)
            for tp in tps:
                records = merged.get(tp)
                if not records or time_of[tp](records[-1]) <= limit:  # the usual case: not ahead of its partner
                    continue
                ready = next((i for i, record in enumerate(records) if time_of[tp](record) > limit), len(records))
                self.records[tp] = list(records[ready:])
                merged[tp] = records[:ready]
        return {tp: records for tp, records in merged.items() if records}

    def wait(self, timeout: float) -> float:
        """How long the next fetch may wait for records: :data:`HELD_RECHECK_S` at most while records are held (the
        partner's end they wait for comes with fetches that bring none), else ``timeout``."""
        return min(timeout, HELD_RECHECK_S) if self.records else timeout

    def flow(self) -> tuple[list[TP], list[TP]]:
        """The partitions to pause (holding more than :data:`MAX_HELD` records) and those to resume (paused, holding
        no more than that now)."""
        pause = [tp for tp, records in self.records.items() if len(records) > MAX_HELD and tp not in self.paused]
        resume = [tp for tp in self.paused if len(self.records.get(tp, ())) <= MAX_HELD]
        self.paused.update(pause)
        self.paused.difference_update(resume)
        return pause, resume

    def _waited_out(self, group: tuple[str, int], empty: list[tuple[TP, int | None]], now: float) -> bool:
        """Whether ``group``'s records have waited :data:`PARTNER_WAIT_S` for the partners in ``empty``."""
        since = self.waiting.setdefault(group, now)
        if now - since < PARTNER_WAIT_S:
            return False
        if group not in self.warned:
            self.warned.add(group)
            logger.warning("Partition %d of %s joined without waiting longer for %s: records to fetch, none brought "
                           "for %.0f s", group[1], group[0], ", ".join(
                               f"{tp.topic} (lag {'unknown' if n is None else n})" for tp, n in empty), now - since)
        return True

    def drop(self) -> tuple[dict[TP, int], set[TP]]:
        """A seek or a rebalance: the records held are dropped, fetched again from where it puts their partitions;
        returns the first offset held of each partition and the partitions :meth:`flow` paused (to resume)."""
        firsts = {tp: records[0].offset for tp, records in self.records.items()}
        paused, self.paused = self.paused, set()
        self.records.clear()
        self.waiting.clear()
        self.warned.clear()
        return firsts, paused


def rounds(fetched: Mapping[TP, Sequence[ConsumerRecord]], handlers: Mapping[str, BatchHandler]
           ) -> list[list[tuple[str, dict[TP, Sequence[ConsumerRecord]] | InOrder]]]:
    """A fetch's batch messages as handler calls: rounds of (topic, messages by partition), in processing order.

    Round i holds the i-th run (:func:`event_time_runs`) of every partition number;
    within a round the table sources' calls come first.  Partitions whose records
    are all of one topic (the usual case) take one round and cost no event time;
    so do those holding table sources' records only (the users and the repartition
    topic while the tables load): each table's updates are its own, and no stream
    record is among them to be ordered against.  A joint handler's topics (:attr:`Handler.joint`)
    make one call of the first round: each partition's runs of them, in order (an :class:`InOrder`).
    """
    by_partition: dict[int, list[tuple[TP, Sequence[ConsumerRecord]]]] = {}
    for tp, messages in fetched.items():
        by_partition.setdefault(tp.partition, []).append((tp, messages))

    def is_table(tp: TP) -> bool:
        return bool(getattr(handlers[tp.topic], "table", False))

    def time_of(tp: TP, record: ConsumerRecord) -> int:
        return getattr(handlers[tp.topic], "event_time", record_time)(record)

    result: list[dict[str, dict[TP, Sequence[ConsumerRecord]] | InOrder]] = []
    joint: dict[str, tuple[str, list[tuple[TP, Sequence[ConsumerRecord]]]]] = {}

    def joint_of(tp: TP) -> str | None:
        return getattr(handlers[tp.topic], "joint", None)

    for queues in by_partition.values():
        for name in dict.fromkeys(filter(None, (joint_of(q[0]) for q in queues))):
            theirs = [q for q in queues if joint_of(q[0]) == name]
            queues = [q for q in queues if joint_of(q[0]) != name]
            call = joint.setdefault(name, (theirs[0][0].topic, []))
            call[1].extend(event_time_runs(theirs, time_of, is_table))
        if not queues:
            continue
        queues.sort(key=lambda q: not is_table(q[0]))
        if is_table(queues[-1][0]):  # tables only: one round, no event time
            ordered = [list(queues)]
        else:
            ordered = [[run] for run in event_time_runs(queues, time_of, is_table)]
        for i, runs in enumerate(ordered):
            if i == len(result):
                result.append({})
            for tp, run in runs:
                result[i].setdefault(tp.topic, {})[tp] = run  # type: ignore[index]
    for topic, runs in joint.values():
        if not result:
            result.append({})
        result[0][topic] = InOrder(runs)
    return [sorted(calls.items(), key=lambda call: not is_table(TP(call[0], 0))) for calls in result]


class Consumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer with batch delivery, whose rebalances and stops commit everything acked.

    Under at_least_once a clean rebalance (a worker joins, or one stops) must leave the
    next owner nothing to read twice, as Kafka Streams' commit on revoke does.  Two
    things in Faust made each rebalance re-read everything acked since the last periodic
    commit (measured: 137 to 927 of 12,000 orders in ``tests/test_worker_group.py``):

    - Faust's ``Consumer.on_partitions_revoked`` forgets the revoked partitions' acked
      offsets *before* the app's revoke handler commits, so that commit never covers
      them; aiokafka revokes every partition at each rebalance.  So the commit comes
      first here (:meth:`on_partitions_revoked`).
    - After a rebalance Faust's recovery resumes the stream partitions, then awaits
      ``perform_seek``, which moves each one's read offset back to its committed offset.
      Orders handled in between are read again, or leave a false gap that Faust merges
      into its acked offsets as duplicates, after which each commit moves one offset.
      So no batch is handled while a seek is under way, nor after one that began since
      it was fetched (:meth:`perform_seek`, :meth:`getmany`).
    """

    #: The ``commit_every`` commit under way, if any, and whether batches were acked since it began (:meth:`_commit_if_due`).
    _due_commit: asyncio.Future[None] | None = None
    _acked_while_committing = False
    #: The batch handler call under way, if any: a revoke or a stop waits for it (:meth:`_settle`).
    _handling: asyncio.Future[None] | None = None
    #: Seeks to the committed offsets under way, how many began or ended so far, and an event set while none
    #: runs (:meth:`perform_seek`).
    _seeking = 0
    _seeks = 0
    _no_seek: asyncio.Event | None = None
    #: Where the last seek to the committed offsets put each partition: its committed offset, None when it has none
    #: (its start); empty while a seek runs, and after one that ended before the consumer thread answered.
    #: A batch that seek overtook goes back there (:meth:`_seek_again`).
    _sought: Mapping[TP, int | None] = {}
    #: The first offset of each partition's records dropped unhandled for a seek to the committed offsets: the
    #: batches it overtook and the records held back when it began, sought again once it ends (:meth:`_seek_again`).
    _dropped: Mapping[TP, int] = {}
    #: The batch topics' records of the fetch under way, by partition, and the generation they were fetched in:
    #: kept aside by :meth:`_wait_next_records`, handled by :meth:`getmany`.
    _batch_fetch: tuple[dict[TP, Sequence[ConsumerRecord]], int] | None = None
    #: Revokes whose commit left acked offsets uncommitted (their next owner reads them again): the metrics count them.
    revoke_commits_failed = 0
    #: A joint handler's records fetched but not handled yet, to keep its partitions' topics in event-time order
    #: across fetches: never acked; dropped at a rebalance, which fetches them again from the committed offsets,
    #: and at a seek, which may move nothing (:attr:`_dropped`).
    _held: HeldBack | None = None

    @property
    def held(self) -> HeldBack:
        if self._held is None:
            self._held = HeldBack()
        return self._held

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        """The consumer fetches with ``FETCH_WAIT_MS``, and under exactly_once reads ``read_committed``
        (docs/RELIABILITY.md)."""
        eos = self.app.settings.exactly_once
        return faust_internals.new_consumer_thread(self, committed_only=eos)

    async def seek_to_committed(self) -> Mapping[TP, int]:
        """Faust's seek, after the exactly-once fence of the joined streams' partitions (:mod:`streamapp.worker.transactions`).

        Where it puts each partition is kept for :meth:`_seek_again`: Faust keeps it only
        as the read offset, which the batch path moves on as it accepts a fetch.  A
        partition without a commit goes to its start, as Faust's read offset says: aiokafka
        leaves it where it is, past the records of a fetch dropped for the rebalance this
        seek follows (a long poll begun before it), which nothing would read again.
        """
        committed = await faust_internals.seek_fenced(self, super().seek_to_committed)
        self._sought = {TP(tp.topic, tp.partition): offset if offset and offset > 0 else None
                        for tp, offset in committed.items()}
        for tp in sorted(tp for tp, offset in self._sought.items() if offset is None):
            await self.seek(tp, 0)  # Faust's public seek: its read offset stays None (no commit)
        return committed

    async def perform_seek(self) -> None:
        """Faust's seek of every partition to its committed offset, counted so that no batch is handled across it."""
        if self._no_seek is None:
            self._no_seek = asyncio.Event()
        self._no_seek.clear()
        self._sought = {}
        self._drop(self._drop_held())
        self._seeking += 1
        self._seeks += 1
        try:
            await super().perform_seek()
        finally:
            self._seeking -= 1
            self._seeks += 1
            if not self._seeking:
                self._no_seek.set()

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        """Commit everything acked, then Faust's revoke, which forgets the revoked partitions' acked offsets.

        The flow stops first (no batch starts after the one under way), the batch under
        way finishes (its orders are acked once their outputs are queued), and the
        commit flushes the producer and commits.  The worker still owns the partitions:
        the group waits for every member's revoke before it reassigns them.
        """
        self._drop_held()  # before Faust's revoke, which pauses the whole assignment until its recovery resumes it
        self._dropped = {}  # the rebalance fetches every partition again from its committed offset
        if not self.app.should_stop:  # a stopping worker has committed in wait_empty
            self.stop_flow()
            await self._settle()
            await faust_internals.commit_now(self)
            if faust_internals.uncommitted(self, revoked):
                self.revoke_commits_failed += 1
        await super().on_partitions_revoked(revoked)

    async def wait_empty(self) -> None:
        """Faust's wait for the events being processed and its commit, made to cover the batches and to commit.

        A stopping worker cancels the fetch loop, then calls this: the batch handler call
        under way (shielded from that cancel) finishes first, and the last commit waits
        for any commit under way instead of returning without committing.
        """
        await self._settle()
        await super().wait_empty()
        await faust_internals.commit_now(self)

    def _drop_held(self) -> dict[TP, int]:
        """The held records dropped (:meth:`HeldBack.drop`), the partitions their number paused resumed: Faust keeps
        a paused partition paused across rebalances."""
        firsts, paused = self.held.drop()
        if paused:
            self.resume_partitions(paused)
        return firsts

    def _drop(self, firsts: Mapping[TP, int]) -> None:
        """Records dropped unhandled for a seek, by the first offset of each partition's: kept for :meth:`_seek_again`."""
        dropped = dict(self._dropped)
        for tp, offset in firsts.items():
            dropped[tp] = min(offset, dropped.get(tp, offset))
        self._dropped = dropped

    async def _seek_again(self, generation: int | None) -> None:
        """Once no seek runs, seek the partitions whose records were dropped for it (:attr:`_dropped`), if still
        assigned, where it put them: the committed offset, or the start when there is none.

        A seek moves a partition in the consumer thread before it ends here, so a fetch
        that came back meanwhile may hold records after the new position: dropped, they
        would be skipped.  The position is the one the seek gave (:attr:`_sought`), not
        the read offset: a seek can end while a fetch is being accepted (Faust's gap
        bookkeeping yields to the loop), and the partitions accepted after it then have
        the fetch's last offset as their read offset.  A seek cancelled before the consumer
        thread answered (a recovery's timeout) moved nothing: the first record dropped then
        (the read offset may be past it: accepted, or held back).  Not after a rebalance
        began: its own seek comes after it.  Faust's ``seek`` sets the read offset back too.
        """
        while self._seeking and self._no_seek is not None:
            await self._no_seek.wait()
        dropped, self._dropped = self._dropped, {}
        if dropped and self.flow_active and self.app.consumer_generation_id == generation:
            assigned = self.assignment()
            partitions = sorted(tp for tp in dropped if tp in assigned)
            for tp in partitions:
                offset = self._sought[tp] if tp in self._sought else dropped[tp]
                await self.seek(tp, offset or 0)
            logger.info("A seek to the committed offsets overtook records fetched: %s sought again, the records "
                        "read again", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))

    async def _settle(self) -> None:
        """Wait for the batch handler call under way, then for the ``commit_every`` commit (that call may start one)."""
        for pending in (lambda: self._handling, lambda: self._due_commit):
            task = pending()
            if task is not None and not task.done():
                await asyncio.wait([task])

    async def subscribe(self, topics: Iterable[str]) -> None:
        """Faust's subscribe, once the broker lists every topic (see the module's docstring)."""
        names = set(topics)
        servers = self.app.settings.kafka
        try:
            await asyncio.get_running_loop().run_in_executor(None, wait_listed, servers, names)
        except TopicError as exc:  # a topic nobody created: subscribe to it as Faust would
            logger.warning("Subscribing anyway: %s", exc)
        await super().subscribe(names)

    async def _wait_next_records(self, timeout: float) -> tuple[Mapping[TP, Sequence[ConsumerRecord]] | None, set[TP] | None]:
        """Faust's fetch, less the batch topics' records: Faust delivers the rest, :meth:`getmany` hands these over.

        Faust's ``getmany`` turns each fetched record into a message, tracks its
        partition's end offset and yields it, one at a time; for the batch topics
        that cost a fifth of the worker's time (issue 16's profile).  Their records
        are kept aside here as fetched, of the partitions Faust would deliver
        (:func:`~streamapp.worker.faust_internals.deliverable`), with the generation
        Faust's ``getmany`` reads right after this returns.
        """
        records, active = await super()._wait_next_records(timeout)
        handlers = self.app.batch_handlers
        if records and any(tp.topic in handlers for tp in records):
            kept = {tp: batch for tp, batch in records.items()
                    if tp.topic in handlers and faust_internals.deliverable(self, tp, active)}
            self._batch_fetch = (kept, self.app.consumer_generation_id)
            records = {tp: batch for tp, batch in records.items() if tp.topic not in handlers}
        return records, active

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        """Faust's fetch for the other topics' messages, then the batch topics' records to their handlers.

        Per partition, not per record, the batch path does what Faust's fetch does
        per message: the generation check, the end offset tracked for the monitor,
        and the offsets kept as Faust's own fetch loop keeps them
        (:func:`~streamapp.worker.faust_internals.accept_all`).  After each batch
        Faust's ``commit_every`` rule applies as it does after each message there,
        its commit running beside the loop (:meth:`_commit_if_due`).
        A batch that a rebalance or a seek to the committed offsets overtakes is
        dropped unhandled and fetched again: by its next owner after a rebalance, from
        where the seek put its partitions after a seek (:meth:`_seek_again`).  A handler
        call runs shielded: a stopping worker cancels this loop, and :meth:`wait_empty`
        waits for the call to ack.
        """
        handlers: Mapping[str, BatchHandler] = self.app.batch_handlers
        if self._dropped:  # held back when a seek began that overtook no fetch: sought again before the next one
            await self._seek_again(self.app.consumer_generation_id)
        seeks = self._seeks  # before the fetch: a seek that ends while it is under way may have moved its partitions
        self._batch_fetch = None
        async for tp, message in super().getmany(self.held.wait(timeout)):
            yield tp, message
        taken, self._batch_fetch = self._batch_fetch, None
        if taken is None and self.held.records:  # nothing new: what is held waits for nothing more
            taken = {}, self.app.consumer_generation_id
        if taken is None or self.should_stop:
            return
        received, generation = taken

        def rebalancing() -> bool:
            return not self.flow_active or self.app.consumer_generation_id != generation

        async def overtaken(batch: Mapping[TP, Sequence[ConsumerRecord]]) -> bool:
            """Whether a rebalance or a seek (one runs, or one ran since this fetch began) overtook ``batch``: then
            it is dropped unhandled, and after a seek its partitions are sought again (the held records were
            dropped when the seek began)."""
            if rebalancing():
                return True
            if not self._seeking and self._seeks == seeks:
                return False
            self._drop({tp: records[0].offset for tp, records in batch.items() if records})
            await self._seek_again(generation)
            return True

        if not (received or self.held.records) or await overtaken(received):
            return
        fetched: dict[TP, Sequence[ConsumerRecord]] = {}
        for tp, records in received.items():
            self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
            accepted = await faust_internals.accept_all(self, tp, records)
            if accepted:
                fetched[tp] = accepted

        if await overtaken(fetched):  # (accept_all awaits)
            return
        fetched = self.held.take(fetched, handlers, lambda tp: faust_internals.fetch_lag(self, tp))
        pause, resume = self.held.flow()
        if pause:
            self.pause_partitions(pause)
        if resume:
            self.resume_partitions(resume)
        for calls in rounds(fetched, handlers):
            for topic, by_partition in calls:
                for piece in pieces(by_partition, getattr(handlers[topic], "call_size", CALL_SIZE)):
                    if await overtaken(fetched):
                        return
                    self._handling = asyncio.ensure_future(handlers[topic](piece))
                    await asyncio.shield(self._handling)
                    faust_internals.polled(self)  # aiokafka's poll interval bounds a call, not the fetch
                    self._commit_if_due()
                    await asyncio.sleep(0)  # let the web views and heartbeats in between

    async def _commit(self, offsets: Mapping[TP, int]) -> bool:
        """Faust's commit to the group (after its producer flush), unless a batch was refused since the worker
        started: the records acked with it were not written, and only a restart reads them again
        (:meth:`~streamapp.worker.health.OutputWatch.commits_held`; the worker exits after ``output_failure_exit``).
        """
        monitor = getattr(self.app, "kafka_monitor", None)
        if monitor is not None and monitor.outputs.commits_held():
            return False
        return await super()._commit(offsets)

    def _commit_if_due(self) -> None:
        """Faust's ``commit_every`` rule after a batch, with the commit beside the fetch loop instead of in it.

        Faust's commit flushes the producer (waits until the broker has acknowledged
        everything queued so far), then commits the acked offsets.  Awaited in the
        fetch loop, as Faust does, nothing is fetched, handled or queued during each
        flush, and the producer has nothing in flight right after it.  Here one commit
        at a time runs as a task of its own while the loop goes on (the producer's
        own queue, one pending batch per partition, bounds what is in flight).  It
        stays at-least-once: a message is acked once its outputs are queued, and the
        flush covers everything queued before it, so every offset the commit takes
        is covered.  Batches handled while a commit runs are judged by the rule again
        when it ends (:meth:`_commit_due`), so none waits for the commit interval.
        A commit that failed raises here, in the fetch loop, at the next batch.
        """
        task = self._due_commit
        if task is not None:
            if not task.done():
                self._acked_while_committing = True
                return
            self._due_commit = None
            if not task.cancelled():  # cancelled only when the app stops
                task.result()
        self._due_commit = asyncio.ensure_future(self._commit_due())

    async def _commit_due(self) -> None:
        """Faust's ``commit_every`` commit, again as long as batches were acked while the last one ran."""
        self._acked_while_committing = True
        while self._acked_while_committing:
            self._acked_while_committing = False
            await faust_internals.commit_if_due(self)


class Transport(faust_aiokafka.Transport):
    Consumer = Consumer
