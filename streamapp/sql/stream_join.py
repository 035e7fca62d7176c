"""Windowed stream-stream joins (``STREAM_STREAM_JOIN``): Kafka Streams' ``KStreamKStreamJoin`` as ksqlDB
builds it, fed one record at a time.  Its state (:class:`JoinState`: the two window stores, the outer store, stream
time) is in memory here; the worker hands it one held in RocksDB per partition (``agents/stream_joins.py``), so
both run this one decision.  See docs/reference/statements.md."""
from __future__ import annotations

import json
from operator import itemgetter
from typing import Any, Callable, Iterable, NamedTuple, Protocol

from . import plan as p
from .engine import Output, Reader, Record, Row
from .expressions import compile_expression
from .table_join import TwoSided

#: The value column that carries a re-keyed stream record's event time through its repartition topic (a name no
#: declared column takes: ksqlDB reserves it); a re-keyed null value's time is its record's (``Rekeyer.null_value``).
ROWTIME = "ROWTIME"

#: Kafka Streams' grace of a join window declared without one (``JoinWindows.of``): 24 hours less twice ``before``.
LEGACY_GRACE_MS = 24 * 3_600_000
#: How often (wall-clock milliseconds) Kafka Streams looks for unmatched records whose window closed
#: (``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``, 1000 by default).
EMIT_INTERVAL_MS = 1000


class JoinWindowSpec(NamedTuple):
    """A join window in milliseconds, as Kafka Streams' ``JoinWindows`` holds it."""

    before: int
    after: int
    grace: int | None  # None: no GRACE PERIOD (legacy: eager left/outer results)

    @property
    def grace_ms(self) -> int:
        """The grace Kafka Streams applies: the declared one, else the legacy 24 hours less twice ``before``."""
        return self.grace if self.grace is not None else max(LEGACY_GRACE_MS - 2 * self.before, 0)

    @property
    def retention(self) -> int:
        """How long a record stays in its side's window store: the window's size plus its grace."""
        return self.before + self.after + self.grace_ms


def join_bounds(window: JoinWindowSpec, timestamp: int, this_is_left: bool) -> tuple[int, int]:
    """The time range of the other side's records a record at ``timestamp`` joins: ``[t - before, t + after]``
    for the left ("this") side, the mirror image for the other (Kafka Streams floors both at 0)."""
    before, after = (window.before, window.after) if this_is_left else (window.after, window.before)
    return max(0, timestamp - before), max(0, timestamp + after)


class WindowStore(Protocol):
    """One side's records by join key and time (Kafka Streams' join window store)."""

    def put(self, key: Any, timestamp: int, row: Row, seq: int) -> bool:
        """Keep the record (``seq``: its place among the key's records of one time); False: older than the
        retention, dropped."""

    def fetch(self, key: Any, start: int, end: int) -> list[tuple[int, Row]]:
        """The key's records of ``[start, end]`` still within the retention, by time then arrival."""


class OuterStore(Protocol):
    """The unmatched records of an outer side waiting for their window to close (Kafka Streams' outer store), by
    (time, this side?, join key); :meth:`entries` in its order: time, the other side first, the key's bytes."""

    def add(self, timestamp: int, this_is_left: bool, key: Any, row: Row, seq: int) -> None: ...

    def discard(self, timestamp: int, this_is_left: bool, key: Any) -> None: ...

    def entries(self) -> Iterable[tuple[int, bool, Any]]: ...

    def pop(self, entry: tuple[int, bool, Any]) -> list[tuple[Any, Row]]: ...


class JoinState:
    """What a join remembers between records, for one task (the worker: one partition of both topics): the
    two sides' window stores, the outer store (None: INNER or no GRACE PERIOD), stream time."""

    def __init__(self, stores: dict[str, WindowStore], outer: OuterStore | None, stream_time: int = -1) -> None:
        self.stores, self.outer, self.stream_time = stores, outer, stream_time
        #: The oldest waiting unmatched record's time, as far as known (a lower bound: 0 after a restore).
        self.min_time = _NEVER
        self.next_emit = 0


class _WindowStore:
    """One side's records by key, for the window's retention: Kafka Streams' join window store, in memory.

    A fetch sees only records no older than the store's stream time less its retention (a record that was
    already expired when it arrived is never seen), as ``AbstractRocksDBSegmentedBytesStore.fetch`` does.
    """

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -1
        self.rows: dict[Any, list[tuple[int, Row]]] = {}
        self._swept = -1

    def put(self, key: Any, timestamp: int, row: Row, seq: int = 0) -> bool:
        """Keep the record; False when it is already older than the retention (it is dropped)."""
        key = _hashable(key)
        self.observed = max(self.observed, timestamp)
        oldest = self.observed - self.retention + 1
        if timestamp < oldest:
            return False
        if self.observed - self._swept >= self.retention:  # once a retention: what expired goes, keys included
            self._swept = self.observed
            self.rows = {k: kept for k, v in self.rows.items() if (kept := [x for x in v if x[0] >= oldest])}
        kept = [x for x in self.rows.get(key, ()) if x[0] >= oldest]  # the expired ones go, as segments do
        kept.append((timestamp, row))
        kept.sort(key=itemgetter(0))  # by time, duplicates in arrival order (a stable sort)
        self.rows[key] = kept
        return True

    def fetch(self, key: Any, start: int, end: int) -> list[tuple[int, Row]]:
        start = max(start, self.observed - self.retention + 1)
        return [x for x in self.rows.get(_hashable(key), ()) if start <= x[0] <= end]

    def __len__(self) -> int:
        return sum(len(v) for v in self.rows.values())


class _OuterStore:
    """The outer store in memory; ``order``: a key's bytes, its place among entries of one time and side."""

    def __init__(self, order: Callable[[Any], bytes | None]) -> None:
        self._order = order
        self._rows: dict[tuple[int, bool, Any], list[tuple[Any, Row]]] = {}

    def add(self, timestamp: int, this_is_left: bool, key: Any, row: Row, seq: int = 0) -> None:
        self._rows.setdefault((timestamp, this_is_left, _hashable(key)), []).append((key, row))

    def discard(self, timestamp: int, this_is_left: bool, key: Any) -> None:
        self._rows.pop((timestamp, this_is_left, _hashable(key)), None)

    def entries(self) -> list[tuple[int, bool, Any]]:
        return sorted(self._rows, key=lambda e: (e[0], e[1], self._order(self._rows[e][0][0]) or b""))

    def pop(self, entry: tuple[int, bool, Any]) -> list[tuple[Any, Row]]:
        return self._rows.pop(entry)


class StreamJoin(TwoSided):
    """A windowed stream-stream join (``STREAM_STREAM_JOIN``), fed one record at a time: Kafka Streams'
    ``KStreamKStreamJoin`` as ksqlDB builds it (``StreamStreamJoinBuilder``).

    - A record joins every record of the other side with the same join key whose time is within the window
      (:func:`join_bounds`); each pair is written with the later of the two times.  RIGHT is the right stream
      left-joined with the left one (its window mirrored), as ksqlDB builds it.
    - A record of an outer side (LEFT's left, RIGHT's right, either of FULL) that finds no match: with no GRACE
      PERIOD it is written at once with NULLs (the legacy join); with one, it waits in the outer store and is
      written only when stream time shows its window closed (and only if no match came), unless its window had
      already closed when it arrived.  Kafka Streams looks for closed windows at most every
      ``EMIT_INTERVAL_MS`` of wall-clock time (``clock``): the test driver's clock never moves, so, as in
      ksqlDB's tests, it looks once.
    - A null value is dropped, a null join key too, but an outer side's is written at once with NULLs (KIP-962).
    - A record older than stream time less the window and its grace is too late: it is never stored, so no
      later record joins it (``late`` counts them), though it still joins what is stored.
    """

    def __init__(self, plan: p.Plan, query: p.Query, clock: Callable[[], int] = lambda: 0) -> None:
        assert query.kind == p.STREAM_STREAM_JOIN and query.within_before is not None and query.within_after is not None
        assert query.left_key is not None and query.right_key is not None
        super().__init__(plan, query)
        self.window = join_window(query)
        #: Kafka Streams' "this" side: the left stream, but the right one of a RIGHT join (``right.leftJoin(left)``).
        self.this_side = side_of(query, this_side=True)
        self._outer = {self.this_side: query.join_type != "INNER", _other(self.this_side): query.join_type == "FULL"}
        #: The state in use: this one in memory, unless the worker hands it a partition's (:meth:`new_state`).
        self.state = self.new_state()
        self._clock = clock
        #: Records that arrived too late to be stored for later joins (Kafka Streams' dropped-records count).
        self.late = 0
        self._keys = {p.LEFT_SIDE: compile_expression(query.left_key), p.RIGHT_SIDE: compile_expression(query.right_key)}
        #: Whether the query reads where a record was read (ROWPARTITION, ROWOFFSET): each row is then given them.
        self._where_read = bool(where_read(query))

    @property
    def has_outer(self) -> bool:
        """Whether unmatched records wait for their window to close (an outer join with a GRACE PERIOD)."""
        return self.query.grace is not None and self.query.join_type != "INNER"

    def new_state(self) -> JoinState:
        """A new state in memory."""
        retention = self.window.retention
        return JoinState({p.LEFT_SIDE: _WindowStore(retention), p.RIGHT_SIDE: _WindowStore(retention)},
                         _OuterStore(self.sink_codec.encode_key) if self.has_outer else None)

    def _join_key(self, side: str, row: Row) -> Any:
        return self._keys[side](None, row, None) if side == p.LEFT_SIDE else self._keys[side](None, None, row)

    def _update(self, side: str, reader: Reader, record: Record) -> list[Output]:
        _, row = reader.row(record)
        if row is None:  # a null value joins nothing, but moves stream time by its record's (KStreamKStreamJoin); not
            # when its time is a column of its value (ksqlDB drops it at the source); a re-keyed one's is its record's
            if reader.source.timestamp in (None, ROWTIME):
                self.state.stream_time = max(self.state.stream_time, record.timestamp)
            return []
        if self._where_read:  # unless the row carries its own (the worker's re-keyed stream: its source's)
            for name, where in zip(_WHERE_READ, (record.partition, record.offset)):
                row[0].setdefault(name, where)
        timestamp = row[1]
        key = self._join_key(side, row)
        this_is_left = side == self.this_side
        outer = self._outer[side]
        state = self.state
        state.stream_time = max(state.stream_time, timestamp)
        outputs: list[Output] = []
        if key is None:
            return self._output(key, side, row, None, timestamp) if outer else []
        if timestamp == state.stream_time and state.outer is not None:
            outputs += self._emit_closed(this_is_left)
        start, end = join_bounds(self.window, timestamp, this_is_left)
        matches = state.stores[_other(side)].fetch(key, start, end)
        for other_time, other_row in matches:
            if state.outer is not None:
                state.outer.discard(other_time, not this_is_left, key)
            outputs += self._output(key, side, row, other_row, max(timestamp, other_time))
        if not matches and outer:
            if state.outer is None or end < state.stream_time:
                outputs += self._output(key, side, row, None, timestamp)
            else:
                state.min_time = min(state.min_time, timestamp)
                state.outer.add(timestamp, this_is_left, key, row, record.offset)
        if not state.stores[side].put(key, timestamp, row, record.offset):
            self.late += 1
        return outputs

    def _emit_closed(self, this_is_left: bool) -> list[Output]:
        """The waiting unmatched records whose window has closed by stream time (``emitNonJoinedOuterRecords``)."""
        state = self.state
        assert state.outer is not None
        grace = self.window.grace_ms
        after = self.window.after if this_is_left else self.window.before
        if state.min_time + after + grace >= state.stream_time:
            return []
        now = self._clock()
        if now < state.next_emit:
            return []
        state.next_emit = now + EMIT_INTERVAL_MS
        state.min_time = _NEVER
        outputs: list[Output] = []
        open_sides: set[bool] = set()
        for entry in state.outer.entries():
            timestamp, left_side, _ = entry
            state.min_time = timestamp
            if len(open_sides) == 2:
                break
            look_back = self.window.after if left_side else self.window.before
            if timestamp + look_back + grace >= state.stream_time:
                open_sides.add(left_side)
                continue
            side = self.this_side if left_side else _other(self.this_side)
            for key, row in state.outer.pop(entry):
                outputs += self._output(key, side, row, None, timestamp)
        return outputs

    def _output(self, key: Any, side: str, row: Row, other: Row | None, timestamp: int) -> list[Output]:
        """The joined record of ``row`` (of ``side``) and ``other`` (None: unmatched), unless WHERE drops it."""
        left, right = (row, other) if side == p.LEFT_SIDE else (other, row)
        if self._where is not None and self._where(key, left, right) is not True:
            return []
        value, timestamp = self._value(key, left, right, timestamp)
        return [Output(Record(self.sink.topic, self.sink_codec.encode_key(key), value, timestamp), other is not None)]


_NEVER = 2**63 - 1
#: The pseudo columns of where a record was read, as a stream-stream join's rows hold them.
_WHERE_READ = tuple(c.name for c in p.WHERE_READ)


def where_read(query: p.Query) -> tuple[str, ...]:
    """The pseudo columns of where a record was read (``ROWPARTITION``, ``ROWOFFSET``) that a join reads."""
    read = json.dumps([p.expression_to_dict(x) for x in (query.left_key, query.right_key, query.where,
                                                          *(y.expression for y in query.projection)) if x])
    return tuple(name for name in _WHERE_READ if f'"{name}"' in read)


def _hashable(key: Any) -> Any:
    """A join key as a store looks it up: an ARRAY or STRUCT key by its JSON text (its fields in order)."""
    if isinstance(key, (list, dict)):
        return json.dumps(key, sort_keys=True, default=str)
    return key


def store_key(key: Any) -> bytes:
    """A join key's bytes in a store held outside this process (the worker's RocksDB): equal keys, equal bytes
    (JSON; an integer's written directly, and one encoder reused: ``json.dumps(default=str)`` builds one a call)."""
    if type(key) is int:
        return str(key).encode()
    return _KEY_JSON(_hashable(key)).encode("utf-8")


_KEY_JSON = json.JSONEncoder(default=str).encode


def _other(side: str) -> str:
    return p.RIGHT_SIDE if side == p.LEFT_SIDE else p.LEFT_SIDE


def join_window(query: p.Query) -> JoinWindowSpec:
    """A stream-stream join's window, as its query declares it (``WITHIN``, ``GRACE PERIOD``)."""
    assert query.within_before is not None and query.within_after is not None
    return JoinWindowSpec(query.within_before, query.within_after, query.grace)


def side_of(query: p.Query, this_side: bool) -> str:
    """Kafka Streams' "this" side of the join (``this_side``), else the other: the left stream, but the right one of a
    RIGHT join, which ksqlDB builds as ``right.leftJoin(left)``."""
    first = p.RIGHT_SIDE if query.join_type == "RIGHT" else p.LEFT_SIDE
    return first if this_side else _other(first)
