"""The typed join plan: what a file of ksqlDB statements declares, defined once and read by every executor.

The planner (:mod:`streamapp.sql.planner`) writes it; the pure engine
(:mod:`streamapp.sql.engine`), the worker, the Kafka Streams program and the
reconciliation read it.  Like ksqlDB's own ``plan.json`` it is plain data with
formats and schemas on each part, frozen and JSON-serialisable
(:meth:`Plan.to_json` / :meth:`Plan.from_json`), so another process (the JVM)
reads exactly what Python planned.

Names are ksqlDB's resolved names (unquoted upper-cased, quoted as written).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Union

#: The plan's own format version, written in its JSON; a reader refuses another.
VERSION = 1

STREAM, TABLE = "stream", "table"
#: A query that reads one source and writes it re-keyed or re-projected (``CREATE TABLE ... AS SELECT ... FROM t``).
SELECT = "select"
#: ``CREATE STREAM ... AS SELECT ... FROM s [LEFT | INNER] JOIN t ON ...``.
STREAM_TABLE_JOIN = "stream_table_join"
#: ``CREATE TABLE ... AS SELECT ... FROM t1 [INNER | LEFT | RIGHT | FULL] JOIN t2 ON t1.pk = t2.pk [WHERE ...]``.
#: Only its plans carry the fields and expressions added with it (``where``, :class:`JoinKey`, :class:`Literal`,
#: :class:`Compare`, :class:`Logical`), so a reader of the other kinds reads their plans as before (version 1).
TABLE_TABLE_JOIN = "table_table_join"
#: ``CREATE STREAM ... AS SELECT ... FROM s1 [INNER | LEFT | RIGHT | FULL] JOIN s2 WITHIN ... ON ...``: a windowed
#: stream-stream join.  Only its plans carry ``right_key``, ``within_before``, ``within_after`` and ``grace``.
STREAM_STREAM_JOIN = "stream_stream_join"
LEFT_SIDE, RIGHT_SIDE = "left", "right"


@dataclass(frozen=True)
class Column:
    name: str
    #: ksqlDB's type text (``BIGINT``, ``DECIMAL(4, 2)``, ``ARRAY<STRING>``): :func:`streamapp.sql.syntax.parse_type`.
    type: str


#: The pseudo columns of where a record was read (its partition, its offset), with their types: a stream-stream
#: join's rows hold those it reads, and a stream the worker re-keys for it carries them through its repartition topic.
WHERE_READ = (Column("ROWPARTITION", "INT"), Column("ROWOFFSET", "BIGINT"))


@dataclass(frozen=True)
class Source:
    """A stream or table: a topic, its key and value columns, their formats and its event time."""

    name: str
    kind: str  # STREAM | TABLE
    topic: str
    key_columns: tuple[Column, ...]
    value_columns: tuple[Column, ...]
    key_format: str  # KAFKA | JSON | DELIMITED | NONE
    value_format: str  # JSON | DELIMITED
    #: WRAP_SINGLE_VALUE: None unless the statement set it (a single value column is then wrapped in an object).
    wrap_single_value: bool | None = None
    #: The value column whose BIGINT is the record's event time (``TIMESTAMP=``); None: the record's timestamp.
    timestamp: str | None = None
    #: PARTITIONS= of the statement; None: the topic's own count.
    partitions: int | None = None
    #: The statement's line in its file, for messages about it.
    line: int = 0

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.key_columns + self.value_columns

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


# ---- expressions: what a projection or a join key computes from the rows of a query's sources ----------------------

@dataclass(frozen=True)
class ColumnOf:
    """Column ``name`` of the query's ``side`` (``left`` or ``right``) source."""

    side: str
    name: str


@dataclass(frozen=True)
class RowTime:
    """``ROWTIME`` of one side: its record's event time."""

    side: str


@dataclass(frozen=True)
class AsValue:
    """``AS_VALUE(x)``: ``x`` copied into the value (a key column kept as a value column too)."""

    argument: "Expression"


@dataclass(frozen=True)
class JoinKey:
    """A table-table join's key: the primary key both rows share, whichever side holds a row.

    ksqlDB keys the result by it: ``T_ID`` of a RIGHT join is the right row's key when the left has none,
    and a FULL join's synthetic ``ROWKEY`` is it by definition.
    """


@dataclass(frozen=True)
class Literal:
    """A constant of a WHERE: text, an integer, a float, a boolean or NULL."""

    value: Any


@dataclass(frozen=True)
class Compare:
    """``left op right`` (``=``, ``!=``/``<>``, ``<``, ``<=``, ``>``, ``>=``): NULL when either side is NULL."""

    op: str
    left: "Expression"
    right: "Expression"


@dataclass(frozen=True)
class Logical:
    """``AND`` / ``OR`` of its ``args``, or ``NOT`` of its one: SQL's three-valued logic."""

    op: str
    args: tuple["Expression", ...]


@dataclass(frozen=True)
class Apply:
    """A function or operator of a stream-stream join's ON or projection (only its plans carry it): ``op`` is
    ``ABS``, ``SUBSTRING``, ``CAST`` (``detail``: the target type), ``+ - * / %``, ``NEGATE``, ``SUBSCRIPT``,
    ``FIELD`` (``detail``: the struct field) or ``CASE`` (``args``: condition, value, ..., then the ELSE's if
    ``detail`` is ``ELSE``)."""

    op: str
    args: tuple["Expression", ...]
    detail: str = ""


Expression = Union[ColumnOf, RowTime, AsValue, JoinKey, Literal, Compare, Logical, Apply]

_EXPRESSIONS = {"column": ColumnOf, "rowtime": RowTime, "as_value": AsValue, "join_key": JoinKey,
                "literal": Literal, "compare": Compare, "logical": Logical, "apply": Apply}


def expression_to_dict(expression: Expression) -> dict[str, Any]:
    kind = next(k for k, v in _EXPRESSIONS.items() if isinstance(expression, v))
    if isinstance(expression, AsValue):
        return {"kind": kind, "argument": expression_to_dict(expression.argument)}
    if isinstance(expression, Compare):
        return {"kind": kind, "op": expression.op, "left": expression_to_dict(expression.left),
                "right": expression_to_dict(expression.right)}
    if isinstance(expression, Logical):
        return {"kind": kind, "op": expression.op, "args": [expression_to_dict(a) for a in expression.args]}
    if isinstance(expression, Apply):
        return {"kind": kind, "op": expression.op, "args": [expression_to_dict(a) for a in expression.args],
                "detail": expression.detail}
    return {"kind": kind, **asdict(expression)}


def expression_from_dict(data: dict[str, Any]) -> Expression:
    kind = _EXPRESSIONS[data["kind"]]
    if kind is AsValue:
        return AsValue(expression_from_dict(data["argument"]))
    if kind is Compare:
        return Compare(data["op"], expression_from_dict(data["left"]), expression_from_dict(data["right"]))
    if kind is Logical:
        return Logical(data["op"], tuple(expression_from_dict(a) for a in data["args"]))
    if kind is Apply:
        return Apply(data["op"], tuple(expression_from_dict(a) for a in data["args"]), data["detail"])
    return kind(**{k: v for k, v in data.items() if k != "kind"})  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Projection:
    """One output column: its name and type, what computes it, and whether it is the output's key."""

    name: str
    type: str
    expression: Expression
    key: bool = False


@dataclass(frozen=True)
class Query:
    """One persistent query: reads ``left`` (and joins ``right``), writes the source ``sink``.

    ``left_key`` is what the left side is keyed by for the join: the stream's key column,
    or any other expression, in which case ``repartition`` is set and the stream is
    re-keyed through a topic partitioned by murmur2, as ksqlDB does.
    """

    name: str
    kind: str  # SELECT | STREAM_TABLE_JOIN | TABLE_TABLE_JOIN | STREAM_STREAM_JOIN
    sink: str
    left: str
    projection: tuple[Projection, ...]
    right: str | None = None
    join_type: str | None = None  # LEFT | INNER (and RIGHT | FULL for TABLE_TABLE_JOIN)
    left_key: Expression | None = None
    #: The left side is re-keyed (joined on another column, or its key bytes differ from the join's key format).
    repartition: bool = False
    #: The table is re-keyed into the stream's key format (a key-to-key join of two key formats).
    repartition_right: bool = False
    line: int = 0
    #: A table-table or stream-stream join's WHERE (None: none); written in the JSON only when set.
    where: Expression | None = None
    #: What a stream-stream join keys its right side by (with ``repartition_right`` when that is not its key
    #: column itself); None for the other kinds, and then not in the JSON.
    right_key: Expression | None = None
    #: A stream-stream join's window in milliseconds: a right record joins a left one at ``t`` when its time is
    #: in ``[t - within_before, t + within_after]``; ``grace`` None: no GRACE PERIOD (Kafka Streams' legacy
    #: eager left/outer results, 24 hours of grace).  Written in the JSON only for that kind.
    within_before: int | None = None
    within_after: int | None = None
    grace: int | None = None

    @property
    def key(self) -> tuple[Projection, ...]:
        return tuple(p for p in self.projection if p.key)

    @property
    def value(self) -> tuple[Projection, ...]:
        return tuple(p for p in self.projection if not p.key)


@dataclass(frozen=True)
class Plan:
    """Every source and every query of a statements file, in statement order."""

    sources: tuple[Source, ...]
    queries: tuple[Query, ...]
    #: Where the statements came from (a path, or the packaged default), for messages.
    origin: str = ""
    version: int = field(default=VERSION)

    def source(self, name: str) -> Source:
        return next(s for s in self.sources if s.name == name)

    def sink_of(self, query: Query) -> Source:
        return self.source(query.sink)

    @property
    def joins(self) -> tuple[Query, ...]:
        """The stream-table joins (what the worker, the guard and the reconciliation pair up)."""
        return tuple(q for q in self.queries if q.kind == STREAM_TABLE_JOIN)

    def writer_of(self, source: str) -> Query | None:
        return next((q for q in self.queries if q.sink == source), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for query, raw in zip(self.queries, data["queries"]):
            raw["left_key"] = None if query.left_key is None else expression_to_dict(query.left_key)
            if query.where is None:
                del raw["where"]  # the fields of plans without it stay as they were
            else:
                raw["where"] = expression_to_dict(query.where)
            if query.right_key is None:
                del raw["right_key"]
            else:
                raw["right_key"] = expression_to_dict(query.right_key)
            if query.kind != STREAM_STREAM_JOIN:  # the fields only a stream-stream join has
                for name in ("within_before", "within_after", "grace"):
                    del raw[name]
            for projection, raw_projection in zip(query.projection, raw["projection"]):
                raw_projection["expression"] = expression_to_dict(projection.expression)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        if data.get("version") != VERSION:
            raise ValueError(f"plan version {data.get('version')!r}: this streamapp reads version {VERSION}")
        sources = tuple(
            Source(**{**raw, "key_columns": tuple(Column(**c) for c in raw["key_columns"]),
                      "value_columns": tuple(Column(**c) for c in raw["value_columns"])})
            for raw in data["sources"])
        queries = tuple(
            Query(**{**raw,
                     "left_key": None if raw["left_key"] is None else expression_from_dict(raw["left_key"]),
                     "where": None if raw.get("where") is None else expression_from_dict(raw["where"]),
                     "right_key": None if raw.get("right_key") is None else expression_from_dict(raw["right_key"]),
                     "projection": tuple(Projection(**{**p, "expression": expression_from_dict(p["expression"])})
                                         for p in raw["projection"])})
            for raw in data["queries"])
        return cls(sources, queries, data.get("origin", ""), data["version"])

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return cls.from_dict(json.loads(text))
