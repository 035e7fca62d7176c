"""The window and outer stores of a windowed stream-stream join, held in RocksDB, and their key layout.

Here, not in ``agents/``, so that the web views, which read a key's records of a time range, share the layout
the join writes (``agents/stream_joins.py`` holds the join).  A side's window store keeps a record under its
key bytes, big-endian time and offset (a key's records of a time range are one range scan), and a time index
by which what the retention let go is deleted as stream time moves.  See
docs/explanation/worker-internals.md#stream-stream-joins.
"""
from __future__ import annotations

import pickle
from typing import Any, Iterator

import faust

from streamapp.sql.engine import Row
from streamapp.sql.stream_join import store_key
from streamapp.worker.faust_internals import partition_db

#: A window store's keys: a record by (key, time, offset); the time index by (time, key, offset); the partition's
#: stream times (in the left side's table).  The outer store's: a record by (time, side, key, offset).  Faust keeps
#: its changelog offset in each database too, under a key of its own (``__faust...``), after these.
DATA, INDEX, META = b"\x00", b"\x01", b"\x02"
#: One change of a store, for its changelog: (table, partition, key, value or None for a delete).
Change = tuple[faust.Table, int, bytes, bytes | None]


def _time(timestamp: int) -> bytes:
    """A time as 8 bytes that sort as the times do (negative ones too)."""
    return (timestamp + 2**63).to_bytes(8, "big")


def _seq(seq: int) -> bytes:
    return (seq % 2**64).to_bytes(8, "big")


def _sized(key: bytes) -> bytes:
    return len(key).to_bytes(4, "big") + key


def _scan(db: Any, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The items of ``db`` with ``start <= key < end``, in key order."""
    for key, value in db.items(from_key=start):
        if key >= end:
            return
        yield key, value


class Writes:
    """The direct writes of a partition's state to RocksDB, each also kept for the store's changelog."""

    def __init__(self, table: faust.Table, partition: int, changes: list[Change]) -> None:
        self.table, self.partition, self.changes = table, partition, changes
        self.db = partition_db(table, partition)

    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self.changes.append((self.table, self.partition, key, value))

    def delete(self, key: bytes) -> None:
        self.db.delete(key)
        self.changes.append((self.table, self.partition, key, None))


class RocksWindow:
    """One side's window store of one partition in RocksDB (:class:`~streamapp.sql.stream_join.WindowStore`).

    As the in-memory store: a fetch sees nothing older than the store's stream time less the retention; what
    expired is deleted once stream time moved half a retention (Kafka Streams drops a segment at a time).
    """

    def __init__(self, writes: Writes, retention: int, observed: int, swept: int) -> None:
        self.writes, self.retention, self.observed, self.swept = writes, retention, observed, swept

    def put(self, key: Any, timestamp: int, row: Row, seq: int) -> bool:
        self.observed = max(self.observed, timestamp)
        oldest = self.observed - self.retention + 1
        if timestamp < oldest:
            return False
        if self.observed - self.swept >= max(self.retention // 2, 1):
            self.swept = self.observed
            self.expire(oldest)
        kb = _sized(store_key(key))
        self.writes.put(DATA + kb + _time(timestamp) + _seq(seq), pickle.dumps(row, protocol=5))
        self.writes.put(INDEX + _time(timestamp) + kb + _seq(seq), b"1")
        return True

    def fetch(self, key: Any, start: int, end: int) -> list[tuple[int, Row]]:
        start = max(start, self.observed - self.retention + 1)
        if start > end:
            return []
        prefix = DATA + _sized(store_key(key))
        return [(int.from_bytes(k[-16:-8], "big") - 2**63, pickle.loads(v))
                for k, v in _scan(self.writes.db, prefix + _time(start), prefix + _time(end + 1))]

    def expire(self, oldest: int) -> int:
        """Delete the records older than ``oldest``; how many."""
        gone = [k for k, _ in _scan(self.writes.db, INDEX, INDEX + _time(oldest))]
        for k in gone:
            self.writes.delete(k)
            self.writes.delete(DATA + k[9:-8] + k[1:9] + k[-8:])
        return len(gone)

    def __len__(self) -> int:
        return sum(1 for _ in _scan(self.writes.db, DATA, INDEX))


class RocksOuter:
    """The outer store of one partition in RocksDB (:class:`~streamapp.sql.stream_join.OuterStore`): a record
    by (time, this side?, key, offset); its entries in the engine's order (the key's output bytes break ties)."""

    def __init__(self, writes: Writes, order: Any) -> None:
        self.writes, self._order = writes, order

    @staticmethod
    def _prefix(timestamp: int, this_is_left: bool, key: Any) -> bytes:
        return DATA + _time(timestamp) + (b"\x01" if this_is_left else b"\x00") + _sized(store_key(key))

    def add(self, timestamp: int, this_is_left: bool, key: Any, row: Row, seq: int) -> None:
        self.writes.put(self._prefix(timestamp, this_is_left, key) + _seq(seq), pickle.dumps((key, row), protocol=5))

    def discard(self, timestamp: int, this_is_left: bool, key: Any) -> None:
        self.pop((timestamp, this_is_left, self._prefix(timestamp, this_is_left, key)))

    def entries(self) -> list[tuple[int, bool, Any]]:
        firsts: dict[bytes, Any] = {}
        for k, v in _scan(self.writes.db, DATA, INDEX):  # not Faust's own keys (its changelog offset)
            firsts.setdefault(k[:-8], v)
        entries = [(int.from_bytes(k[1:9], "big") - 2**63, k[9] == 1, k) for k in firsts]
        return sorted(entries, key=lambda e: (e[0], e[1], self._order(pickle.loads(firsts[e[2]])[0]) or b""))

    def pop(self, entry: tuple[int, bool, Any]) -> list[tuple[Any, Row]]:
        prefix = entry[2]
        found = list(_scan(self.writes.db, prefix, prefix + b"\xff" * 9))
        for k, _ in found:
            self.writes.delete(k)
        return [pickle.loads(v) for _, v in found]
