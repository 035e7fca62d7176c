"""The window and outer stores of a windowed stream-stream join, held in RocksDB, and their key layout.

Here, not in ``agents/``, so that the web views, which read a key's records of a time range, share the layout
the join writes (``agents/stream_joins.py`` holds the join).  A side's window store keeps a record under its
segment (its time by half the retention, as Kafka Streams' segmented window stores), key bytes, big-endian time and
offset: a key's records of a time range are one range scan per segment, and one write and one changelog record a
record.  What the retention let go is whole segments, dropped at once (one range deletion, compacted away), with no
changelog record: the windowed changelogs delete by time instead.
See docs/explanation/worker-internals.md#stream-stream-joins.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

import faust
from rocksdict import ReadOptions, WriteOptions

from streamapp.sql.engine import Row
from streamapp.sql.stream_join import LastEncoded, store_key
from streamapp.worker.faust_internals import partition_db

#: A window store's keys: a record by (segment, key, time, offset) under SEGMENTS; the partition's stream times and
#: segment interval (in the left side's table) under META.  Written before 2026-11-27 15:00: a record by (key, time,
#: offset) under DATA, and before that a time index under INDEX (both rewritten or dropped when the store is next
#: opened: :meth:`RocksWindow.migrate`).  The outer store's: a record by (time, side, key, offset) under DATA.  Faust
#: keeps its changelog offset in each database too, under a key of its own (``__faust...``), after these.
DATA, INDEX, META, SEGMENTS = b"\x00", b"\x01", b"\x02", b"\x03"
#: The end of the SEGMENTS keys (exclusive).
SEGMENTS_END = b"\x04"
#: One change of a store, for its changelog: (table, partition, key, value or None for a delete).
Change = tuple[faust.Table, int, bytes, bytes | None]


def _time(timestamp: int) -> bytes:
    """A time as 8 bytes that sort as the times do (negative ones too)."""
    return (timestamp + 2**63).to_bytes(8, "big")


def _seq(seq: int) -> bytes:
    return (seq % 2**64).to_bytes(8, "big")


def _sized(key: bytes) -> bytes:
    return len(key).to_bytes(4, "big") + key


def _filter_size(records: int) -> int:
    """A segment filter's bits for ``records`` records (:data:`KEY_BITS_PER_KEY` each, a power of two, at least
    :data:`KEY_BITS_MIN`, at most :data:`KEY_BITS`)."""
    bits = KEY_BITS_MIN
    while bits < KEY_BITS and bits < records * KEY_BITS_PER_KEY:
        bits *= 2
    return bits


def _set_bit(bits: bytearray, h: int) -> None:
    """A key's bit (its hash ``h``) set in a segment's filter."""
    bit = h & (len(bits) * 8 - 1)
    bits[bit >> 3] |= 1 << (bit & 7)


def key_bytes_of() -> LastEncoded:
    """A join key's bytes as the stores keep them, the last key's remembered (a record's fetch, put and outer-store
    calls ask for the same key): one per partition's state, shared by its :class:`RocksWindow` and
    :class:`RocksOuter`."""
    return LastEncoded(lambda key: _sized(store_key(key)))


def _read_time(data: bytes) -> int:
    return int.from_bytes(data, "big") - 2**63


def _read_seq(data: bytes) -> int:
    """An offset as :func:`_seq` wrote it (the engine's -1, no offset, comes back as -1)."""
    seq = int.from_bytes(data, "big")
    return seq - 2**64 if seq >= 2**63 else seq


def _scan(db: Any, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The items of ``db`` with ``start <= key < end``, in key order.

    RocksDB is told the end (its iterate upper bound): without it, a range with no live key left walks every
    delete marker after it up to the next live key, which the expired records leave by the ten thousand
    (20-40 ms a read, instead of microseconds, once 90,000 records had expired).
    """
    bound = ReadOptions()
    bound.set_iterate_upper_bound(end)
    for key, value in db.items(from_key=start, read_opt=bound):
        if key >= end:
            return
        yield key, value


def _keys(db: Any, start: bytes, end: bytes) -> Iterator[bytes]:
    """The keys of ``db`` with ``start <= key < end``, in key order (values unread)."""
    bound = ReadOptions()
    bound.set_iterate_upper_bound(end)
    return (key for key in db.keys(from_key=start, read_opt=bound) if key < end)


def _first(db: Any, start: bytes, end: bytes) -> bytes | None:
    """The first key of ``db`` with ``start <= key < end`` (None: none), one seek."""
    return next(_keys(db, start, end), None)


def segment_interval(retention: int) -> int:
    """The time a window store's segment spans: half the retention, as Kafka Streams' (``Stores.persistentWindowStore``,
    there at least a minute: each segment is a RocksDB database of its own; here a key prefix, so none)."""
    return max(retention // 2, 1)


def _segment(timestamp: int, interval: int) -> bytes:
    return SEGMENTS + _time(timestamp // interval)


def _segments(db: Any) -> Iterator[bytes]:
    """The prefixes of the segments a window store holds, in time order: one seek each."""
    at = SEGMENTS
    while (key := _first(db, at, SEGMENTS_END)) is not None:
        yield key[:9]
        at = SEGMENTS + _time(_read_time(key[1:9]) + 1)


def _times(db: Any, prefix: bytes, start: int, end: int) -> Iterator[tuple[bytes, bytes]]:
    """The items of a window store's segment and key (``prefix``) with ``start <= time <= end``: one range scan."""
    return _scan(db, prefix + _time(start), prefix + _time(end + 1))


#: The most bits of a window store segment's key filter (:attr:`RocksWindow.keys`, one bit a key's hash): 128 KiB a
#: segment, 2 % of the fetches that find nothing still scan at 20,000 keys a segment (the benchmark's 1,000,000
#: orders); a set of the keys' bytes took about 80 MiB more RSS there.
KEY_BITS = 2**20
#: The fewest: a segment's filter has :data:`KEY_BITS_PER_KEY` bits for each record its store's fullest segment got
#: (the newest one's share, as far as known: a quiet partition's filters take 1 KiB, not 128, a segment).
KEY_BITS_MIN, KEY_BITS_PER_KEY = 2**13, 32

#: A window or outer store's writes skip RocksDB's write-ahead log, as Kafka Streams' RocksDBStore's do: the
#: changelog is the store's durability.  A crash loses what the memtables held, Faust's changelog offset (the same
#: database) with it, so the database is as it was at an earlier point and recovery replays the changelog from there.
UNLOGGED = WriteOptions()
UNLOGGED.disable_wal = True


class Writes:
    """The direct writes of a partition's state to RocksDB (:data:`UNLOGGED`), each also kept for the store's
    changelog."""

    def __init__(self, table: faust.Table, partition: int, changes: list[Change]) -> None:
        self.table, self.partition, self.changes = table, partition, changes
        self.db = partition_db(table, partition)
        self.db.set_write_options(UNLOGGED)

    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self.changes.append((self.table, self.partition, key, value))

    def add(self, key: bytes, value: bytes) -> None:
        """:meth:`put` of a key that holds the record's offset: no other record wrote it (a record read again
        writes the same value), so it had no value before."""
        self.put(key, value)

    def delete(self, key: bytes, value: bytes | None = None) -> None:
        """``value``: the key's, when the caller read it (a journal need not read it again)."""
        self.db.delete(key)
        self.changes.append((self.table, self.partition, key, None))

    def drop(self, start: bytes, end: bytes, logged: bool = False) -> bool:
        """Every key of ``start <= key < end`` deleted at once (one range deletion) and compacted away (no marker
        left in the SST files), with no changelog record (``logged``: a delete each); whether there was one (a seek
        when there is none)."""
        if _first(self.db, start, end) is None:
            return False
        items: Iterable[tuple[bytes, bytes]] = _scan(self.db, start, end)
        if logged:
            items = list(items)
            self.changes.extend((self.table, self.partition, key, None) for key, _ in items)
        self.dropping(iter(items))
        self.db.delete_range(start, end)
        self.db.compact_range(start, end)
        return True

    def dropping(self, items: Iterator[tuple[bytes, bytes]]) -> None:
        """What :meth:`drop` is about to delete (a subclass keeps it: ``agents/stream_joins.py``'s journal)."""


class RocksWindow:
    """One side's window store of one partition in RocksDB (:class:`~streamapp.sql.stream_join.WindowStore`).

    As the in-memory store: a fetch sees nothing older than the store's stream time less the retention.  Records
    are kept by segment (:func:`segment_interval`), as Kafka Streams' ``AbstractRocksDBSegmentedBytesStore``: once
    stream time leaves a segment's records all past the retention, the segment is dropped, one range deletion
    compacted away at once (point deletions left a marker each, which flushed to SST files faster than compaction
    dropped them: the stores grew with the stream), and no changelog record: the changelog deletes by time.
    """

    def __init__(self, writes: Writes, retention: int, observed: int, swept: int, outer: Any = None,
                 key_bytes: LastEncoded | None = None) -> None:
        """Nothing read or written yet: :meth:`open` before the first record."""
        self.writes, self.retention, self.observed, self.swept = writes, retention, observed, swept
        self._key_bytes = key_bytes_of() if key_bytes is None else key_bytes
        self.interval = segment_interval(retention)
        #: The outer store's database (None: none): compacted below the retention at each drop (:meth:`expire`).
        self.outer = outer
        #: Each segment's key filter (:data:`KEY_BITS`), by segment number, from :meth:`open` on: a fetch scans a
        #: segment only where its key may be (half of them find none), and a segment's filter goes with it.  It may
        #: say yes for a key RocksDB has not (another key's bit, an undone record's key: a scan that finds nothing),
        #: never no for one it has.  Sized when the segment's first record comes (:meth:`_filter_size`).
        self.keys: dict[int, bytearray] = {}
        #: How many records each segment's filter was marked with (its keys, counted again for each of their records).
        self.marks: dict[int, int] = {}

    def open(self, written: int | None = None) -> int:
        """The store made what this run reads, once a partition's assignment (what a restore, an older layout or
        another window left): records in segments of another interval (``written``: the one kept with the stream
        times; None: this one) or in the older layout rewritten in this one's, expired segments dropped; how many
        records moved from another interval's segments (a seek each when there is nothing to do)."""
        oldest = self.observed - self.retention + 1
        moved = 0
        if written not in (None, self.interval):
            moved = self._rewrite(SEGMENTS, SEGMENTS_END, 9, oldest)
        if self.observed >= 0:
            self.migrate(oldest)
            if _first(self.writes.db, SEGMENTS, self._live(oldest)) is not None:
                self.expire(oldest)
        self.reload()
        return moved

    def reload(self) -> None:
        """:attr:`keys` read from RocksDB (one scan of the store's keys): at open, and where RocksDB changed under
        them (a record undone put back the segments it dropped)."""
        hashes: dict[int, list[int]] = {}  # one scan: each segment's filter sized by what RocksDB holds there
        for k in _keys(self.writes.db, SEGMENTS, SEGMENTS_END):
            hashes.setdefault(_read_time(k[1:9]), []).append(hash(k[9:-16]))
        self.keys, self.marks = {}, {}
        for segment, found in hashes.items():
            bits = self.keys[segment] = bytearray(_filter_size(len(found)) // 8)
            for h in found:
                _set_bit(bits, h)
            self.marks[segment] = len(found)

    def _mark(self, segment: int, sized: bytes) -> None:
        bits = self.keys.get(segment)
        if bits is None:
            bits = self.keys[segment] = bytearray(_filter_size(max(self.marks.values(), default=0)) // 8)
        _set_bit(bits, hash(sized))
        self.marks[segment] = self.marks.get(segment, 0) + 1

    def may_hold(self, segment: int, sized: bytes) -> bool:
        """Whether segment number ``segment`` may hold records of the key ``sized`` (:attr:`keys`)."""
        bits = self.keys.get(segment)
        if bits is None:
            return False
        bit = hash(sized) & (len(bits) * 8 - 1)
        return bits[bit >> 3] >> (bit & 7) & 1 == 1

    def _live(self, oldest: int) -> bytes:
        return _segment(oldest, self.interval)

    def put(self, key: Any, timestamp: int, row: Row, seq: int) -> bool:
        self.observed = max(self.observed, timestamp)
        oldest = self.observed - self.retention + 1
        if timestamp < oldest:
            return False
        if oldest // self.interval > (self.swept - self.retention + 1) // self.interval:  # a segment left
            self.swept = self.observed
            self.expire(oldest)
        segment, sized = timestamp // self.interval, self._key_bytes(key)
        self.writes.add(SEGMENTS + _time(segment) + sized + _time(timestamp) + _seq(seq), pickle.dumps(row, protocol=5))
        self._mark(segment, sized)
        return True

    def fetch(self, key: Any, start: int, end: int) -> list[tuple[int, Row]]:
        start = max(start, self.observed - self.retention + 1)
        end = min(end, self.observed)  # none is later: a record's window ahead of the store scans no segment there
        if start > end:
            return []
        sized = self._key_bytes(key)
        return [(_read_time(k[-16:-8]), pickle.loads(v))
                for s in range(start // self.interval, end // self.interval + 1) if self.may_hold(s, sized)
                for k, v in _times(self.writes.db, SEGMENTS + _time(s) + sized, start, end)]

    def expire(self, oldest: int) -> bool:
        """Drop the segments whose records are all older than ``oldest``; whether there were any.  The outer store's
        range older than ``oldest`` is compacted too: its records go one by one as they match or their window closes,
        and their deletion markers, flushed to SST files, would stay until four of them gathered (its live records
        stay: a compaction drops only what was deleted)."""
        dropped = self.writes.drop(SEGMENTS, self._live(oldest))
        for segment in [s for s in self.keys if s < oldest // self.interval]:
            del self.keys[segment]
            self.marks.pop(segment, None)
        if self.outer is not None:
            self.outer.compact_range(DATA, DATA + _time(oldest))
        return dropped

    def migrate(self, oldest: int) -> int:
        """An older layout's records (DATA) no older than ``oldest`` rewritten in their segments, the older layout
        dropped (its time index too); how many were rewritten (a seek when there is none)."""
        return self._rewrite(DATA, META, 1, oldest)

    def _rewrite(self, start: bytes, end: bytes, head: int, oldest: int) -> int:
        """The records of ``start <= key < end`` (a key: ``head`` bytes, then the record's key, time and offset; a
        time index's keys dropped) no older than ``oldest`` rewritten in this store's segments; how many (a seek when
        there are none).  The old keys' deletes go to the changelog before the new keys, so a restore holds the
        rewritten records only (a record whose key stays is deleted, then put again)."""
        if _first(self.writes.db, start, end) is None:
            return 0
        kept = [(k[head:], v) for k, v in _scan(self.writes.db, start, end)
                if k[:1] != INDEX and _read_time(k[-16:-8]) >= oldest]
        self.writes.drop(start, end, logged=True)
        for k, v in kept:
            self.writes.put(_segment(_read_time(k[-16:-8]), self.interval) + k, v)
        return len(kept)

    def __len__(self) -> int:
        return sum(1 for _ in _scan(self.writes.db, SEGMENTS, SEGMENTS_END))


class RocksOuter:
    """The outer store of one partition in RocksDB (:class:`~streamapp.sql.stream_join.OuterStore`): a record
    by (time, this side?, key, offset); its entries in the engine's order (the key's output bytes break ties).

    :attr:`waiting`: the (time, side, key) prefixes of its records, read from RocksDB when it is built (one scan of
    its keys) and kept in memory as long as it is (the partition's assignment), so that a match looks in RocksDB only
    where a record waits (most find none: their partner was matched, not unmatched, or never waited), and a look for
    closed windows starts at the oldest.  Whoever writes the database otherwise (a put back) refreshes it
    (:meth:`reload`).
    """

    def __init__(self, writes: Writes, order: Any, key_bytes: LastEncoded | None = None) -> None:
        self.writes, self._order = writes, order
        self._key_bytes = key_bytes_of() if key_bytes is None else key_bytes
        self.waiting = self.reload(set())

    def reload(self, waiting: set[bytes]) -> set[bytes]:
        """``waiting`` refilled with the prefixes the database holds (in place: its holders see them)."""
        waiting.clear()
        waiting.update(k[:-8] for k in _keys(self.writes.db, DATA, INDEX))
        return waiting

    def _prefix(self, timestamp: int, this_is_left: bool, key: Any) -> bytes:
        return DATA + _time(timestamp) + (b"\x01" if this_is_left else b"\x00") + self._key_bytes(key)

    def add(self, timestamp: int, this_is_left: bool, key: Any, row: Row, seq: int) -> None:
        prefix = self._prefix(timestamp, this_is_left, key)
        self.writes.add(prefix + _seq(seq), pickle.dumps((key, row), protocol=5))
        self.waiting.add(prefix)

    def discard(self, timestamp: int, this_is_left: bool, key: Any) -> None:
        prefix = self._prefix(timestamp, this_is_left, key)
        if prefix in self.waiting:
            self._take(prefix)  # matched: its rows are not read

    def entries(self) -> Iterator[tuple[int, bool, Any]]:
        """The entries as the engine orders them, read as it asks: RocksDB holds them by (time, side), so only a
        (time, side)'s few are sorted (by the key's output bytes), and the engine's stop, at the first open window of
        each side, leaves the later ones unread (and unpickled).  Its pops while it reads are not seen: RocksDB's
        iterator reads the database as it was when the scan began."""
        if not self.waiting:
            return
        firsts: dict[bytes, bytes] = {}
        head = b""
        for k, v in _scan(self.writes.db, min(self.waiting), INDEX):  # not Faust's own keys (its changelog offset)
            if k[:10] != head:
                yield from self._ordered(firsts)
                firsts, head = {}, k[:10]
            firsts.setdefault(k[:-8], v)
        yield from self._ordered(firsts)

    def _ordered(self, firsts: dict[bytes, bytes]) -> list[tuple[int, bool, Any]]:
        """One (time, side)'s entries, by the key's output bytes."""
        entries = [(_read_time(k[1:9]), k[9] == 1, k) for k in firsts]
        return sorted(entries, key=lambda e: self._order(pickle.loads(firsts[e[2]])[0]) or b"")

    def pop(self, entry: tuple[int, bool, Any]) -> list[tuple[Any, Row]]:
        return [pickle.loads(v) for v in self._take(entry[2])]

    def _take(self, prefix: bytes) -> list[bytes]:
        """The values of a (time, side, key)'s records, deleted."""
        self.waiting.discard(prefix)
        found = list(_scan(self.writes.db, prefix, prefix + b"\xff" * 9))
        for k, v in found:
            self.writes.delete(k, v)
        return [v for _, v in found]


#: The widest time range a read may ask for (a store's times are 8-byte signed milliseconds; the end is exclusive).
MIN_TIME, MAX_TIME = -(2**63), 2**63 - 2


@dataclass(frozen=True)
class StoredRecord:
    """A record a store holds: its event time, its offset in its topic, its row's columns; in the outer store, also
    whether it is of the join's "this" side (the left one, the right one of a RIGHT join)."""

    time: int
    offset: int
    columns: dict[str, Any]
    this_side: bool | None = None


def window_records(db: Any, key: Any, start: int, end: int) -> list[StoredRecord]:
    """Join key ``key``'s records in one partition's window store with ``start <= time <= end``, by time then
    offset: one range scan a segment, what the join itself reads (expired records not dropped yet included)."""
    sized = _sized(store_key(key))
    return [StoredRecord(_read_time(k[-16:-8]), _read_seq(k[-8:]), pickle.loads(v)[0])
            for segment in _segments(db) for k, v in _times(db, segment + sized, start, end)]


def outer_records(db: Any, key: Any, start: int, end: int) -> list[StoredRecord]:
    """Join key ``key``'s unmatched records waiting in one partition's outer store with ``start <= time <= end``:
    the store is by time first, so the time range is scanned and the key picked out."""
    sized = _sized(store_key(key))
    return [StoredRecord(_read_time(k[1:9]), _read_seq(k[-8:]), pickle.loads(v)[1][0], k[9] == 1)
            for k, v in _scan(db, DATA + _time(start), DATA + _time(end + 1)) if k[10:-8] == sized]


def stream_times(db: Any) -> dict[str, Any]:
    """What one partition's state keeps of its stream times (in the left window store's database): the join's
    ``stream_time``, per side ``[observed, swept]``, and the window stores' ``segment`` interval (none before
    it was kept); empty before the partition's first record."""
    return read_stream_times(db.get(META))


def read_stream_times(value: bytes | None) -> dict[str, Any]:
    """:func:`stream_times` of the value kept under :data:`META` (None: none kept)."""
    return json.loads(value) if value is not None else {}


def stream_times_value(stream_time: int, sides: Mapping[str, tuple[int, int]], segment: int) -> bytes:
    """The value :func:`stream_times` reads: the join's stream time, each side's (observed, swept), and the
    segment interval the window stores are written with (``segment``)."""
    return json.dumps({"stream_time": stream_time, **{side: list(times) for side, times in sides.items()},
                       "segment": segment}).encode()
