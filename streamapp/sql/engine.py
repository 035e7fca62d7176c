"""The pure join engine: one persistent query of a plan, fed one record at a time, as Kafka Streams'
``TopologyTestDriver`` feeds a topology.

No Kafka, no Faust, no clock: a record in, the records it produces out.  The test
runner feeds it files, the worker feeds it what its consumers read and hands it its
RocksDB table as ``table``; both therefore run the same join.

Stream-table semantics are ksqlDB's (``StreamTableJoinBuilder``: Kafka Streams'
``KStream.join`` / ``leftJoin`` on a ``KTable``):

- a table record upserts its key's row; a null value deletes it; neither emits anything;
- a stream record looks its join key up in the table as it is at that moment: INNER
  emits only on a hit, LEFT emits on a miss too, with NULL table columns;
- a stream record with a null value is dropped; one with a null join key finds no row
  (a LEFT join still emits it, as Kafka Streams does since 3.7, KIP-962);
- the output's timestamp is the stream record's event time, or the sink's
  ``TIMESTAMP=`` column.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, MutableMapping

from ..model.records import MAX_TIMESTAMP_MS, RecordError
from . import plan as p
from .formats import Codec

#: A row as the engine keeps it: the columns by name (key columns included) and the record's event time.
Row = tuple[dict[str, Any], int]


@dataclass(frozen=True, slots=True)
class Record:
    """A Kafka record as the engine sees it: bytes in, bytes out."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass(frozen=True, slots=True)
class Output:
    """A record the query writes, with whether the join found the table row (None: not a join)."""

    record: Record
    matched: bool | None = None


class Reader:
    """Decodes one source's records into rows, with its event time (``TIMESTAMP=`` or the record's)."""

    def __init__(self, source: p.Source) -> None:
        self.source = source
        self.codec = Codec(source)
        self._key_name = source.key_columns[0].name if source.key_columns else None

    def row(self, record: Record) -> tuple[Any, Row | None]:
        """(key value, row); the row is None for a null value."""
        key = self.codec.decode_key(record.key)
        columns = self.codec.decode_value(record.value)
        if columns is None:
            if self.source.timestamp is not None and self.source.kind == p.TABLE:
                # ksqlDB's timestamp extractor reads the column from the value: a tombstone has none, so Kafka
                # Streams drops it (the extractor gives -1) and the row stays; so does this engine.
                raise RecordError(f"a tombstone of a table with TIMESTAMP={self.source.timestamp}: ksqlDB's "
                                  "timestamp extractor has no column to read, so Kafka Streams drops it (the row "
                                  "stays)", self.source.timestamp)
            return key, None
        if self._key_name is not None:
            columns[self._key_name] = key
        timestamp = record.timestamp
        if self.source.timestamp is not None:
            timestamp = columns.get(self.source.timestamp)
            if timestamp is None or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
                raise RecordError(f"field {self.source.timestamp!r} is {timestamp!r}: the record's event time must "
                                  f"be epoch milliseconds >= 0 (Kafka Streams drops the record)",
                                  self.source.timestamp)
        return key, (columns, timestamp)


def _compile(expression: p.Expression) -> Callable[[Row | None, Row | None], Any]:
    """``expression`` as a function of the left and right rows (a missing right row reads as NULL)."""
    if isinstance(expression, p.AsValue):
        return _compile(expression.argument)
    index = 0 if expression.side == p.LEFT_SIDE else 1
    if isinstance(expression, p.RowTime):
        return lambda *rows: None if rows[index] is None else rows[index][1]
    name = expression.name
    return lambda *rows: None if rows[index] is None else rows[index][0].get(name)


class Query:
    """One persistent query of a plan; ``table`` holds a join's table rows by key (a dict unless given)."""

    def __init__(self, plan: p.Plan, query: p.Query, table: MutableMapping[Any, Row] | None = None) -> None:
        self.query = query
        self.left = Reader(plan.source(query.left))
        self.right = Reader(plan.source(query.right)) if query.right else None
        self.sink = plan.sink_of(query)
        self.sink_codec = Codec(self.sink)
        self.table: MutableMapping[Any, Row] = {} if table is None else table
        key = query.key[0] if query.key else None
        self._key = _compile(key.expression) if key else (lambda left, right: None)
        self._values = tuple((x.name, _compile(x.expression)) for x in query.value)
        self._join_key = _compile(query.left_key) if query.left_key is not None else None
        self._sink_topic = self.sink.topic
        self._sink_timestamp = self.sink.timestamp

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics this query reads, the table's first."""
        return ((self.right.source.topic,) if self.right else ()) + (self.left.source.topic,)

    def process(self, record: Record) -> list[Output]:
        """What one input record makes this query write; RecordError when it cannot be read (dead-letter it)."""
        if self.right is not None and record.topic == self.right.source.topic:
            self._update_table(record)
            return []
        if record.topic != self.left.source.topic:
            return []
        key, row = self.left.row(record)
        if row is None:
            if self.left.source.kind == p.TABLE and key is not None:  # a table's delete passes through a copy
                return [Output(Record(self._sink_topic, self.sink_codec.encode_key(key), None, record.timestamp))]
            return []
        if self._join_key is None:
            return [self.output(row, None, None)]
        join_key = self.join_key(row)
        found = None if join_key is None else self.table.get(join_key)
        if found is None and self.query.join_type == "INNER":
            return []
        return [self.output(row, found, found is not None)]

    def join_key(self, row: Row) -> Any:
        """The value a stream row looks the table up by (None: it finds no row)."""
        return self._join_key(row, None) if self._join_key is not None else None

    def _update_table(self, record: Record) -> None:
        assert self.right is not None
        key, row = self.right.row(record)
        if key is None:
            raise RecordError("key is null: a table row needs a key (ksqlDB ignores a null-key table record)", "key")
        if row is None:
            self.table.pop(key, None)
        else:
            self.table[key] = row

    def output(self, left: Row, right: Row | None, matched: bool | None) -> Output:
        """The record the query writes for a left row and the table row it found (None: a miss)."""
        columns = {name: value(left, right) for name, value in self._values}
        timestamp = left[1]
        if self._sink_timestamp is not None:
            timestamp = columns.get(self._sink_timestamp)
            if timestamp is None or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
                raise RecordError(f"output column {self._sink_timestamp!r} is {timestamp!r}: the output's event time "
                                  "must be epoch milliseconds >= 0", self._sink_timestamp)
        key = self.sink_codec.encode_key(self._key(left, right))
        return Output(Record(self._sink_topic, key, self.sink_codec.encode_value(columns), timestamp), matched)
