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

The other join kinds: :mod:`.table_join`, :mod:`.stream_join`.
"""
from __future__ import annotations

import json
from decimal import Decimal
from operator import itemgetter
from typing import Any, Callable, MutableMapping, NamedTuple

from ..model.records import MAX_TIMESTAMP_MS, RecordError, big_decimal_text
from . import plan as p
from .formats import Codec, plain_json

#: A row as the engine keeps it: the columns by name (key columns included) and the record's event time.
Row = tuple[dict[str, Any], int]


def null_table_key() -> RecordError:
    """A table record with a null key: ksqlDB ignores it (no row without a key); here it is a dead letter."""
    return RecordError("key is null: a table row needs a key (ksqlDB ignores a null-key table record)", "key")


class Record(NamedTuple):
    """A Kafka record as the engine sees it: bytes in, bytes out; where it was read, for ROWPARTITION and ROWOFFSET
    (the test runner reads every record from partition 0, as ksqlDB's tests do; -1: not read from a topic)."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int
    partition: int = 0
    offset: int = -1


class Output(NamedTuple):
    """A record the query writes, with whether the join found the table row (None: not a join)."""

    record: Record
    matched: bool | None = None


class Reader:
    """Decodes one source's records into rows, with its event time (``TIMESTAMP=`` or the record's)."""

    def __init__(self, source: p.Source) -> None:
        self.source = source
        self.codec = Codec(source)
        self._key_name = source.key_columns[0].name if len(source.key_columns) == 1 else None
        #: A key of several columns: the codec reads it as a dict of them, each put in the row.
        self._object_key = len(source.key_columns) > 1
        self._timestamp = source.timestamp

    def row(self, record: Record) -> tuple[Any, Row | None]:
        """(key value, row); the row is None for a null value."""
        return self.read(record.key, record.value, record.timestamp)

    def read(self, key_bytes: bytes | None, value: bytes | None, timestamp: int) -> tuple[Any, Row | None]:
        """:meth:`row` of a record's parts (the worker's path: no Record built per message)."""
        key = self.codec.decode_key(key_bytes)
        columns = self.codec.decode_value(value)
        if columns is None:
            if self._timestamp is not None and self.source.kind == p.TABLE:
                # ksqlDB's timestamp extractor reads the column from the value: a tombstone has none, so Kafka
                # Streams drops it (the extractor gives -1) and the row stays; so does this engine.
                raise RecordError(f"a tombstone of a table with TIMESTAMP={self._timestamp}: ksqlDB's "
                                  "timestamp extractor has no column to read, so Kafka Streams drops it (the row "
                                  "stays)", self._timestamp)
            return key, None
        if self._key_name is not None:
            columns[self._key_name] = key
        elif self._object_key:
            columns.update(key)
        if self._timestamp is not None:
            timestamp = columns.get(self._timestamp)
            if timestamp is None or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
                shown = "missing or null" if timestamp is None else str(timestamp)
                raise RecordError(f"field {self._timestamp!r} is {shown}: the record's event time "
                                  f"(TIMESTAMP={self._timestamp}), expected epoch milliseconds >= 0 (Kafka Streams "
                                  "drops the record)", self._timestamp)
        return key, (columns, timestamp)


def _compile(expression: p.Expression) -> Callable[[Row, Row | None], Any]:
    """``expression`` as a function of the left and right rows (a missing right row reads as NULL)."""
    if isinstance(expression, p.AsValue):
        return _compile(expression.argument)
    if isinstance(expression, p.RowTime):
        if expression.side == p.LEFT_SIDE:
            return lambda left, right: left[1]
        return lambda left, right: None if right is None else right[1]
    name = expression.name
    if expression.side == p.LEFT_SIDE:
        return lambda left, right: left[0].get(name)
    return lambda left, right: None if right is None else right[0].get(name)


class _Projector:
    """The value columns of a projection of plain columns, by C-level lookups: the join's hot path.

    The left row's columns, then the right row's (or NULLs on a miss), each picked by an itemgetter,
    then put in projection order; a projection with ROWTIME is not ``plain`` (the caller computes it).
    """

    def __init__(self, projection: tuple[p.Projection, ...], right: p.Source | None) -> None:
        refs = [_column_of(x.expression) for x in projection]
        self.plain = bool(refs) and all(r is not None for r in refs)
        if not self.plain:
            return
        left = [r.name for r in refs if r.side == p.LEFT_SIDE]  # type: ignore[union-attr]
        right_ = [r.name for r in refs if r.side == p.RIGHT_SIDE]  # type: ignore[union-attr]
        self._names = tuple(x.name for x in projection)
        self._left = _getter(left)
        self._right = _getter(right_)
        self._nulls = (None,) * len(right_)
        left_order = [i for i, r in enumerate(refs) if r.side == p.LEFT_SIDE]  # type: ignore[union-attr]
        right_order = [i for i, r in enumerate(refs) if r.side == p.RIGHT_SIDE]  # type: ignore[union-attr]
        position = {slot: n for n, slot in enumerate(left_order + right_order)}
        self._order = _getter([position[i] for i in range(len(refs))])

    def __call__(self, left: Row, right: Row | None) -> dict[str, Any]:
        values = self._left(left[0]) + (self._nulls if right is None else self._right(right[0]))
        return dict(zip(self._names, self._order(values)))


def _column_of(expression: p.Expression) -> p.ColumnOf | None:
    if isinstance(expression, p.AsValue):
        return _column_of(expression.argument)
    return expression if isinstance(expression, p.ColumnOf) else None


def _getter(keys: list[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """``operator.itemgetter`` that always returns a tuple (also of one item, or of none)."""
    if not keys:
        return lambda _: ()
    if len(keys) == 1:
        key = keys[0]
        return lambda mapping: (mapping[key],)
    return itemgetter(*keys)


class ValueWriter:
    """A JSON value written straight from the rows: the join's hot path, compiled for one projection.

    The projection is cut into runs of consecutive columns of one side, and the writer is generated
    as one function of f-strings, as :mod:`dataclasses` generates its methods (a loop over the columns
    cost twice as much).  A run of stream columns is written once per stream record however many joins
    read it (``texts``, one dict per record, shared by the joins: the seed's two joins share the order's
    five columns, heads included); a run of table columns per output.  None when a value is not plain
    (a NaN, a nested value) or a row lacks a column: the caller then writes it through the sink's codec.  A
    missing row (None: a stream-stream join's unmatched record) reads as NULLs on either side.
    """

    def __init__(self, projection: tuple[p.Projection, ...], sink: p.Source, types: dict[tuple[str, str], str]) -> None:
        refs = [_column_of(x.expression) for x in projection]
        self.usable = (sink.value_format == "JSON" and sink.wrap_single_value is not False and bool(refs)
                       and all(r is not None for r in refs))
        if not self.usable:
            return
        runs: list[tuple[bool, list[tuple[str, str, Callable[[Any], str]]]]] = []
        for i, (x, ref) in enumerate(zip(projection, refs)):
            head = ("{" if i == 0 else ",") + plain_json(x.name) + ":"
            from_left = ref.side == p.LEFT_SIDE  # type: ignore[union-attr]
            column = (head, ref.name, _writer_of(types.get((ref.side, ref.name), "")))  # type: ignore[union-attr]
            if runs and runs[-1][0] == from_left:
                runs[-1][1].append(column)
            else:
                runs.append((from_left, [column]))
        self._write = _compile_writer(runs)

    def __call__(self, left: Row | None, right: Row | None, texts: dict[str, str]) -> str | None:
        try:
            return self._write(None if left is None else left[0], None if right is None else right[0], texts)
        except (TypeError, KeyError):
            return None


def _compile_writer(runs: list[tuple[bool, list[tuple[str, str, Callable[[Any], str]]]]]
                    ) -> Callable[[dict[str, Any] | None, dict[str, Any] | None, dict[str, str]], str]:
    """``write(left_columns or None, right_columns or None, texts)``: the value's JSON text, from generated source."""
    namespace: dict[str, Any] = {}
    lines, parts = [], []
    for n, (from_left, columns) in enumerate(runs):
        side = "left" if from_left else "right"
        text = "".join(head.replace("{", "{{").replace("}", "}}") + f"{{w{n}_{i}({side}[c{n}_{i}])}}"
                       for i, (head, _, _) in enumerate(columns))
        for i, (_, name, write) in enumerate(columns):
            namespace[f"w{n}_{i}"], namespace[f"c{n}_{i}"] = write, name
        namespace[f"nulls{n}"] = "".join(head + "null" for head, _, _ in columns)
        if from_left:  # once per stream record, whatever joins read it
            namespace[f"run{n}"] = "\0".join(f"{h}\1{name}" for h, name, _ in columns)
            lines += [f"    t{n} = nulls{n} if left is None else texts.get(run{n})", f"    if t{n} is None:",
                      f"        t{n} = texts[run{n}] = f{text!r}"]
        else:
            lines.append(f"    t{n} = nulls{n} if right is None else f{text!r}")
        parts.append(f"t{n}")
    source = "def write(left, right, texts):\n" + "\n".join(lines) + f"\n    return {' + '.join(parts)} + '}}'\n"
    exec(source, namespace)  # noqa: S102 - names and writers are in the namespace, never in the source
    return namespace["write"]  # type: ignore[no-any-return]


_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _string(value: Any) -> str:
    return _encode_string(value) if type(value) is str else "null" if value is None else plain_json(value)


def _integer(value: Any) -> str:
    return int.__repr__(value) if type(value) is int else "null" if value is None else plain_json(value)


def _decimal(value: Any) -> str:
    return big_decimal_text(value) if type(value) is Decimal else "null" if value is None else plain_json(value)


def _writer_of(column_type: str) -> Callable[[Any], str]:
    """The column's value as JSON: its type's common case first, anything else as :func:`plain_json` writes it."""
    if column_type.startswith("DECIMAL"):
        return _decimal
    return {"STRING": _string, "BIGINT": _integer, "INT": _integer}.get(column_type, plain_json)


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
        self._columns = _Projector(query.value, self.right.source if self.right else None)
        types = {(side, c.name): c.type for side, reader in ((p.LEFT_SIDE, self.left), (p.RIGHT_SIDE, self.right))
                 if reader is not None for c in reader.source.columns}
        self._writer = ValueWriter(query.value, self.sink, types)
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
        return self._join_key(row, None) if self._join_key is not None else None  # type: ignore[arg-type]

    def _update_table(self, record: Record) -> None:
        assert self.right is not None
        key, row = self.right.row(record)
        if key is None:
            raise null_table_key()
        if row is None:
            self.table.pop(key, None)
        else:
            self.table[key] = row

    def output(self, left: Row, right: Row | None, matched: bool | None) -> Output:
        """The record the query writes for a left row and the table row it found (None: a miss)."""
        key, value, timestamp = self.encode(left, right, {})
        return Output(Record(self._sink_topic, key, value, timestamp), matched)

    def encode(self, left: Row, right: Row | None, texts: dict[str, str]) -> tuple[bytes | None, bytes, int]:
        """(key, value, timestamp) of the output for a left row and its table row (None: a miss).

        ``texts`` holds the left row's columns as JSON once written: pass one dict per left record to every
        join that reads it (the worker's path), so each column is written once.
        """
        timestamp = left[1]
        if self._sink_timestamp is not None or not self._writer.usable:
            columns = self._project(left, right)
            if self._sink_timestamp is not None:
                timestamp = columns.get(self._sink_timestamp)
                if timestamp is None or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
                    raise RecordError(f"output column {self._sink_timestamp!r} is {timestamp!r}: the output's event "
                                      "time must be epoch milliseconds >= 0", self._sink_timestamp)
            value = self.sink_codec.encode_value(columns)
        else:
            text = self._writer(left, right, texts)
            value = self.sink_codec.encode_value(self._project(left, right)) if text is None else text.encode("utf-8")
        return self.sink_codec.encode_key(self._key(left, right)), value, timestamp  # type: ignore[return-value]

    def _project(self, left: Row, right: Row | None) -> dict[str, Any]:
        if self._columns.plain:
            return self._columns(left, right)
        return {name: value(left, right) for name, value in self._values}
