"""Statements -> :class:`~streamapp.sql.plan.Plan`, with ksqlDB's checks and ksqlDB's names.

What ksqlDB rejects is refused with ksqlDB's own message text (its QTT cases match
on it); what ksqlDB accepts and streamapp cannot run yet is refused saying so.
Either way one :class:`PlanError` line that names the statement by its line.

The rules follow ksqlDB's planner (``AstSanitizer``, ``LogicalPlanner.buildJoinKey``,
``JoinNode``, ``FinalProjectNode`` in the ksql repository); docs/reference/statements.md
walks through them with examples.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import StreamappError
from . import plan as p
from . import syntax as s
from . import types

#: Formats streamapp reads and writes, by part of the record.
KEY_FORMATS = ("KAFKA", "JSON", "DELIMITED", "NONE")
VALUE_FORMATS = ("JSON", "DELIMITED")
#: Formats ksqlDB has that need a schema registry (or Protobuf), which streamapp does not read yet.
REGISTRY_FORMATS = ("AVRO", "PROTOBUF", "PROTOBUF_NOSR", "JSON_SR")
#: The WITH properties streamapp knows; ksqlDB's others are refused by name.
SOURCE_PROPERTIES = ("KAFKA_TOPIC", "KEY_FORMAT", "VALUE_FORMAT", "FORMAT", "TIMESTAMP", "PARTITIONS", "REPLICAS",
                     "WRAP_SINGLE_VALUE", "RETENTION_MS", "CLEANUP_POLICY")
#: A windowed source's properties: streamapp reads no windowed source, but plans ksqlDB's refusals of them.
WINDOW_PROPERTIES = ("WINDOW_TYPE", "WINDOW_SIZE")
#: ksqlDB's column types a KAFKA-format key can have.
KAFKA_KEY_TYPES = ("INT", "BIGINT", "DOUBLE", "STRING", "BYTES")
PSEUDO_COLUMNS = ("ROWTIME",)
#: The pseudo columns of where a record was read (plan.WHERE_READ): refused but in a stream-stream join, qualified.
UNSUPPORTED_PSEUDO = tuple(c.name for c in p.WHERE_READ)
#: A windowed source's bounds: no source streamapp reads is windowed, so they never resolve.
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")


class PlanError(StreamappError, s.SqlError):
    """A statement ksqlDB rejects, or one streamapp cannot run yet: one line naming it."""


#: ksqlDB's property that sets the key format of a source or join that names none.
DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"


def plan_file(path: str | Path, properties: Mapping[str, Any] | None = None) -> p.Plan:
    """The plan of a ``.sql`` file; a file that cannot be read is a PlanError naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # an editor's byte order mark is not a statement
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"statements file {str(path)!r} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    return plan_text(text, str(path), properties)


def plan_text(text: str, origin: str = "<statements>", properties: Mapping[str, Any] | None = None) -> p.Plan:
    """The plan of ksqlDB statements under ksqlDB's ``properties`` (only :data:`DEFAULT_KEY_FORMAT` is read, as
    a QTT case sets it); every error is one line starting with ``origin``."""
    unknown = sorted(set(properties or {}) - {DEFAULT_KEY_FORMAT})
    if unknown:
        raise PlanError(f"{origin}: not supported by streamapp yet: the ksqlDB properties {', '.join(unknown)}")
    default_key = str((properties or {}).get(DEFAULT_KEY_FORMAT, "KAFKA")).upper()
    try:
        statements = s.parse(text)
        return _Planner(origin, default_key).plan(statements)
    except s.SqlError as exc:
        raise PlanError(f"{origin}: {exc}") from None


@dataclass(frozen=True)
class _Side:
    """A source as one side of a query sees it: its alias and whether it is the left or the right one."""

    source: p.Source
    label: str  # the alias, else the source's name: what qualifies its columns
    side: str


class _Planner:
    def __init__(self, origin: str, default_key_format: str = "KAFKA") -> None:
        self.origin = origin
        #: The key format of a source with key columns and no KEY_FORMAT, and of a join no side keys.
        self.default_key_format = default_key_format
        self.sources: dict[str, p.Source] = {}
        self.queries: list[p.Query] = []
        #: The synthetic key (name, type) of the FULL table-table join being planned: a column SELECT may name.
        self._synthetic: tuple[str, str] | None = None
        #: Whether the query being planned computes functions and operators (a stream-stream join does).
        self._rich = False
        #: The windowed sources (WINDOW_TYPE) declared, by name: their window type (and size) and statement.
        #: streamapp reads none, but ksqlDB's refusals of joins of them come first.
        self._windowed: dict[str, tuple[str, s.Statement]] = {}

    def plan(self, statements: Iterable[s.Statement]) -> p.Plan:
        for statement in statements:
            if isinstance(statement, s.CreateSource):
                self._add(statement, self._create_source(statement))
            elif isinstance(statement, s.CreateAs):
                sink, query = self._create_as(statement)
                self._add(statement, sink)
                self.queries.append(query)
            elif isinstance(statement, s.InsertInto):
                raise self._insert_into(statement)
            else:
                raise self._unsupported(statement, f"{statement.keyword} statements are not supported: a statements "
                                                   "file declares sources and persistent queries (CREATE ...)")
        for name, (_, statement) in self._windowed.items():  # what no query refused first: streamapp reads none
            raise self._unsupported(statement, f"the windowed source {name} (WINDOW_TYPE)")
        if not self.queries:
            raise PlanError(f"{self.origin}: no query: declare at least one CREATE STREAM ... AS SELECT ... JOIN")
        return p.Plan(tuple(self.sources.values()), tuple(self.queries), self.origin)

    # ---- errors ------------------------------------------------------------------------------------------------------

    def _rejected(self, statement: s.Statement, message: str) -> PlanError:
        """What ksqlDB itself rejects, with ksqlDB's message."""
        return PlanError(f"{statement.label}: {message}")

    def _unsupported(self, statement: s.Statement, message: str) -> PlanError:
        """What ksqlDB accepts and streamapp does not run yet."""
        return PlanError(f"{statement.label}: not supported by streamapp yet: {message}")

    def _add(self, statement: s.Statement, source: p.Source) -> None:
        if source.name in self.sources:
            if getattr(statement, "if_not_exists", False):
                return
            kind = self.sources[source.name].kind.upper()
            raise self._rejected(statement, f"Cannot add {source.kind} '{source.name}': A {kind.lower()} "
                                            f"with the same name already exists")
        self.sources[source.name] = source

    # ---- CREATE STREAM / TABLE ---------------------------------------------------------------------------------------

    def _properties(self, statement: s.Statement, properties: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name, value in properties:
            if name not in SOURCE_PROPERTIES:
                raise self._unsupported(statement, f"WITH property {name}")
            found[name] = value
        if "FORMAT" in found and ("KEY_FORMAT" in found or "VALUE_FORMAT" in found):
            raise self._rejected(statement, "Cannot supply both 'FORMAT' and 'KEY_FORMAT' or 'VALUE_FORMAT' properties")
        return found

    def _create_source(self, statement: s.CreateSource) -> p.Source:
        window = {k: v for k, v in statement.properties if k in WINDOW_PROPERTIES}
        props = self._properties(statement, tuple(x for x in statement.properties if x[0] not in WINDOW_PROPERTIES))
        if window:
            kind = str(window.get("WINDOW_TYPE", "")).upper()
            if kind not in ("SESSION", "HOPPING", "TUMBLING"):
                raise self._rejected(statement, f"Unknown window type: '{window.get('WINDOW_TYPE')}'")
            self._windowed[statement.name] = (f"{kind} {window.get('WINDOW_SIZE', '')}".strip(), statement)
        if "KAFKA_TOPIC" not in props:
            raise self._rejected(statement, 'Missing required property "KAFKA_TOPIC" which has no default value.')
        if statement.columns is None:
            raise self._unsupported(statement, f"{statement.name} has no column list: its columns would come from a "
                                               "schema registry; declare them")
        key_constraint = "KEY" if statement.kind == "STREAM" else "PRIMARY KEY"
        for column in statement.columns:
            if column.constraint in ("HEADERS", "HEADER"):
                raise self._unsupported(statement, f"header column {column.name}")
            if column.constraint not in (None, key_constraint):
                if statement.kind == "TABLE":
                    raise self._rejected(statement, f"Column `{column.name}` is a 'KEY' column: please use "
                                                    "'PRIMARY KEY' for tables.")
                raise self._rejected(statement, f"Column `{column.name}` is a 'PRIMARY KEY' column: please use "
                                                "'KEY' for streams.")
        keys = tuple(p.Column(c.name, str(c.type)) for c in statement.columns if c.constraint)
        values = tuple(p.Column(c.name, str(c.type)) for c in statement.columns if not c.constraint)
        names = [c.name for c in statement.columns]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise self._rejected(statement, f"Duplicate column names: {duplicate}")
        if statement.kind == "TABLE" and not keys:
            raise self._rejected(statement, "Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
        key_format, value_format = self._formats(statement, props,
                                                 default_key=self.default_key_format if keys else "NONE")
        if key_format == "NONE" and keys:
            raise self._rejected(statement, "The 'NONE' format can only be used when no columns are defined. "
                                            f"Got: [{', '.join(f'`{k.name}` {k.type} KEY' for k in keys)}]")
        source = p.Source(
            name=statement.name, kind=p.STREAM if statement.kind == "STREAM" else p.TABLE,
            topic=str(props["KAFKA_TOPIC"]), key_columns=keys, value_columns=values,
            key_format=key_format, value_format=value_format,
            wrap_single_value=self._wrap(statement, props, values),
            timestamp=self._timestamp(statement, props, keys + values),
            partitions=self._partitions(statement, props), line=statement.line)
        return source

    def _formats(self, statement: s.Statement, props: dict[str, Any], default_key: str,
                 inherited: tuple[str, str] | None = None) -> tuple[str, str]:
        both = props.get("FORMAT")
        key = str(props.get("KEY_FORMAT", both or (inherited[0] if inherited else default_key))).upper()
        value = props.get("VALUE_FORMAT", both or (inherited[1] if inherited else None))
        if value is None:
            raise self._rejected(statement, 'Missing required property "VALUE_FORMAT" which has no default value.')
        value = str(value).upper()
        for part, name in (("key", key), ("value", value)):
            if name not in KEY_FORMATS + VALUE_FORMATS + REGISTRY_FORMATS + ("KAFKA",):
                raise self._rejected(statement, f"Unknown format: {name}")
        return key, value

    def _wrap(self, statement: s.Statement, props: dict[str, Any], values: tuple[p.Column, ...]) -> bool | None:
        if "WRAP_SINGLE_VALUE" not in props:
            return None
        wrap = props["WRAP_SINGLE_VALUE"]
        if not isinstance(wrap, bool):
            raise self._rejected(statement, f"Invalid value for WRAP_SINGLE_VALUE: {wrap!r} (true or false)")
        if len(values) != 1:
            raise self._rejected(statement, "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")
        return wrap

    def _timestamp(self, statement: s.Statement, props: dict[str, Any], columns: tuple[p.Column, ...]) -> str | None:
        if "TIMESTAMP" not in props:
            return None
        wanted = str(props["TIMESTAMP"])
        name = wanted if wanted.startswith("`") else wanted.upper()
        name = name.strip("`")
        column = next((c for c in columns if c.name == name), None)
        if column is None:
            raise self._rejected(statement, f"The TIMESTAMP column set in the WITH clause does not exist in the "
                                            f"schema: '{name}'")
        if column.type != "BIGINT":
            raise self._unsupported(statement, f"TIMESTAMP column {name} of type {column.type}: only BIGINT "
                                               "epoch milliseconds")
        return name

    def _partitions(self, statement: s.Statement, props: dict[str, Any]) -> int | None:
        if "PARTITIONS" not in props:
            return None
        count = props["PARTITIONS"]
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise self._rejected(statement, f"Invalid number of partitions: {count!r}")
        return count

    def _runnable(self, statement: s.Statement, source: p.Source) -> None:
        """What streamapp can read and write: checked after ksqlDB's own rules, so ksqlDB's errors come first."""
        if source.key_format not in KEY_FORMATS:
            raise self._unsupported(statement, f"{source.name}'s key format {source.key_format} (streamapp reads "
                                               f"{', '.join(KEY_FORMATS)})")
        if source.value_format not in VALUE_FORMATS:
            raise self._unsupported(statement, f"{source.name}'s value format {source.value_format} (streamapp reads "
                                               f"{', '.join(VALUE_FORMATS)})")
        if len(source.key_columns) > 1 and not (self._rich and source.key_format == "JSON"):
            raise self._unsupported(statement, f"{source.name} has {len(source.key_columns)} key columns (streamapp "
                                               "reads a key of several columns in a stream-stream join, in JSON)")
        for column in source.key_columns:
            if source.key_format in ("KAFKA", "DELIMITED") and column.type not in KAFKA_KEY_TYPES:
                raise self._rejected(statement, f"The '{source.key_format}' format does not support type "
                                                f"'{column.type.split('(')[0].split('<')[0]}'")

    # ---- CREATE ... AS SELECT ----------------------------------------------------------------------------------------

    def _source(self, statement: s.Statement, relation: s.Relation, side: str) -> _Side:
        source = self.sources.get(relation.name)
        if source is None:
            raise self._rejected(statement, f"{relation.name} does not exist.")
        return _Side(source, relation.label, side)

    def _create_as(self, statement: s.CreateAs) -> tuple[p.Source, p.Query]:
        query = statement.query
        if len(query.joins) > 1:
            raise self._unsupported(statement, f"a query of {len(query.joins) + 1} sources (n-way joins)")
        if query.emit == "EMIT FINAL":
            raise self._unsupported(statement, "EMIT FINAL")
        left = self._source(statement, query.source, p.LEFT_SIDE)
        sides = [left] + [self._source(statement, j.right, p.RIGHT_SIDE) for j in query.joins]
        tables = len(sides) == 2 and all(x.source.kind == p.TABLE for x in sides)
        streams = len(sides) == 2 and all(x.source.kind == p.STREAM for x in sides)
        self._synthetic = None
        self._rich = streams
        windowed = [x for x in sides if x.source.name in self._windowed]
        if windowed and not streams:
            raise self._unsupported(statement, f"the windowed source {windowed[0].source.name} (WINDOW_TYPE)")
        if tables or streams:
            on = query.joins[0].on
            self._prepared(statement, sides, on, query.select if streams else ())
            # a FULL join's key, or a stream-stream join's on two expressions, is synthetic (ksqlDB's ROWKEY)
            on_columns = isinstance(on, s.Comparison) and any(isinstance(x, s.Column) for x in (on.left, on.right))
            if query.joins[0].type == "FULL" or (streams and isinstance(on, s.Comparison) and not on_columns):
                self._synthetic = self._synthetic_key(sides)
        if streams:
            self._reserved(statement, query.select)
        self._resolvable(statement, sides, query)
        if streams and {"GROUP BY", "HAVING"} & set(query.clauses):
            raise self._aggregation(statement, left, sides[1], query)
        for clause in query.clauses:
            if not ((tables or streams) and clause == "WHERE"):
                raise self._unsupported(statement, f"{clause} in a persistent query")
        if not query.joins:
            return self._select(statement, left)
        join, right = query.joins[0], sides[1]
        if left.source.name == right.source.name:
            raise self._rejected(statement, f"Can not join '{left.source.name}' to '{right.source.name}': "
                                            "self joins are not yet supported.")
        if tables:
            return self._table_join(statement, left, right, join)
        if streams:
            return self._stream_join(statement, left, right, join)
        return self._join(statement, left, right, join)

    def _sink(self, statement: s.CreateAs, props: dict[str, Any], key: tuple[p.Projection, ...],
              value: tuple[p.Projection, ...], formats: tuple[str, str], partitions: int | None) -> p.Source:
        key_format, value_format = self._formats(statement, props, "KAFKA", inherited=formats)
        if not key and "KEY_FORMAT" not in props and "FORMAT" not in props:
            key_format = "NONE"
        columns = tuple(p.Column(x.name, x.type) for x in value)
        sink = p.Source(
            name=statement.name, kind=p.STREAM if statement.kind == "STREAM" else p.TABLE,
            topic=str(props.get("KAFKA_TOPIC", statement.name)),
            key_columns=tuple(p.Column(x.name, x.type) for x in key), value_columns=columns,
            key_format=key_format, value_format=value_format,
            wrap_single_value=self._wrap(statement, props, columns),
            timestamp=self._timestamp(statement, props, columns),
            partitions=self._partitions(statement, props) or partitions, line=statement.line)
        return sink

    def _select(self, statement: s.CreateAs, left: _Side) -> tuple[p.Source, p.Query]:
        """``CREATE TABLE t2 AS SELECT ... FROM t`` (or a stream from a stream): a copy through murmur2."""
        source = left.source
        if (statement.kind == "TABLE") != (source.kind == p.TABLE):
            raise self._unsupported(statement, f"CREATE {statement.kind} AS SELECT from the {source.kind} "
                                               f"{source.name} (an aggregation or a stream-to-table conversion)")
        props = self._properties(statement, statement.properties)
        items = self._projection(statement, [left], statement.query.select, join=False)
        key_names = {c.name for c in source.key_columns}
        key_refs = [i for i in items if isinstance(i[1], p.ColumnOf) and i[1].name in key_names]
        if source.key_columns and not key_refs:
            missing = ", ".join(c.name for c in source.key_columns)
            raise self._rejected(statement, f"Key missing from projection (ie, SELECT). The query used to build "
                                            f"`{statement.name}` must include the key column {missing} "
                                            "in its projection (eg, SELECT KEY...).")
        self._one_key(statement, key_refs)
        projection = tuple(p.Projection(name, type_, expression, expression in [k[1] for k in key_refs])
                           for name, expression, type_ in items)
        self._runnable(statement, source)
        sink = self._sink(statement, props, tuple(x for x in projection if x.key),
                          tuple(x for x in projection if not x.key),
                          (source.key_format, source.value_format), source.partitions)
        self._check_value(statement, sink)
        query = p.Query(name=statement.name, kind=p.SELECT, sink=sink.name, left=source.name,
                        projection=projection, line=statement.line)
        return sink, query

    def _one_key(self, statement: s.Statement, key_refs: list[tuple[str, p.Expression, str]]) -> None:
        by_column: dict[str, list[str]] = {}
        for name, expression, _ in key_refs:
            by_column.setdefault(expression.name, []).append(name)  # type: ignore[union-attr]
        for column, names in by_column.items():
            self._key_once(statement, column, names)

    def _key_once(self, statement: s.Statement, column: str, names: list[str]) -> None:
        """ksqlDB's refusal of a key column the projection names more than once."""
        if len(names) > 1:
            shown = " and ".join(sorted(names)) if len(names) == 2 else ", ".join(sorted(names))
            raise self._rejected(statement, f"The projection contains a key column ({column}) more than once, "
                                            f"aliased as: {shown}.")

    def _check_value(self, statement: s.Statement, sink: p.Source) -> None:
        if not sink.value_columns:
            raise self._rejected(statement, "The projection contains no value columns.")
        names = [c.name for c in sink.columns]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise self._rejected(statement, f"Duplicate column names: {duplicate}")

    # ---- joins -------------------------------------------------------------------------------------------------------

    def _join(self, statement: s.CreateAs, left: _Side, right: _Side,
              join: s.Join) -> tuple[p.Source, p.Query]:
        kinds = (left.source.kind, right.source.kind)
        shown = {"INNER": "[INNER] JOIN", "LEFT": "LEFT [OUTER] JOIN", "RIGHT": "RIGHT [OUTER] JOIN",
                 "FULL": "[FULL] OUTER JOIN"}[join.type]
        got = f"Got {left.source.name} {shown} {right.source.name}."
        if kinds == (p.TABLE, p.STREAM):
            raise self._rejected(statement, "Invalid join order: table-stream joins are not supported; only "
                                            f"stream-table joins. {got}")
        if join.type in ("FULL", "RIGHT"):
            kind = "full-outer" if join.type == "FULL" else "right-outer"
            raise self._rejected(statement, f"Invalid join type: {kind} join not supported for stream-table join. "
                                            f"{got}")
        if join.within is not None:
            raise self._rejected(statement, "A window definition was provided for a Stream-Table join. These joins "
                                            "are not windowed. Please drop the window definition (ie. the WITHIN "
                                            "clause) and try to execute your join again.")
        sides = [left, right]
        left_expr, right_expr = self._halves(statement, sides, join.on)
        if left_expr[0] is right:
            left_expr, right_expr = right_expr, left_expr
        stream_key, stream_type = left_expr[1], left_expr[2]
        table_key, table_type = right_expr[1], right_expr[2]
        table_keys = [c.name for c in right.source.key_columns]
        if not (isinstance(table_key, p.ColumnOf) and table_keys == [table_key.name]):
            raise self._rejected(statement, "Invalid join condition: stream-table joins require to join on the "
                                            f"table's primary key. Got {self._shown(left_expr)} = "
                                            f"{self._shown(right_expr)}.")
        if stream_type != table_type:
            raise self._rejected(statement, f"Invalid join condition: types don't match. Got "
                                            f"{self._shown(left_expr)}{{{stream_type}}} = "
                                            f"{self._shown(right_expr)}{{{table_type}}}.")
        props = self._properties(statement, statement.properties)
        # ksqlDB's viable key columns: each side of ON that is a plain column, left first.
        viable = [e for e in (stream_key, table_key) if isinstance(e, p.ColumnOf)]
        items = self._projection(statement, sides, statement.query.select, join=True)
        key_column = self._key_of(statement, sides, viable, items)
        key_refs = [item for item in items if item[1] == key_column]
        self._one_key(statement, key_refs)
        # The key holds the join key's value, whichever side the projection names it by.
        projection = tuple(
            p.Projection(name, type_, stream_key if expression == key_column else expression,
                         expression == key_column)
            for name, expression, type_ in items)
        for source in (left.source, right.source):
            self._runnable(statement, source)
        left_src, right_src = left.source, right.source
        rekeyed = not (isinstance(stream_key, p.ColumnOf)
                       and [c.name for c in left_src.key_columns] == [stream_key.name])
        join_key_format = right_src.key_format if rekeyed or left_src.key_format == "NONE" else left_src.key_format
        key_format = next((f for f in (left_src.key_format, right_src.key_format) if f != "NONE"), "KAFKA")
        sink = self._sink(statement, props, tuple(x for x in projection if x.key),
                          tuple(x for x in projection if not x.key), (key_format, left_src.value_format),
                          left_src.partitions)
        self._check_value(statement, sink)
        if sink.kind != p.STREAM:
            raise self._rejected(statement, "Invalid result type. Your SELECT query produces a STREAM. Please use "
                                            "CREATE STREAM AS SELECT statement instead.")
        query = p.Query(
            name=statement.name, kind=p.STREAM_TABLE_JOIN, sink=sink.name, left=left_src.name,
            projection=projection, right=right_src.name, join_type=join.type, left_key=stream_key,
            repartition=rekeyed or left_src.key_format != join_key_format,
            repartition_right=right_src.key_format != join_key_format, line=statement.line)
        return sink, query

    # ---- table-table joins --------------------------------------------------------------------------------------------

    def _prepared(self, statement: s.Statement, sides: list[_Side], on: s.Expression,
                  select: tuple[s.SelectItem, ...] = ()) -> None:
        """ksqlDB's checks of ``ON``'s columns (and of ``select``'s, given for a stream-stream join) when it
        prepares the statement (``AstBuilder``), before any other."""
        refs = [c for item in select for c in _columns_in(item.expression)] + _columns_in(on)
        qualifiers = [item.source for item in select if item.kind == "source"] + [r.qualifier for r in refs]
        for qualifier in qualifiers:  # every qualifier first, then every unqualified name (ksqlDB's order)
            if qualifier is not None and not any(x.label == qualifier for x in sides):
                raise self._rejected(statement, f"Failed to prepare statement: '{qualifier}' is not a valid "
                                                "stream/table name or alias.")
        for ref in refs:
            if ref.qualifier is not None:
                continue
            found = [x for x in sides if x.source.column(ref.name)]
            if len(found) > 1:
                raise self._rejected(statement, f"Exception while preparing statement: Line: {ref.line}, Col: "
                                                f"{ref.column}: Column '{ref.name}' is ambiguous. Could be "
                                                + " or ".join(f"{x.label}.{ref.name}" for x in found) + ".")

    @staticmethod
    def _synthetic_key(sides: list[_Side]) -> tuple[str, str]:
        """A FULL join's key column: ``ROWKEY``, else ``ROWKEY_n`` with the first n no source column takes."""
        taken = {c.name for x in sides for c in x.source.columns}
        n = 0
        while (name := "ROWKEY" if n == 0 else f"ROWKEY_{n}") in taken:
            n += 1
        return name, sides[0].source.key_columns[0].type

    def _keyed(self, statement: s.CreateAs, sides: list[_Side], items: list[tuple[str, p.Expression, str]],
               key_of: p.Expression) -> tuple[p.Expression | None, tuple[p.Projection, ...]]:
        """(the WHERE, the projection) of a table-table or stream-stream join, whose key column holds the join key
        (:class:`~streamapp.sql.plan.JoinKey`: either side's, whichever holds a row); both sources runnable."""
        where = None if statement.query.where is None else self._where(statement, sides, statement.query.where)
        projection = tuple(p.Projection(name, type_, p.JoinKey() if expression == key_of else expression,
                                        expression == key_of)
                           for name, expression, type_ in items)
        for side in sides:
            self._runnable(statement, side.source)
        return where, projection

    def _same_types(self, statement: s.Statement, first: tuple[_Side, p.Expression, str],
                    second: tuple[_Side, p.Expression, str]) -> None:
        """ksqlDB's refusal of a join of two join keys of different types (a CAST makes them one)."""
        if first[2] != second[2]:
            raise self._rejected(statement, f"Invalid join condition: types don't match. Got {self._shown(first)}"
                                            f"{{{types.message_name(first[2])}}} = {self._shown(second)}"
                                            f"{{{types.message_name(second[2])}}}.")

    def _join_sink(self, statement: s.CreateAs, props: dict[str, Any], projection: tuple[p.Projection, ...],
                   formats: tuple[str, str], partitions: int | None, kind: str) -> p.Source:
        """The sink of a join whose result is a ``kind`` (STREAM or TABLE); ksqlDB's refusal of the other CREATE."""
        sink = self._sink(statement, props, tuple(x for x in projection if x.key),
                          tuple(x for x in projection if not x.key), formats, partitions)
        self._check_value(statement, sink)
        if sink.kind != kind:
            word = kind.upper()
            raise self._rejected(statement, f"Invalid result type. Your SELECT query produces a {word}. Please use "
                                            f"CREATE {word} AS SELECT statement instead.")
        return sink

    def _synthetic_items(self, statement: s.CreateAs, items: list[tuple[str, p.Expression, str]]) -> str:
        """The synthetic key's name, its column added to ``items`` for a ``*``; ksqlDB's refusal when SELECT
        names it nowhere."""
        assert self._synthetic is not None
        name = self._synthetic[0]
        if any(item.kind == "all" for item in statement.query.select):  # ``*`` names the synthetic key too
            items.insert(0, (name, p.JoinKey(), self._synthetic[1]))
        if not any(isinstance(expr, p.JoinKey) for _, expr, _ in items):
            raise self._rejected(statement, "Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS. "
                                            f"The query used to build `{statement.name}` must include the join "
                                            f"expression {name} in its projection (eg, SELECT {name}...). {name} "
                                            "was added as a synthetic key column because the join criteria did "
                                            "not match any source column. This expression must be included in "
                                            "the projection and may be aliased.")
        return name

    def _table_join(self, statement: s.CreateAs, left: _Side, right: _Side,
                    join: s.Join) -> tuple[p.Source, p.Query]:
        """``CREATE TABLE ... AS SELECT ... FROM t1 JOIN t2 ON t1.pk = t2.pk``: ksqlDB's ``verifyJoin`` for two tables."""
        sides = [left, right]
        first, second = self._halves(statement, sides, join.on)
        written = f"{self._shown(first)} = {self._shown(second)}"
        left_half, right_half = (first, second) if first[0] is left else (second, first)
        if not _is_key(right_half[1], right.source):
            raise self._rejected(statement, "Invalid join condition: table-table joins require to join on the "
                                            f"primary key of the right input table. Got {written}.")
        if not _is_key(left_half[1], left.source):
            if join.type == "FULL":
                raise self._rejected(statement, "Invalid join type: full-outer join not supported for foreign-key "
                                                f"table-table join. Got {left.source.name} [FULL] OUTER JOIN "
                                                f"{right.source.name}.")
            if join.type == "RIGHT":
                raise self._rejected(statement, "RIGHT OUTER JOIN on a foreign key is not supported")
        self._same_types(statement, first, second)
        if not _is_key(left_half[1], left.source):
            raise self._unsupported(statement, f"foreign-key joins ({written})")
        props = self._properties(statement, statement.properties)
        items = self._projection(statement, sides, statement.query.select, join=True)
        if self._synthetic is not None:
            name = self._synthetic_items(statement, items)
            key_of: p.Expression = p.JoinKey()
            shown_key = name
        else:
            key_of = self._key_of(statement, sides, [left_half[1], right_half[1]], items)  # type: ignore[list-item]
            shown_key = key_of.name  # type: ignore[attr-defined]
        self._key_once(statement, shown_key, [item[0] for item in items if item[1] == key_of])
        if join.within is not None:
            raise self._rejected(statement, "A window definition was provided for a Table-Table join. These joins "
                                            "are not windowed. Please drop the window definition (i.e. the WITHIN "
                                            "clause) and try to execute your Table-Table join again.")
        # The key is the primary key both rows share, whichever side holds a row (ksqlDB keys the result by it).
        where, projection = self._keyed(statement, sides, items, key_of)
        sink = self._join_sink(statement, props, projection, (left.source.key_format, left.source.value_format),
                               left.source.partitions, p.TABLE)
        query = p.Query(
            name=statement.name, kind=p.TABLE_TABLE_JOIN, sink=sink.name, left=left.source.name,
            projection=projection, right=right.source.name, join_type=join.type,
            repartition_right=left.source.key_format != right.source.key_format, line=statement.line, where=where)
        return sink, query

    # ---- stream-stream joins -----------------------------------------------------------------------------------------

    def _reserved(self, statement: s.Statement, select: tuple[s.SelectItem, ...]) -> None:
        """ksqlDB's refusal of a SELECT that names an output column after a pseudo column."""
        for item in select:
            if item.alias in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO + WINDOW_BOUNDS:
                raise self._rejected(statement, f"Reserved column name in select: `{item.alias}`. Please remove or "
                                                "alias the column.")

    def _compatible_windows(self, statement: s.Statement, sides: list[_Side], windows: list[str | None]) -> None:
        """ksqlDB's analyzer: a windowed source joins only a windowed one, a session-windowed one only another."""
        if (windows[0] is None) != (windows[1] is None):
            shown = [f"`{x.label}` is {t.split()[0] if t else 'not'} windowed" for x, t in zip(sides, windows)]
            raise self._rejected(statement, "Can not join windowed source to non-windowed source. " + " ".join(shown))
        if windows[0] is not None and windows[1] is not None:
            left, right = (t.split()[0] for t in (windows[0], windows[1]))
            if (left == "SESSION") != (right == "SESSION"):
                raise self._rejected(statement, f"Incompatible windowed sources. Left source: {left} Right source: "
                                                f"{right} Session windowed sources can only be joined to other session "
                                                "windowed sources, and may still not result in expected behaviour as "
                                                "session bounds must be an exact match for the join to work Hopping "
                                                "and tumbling windowed sources can only be joined to other hopping and "
                                                "tumbling windowed sources")

    def _window(self, statement: s.Statement, join: s.Join) -> tuple[int, int, int | None]:
        """(before, after, grace) of ``WITHIN`` in milliseconds; ksqlDB's refusal of a join without one."""
        if join.window is None:
            raise self._rejected(statement, "Stream-Stream joins must have a WITHIN clause specified. None was "
                                            "provided. To learn about how to specify a WITHIN clause with a "
                                            "stream-stream join, please visit: https://docs.confluent.io/current/"
                                            "ksql/docs/syntax-reference.html#create-stream-as-select")
        window = join.window
        before, after = (_milliseconds(self, statement, d) for d in (window.before, window.after))
        grace = None if window.grace is None else _milliseconds(self, statement, window.grace)
        return before, after, grace

    def _stream_condition(self, statement: s.Statement, left: _Side, right: _Side, join: s.Join
                          ) -> tuple[tuple[_Side, p.Expression, str], tuple[_Side, p.Expression, str]]:
        """ksqlDB's checks of two streams and of the ON that joins them; the left and the right half of ON."""
        sides = [left, right]
        kafka = [x.source.name for x in sides if x.source.value_format == "KAFKA"]
        if kafka:
            raise self._rejected(statement, f"Source(s) {', '.join(kafka)} are using the 'KAFKA' value format. This "
                                            "format does not yet support JOIN.")
        window_types = [self._windowed.get(x.source.name, (None,))[0] for x in sides]
        self._compatible_windows(statement, sides, window_types)
        on = join.on
        if isinstance(on, s.Other) and on.kind == "AND":
            raise self._rejected(statement, "Invalid join condition: joins on multiple conditions are not yet "
                                            f"supported. Got {_conjunction(on)}.")
        for ref in _columns_in(on):
            known = [x for x in sides if ref.qualifier in (None, x.label)]
            if ref.name not in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO and not any(x.source.column(ref.name) for x in known):
                raise self._rejected(statement, f"Line: {ref.line}, Col: {ref.column}: JOIN ON column '{ref}' cannot "
                                                "be resolved.")
        first, second = self._halves(statement, sides, on)
        left_half, right_half = (first, second) if first[0] is left else (second, first)
        self._same_types(statement, first, second)
        left_key, right_key = left_half[1], right_half[1]
        if any(window_types):
            rekeyed = not (_is_key(left_key, left.source) and _is_key(right_key, right.source))
            if rekeyed or window_types[0] != window_types[1]:
                raise self._rejected(statement, "Implicit repartitioning of windowed sources is not supported. See "
                                                "https://github.com/confluentinc/ksql/issues/4385.")
            raise self._unsupported(statement, f"a join of the windowed sources {left.source.name} and "
                                               f"{right.source.name} (WINDOW_TYPE)")
        if "MAP" in re.findall(r"\w+", left_half[2]):
            raise self._rejected(statement, "Map keys, including types that contain maps, are not supported as they "
                                            "may lead to unexpected behavior due to inconsistent serialization. Key "
                                            f"column name: `{left.label}_{getattr(left_key, 'name', 'ROWKEY')}`. "
                                            f"Column type: {types.message_name(left_half[2])}. See "
                                            "https://github.com/confluentinc/ksql/issues/6621 for more.")
        return left_half, right_half

    def _stream_join(self, statement: s.CreateAs, left: _Side, right: _Side,
                     join: s.Join) -> tuple[p.Source, p.Query]:
        """``CREATE STREAM ... AS SELECT ... FROM s1 JOIN s2 WITHIN ... ON ...``: ksqlDB's checks for two streams,
        its key (the left ON column the projection names first, else the right one; FULL's synthetic ROWKEY) and
        the re-keying of each side joined on anything but its key column."""
        sides = [left, right]
        left_half, right_half = self._stream_condition(statement, left, right, join)
        left_key, right_key = left_half[1], right_half[1]
        props = self._properties(statement, statement.properties)
        if self._synthetic is not None:
            self._synthetic = (self._synthetic[0], left_half[2])
        items = self._projection(statement, sides, statement.query.select, join=True)
        if self._synthetic is not None:
            key_of: p.Expression = p.JoinKey()
            self._key_once(statement, f"`{self._synthetic_items(statement, items)}`",
                           [name for name, expr, _ in items if isinstance(expr, p.JoinKey)])
        else:
            viable = [e for e in (left_key, right_key) if isinstance(e, p.ColumnOf)]
            key_of = self._key_of(statement, sides, viable, items, plural=True)  # type: ignore[arg-type]
            label = self._label(sides, key_of)  # type: ignore[arg-type]
            column = key_of.name  # type: ignore[attr-defined]
            clashing = sum(1 for x in sides if x.source.column(column)) > 1
            self._key_once(statement, f"`{label}_{column}`" if clashing else f"`{column}`",
                           [name for name, expr, _ in items if expr == key_of])
        where, projection = self._keyed(statement, sides, items, key_of)
        before, after, grace = self._window(statement, join)  # ksqlDB checks it when it builds the join, last
        rekeyed = {x.side: not _is_key(e, x.source) for x, e in ((left, left_key), (right, right_key))}
        kept = [x.source.key_format for x in sides if not rekeyed[x.side] and x.source.key_format != "NONE"]
        join_key_format = kept[0] if kept else next(
            (x.source.key_format for x in sides if x.source.key_format != "NONE"), self.default_key_format)
        sink = self._join_sink(statement, props, projection, (join_key_format, left.source.value_format),
                               left.source.partitions, p.STREAM)
        query = p.Query(
            name=statement.name, kind=p.STREAM_STREAM_JOIN, sink=sink.name, left=left.source.name,
            projection=projection, right=right.source.name, join_type=join.type, left_key=left_key,
            repartition=rekeyed[p.LEFT_SIDE] or left.source.key_format != join_key_format,
            repartition_right=rekeyed[p.RIGHT_SIDE] or right.source.key_format != join_key_format,
            line=statement.line, where=where, right_key=right_key, within_before=before, within_after=after,
            grace=grace)
        return sink, query

    def _where(self, statement: s.Statement, sides: list[_Side], expression: s.Expression,
               clause: str = "WHERE") -> p.Expression:
        """A WHERE of comparisons, AND, OR and NOT over columns and constants: what a table-table join filters by
        (``clause``: HAVING for a HAVING, typed the same way over aggregates, for ksqlDB's refusals).

        Typed as ksqlDB types it (``ExpressionTypeManager``): it must be a BOOLEAN, and a comparison must
        compare numbers with numbers, text with text or booleans with booleans (by = or != only).
        """
        resolved, type_, shown = self._predicate(statement, sides, expression, clause)
        if type_ not in ("BOOLEAN", None):
            raise self._rejected(statement, f"Type error in {clause} expression: Should evaluate to boolean but is "
                                            f"{shown} ({types.message_name(type_)}) instead.")
        return resolved

    def _predicate(self, statement: s.Statement, sides: list[_Side], expression: s.Expression,
                   clause: str = "WHERE") -> tuple[p.Expression, str | None, str]:
        """(what a part of a WHERE (or HAVING) computes, its type (None: NULL), how ksqlDB's messages show it)."""
        if isinstance(expression, s.Comparison):
            op = "!=" if expression.op == "<>" else expression.op
            left, right = (self._predicate(statement, sides, x, clause) for x in (expression.left, expression.right))
            if not types.comparable(left[1], op, right[1]):
                raise self._rejected(statement, f"Error in {clause} expression: Cannot compare {left[2]} "
                                                f"({types.message_name(left[1] or 'NULL')}) to {right[2]} "
                                                f"({types.message_name(right[1] or 'NULL')}) with {_COMPARISONS[op]}.")
            return p.Compare(op, left[0], right[0]), "BOOLEAN", f"({left[2]} {op} {right[2]})"
        if isinstance(expression, s.Other) and expression.kind in ("AND", "OR", "NOT"):
            args = tuple(self._where(statement, sides, a, clause) for a in expression.args)
            return p.Logical(expression.kind, args), "BOOLEAN", expression.text
        if clause == "HAVING" and isinstance(expression, s.Call) and expression.name in _AGGREGATES:
            args = [self._predicate(statement, sides, a, clause) for a in expression.args]
            type_ = _AGGREGATES[expression.name] or (args[0][1] if args else None)
            if type_ is not None:
                return (p.Apply(expression.name, tuple(a[0] for a in args)), type_,
                        f"{expression.name}({', '.join(a[2] for a in args)})")
        if clause == "HAVING" and isinstance(expression, s.Other) and expression.kind == "COUNT(*)":
            return p.Apply("COUNT", ()), "BIGINT", "COUNT(*)"
        if isinstance(expression, s.Literal):
            value = expression.value
            return (p.Literal(float(value) if isinstance(value, Decimal) else value), types.literal_type(value),
                    str(expression))
        if isinstance(expression, s.Column):
            resolved, type_, side = self._column(statement, sides, expression)
            shown = expression.name if isinstance(resolved, p.JoinKey) else f"{side.label}_{expression.name}"
            return resolved, type_, shown
        what = expression.kind if isinstance(expression, s.Other) else "a function call"
        raise self._unsupported(statement, f"{what} in a {clause} ({expression})")

    def _aggregation(self, statement: s.CreateAs, left: _Side, right: _Side, query: s.Query) -> PlanError:
        """GROUP BY / HAVING over a stream-stream join: ksqlDB's checks of the join, then of its WHERE and its
        HAVING over the join's columns (``LogicalPlanner.buildAggregateNode``), then refused: streamapp does not
        aggregate."""
        self._stream_condition(statement, left, right, query.joins[0])
        if query.where is not None:
            self._where(statement, [left, right], query.where)
        if query.having is not None:
            self._where(statement, [left, right], query.having, "HAVING")
        return self._unsupported(statement, "GROUP BY / HAVING in a persistent query (an aggregation)")

    def _insert_into(self, statement: s.InsertInto) -> PlanError:
        """``INSERT INTO stream SELECT ...``: ksqlDB's checks of it (``AstSanitizer``: the target is a stream;
        ``EngineExecutor.validateExistingSink``: the query's result has the target's schema), then refused."""
        target = self.sources.get(statement.name)
        if target is None:
            return self._rejected(statement, f"Source `{statement.name}` does not exist.")
        if target.kind != p.STREAM:
            return self._rejected(statement, f"INSERT INTO can only be used to insert into a stream. "
                                             f"{statement.name} is a table.")
        query = statement.query
        kinds = {self.sources[r.name].kind for r in (query.source, *(j.right for j in query.joins))
                 if r.name in self.sources}
        kind = "TABLE" if kinds == {p.TABLE} else "STREAM"
        result, _ = self._create_as(s.CreateAs(statement.line, statement.text, kind=kind, name=statement.name,
                                               properties=statement.properties, query=query,
                                               if_not_exists=False, or_replace=False))
        if result.kind != target.kind:
            return self._rejected(statement, f"Incompatible data sink and query result. Data sink ({target.name}) "
                                             f"type is K{target.kind.upper()} but select query result is "
                                             f"K{result.kind.upper()}.")
        if not _compatible_schema(result, target):
            return self._rejected(statement, "Incompatible schema between results and sink. Result schema is "
                                             f"{_schema(result)} Sink schema is {_schema(target)}")
        return self._unsupported(statement, f"INSERT INTO {target.name} (a second query writing into a stream)")

    def _key_of(self, statement: s.CreateAs, sides: list[_Side], viable: list[p.ColumnOf],
                items: list[tuple[str, p.Expression, str]], plural: bool = False) -> p.ColumnOf:
        """The join's key column: the first viable one the projection names (ksqlDB's ``buildJoinKey``)."""
        in_projection = [v for v in viable if any(expr == v for _, expr, _ in items)]
        if not in_projection:
            names = " or ".join(f"{self._label(sides, v)}.{v.name}" for v in viable)
            # ksqlDB says "expressions" of several (``PlanNode.throwKeysNotIncludedError``); the stream-table and
            # table-table messages keep the singular their tests pin
            expressions = "expressions" if plural and len(viable) > 1 else "expression"
            raise self._rejected(statement, f"Key missing from projection (ie, SELECT). The query used to build "
                                            f"`{statement.name}` must include the join {expressions} {names} in its "
                                            "projection (eg, SELECT "
                                            f"{self._label(sides, viable[0])}.{viable[0].name}...).")
        return in_projection[0]

    @staticmethod
    def _label(sides: list[_Side], expression: p.ColumnOf) -> str:
        return next(side.label for side in sides if side.side == expression.side)

    def _shown(self, found: tuple[_Side, p.Expression, str]) -> str:
        side, expression, _ = found
        if isinstance(expression, p.ColumnOf):
            return f"{side.label}.{expression.name}"
        if isinstance(expression, p.AsValue) and isinstance(expression.argument, p.ColumnOf):
            return f"AS_VALUE({side.label}.{expression.argument.name})"
        return str(expression)

    def _halves(self, statement: s.Statement, sides: list[_Side], on: s.Expression
                ) -> tuple[tuple[_Side, p.Expression, str], tuple[_Side, p.Expression, str]]:
        """The two halves of ``ON a = b`` as written, each with the side it reads: one side each."""
        if not isinstance(on, s.Comparison) or on.op != "=":
            raise self._rejected(statement, f"Unsupported join expression: {on}")
        first, second = self._side_of(statement, sides, on.left, on), self._side_of(statement, sides, on.right, on)
        if first[0] is second[0]:
            raise self._rejected(statement, f"Each side of the join must reference exactly one source and not the "
                                            f"same source. Left side references {first[0].label} and right "
                                            f"references {second[0].label}")
        return first, second

    def _side_of(self, statement: s.Statement, sides: list[_Side], expression: s.Expression,
                 on: s.Expression) -> tuple[_Side, p.Expression, str]:
        """Which side one half of ``ON`` reads, what it computes and its type."""
        if isinstance(expression, s.Literal):
            raise self._rejected(statement, f"Invalid comparison expression '{expression}' in join '{on}'. Each "
                                            "side of the join comparision must contain references from exactly one "
                                            "source.")
        resolved, type_ = self._expression(statement, sides, expression)
        side = next(x for x in sides if x.side == self._sides_of(resolved))
        return side, resolved, type_

    def _sides_of(self, expression: p.Expression) -> str | None:
        """The side an expression reads (None: the join key, which is both sides')."""
        if isinstance(expression, p.AsValue):
            return self._sides_of(expression.argument)
        parts = (expression.args if isinstance(expression, (p.Apply, p.Logical))
                 else (expression.left, expression.right) if isinstance(expression, p.Compare) else ())
        if parts:
            return next((side for a in parts if (side := self._sides_of(a)) is not None), None)
        return getattr(expression, "side", None)

    def _resolvable(self, statement: s.Statement, sides: list[_Side], query: s.Query) -> None:
        """Every column the projection names exists, checked first as ksqlDB's analyzer does."""
        for item in query.select:
            for ref in _columns_in(item.expression):
                known = [x for x in sides if ref.qualifier in (None, x.label)]
                if ref.qualifier is None and self._synthetic and ref.name == self._synthetic[0]:
                    continue
                if ref.qualifier is not None and not known:
                    raise self._rejected(statement, f"Source '{ref.qualifier}' does not exist.")
                if ref.name in WINDOW_BOUNDS or not any(ref.name in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO
                                                        or x.source.column(ref.name) for x in known):
                    raise self._rejected(statement, f"SELECT column '{ref}' cannot be resolved.")

    # ---- expressions and the projection ------------------------------------------------------------------------------

    def _column(self, statement: s.Statement, sides: list[_Side], ref: s.Column) -> tuple[p.Expression, str, _Side]:
        if ref.name in UNSUPPORTED_PSEUDO and not (self._rich and ref.qualifier is not None):
            raise self._unsupported(statement, f"pseudo column {ref.name}")
        if ref.qualifier is None and self._synthetic and ref.name == self._synthetic[0]:
            return p.JoinKey(), self._synthetic[1], sides[0]
        if ref.qualifier is not None:
            side = next((x for x in sides if x.label == ref.qualifier), None)
            if side is None:
                raise self._rejected(statement, f"Source '{ref.qualifier}' does not exist.")
            candidates = [side]
        else:
            candidates = [x for x in sides if ref.name in PSEUDO_COLUMNS or x.source.column(ref.name)]
            if len(candidates) > 1:
                raise self._rejected(statement, f"Column '{ref.name}' is ambiguous. Could be any of: "
                                                + ", ".join(f"{x.label}.{ref.name}" for x in candidates))
            if not candidates:
                raise self._rejected(statement, f"SELECT column '{ref.name}' cannot be resolved.")
        side = candidates[0]
        if ref.name in PSEUDO_COLUMNS:
            return p.RowTime(side.side), "BIGINT", side
        if ref.name in UNSUPPORTED_PSEUDO:  # a stream-stream join's rows hold where their record was read
            return p.ColumnOf(side.side, ref.name), next(c.type for c in p.WHERE_READ if c.name == ref.name), side
        column = side.source.column(ref.name)
        if column is None:
            raise self._rejected(statement, f"Column '{ref}' cannot be resolved.")
        return p.ColumnOf(side.side, column.name), column.type, side

    def _expression(self, statement: s.Statement, sides: list[_Side], expression: s.Expression) -> tuple[p.Expression, str]:
        if isinstance(expression, s.Column):
            resolved, type_, _ = self._column(statement, sides, expression)
            return resolved, type_
        if isinstance(expression, s.Call) and expression.name == "AS_VALUE" and len(expression.args) == 1:
            inner, type_ = self._expression(statement, sides, expression.args[0])
            return p.AsValue(inner), type_
        if self._rich:
            found = self._computed(statement, sides, expression)
            if found is not None:
                return found
        if isinstance(expression, s.Call):
            runs = "AS_VALUE only" if not self._rich else "AS_VALUE, ABS and SUBSTRING in a stream-stream join"
            raise self._unsupported(statement, f"function {expression.name} (streamapp runs {runs})")
        if isinstance(expression, s.Literal):
            raise self._unsupported(statement, f"the literal {expression} in a projection")
        what = expression.kind if isinstance(expression, s.Other) else "a comparison"
        raise self._unsupported(statement, f"{what} in an expression ({expression})")

    def _computed(self, statement: s.Statement, sides: list[_Side],
                  expression: s.Expression) -> tuple[p.Expression, str] | None:
        """A function, operator or constant a stream-stream join computes (in ON or SELECT) and its type, as ksqlDB
        types it; None: not one streamapp runs."""
        if isinstance(expression, s.Literal) and expression.value is not None:
            value = expression.value
            return p.Literal(float(value) if isinstance(value, Decimal) else value), types.literal_type(value) or "STRING"
        if isinstance(expression, s.Call) and expression.name in ("ABS", "SUBSTRING"):
            args = [self._expression(statement, sides, a) for a in expression.args]
            type_ = args[0][1] if expression.name == "ABS" else "STRING"
            return p.Apply(expression.name, tuple(a[0] for a in args)), type_
        if not isinstance(expression, s.Other):
            return None
        if expression.kind == "CAST":
            inner, _ = self._expression(statement, sides, expression.args[0])
            target = str(expression.args[1])
            return p.Apply("CAST", (inner,), target), target
        if expression.kind == "CASE":
            args, results = [], []
            for n, arg in enumerate(expression.args):
                is_test = n % 2 == 0 and not ("ELSE" in expression.ops and n == len(expression.args) - 1)
                resolved, type_, _ = (self._predicate(statement, sides, arg) if is_test
                                      else (*self._expression(statement, sides, arg), ""))
                args.append(resolved)
                if not is_test:
                    results.append(type_)
            return p.Apply("CASE", tuple(args), "ELSE" if "ELSE" in expression.ops else ""), results[0]
        operands = [a for a in expression.args if not isinstance(a, str)]
        resolved = [self._expression(statement, sides, a) for a in operands]
        if expression.kind == "arithmetic" and len(resolved) == 1:
            return p.Apply("NEGATE", (resolved[0][0],)), resolved[0][1]
        if expression.kind == "arithmetic":
            result, type_ = resolved[0]
            for op, (operand, operand_type) in zip(expression.ops, resolved[1:]):
                result, type_ = p.Apply(op, (result, operand)), types.wider(type_, operand_type)
            return result, type_
        if expression.kind == "[]":
            element = s.parse_type(resolved[0][1]).params[0]
            return p.Apply("SUBSCRIPT", (resolved[0][0], resolved[1][0])), str(element)
        if expression.kind == "->":
            name = expression.args[1]
            fields = dict(s.parse_type(resolved[0][1]).params)
            if name not in fields:
                raise self._rejected(statement, f"Could not find field '{name}' in '{operands[0]}'.")
            return p.Apply("FIELD", (resolved[0][0],), name), str(fields[name])
        return None

    def _projection(self, statement: s.Statement, sides: list[_Side], select: tuple[s.SelectItem, ...],
                    join: bool) -> list[tuple[str, p.Expression, str]]:
        """(name, expression, type) of each output column, named as ksqlDB names them."""
        found: list[tuple[str, p.Expression, str]] = []
        generated = 0
        taken = {c.name for side in sides for c in side.source.columns}
        for item in select:
            if item.kind in ("all", "source"):
                chosen = sides if item.kind == "all" else [x for x in sides if x.label == item.source]
                if not chosen:
                    raise self._rejected(statement, f"Source '{item.source}' does not exist.")
                for side in chosen:
                    for column in side.source.columns:
                        name = f"{side.label}_{column.name}" if join else column.name
                        found.append((name, p.ColumnOf(side.side, column.name), column.type))
                continue
            expression = item.expression
            resolved, type_ = self._expression(statement, sides, expression)
            if item.kind == "struct":  # ``x->*``: a column for each field, named by the field
                if not self._rich:
                    raise self._unsupported(statement, f"{expression}->* outside a stream-stream join")
                found += [(name, p.Apply("FIELD", (resolved,), name), str(field_type))
                          for name, field_type in s.parse_type(type_).params]
                continue
            if item.alias:
                name = item.alias
            elif isinstance(expression, s.Column):
                clashing = join and (expression.name in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO
                                     or sum(1 for x in sides if x.source.column(expression.name)) > 1)
                label = next((x.label for x in sides if x.side == self._sides_of(resolved)), None)
                name = f"{label}_{expression.name}" if clashing and expression.qualifier else expression.name
            else:
                while f"KSQL_COL_{generated}" in taken:
                    generated += 1
                name = f"KSQL_COL_{generated}"
                generated += 1
            found.append((name, resolved, type_))
        return found


#: The longest duration ksqlDB and Kafka Streams hold: a Java long of milliseconds.
_MAX_MILLISECONDS = 2**63 - 1
#: ksqlDB's time units of a WITHIN or GRACE PERIOD, in milliseconds (singular and plural both accepted).
_UNITS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}


def _milliseconds(planner: "_Planner", statement: s.Statement, duration: s.Duration) -> int:
    """A WITHIN or GRACE PERIOD duration in milliseconds; a unit or an amount ksqlDB does not take is refused."""
    unit = duration.unit[:-1] if duration.unit.endswith("S") else duration.unit
    if unit not in _UNITS:
        raise planner._rejected(statement, f"Invalid time unit: {duration.unit}. Valid units are: MILLISECONDS, "
                                           "SECONDS, MINUTES, HOURS, DAYS")
    if not isinstance(duration.amount, int):
        raise planner._rejected(statement, f"Invalid window size: {duration.amount} {duration.unit}: a whole number "
                                           "is expected")
    milliseconds = duration.amount * _UNITS[unit]
    if milliseconds > _MAX_MILLISECONDS:
        raise PlanError(f"{statement.label}: {duration.amount} {duration.unit} is more milliseconds than a Java long "
                        "holds: Kafka Streams could not run it")
    return milliseconds


def _conjunction(expression: s.Expression) -> str:
    """An ``a AND b`` of ON as ksqlDB's messages print it: ``((A = B) AND (C = D))``."""
    if isinstance(expression, s.Other) and expression.kind == "AND":
        return "(" + " AND ".join(_conjunction(a) for a in expression.args) + ")"
    return str(expression)


def _is_key(expression: p.Expression, source: p.Source) -> bool:
    """Whether one half of ``ON`` is the source's primary key column itself."""
    return isinstance(expression, p.ColumnOf) and [c.name for c in source.key_columns] == [expression.name]


#: ksqlDB's names of the comparison operators, for its messages.
_COMPARISONS = {"=": "EQUAL", "!=": "NOT_EQUAL", "<": "LESS_THAN", "<=": "LESS_THAN_OR_EQUAL", ">": "GREATER_THAN",
                ">=": "GREATER_THAN_OR_EQUAL"}


#: The aggregate functions a HAVING is typed with: the type each returns (None: its argument's).
_AGGREGATES = {"SUM": None, "MIN": None, "MAX": None, "COUNT": "BIGINT", "COUNT_DISTINCT": "BIGINT",
               "AVG": "DOUBLE"}


def _schema(source: p.Source) -> str:
    """A source's columns as ksqlDB's messages print a schema: ```K` STRING KEY, `V` INTEGER``."""
    return ", ".join(f"`{c.name}` {types.message_name(c.type)}{' KEY' if c in source.key_columns else ''}"
                     for c in source.columns)


def _compatible_schema(result: p.Source, sink: p.Source) -> bool:
    """ksqlDB's ``LogicalSchema.compatibleSchema``: the same columns in the same order, each key or value as in
    the sink, of its type or one ksqlDB widens to it (INT to BIGINT to DECIMAL to DOUBLE)."""
    pairs = list(zip(result.columns, sink.columns))
    return len(result.columns) == len(sink.columns) and all(
        a.name == b.name and (a in result.key_columns) == (b in sink.key_columns) and types.widens(a.type, b.type)
        for a, b in pairs)


def _columns_in(expression: s.Expression | None) -> list[s.Column]:
    if isinstance(expression, s.Column):
        return [expression]
    if isinstance(expression, s.Call):
        return [c for arg in expression.args for c in _columns_in(arg)]
    if isinstance(expression, s.Comparison):
        return _columns_in(expression.left) + _columns_in(expression.right)
    if isinstance(expression, s.Other):
        return [c for arg in expression.args for c in _columns_in(arg)]
    return []
