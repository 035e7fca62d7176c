"""One side of a declared table-table join, run by the agent of that side's table topic (:mod:`agents.tables`).

Thin: what an update writes is the pure engine's (:class:`streamapp.sql.table_join.TableJoin`), handed the key's
rows as the worker holds them: this side's before the update and the other side's, both read from RocksDB in
the record's own partition (the two topics are co-partitioned, as a stream and its table are), or from this
fetch's rows not written there yet.  See docs/explanation/worker-internals.md#the-table-agents.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import faust

from streamapp.sql import plan as p
from streamapp.sql.engine import Record, Row
from streamapp.sql.formats import Codec
from streamapp.sql.table_join import TableJoin
from streamapp.sql.topology import TableTableJoin
from streamapp.worker.app import StreamappApp
from streamapp.worker.faust_internals import partition_db
from streamapp.worker.tables import RowLookup, RowWrites
from streamapp.worker.transport import ConsumerRecord

logger = logging.getLogger(__name__)

#: What one update of a side writes: (output, key, value or None for a tombstone, timestamp) per record.
Written = list[tuple[str, bytes | None, bytes | None, int]]


class JoinSide:
    """``side`` of ``join``: each update of its table joined with the other side's row of the same key."""

    def __init__(self, app: StreamappApp, join: TableTableJoin, side: str) -> None:
        tables = app.join_tables
        _, own, other = next(s for s in join.sides if s[0] == side)
        self.join, self.side, self.output = join, side, join.output
        self.engine = TableJoin(app.topology.plan, join.query)
        #: The topic the engine knows this side by (the plan's; the worker may read it under another name).
        self._topic = own.source.topic
        self._other_side = p.RIGHT_SIDE if side == p.LEFT_SIDE else p.LEFT_SIDE
        self._own = RowLookup(tables.by_name[own.name], own.source, with_key=True)
        self.other = RowLookup(tables.by_name[other.name], other.source, with_key=True)
        self._other_key = Codec(other.source).encode_key
        #: This fetch's rows of this side by (partition, key bytes), not in RocksDB yet (None: deleted).
        self._pending: dict[tuple[int, bytes], Row | None] = {}

    def update(self, partition: int, msg: ConsumerRecord, key: Any) -> tuple[Written, bytes | None]:
        """What an update (``msg``, whose decoded key is ``key``) writes, and the other side's key bytes when it
        has no row there (a miss), else None; RecordError when the engine cannot write it."""
        held = (partition, msg.key)  # type: ignore[index]
        old = self._pending[held] if held in self._pending else self._own.get(partition, msg.key)  # type: ignore[arg-type]
        other_key = self._other_key(key)
        other = self.other.get(partition, other_key)
        self.engine.tables = {self.side: {} if old is None else {key: old},
                              self._other_side: {} if other is None else {key: other}}
        outputs = self.engine.process(Record(self._topic, msg.key, msg.value, msg.timestamp, partition,
                                                   msg.offset))
        written = [(self.output, o.record.key, o.record.value, o.record.timestamp) for o in outputs]
        return written, other_key if other is None else None

    def wrote(self, partition: int, key: bytes, row: Row | None) -> None:
        """The update of ``key`` passed its checks: its row (None: deleted) is this side's from now on."""
        self._pending[(partition, key)] = row

    def stored(self) -> None:
        """This fetch's rows are in RocksDB now."""
        self._pending.clear()


def sides_of(app: StreamappApp, topic: str) -> list[JoinSide]:
    """The sides of the table-table joins that the worker's table topic ``topic`` updates."""
    return [JoinSide(app, join, side) for join in app.topology.table_joins
            for side, table, _ in join.sides if table.topic == topic]


class UndoLog:
    """exactly_once: each partition's rows of ``tables`` as they were before its open transaction, put back when
    its work is dropped (aborted, fenced), so that the records read again are joined against the rows they were
    joined against the first time, not against their own updates."""

    def __init__(self, tables: Sequence[faust.Table],
                 distrust: Callable[[faust.Table, int], None] = lambda table, partition: None) -> None:
        self.tables = tables
        #: Told a partition whose rows could not be put back: not trusted at its next open (a wipe, a restore).
        self._distrust = distrust
        self._before: dict[int, dict[tuple[int, bytes], bytes | None]] = {}

    def touch(self, partition: int, key: bytes) -> None:
        """``key``'s rows are about to change in the partition's open transaction (call before they are written)."""
        before = self._before.setdefault(partition, {})
        for i, table in enumerate(self.tables):
            if (i, key) not in before:
                before[(i, key)] = partition_db(table, partition).get(key)

    def ended(self, partition: int, committed: bool) -> None:
        """:attr:`Transactions.on_ended`: a committed transaction's rows stay; a dropped one's are put back."""
        before = self._before.pop(partition, {})
        if committed or not before:
            return
        writes = [RowWrites(table) for table in self.tables]
        for (i, key), value in before.items():
            writes[i].put(partition, key, value)
        try:
            for table_writes in writes:
                table_writes.write()
        except Exception as exc:  # noqa: BLE001 - the partition is gone (revoked): its next owner restores it
            logger.warning("Rows of partition %d not put back after its transaction was dropped (%r)", partition, exc)
            for table in self.tables:
                self._distrust(table, partition)
            return
        logger.info("Transaction of partition %d dropped: %d table rows put back as they were before it",
                    partition, len(before))
