"""Table-table joins on the primary key (``TABLE_TABLE_JOIN``): Kafka Streams' KTable-KTable joins as ksqlDB
builds them, fed one record at a time.  An update of either side writes the key's joined row, or a tombstone
when the key had a result and no longer has one (:func:`forwards`); the output's timestamp is the later of the
two rows'.  :class:`TwoSided` is what they share with stream-stream joins."""
from __future__ import annotations

from typing import Any

from ..model.records import MAX_TIMESTAMP_MS, RecordError
from . import plan as p
from .engine import Output, Reader, Record, Row, null_table_key
from .formats import Codec
from .expressions import compile_expression

#: Which side's row a table-table join keeps when the other side has none, by join type.
PRESERVED = {"INNER": (), "LEFT": (p.LEFT_SIDE,), "RIGHT": (p.RIGHT_SIDE,), "FULL": (p.LEFT_SIDE, p.RIGHT_SIDE)}


def has_result(join_type: str, left: Row | None, right: Row | None) -> bool:
    """Whether a key whose sides hold these rows has a row in the join's result."""
    if left is not None and right is not None:
        return True
    present = p.LEFT_SIDE if left is not None else p.RIGHT_SIDE if right is not None else None
    return present in PRESERVED[join_type]


def forwards(join_type: str, side: str, new: Row | None, old: Row | None, other: Row | None) -> bool:
    """Whether an update of ``side`` (its row ``old`` -> ``new``) reaches the join's output at all.

    Kafka Streams' ``KTableKTable{Inner,Left,Right,Outer}Join`` processors, with old values sent as ksqlDB's
    joins have them: an update whose other side has no row is dropped unless its own side is kept alone
    (LEFT's left, RIGHT's right, either of FULL) and it had or has a row; anything else is forwarded,
    a tombstone included (so a tombstone reaches the output when the join had a result for the key before).
    """
    return other is not None or (side in PRESERVED[join_type] and (new is not None or old is not None))


class TwoSided:
    """What a join of two sources reads and writes: a reader per side, the sink and its codec, the projection
    and the WHERE as functions of (key, left row, right row); a record goes to ``_update`` of its side."""

    def __init__(self, plan: p.Plan, query: p.Query) -> None:
        assert query.right is not None and query.join_type is not None
        self.query = query
        self.left = Reader(plan.source(query.left))
        self.right = Reader(plan.source(query.right))
        self.sink = plan.sink_of(query)
        self.sink_codec = Codec(self.sink)
        self._values = tuple((x.name, compile_expression(x.expression)) for x in query.value)
        self._where = None if query.where is None else compile_expression(query.where)

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics this join reads: the left source's, then the right's."""
        return tuple(dict.fromkeys((self.left.source.topic, self.right.source.topic)))

    def process(self, record: Record) -> list[Output]:
        """What one record of either source makes the join write; RecordError when it cannot be read."""
        outputs = []
        for side, reader in ((p.LEFT_SIDE, self.left), (p.RIGHT_SIDE, self.right)):
            if record.topic == reader.source.topic:
                outputs += self._update(side, reader, record)
        return outputs

    def _update(self, side: str, reader: Reader, record: Record) -> list[Output]:
        raise NotImplementedError

    def _value(self, key: Any, left: Row | None, right: Row | None, timestamp: int) -> tuple[bytes | None, int]:
        """The joined row's value and the output's time (the sink's ``TIMESTAMP=`` column's when it has one)."""
        columns = {name: value(key, left, right) for name, value in self._values}
        if self.sink.timestamp is not None:
            timestamp = columns.get(self.sink.timestamp)
            if timestamp is None or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
                raise RecordError(f"output column {self.sink.timestamp!r} is {timestamp!r}: the output's event "
                                  "time must be epoch milliseconds >= 0", self.sink.timestamp)
        return self.sink_codec.encode_value(columns), timestamp


class TableJoin(TwoSided):
    """A table-table join on the primary key (``TABLE_TABLE_JOIN``), fed one record at a time.

    Both sides are tables kept here by key (``tables``); a record of either side upserts (or, null, deletes)
    its row, then the join's result for the key is written when Kafka Streams would forward it
    (:func:`forwards`): the joined row, or a tombstone when the key no longer has a result.  The output's
    timestamp is the later of the two rows' (or the sink's ``TIMESTAMP=`` column); its key is the primary
    key both rows share.  A WHERE filters the result: an update whose result neither passes now nor passed
    before writes nothing, one whose result stops passing writes a tombstone (Kafka Streams' ``KTableFilter``).
    """

    def __init__(self, plan: p.Plan, query: p.Query) -> None:
        assert query.kind == p.TABLE_TABLE_JOIN and query.join_type is not None
        super().__init__(plan, query)
        self.tables: dict[str, dict[Any, Row]] = {p.LEFT_SIDE: {}, p.RIGHT_SIDE: {}}
        self._join_type = query.join_type

    def _update(self, side: str, reader: Reader, record: Record) -> list[Output]:
        key, new = reader.row(record)
        if key is None:
            raise null_table_key()
        rows, other_rows = self.tables[side], self.tables[p.RIGHT_SIDE if side == p.LEFT_SIDE else p.LEFT_SIDE]
        old = rows.get(key)
        if new is None:
            rows.pop(key, None)
        else:
            rows[key] = new
        other = other_rows.get(key)
        if not forwards(self._join_type, side, new, old, other):
            return []
        pair = (new, other) if side == p.LEFT_SIDE else (other, new)
        result = has_result(self._join_type, *pair)
        if self._where is not None:
            before = (old, other) if side == p.LEFT_SIDE else (other, old)
            passed = has_result(self._join_type, *before) and self._where(key, *before) is True
            result = result and self._where(key, *pair) is True
            if not result and not passed:
                return []
        timestamp = max(record.timestamp if new is None else new[1], -1 if other is None else other[1])
        return [Output(self._record(key, pair if result else None, timestamp), other is not None)]

    def _record(self, key: Any, pair: tuple[Row | None, Row | None] | None, timestamp: int) -> Record:
        """The output record: the joined row of ``pair`` (None: a tombstone for the key)."""
        if pair is None:
            return Record(self.sink.topic, self.sink_codec.encode_key(key), None, timestamp)
        value, timestamp = self._value(key, *pair, timestamp)
        return Record(self.sink.topic, self.sink_codec.encode_key(key), value, timestamp)
