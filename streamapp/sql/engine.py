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

Table-table joins on the primary key (:class:`TableJoin`, ``TABLE_TABLE_JOIN``) are Kafka Streams'
KTable-KTable joins as ksqlDB builds them: an update of either side writes the key's joined row, or a
tombstone when the key had a result and no longer has one (:func:`forwards`); their output's timestamp is
the later of the two rows'.  :func:`engine_for` picks the engine of a query.
"""
from __future__ import annotations

import json
import math
from operator import itemgetter
from typing import Any, Callable, MutableMapping, NamedTuple

from ..model.records import MAX_TIMESTAMP_MS, RecordError
from . import plan as p
from .formats import Codec, plain_json

#: A row as the engine keeps it: the columns by name (key columns included) and the record's event time.
Row = tuple[dict[str, Any], int]


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
        self._key_name = source.key_columns[0].name if source.key_columns else None
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


class _ValueWriter:
    """A JSON value written straight from the rows: the join's hot path, compiled for one projection.

    The projection is cut into runs of consecutive columns of one side, and the writer is generated
    as one function of f-strings, as :mod:`dataclasses` generates its methods (a loop over the columns
    cost twice as much).  A run of stream columns is written once per stream record however many joins
    read it (``texts``, one dict per record, shared by the joins: the seed's two joins share the order's
    five columns, heads included); a run of table columns per output.  None when a value is not plain
    (a DECIMAL, a NaN, a nested value): the caller then writes it through the sink's codec.
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

    def __call__(self, left: Row, right: Row | None, texts: dict[str, str]) -> str | None:
        try:
            return self._write(left[0], None if right is None else right[0], texts)
        except TypeError:
            return None


def _compile_writer(runs: list[tuple[bool, list[tuple[str, str, Callable[[Any], str]]]]]
                    ) -> Callable[[dict[str, Any], dict[str, Any] | None, dict[str, str]], str]:
    """``write(left_columns, right_columns or None, texts)``: the value's JSON text, from generated source."""
    namespace: dict[str, Any] = {}
    lines, parts = [], []
    for n, (from_left, columns) in enumerate(runs):
        side = "left" if from_left else "right"
        text = "".join(head.replace("{", "{{").replace("}", "}}") + f"{{w{n}_{i}({side}[c{n}_{i}])}}"
                       for i, (head, _, _) in enumerate(columns))
        for i, (_, name, write) in enumerate(columns):
            namespace[f"w{n}_{i}"], namespace[f"c{n}_{i}"] = write, name
        if from_left:  # once per stream record, whatever joins read it
            namespace[f"run{n}"] = "\0".join(f"{h}\1{name}" for h, name, _ in columns)
            lines += [f"    t{n} = texts.get(run{n})", f"    if t{n} is None:",
                      f"        t{n} = texts[run{n}] = f{text!r}"]
        else:
            namespace[f"nulls{n}"] = "".join(head + "null" for head, _, _ in columns)
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


def _writer_of(column_type: str) -> Callable[[Any], str]:
    """The column's value as JSON: its type's common case first, anything else as :func:`plain_json` writes it."""
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
        self._writer = _ValueWriter(query.value, self.sink, types)
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
            raise RecordError("key is null: a table row needs a key (ksqlDB ignores a null-key table record)", "key")
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


# ---- table-table joins ---------------------------------------------------------------------------------------------

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


def _compile_table(expression: p.Expression) -> Callable[[Any, Row | None, Row | None], Any]:
    """``expression`` as a function of the key and the two rows of a table-table join (a missing row reads NULL)."""
    if isinstance(expression, p.JoinKey):
        return lambda key, left, right: key
    if isinstance(expression, p.AsValue):
        return _compile_table(expression.argument)
    if isinstance(expression, p.Literal):
        value = expression.value
        return lambda key, left, right: value
    if isinstance(expression, p.Compare):
        return _compare(expression.op, _compile_table(expression.left), _compile_table(expression.right))
    if isinstance(expression, p.Logical):
        return _logical(expression.op, tuple(_compile_table(a) for a in expression.args))
    if isinstance(expression, p.Apply):
        return _apply(expression.op, tuple(_compile_table(a) for a in expression.args), expression.detail)
    row = 1 if expression.side == p.LEFT_SIDE else 2  # the argument holding the side's row
    if isinstance(expression, p.RowTime):
        return lambda *args: None if args[row] is None else args[row][1]
    name = expression.name
    return lambda *args: None if args[row] is None else args[row][0].get(name)


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _compare(op: str, left: Callable[..., Any], right: Callable[..., Any]) -> Callable[..., bool | None]:
    """SQL's comparison: NULL when either side is NULL (or the two cannot be compared)."""
    operator = _OPERATORS[op]

    def compare(*rows: Any) -> bool | None:
        a, b = left(*rows), right(*rows)
        if a is None or b is None:
            return None
        try:
            return operator(a, b)
        except TypeError:
            return None
    return compare


def _java_div(a: Any, b: Any) -> Any:
    """``a / b`` as Java divides: integers truncated toward zero (NULL for a division by zero), else a float."""
    if isinstance(a, int) and isinstance(b, int):
        return None if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return a / b if b else None


def _java_mod(a: Any, b: Any) -> Any:
    """``a % b`` as Java computes it: the remainder takes the dividend's sign."""
    if isinstance(a, int) and isinstance(b, int):
        return None if b == 0 else int(math.fmod(a, b))
    return math.fmod(a, b) if b else None


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": _java_div, "%": _java_mod}


def _substring(text: Any, position: Any, length: Any = None) -> Any:
    """ksqlDB's ``SUBSTRING``: 1-based, a negative position counts from the end."""
    if text is None or position is None:
        return None
    start = position - 1 if position > 0 else max(len(text) + position, 0)
    return text[start:] if length is None else text[start:start + max(length, 0)]


def _subscript(array: Any, index: Any) -> Any:
    """``array[i]``: 1-based, a negative index counts from the end; NULL out of range."""
    if array is None or index is None or index == 0 or abs(index) > len(array):
        return None
    return array[index - 1] if index > 0 else array[index]


def _field(struct: Any, name: str) -> Any:
    """``struct->field``: the field by its name, else the one whose upper-cased name it is (JSON's own case)."""
    if struct is None:
        return None
    return struct.get(name, next((v for k, v in struct.items() if k.upper() == name), None))


def _cast(value: Any, target: str) -> Any:
    """``CAST(value AS target)`` of the numbers and text a join key holds (Java's narrowing truncates)."""
    if value is None:
        return None
    if target in ("INT", "BIGINT"):
        return int(value)
    if target == "DOUBLE":
        return float(value)
    if target == "STRING":
        return value if isinstance(value, str) else plain_json(value)
    return value


def _apply(op: str, args: tuple[Callable[..., Any], ...], detail: str) -> Callable[..., Any]:
    """An :class:`~streamapp.sql.plan.Apply` as a function of (key, left row, right row); NULL in, NULL out."""
    if op == "CASE":
        pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - (detail == "ELSE"), 2)]
        default = args[-1] if detail == "ELSE" else (lambda *rows: None)

        def case(*rows: Any) -> Any:
            for test, value in pairs:
                if test(*rows) is True:
                    return value(*rows)
            return default(*rows)
        return case
    if op == "SUBSTRING":
        return lambda *rows: _substring(*(a(*rows) for a in args))

    def strict(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*rows: Any) -> Any:
            values = [a(*rows) for a in args]
            return None if any(v is None for v in values) else function(*values)
        return call
    if op in _ARITHMETIC:
        return strict(_ARITHMETIC[op])
    simple: dict[str, Callable[..., Any]] = {
        "ABS": abs, "NEGATE": lambda v: -v, "SUBSCRIPT": _subscript, "FIELD": lambda v: _field(v, detail),
        "CAST": lambda v: _cast(v, detail)}
    return strict(simple[op])


def _logical(op: str, args: tuple[Callable[..., Any], ...]) -> Callable[..., bool | None]:
    """AND / OR / NOT in SQL's three-valued logic (NULL is unknown)."""
    if op == "NOT":
        [arg] = args
        return lambda *rows: None if (v := arg(*rows)) is None else not v
    decisive = op == "OR"  # the value that decides an OR (True) or an AND (False) alone

    def combine(*rows: Any) -> bool | None:
        unknown = False
        for arg in args:
            value = arg(*rows)
            if value is None:
                unknown = True
            elif bool(value) is decisive:
                return decisive
        return None if unknown else not decisive
    return combine


class _TwoSided:
    """What a join of two sources reads and writes: a reader per side, the sink and its codec, the projection
    and the WHERE as functions of (key, left row, right row); a record goes to ``_update`` of its side."""

    def __init__(self, plan: p.Plan, query: p.Query) -> None:
        assert query.right is not None and query.join_type is not None
        self.query = query
        self.left = Reader(plan.source(query.left))
        self.right = Reader(plan.source(query.right))
        self.sink = plan.sink_of(query)
        self.sink_codec = Codec(self.sink)
        self._values = tuple((x.name, _compile_table(x.expression)) for x in query.value)
        self._where = None if query.where is None else _compile_table(query.where)

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


class TableJoin(_TwoSided):
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
            raise RecordError("key is null: a table row needs a key (ksqlDB ignores a null-key table record)", "key")
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


# ---- stream-stream joins -------------------------------------------------------------------------------------------

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


class _WindowStore:
    """One side's records by key, for the window's retention: Kafka Streams' join window store.

    A fetch sees only records no older than the store's stream time less its retention (a record that was
    already expired when it arrived is never seen), as ``AbstractRocksDBSegmentedBytesStore.fetch`` does.
    """

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -1
        self.rows: dict[Any, list[tuple[int, Row]]] = {}
        self._swept = -1

    def put(self, key: Any, timestamp: int, row: Row) -> bool:
        """Keep the record; False when it is already older than the retention (it is dropped)."""
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
        return [x for x in self.rows.get(key, ()) if start <= x[0] <= end]

    def __len__(self) -> int:
        return sum(len(v) for v in self.rows.values())


class StreamJoin(_TwoSided):
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
        self.window = JoinWindowSpec(query.within_before, query.within_after, query.grace)
        #: Kafka Streams' "this" side: the left stream, but the right one of a RIGHT join (``right.leftJoin(left)``).
        self.this_side = p.RIGHT_SIDE if query.join_type == "RIGHT" else p.LEFT_SIDE
        self._outer = {self.this_side: query.join_type != "INNER", _other(self.this_side): query.join_type == "FULL"}
        self.stores = {p.LEFT_SIDE: _WindowStore(self.window.retention), p.RIGHT_SIDE: _WindowStore(self.window.retention)}
        #: Unmatched records of an outer side waiting for their window to close: (time, this side?, key) -> their
        #: (key, row)s (the key as :func:`_hashable` makes it, then as read).
        self.outer: dict[tuple[int, bool, Any], list[tuple[Any, Row]]] | None = (
            {} if query.grace is not None and query.join_type != "INNER" else None)
        self.stream_time = -1
        self._min_time = _NEVER
        self._next_emit = 0
        self._clock = clock
        #: Records that arrived too late to be stored for later joins (Kafka Streams' dropped-records count).
        self.late = 0
        self._keys = {p.LEFT_SIDE: _compile_table(query.left_key), p.RIGHT_SIDE: _compile_table(query.right_key)}
        read = json.dumps([p.expression_to_dict(x) for x in (query.left_key, query.right_key, query.where,
                                                              *(y.expression for y in query.projection)) if x])
        #: Whether the query reads where a record was read (ROWPARTITION, ROWOFFSET): each row is then given them.
        self._where_read = any(f'"{name}"' in read for name in _WHERE_READ)

    def _join_key(self, side: str, row: Row) -> Any:
        return self._keys[side](None, row, None) if side == p.LEFT_SIDE else self._keys[side](None, None, row)

    def _update(self, side: str, reader: Reader, record: Record) -> list[Output]:
        _, row = reader.row(record)
        if row is None:  # a null value joins nothing (its time, read from no value, moves nothing either)
            if reader.source.timestamp is None:
                self.stream_time = max(self.stream_time, record.timestamp)
            return []
        if self._where_read:
            row[0].update(zip(_WHERE_READ, (record.partition, record.offset)))
        timestamp = row[1]
        key = self._join_key(side, row)
        this_is_left = side == self.this_side
        outer = self._outer[side]
        self.stream_time = max(self.stream_time, timestamp)
        outputs: list[Output] = []
        if key is None:
            return self._output(key, side, row, None, timestamp) if outer else []
        if timestamp == self.stream_time and self.outer is not None:
            outputs += self._emit_closed(this_is_left)
        start, end = join_bounds(self.window, timestamp, this_is_left)
        other = _other(side)
        lookup = _hashable(key)
        matches = self.stores[other].fetch(lookup, start, end)
        for other_time, other_row in matches:
            if self.outer is not None:
                self.outer.pop((other_time, not this_is_left, lookup), None)
            outputs += self._output(key, side, row, other_row, max(timestamp, other_time))
        if not matches and outer:
            if self.outer is None or end < self.stream_time:
                outputs += self._output(key, side, row, None, timestamp)
            else:
                self._min_time = min(self._min_time, timestamp)
                self.outer.setdefault((timestamp, this_is_left, lookup), []).append((key, row))
        if not self.stores[side].put(lookup, timestamp, row):
            self.late += 1
        return outputs

    def _emit_closed(self, this_is_left: bool) -> list[Output]:
        """The waiting unmatched records whose window has closed by stream time (``emitNonJoinedOuterRecords``)."""
        assert self.outer is not None
        grace = self.window.grace_ms
        after = self.window.after if this_is_left else self.window.before
        if self._min_time + after + grace >= self.stream_time:
            return []
        now = self._clock()
        if now < self._next_emit:
            return []
        self._next_emit = now + EMIT_INTERVAL_MS
        self._min_time = _NEVER
        outputs: list[Output] = []
        open_sides: set[bool] = set()
        for entry in sorted(self.outer, key=self._order):
            timestamp, left_side, _ = entry
            self._min_time = timestamp
            if len(open_sides) == 2:
                break
            look_back = self.window.after if left_side else self.window.before
            if timestamp + look_back + grace >= self.stream_time:
                open_sides.add(left_side)
                continue
            side = self.this_side if left_side else _other(self.this_side)
            for key, row in self.outer.pop(entry):
                outputs += self._output(key, side, row, None, timestamp)
        return outputs

    def _order(self, entry: tuple[int, bool, Any]) -> tuple[int, bool, bytes]:
        """The outer store's order: time, then the other side before this one, then the key's bytes."""
        assert self.outer is not None
        timestamp, left_side, _ = entry
        return timestamp, left_side, self.sink_codec.encode_key(self.outer[entry][0][0]) or b""

    def _output(self, key: Any, side: str, row: Row, other: Row | None, timestamp: int) -> list[Output]:
        """The joined record of ``row`` (of ``side``) and ``other`` (None: unmatched), unless WHERE drops it."""
        left, right = (row, other) if side == p.LEFT_SIDE else (other, row)
        if self._where is not None and self._where(key, left, right) is not True:
            return []
        value, timestamp = self._value(key, left, right, timestamp)
        return [Output(Record(self.sink.topic, self.sink_codec.encode_key(key), value, timestamp), other is not None)]


_NEVER = 2**63 - 1
#: The pseudo columns of where a record was read, as a stream-stream join's rows hold them.
_WHERE_READ = ("ROWPARTITION", "ROWOFFSET")


def _hashable(key: Any) -> Any:
    """A join key as a store looks it up: an ARRAY or STRUCT key by its JSON text (its fields in order)."""
    if isinstance(key, (list, dict)):
        return json.dumps(key, sort_keys=True, default=str)
    return key


def _other(side: str) -> str:
    return p.RIGHT_SIDE if side == p.LEFT_SIDE else p.LEFT_SIDE


def engine_for(plan: p.Plan, query: p.Query) -> Query | TableJoin | StreamJoin:
    """The engine that runs ``query``: a table-table or stream-stream join's, else :class:`Query` (a copy or a
    stream-table join)."""
    if query.kind == p.STREAM_STREAM_JOIN:
        return StreamJoin(plan, query)
    return TableJoin(plan, query) if query.kind == p.TABLE_TABLE_JOIN else Query(plan, query)
