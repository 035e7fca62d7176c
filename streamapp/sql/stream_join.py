"""Windowed stream-stream joins (``STREAM_STREAM_JOIN``): Kafka Streams' ``KStreamKStreamJoin`` as ksqlDB
builds it, fed one record at a time.  Its state (:class:`JoinState`: the two window stores, the outer store, stream
time) is in memory here; the worker hands it one held in RocksDB per partition (``agents/stream_joins.py``), so
both run this one decision.  See docs/reference/statements.md."""
from __future__ import annotations

import json
from bisect import insort
from operator import itemgetter
from typing import Any, Callable, Iterable, NamedTuple, Protocol

from . import plan as p
from .engine import Output, Reader, Record, Row, ValueWriter
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


def side_window(window: JoinWindowSpec, this_is_left: bool) -> tuple[int, int]:
    """How far before and after its own time a record of a side joins the other's: the window as declared for the
    left ("this") side, its mirror image for the other."""
    return (window.before, window.after) if this_is_left else (window.after, window.before)


def join_bounds(window: JoinWindowSpec, timestamp: int, this_is_left: bool) -> tuple[int, int]:
    """The time range of the other side's records a record at ``timestamp`` joins: ``[t - before, t + after]``
    (:func:`side_window`; Kafka Streams floors both at 0)."""
    before, after = side_window(window, this_is_left)
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
        if timestamp > self.observed:
            self.observed = timestamp
        oldest = self.observed - self.retention + 1
        if timestamp < oldest:
            return False
        if self.observed - self._swept >= self.retention:  # once a retention: what expired goes, keys included
            self._swept = self.observed
            self.rows = {k: v if v[0][0] >= oldest else [x for x in v if x[0] >= oldest]
                         for k, v in self.rows.items() if v[-1][0] >= oldest}  # by time: the last is the newest
        kept = self.rows.get(key)
        if kept is None:
            self.rows[key] = [(timestamp, row)]
            return True
        if kept[0][0] < oldest:  # the expired ones go, as segments do (a key's records are kept by time)
            kept = self.rows[key] = [x for x in kept if x[0] >= oldest]
        insort(kept, (timestamp, row), key=_TIME)  # by time, after those of its time: duplicates in arrival order
        return True

    def fetch(self, key: Any, start: int, end: int) -> list[tuple[int, Row]]:
        kept = self.rows.get(_hashable(key))
        if not kept:
            return []
        oldest = self.observed - self.retention + 1
        if start < oldest:
            start = oldest
        return [x for x in kept if start <= x[0] <= end]

    def __len__(self) -> int:
        return sum(len(v) for v in self.rows.values())


class _OuterStore:
    """The outer store in memory; ``order``: a key's bytes, its place among entries of one time and side."""

    def __init__(self, order: Callable[[Any], bytes | None]) -> None:
        self._order = order
        self._rows: dict[tuple[int, bool, Any], list[tuple[Any, Row]]] = {}
        #: Each entry's place in :meth:`entries`, worked out when it comes: (time, side, its first key's bytes).
        self._places: dict[tuple[int, bool, Any], tuple[int, bool, bytes]] = {}

    def add(self, timestamp: int, this_is_left: bool, key: Any, row: Row, seq: int = 0) -> None:
        entry = (timestamp, this_is_left, _hashable(key))
        waiting = self._rows.get(entry)
        if waiting is None:
            self._rows[entry] = [(key, row)]
            self._places[entry] = (timestamp, this_is_left, self._order(key) or b"")
        else:
            waiting.append((key, row))

    def discard(self, timestamp: int, this_is_left: bool, key: Any) -> None:
        entry = (timestamp, this_is_left, _hashable(key))
        if self._rows.pop(entry, None) is not None:
            del self._places[entry]

    def entries(self) -> list[tuple[int, bool, Any]]:
        return sorted(self._rows, key=self._places.__getitem__)

    def pop(self, entry: tuple[int, bool, Any]) -> list[tuple[Any, Row]]:
        del self._places[entry]
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
        outer = {self.this_side: query.join_type != "INNER", _other(self.this_side): query.join_type == "FULL"}
        #: The state in use: this one in memory, unless the worker hands it a partition's (:meth:`new_state`).
        self.state = self.new_state()
        self._clock = clock
        #: Records that arrived too late to be stored for later joins (Kafka Streams' dropped-records count).
        self.late = 0
        #: Whether the query reads where a record was read (ROWPARTITION, ROWOFFSET): each row is then given them.
        self._where_read = bool(where_read(query))
        #: Each topic's sides (two for a self-join), the left one first.
        self._sides: dict[str, list[_Side]] = {}
        for name, reader, key in ((p.LEFT_SIDE, self.left, query.left_key), (p.RIGHT_SIDE, self.right, query.right_key)):
            self._sides.setdefault(reader.source.topic, []).append(
                _Side(name, reader, _key_of(key, name), name == self.this_side, outer[name], self.window))
        types = {(side, c.name): c.type for side, reader in ((p.LEFT_SIDE, self.left), (p.RIGHT_SIDE, self.right))
                 for c in reader.source.columns}
        writer = ValueWriter(query.value, self.sink, types)
        #: The value's JSON written straight from the rows (None: through the codec, as :meth:`_value` writes it).
        self._writer = writer if (writer.usable and self.sink.timestamp is None and tuple(x.name for x in query.value)
                                  == tuple(c.name for c in self.sink.value_columns)) else None
        self._topic = self.sink.topic
        #: An output key's bytes: a record's outputs share its key.
        self._key_bytes = LastEncoded(self.sink_codec.encode_key)

    @property
    def has_outer(self) -> bool:
        """Whether unmatched records wait for their window to close (an outer join with a GRACE PERIOD)."""
        return self.query.grace is not None and self.query.join_type != "INNER"

    def new_state(self) -> JoinState:
        """A new state in memory."""
        retention = self.window.retention
        return JoinState({p.LEFT_SIDE: _WindowStore(retention), p.RIGHT_SIDE: _WindowStore(retention)},
                         _OuterStore(self.sink_codec.encode_key) if self.has_outer else None)

    def process(self, record: Record) -> list[Output]:
        """What one record of either source makes the join write; RecordError when it cannot be read."""
        sides = self._sides.get(record.topic)
        if sides is None:
            return []
        if len(sides) == 1:
            return self._update(sides[0], record)
        return [out for side in sides for out in self._update(side, record)]

    def _update(self, side: _Side, record: Record) -> list[Output]:  # type: ignore[override]
        _, row = side.read(record.key, record.value, record.timestamp)
        state = self.state
        if row is None:  # a null value joins nothing, but moves stream time by its record's (KStreamKStreamJoin); not
            # when its time is a column of its value (ksqlDB drops it at the source); a re-keyed one's is its record's
            if side.moves_time and record.timestamp > state.stream_time:
                state.stream_time = record.timestamp
            return []
        if self._where_read:  # unless the row carries its own (the worker's re-keyed stream: its source's)
            for name, where in zip(_WHERE_READ, (record.partition, record.offset)):
                row[0].setdefault(name, where)
        timestamp = row[1]
        key = side.key(row)
        if timestamp > state.stream_time:
            state.stream_time = timestamp
        outputs: list[Output] = []
        if key is None:
            if side.outer:
                self._output(outputs, key, side.name, row, None, timestamp, {})
            return outputs
        outer = state.outer
        if outer is not None and timestamp == state.stream_time and state.min_time + side.closes < timestamp:
            self._emit_closed(outputs)
        start, end = timestamp - side.before, timestamp + side.after
        matches = state.stores[side.other].fetch(key, 0 if start < 0 else start, 0 if end < 0 else end)
        if matches:
            texts: dict[str, str] = {}  # the left row's columns as JSON, once a record: a right one's change per match
            for other_time, other_row in matches:
                if outer is not None:
                    outer.discard(other_time, not side.this_is_left, key)
                self._output(outputs, key, side.name, row, other_row,
                             other_time if other_time > timestamp else timestamp, texts if side.is_left else {})
        elif side.outer:
            if outer is None or end < state.stream_time:
                self._output(outputs, key, side.name, row, None, timestamp, {})
            else:
                if timestamp < state.min_time:
                    state.min_time = timestamp
                outer.add(timestamp, side.this_is_left, key, row, record.offset)
        if not state.stores[side.name].put(key, timestamp, row, record.offset):
            self.late += 1
        return outputs

    def _emit_closed(self, outputs: list[Output]) -> None:
        """The waiting unmatched records whose window has closed by stream time (``emitNonJoinedOuterRecords``),
        looked for once the oldest one's window may have closed, at most every ``EMIT_INTERVAL_MS``."""
        state = self.state
        assert state.outer is not None
        now = self._clock()
        if now < state.next_emit:
            return
        state.next_emit = now + EMIT_INTERVAL_MS
        state.min_time = _NEVER
        grace = self.window.grace_ms
        open_sides: set[bool] = set()
        for entry in state.outer.entries():
            timestamp, left_side, _ = entry
            state.min_time = timestamp
            if len(open_sides) == 2:
                break
            look_back = side_window(self.window, left_side)[1]
            if timestamp + look_back + grace >= state.stream_time:
                open_sides.add(left_side)
                continue
            side = self.this_side if left_side else _other(self.this_side)
            for key, row in state.outer.pop(entry):
                self._output(outputs, key, side, row, None, timestamp, {})

    def _output(self, outputs: list[Output], key: Any, side: str, row: Row, other: Row | None, timestamp: int,
                texts: dict[str, str]) -> None:
        """Add the joined record of ``row`` (of ``side``) and ``other`` (None: unmatched) to ``outputs``, unless WHERE
        drops it; ``texts``: the left row's columns as JSON (:class:`~streamapp.sql.engine.ValueWriter`)."""
        left, right = (row, other) if side == p.LEFT_SIDE else (other, row)
        if self._where is not None and self._where(key, left, right) is not True:
            return
        text = None if self._writer is None else self._writer(left, right, texts)
        if text is None:
            value, timestamp = self._value(key, left, right, timestamp)
        else:
            value = text.encode("utf-8")
        # Output(Record(...)) without the two Python calls of NamedTuple.__new__ (which makes the same tuples)
        outputs.append(_new(Output, (_new(Record, (self._topic, self._key_bytes(key), value, timestamp, 0, -1)),
                                     other is not None)))


class LastEncoded:
    """``encode(key)``, the last key's bytes remembered: a record's calls (its outputs, its store calls) ask for the
    same key object, which nobody changes in place."""

    __slots__ = ("_encode", "_key", "_bytes")

    def __init__(self, encode: Callable[[Any], Any]) -> None:
        self._encode, self._key, self._bytes = encode, LastEncoded, None

    def __call__(self, key: Any) -> Any:
        if key is not self._key:
            self._bytes, self._key = self._encode(key), key
        return self._bytes


class _Side:
    """One side of a join as its records' hot path reads it, worked out once: its reader, join key, window bounds."""

    __slots__ = ("name", "other", "is_left", "read", "key", "this_is_left", "outer", "before", "after", "closes",
                 "moves_time")

    def __init__(self, name: str, reader: Reader, key: Callable[[Row], Any], this_is_left: bool, outer: bool,
                 window: JoinWindowSpec) -> None:
        self.name, self.other, self.is_left = name, _other(name), name == p.LEFT_SIDE
        self.read, self.key, self.this_is_left, self.outer = reader.read, key, this_is_left, outer
        #: The other side's times a record at t joins: [t - before, t + after] (:func:`join_bounds`, floored at 0).
        self.before, self.after = side_window(window, this_is_left)
        #: A waiting record of this side at t is past its window once stream time passes t + closes.
        self.closes = self.after + window.grace_ms
        #: A null value moves stream time by its record's time: not when its time is a column of its value.
        self.moves_time = reader.source.timestamp in (None, ROWTIME)


def _key_of(expression: p.Expression, side: str) -> Callable[[Row], Any]:
    """A side's join key as a function of its row: a column read straight from it, else the compiled expression."""
    while isinstance(expression, p.AsValue):
        expression = expression.argument
    if isinstance(expression, p.ColumnOf) and expression.side == side:
        name = expression.name
        return lambda row: row[0].get(name)
    compiled = compile_expression(expression)
    if side == p.LEFT_SIDE:
        return lambda row: compiled(None, row, None)
    return lambda row: compiled(None, None, row)


_new = tuple.__new__
_TIME = itemgetter(0)


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
    if type(key) is int or type(key) is str:
        return key
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
