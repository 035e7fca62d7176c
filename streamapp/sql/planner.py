"""Statements -> :class:`~streamapp.sql.plan.Plan`, with ksqlDB's checks and ksqlDB's names.

What ksqlDB rejects is refused with ksqlDB's own message text (its QTT cases match
on it); what ksqlDB accepts and streamapp cannot run yet is refused saying so.
Either way one :class:`PlanError` line that names the statement by its line.

The rules follow ksqlDB's planner (``AstSanitizer``, ``LogicalPlanner.buildJoinKey``,
``JoinNode``, ``FinalProjectNode`` in the ksql repository); docs/reference/statements.md
walks through them with examples.

This module reads the statements in order and plans each query: a copy or one of the
three joins.  Beside it: :mod:`~streamapp.sql.declarations` (CREATE STREAM / TABLE and
the WITH clause), :mod:`~streamapp.sql.scope` (a query's names and expressions against
its sources) and :mod:`~streamapp.sql.refusals` (:class:`PlanError`).
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import plan as p
from . import syntax as s
from . import types
from .declarations import (check_runnable, declared_source, formats_of, partition_count, timestamp_column,
                           with_properties, wrap_single_value)
from .refusals import PlanError, rejected, unsupported
from .scope import PSEUDO_COLUMNS, UNSUPPORTED_PSEUDO, WINDOW_BOUNDS, Scope, Side, columns_in, side_read

#: What other modules import from here; the constants live in the modules of their concept.
__all__ = ["DEFAULT_KEY_FORMAT", "PlanError", "plan_file", "plan_text"]

#: ksqlDB's property that sets the key format of a source or join that names none.
DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"


def plan_file(path: str | Path, properties: Mapping[str, Any] | None = None) -> p.Plan:
    """The plan of a ``.sql`` file; a file that cannot be read is a PlanError naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # an editor's byte order mark is not a statement
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"statements file {str(path)!r} cannot be read: "
                        f"{getattr(exc, 'strerror', None) or exc}") from None
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


class _Planner:
    """The sources declared so far and the queries planned, statement by statement: a query reads only the sources
    declared above it, as in ksqlDB."""

    def __init__(self, origin: str, default_key_format: str = "KAFKA") -> None:
        self.origin = origin
        #: The key format of a source with key columns and no KEY_FORMAT, and of a join no side keys.
        self.default_key_format = default_key_format
        self.sources: dict[str, p.Source] = {}
        self.queries: list[p.Query] = []
        #: The windowed sources (WINDOW_TYPE) declared, by name: their window type (and size) and statement.
        #: streamapp reads none, but ksqlDB's refusals of joins of them come first.
        self._windowed: dict[str, tuple[str, s.Statement]] = {}

    def plan(self, statements: Iterable[s.Statement]) -> p.Plan:
        """Every statement in order, so that the first refusal in the file is the one reported."""
        for statement in statements:
            if isinstance(statement, s.CreateSource):
                source, window = declared_source(statement, self.default_key_format)
                if window is not None:
                    self._windowed[statement.name] = (window, statement)
                self._add(statement, source)
            elif isinstance(statement, s.CreateAs):
                sink, query = self._create_as(statement)
                self._add(statement, sink)
                self.queries.append(query)
            elif isinstance(statement, s.InsertInto):
                raise self._insert_into(statement)
            else:
                raise unsupported(statement, f"{statement.keyword} statements are not supported: a statements "
                                             "file declares sources and persistent queries (CREATE ...)")
        for name, (_, statement) in self._windowed.items():  # what no query refused first: streamapp reads none
            raise unsupported(statement, f"the windowed source {name} (WINDOW_TYPE)")
        if not self.queries:
            raise PlanError(f"{self.origin}: no query: declare at least one CREATE STREAM ... AS SELECT ... JOIN")
        return p.Plan(tuple(self.sources.values()), tuple(self.queries), self.origin)

    def _add(self, statement: s.Statement, source: p.Source) -> None:
        """A declared source or a query's sink, by name: ksqlDB's refusal of a name taken (IF NOT EXISTS: the
        first one kept)."""
        if source.name in self.sources:
            if getattr(statement, "if_not_exists", False):
                return
            kind = self.sources[source.name].kind.upper()
            raise rejected(statement, f"Cannot add {source.kind} '{source.name}': A {kind.lower()} "
                                      f"with the same name already exists")
        self.sources[source.name] = source

    # ---- CREATE ... AS SELECT ----------------------------------------------------------------------------------------

    def _create_as(self, statement: s.CreateAs) -> tuple[p.Source, p.Query]:
        """A query's checks in ksqlDB's order, then its plan by kind: a copy, or one of the three joins."""
        query = statement.query
        if len(query.joins) > 1:
            raise unsupported(statement, f"a query of {len(query.joins) + 1} sources (n-way joins)")
        if query.emit == "EMIT FINAL":
            raise unsupported(statement, "EMIT FINAL")
        left = self._source(statement, query.source, p.LEFT_SIDE)
        sides = (left, *(self._source(statement, j.right, p.RIGHT_SIDE) for j in query.joins))
        tables = len(sides) == 2 and all(x.source.kind == p.TABLE for x in sides)
        streams = len(sides) == 2 and all(x.source.kind == p.STREAM for x in sides)
        windowed = [x for x in sides if x.source.name in self._windowed]
        if windowed and not streams:
            raise unsupported(statement, f"the windowed source {windowed[0].source.name} (WINDOW_TYPE)")
        synthetic = None
        if tables or streams:
            on = query.joins[0].on
            self._prepared(statement, sides, on, query.select if streams else ())
            # a FULL join's key, or a stream-stream join's on two expressions, is synthetic (ksqlDB's ROWKEY)
            on_columns = isinstance(on, s.Comparison) and any(isinstance(x, s.Column) for x in (on.left, on.right))
            if query.joins[0].type == "FULL" or (streams and isinstance(on, s.Comparison) and not on_columns):
                synthetic = self._synthetic_key(sides)
        scope = Scope(sides, rich=streams, synthetic=synthetic)
        if streams:
            self._reserved(statement, query.select)
        scope.resolvable(statement, query)
        if streams and {"GROUP BY", "HAVING"} & set(query.clauses):
            raise self._aggregation(statement, scope, query)
        for clause in query.clauses:
            if not ((tables or streams) and clause == "WHERE"):
                raise unsupported(statement, f"{clause} in a persistent query")
        if not query.joins:
            return self._select(statement, scope)
        join, right = query.joins[0], sides[1]
        if left.source.name == right.source.name:
            raise rejected(statement, f"Can not join '{left.source.name}' to '{right.source.name}': "
                                      "self joins are not yet supported.")
        if tables:
            return self._table_join(statement, scope, join)
        if streams:
            return self._stream_join(statement, scope, join)
        return self._join(statement, scope, join)

    def _source(self, statement: s.Statement, relation: s.Relation, side: str) -> Side:
        """A source a query reads, declared above it."""
        source = self.sources.get(relation.name)
        if source is None:
            raise rejected(statement, f"{relation.name} does not exist.")
        return Side(source, relation.label, side)

    def _sink(self, statement: s.CreateAs, props: dict[str, Any], key: tuple[p.Projection, ...],
              value: tuple[p.Projection, ...], formats: tuple[str, str], partitions: int | None) -> p.Source:
        """The source a query writes: its WITH checked as a declared source's, its formats the source's by default."""
        key_format, value_format = formats_of(statement, props, "KAFKA", inherited=formats)
        if not key and "KEY_FORMAT" not in props and "FORMAT" not in props:
            key_format = "NONE"
        columns = tuple(p.Column(x.name, x.type) for x in value)
        sink = p.Source(
            name=statement.name, kind=p.STREAM if statement.kind == "STREAM" else p.TABLE,
            topic=str(props.get("KAFKA_TOPIC", statement.name)),
            key_columns=tuple(p.Column(x.name, x.type) for x in key), value_columns=columns,
            key_format=key_format, value_format=value_format,
            wrap_single_value=wrap_single_value(statement, props, columns),
            timestamp=timestamp_column(statement, props, columns),
            partitions=partition_count(statement, props) or partitions, line=statement.line)
        return sink

    def _select(self, statement: s.CreateAs, scope: Scope) -> tuple[p.Source, p.Query]:
        """``CREATE TABLE t2 AS SELECT ... FROM t`` (or a stream from a stream): a copy through murmur2."""
        source = scope.sides[0].source
        if (statement.kind == "TABLE") != (source.kind == p.TABLE):
            raise unsupported(statement, f"CREATE {statement.kind} AS SELECT from the {source.kind} "
                                         f"{source.name} (an aggregation or a stream-to-table conversion)")
        props = with_properties(statement, statement.properties)
        items = scope.projection(statement, statement.query.select, join=False)
        key_names = {c.name for c in source.key_columns}
        key_refs = [i for i in items if isinstance(i[1], p.ColumnOf) and i[1].name in key_names]
        if source.key_columns and not key_refs:
            missing = ", ".join(c.name for c in source.key_columns)
            raise rejected(statement, f"Key missing from projection (ie, SELECT). The query used to build "
                                      f"`{statement.name}` must include the key column {missing} "
                                      "in its projection (eg, SELECT KEY...).")
        self._one_key(statement, key_refs)
        projection = tuple(p.Projection(name, type_, expression, expression in [k[1] for k in key_refs])
                           for name, expression, type_ in items)
        check_runnable(statement, source, scope.rich)
        sink = self._sink(statement, props, tuple(x for x in projection if x.key),
                          tuple(x for x in projection if not x.key),
                          (source.key_format, source.value_format), source.partitions)
        self._check_value(statement, sink)
        query = p.Query(name=statement.name, kind=p.SELECT, sink=sink.name, left=source.name,
                        projection=projection, line=statement.line)
        return sink, query

    def _one_key(self, statement: s.Statement, key_refs: list[tuple[str, p.Expression, str]]) -> None:
        """Each key column the projection names (``key_refs``) named once."""
        by_column: dict[str, list[str]] = {}
        for name, expression, _ in key_refs:
            by_column.setdefault(expression.name, []).append(name)  # type: ignore[union-attr]
        for column, names in by_column.items():
            self._key_once(statement, column, names)

    def _key_once(self, statement: s.Statement, column: str, names: list[str]) -> None:
        """ksqlDB's refusal of a key column the projection names more than once."""
        if len(names) > 1:
            shown = " and ".join(sorted(names)) if len(names) == 2 else ", ".join(sorted(names))
            raise rejected(statement, f"The projection contains a key column ({column}) more than once, "
                                      f"aliased as: {shown}.")

    def _check_value(self, statement: s.Statement, sink: p.Source) -> None:
        """ksqlDB's refusals of a sink without a value column, or with two columns of one name."""
        if not sink.value_columns:
            raise rejected(statement, "The projection contains no value columns.")
        names = [c.name for c in sink.columns]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise rejected(statement, f"Duplicate column names: {duplicate}")

    # ---- stream-table joins ------------------------------------------------------------------------------------------

    def _join(self, statement: s.CreateAs, scope: Scope, join: s.Join) -> tuple[p.Source, p.Query]:
        """``CREATE STREAM ... AS SELECT ... FROM s JOIN t ON ...``: ksqlDB's checks of a stream joined to a table on
        the table's primary key, and the re-keying of the stream joined on anything but its key."""
        left, right = scope.sides
        kinds = (left.source.kind, right.source.kind)
        shown = {"INNER": "[INNER] JOIN", "LEFT": "LEFT [OUTER] JOIN", "RIGHT": "RIGHT [OUTER] JOIN",
                 "FULL": "[FULL] OUTER JOIN"}[join.type]
        got = f"Got {left.source.name} {shown} {right.source.name}."
        if kinds == (p.TABLE, p.STREAM):
            raise rejected(statement, "Invalid join order: table-stream joins are not supported; only "
                                      f"stream-table joins. {got}")
        if join.type in ("FULL", "RIGHT"):
            kind = "full-outer" if join.type == "FULL" else "right-outer"
            raise rejected(statement, f"Invalid join type: {kind} join not supported for stream-table join. "
                                      f"{got}")
        if join.within is not None:
            raise rejected(statement, "A window definition was provided for a Stream-Table join. These joins "
                                      "are not windowed. Please drop the window definition (ie. the WITHIN "
                                      "clause) and try to execute your join again.")
        left_expr, right_expr = self._halves(statement, scope, join.on)
        if left_expr[0] is right:
            left_expr, right_expr = right_expr, left_expr
        stream_key, stream_type = left_expr[1], left_expr[2]
        table_key, table_type = right_expr[1], right_expr[2]
        table_keys = [c.name for c in right.source.key_columns]
        if not (isinstance(table_key, p.ColumnOf) and table_keys == [table_key.name]):
            raise rejected(statement, "Invalid join condition: stream-table joins require to join on the "
                                      f"table's primary key. Got {self._shown(left_expr)} = "
                                      f"{self._shown(right_expr)}.")
        if stream_type != table_type:
            raise rejected(statement, f"Invalid join condition: types don't match. Got "
                                      f"{self._shown(left_expr)}{{{stream_type}}} = "
                                      f"{self._shown(right_expr)}{{{table_type}}}.")
        props = with_properties(statement, statement.properties)
        # ksqlDB's viable key columns: each side of ON that is a plain column, left first.
        viable = [e for e in (stream_key, table_key) if isinstance(e, p.ColumnOf)]
        items = scope.projection(statement, statement.query.select, join=True)
        key_column = self._key_of(statement, scope.sides, viable, items)
        key_refs = [item for item in items if item[1] == key_column]
        self._one_key(statement, key_refs)
        # The key holds the join key's value, whichever side the projection names it by.
        projection = tuple(
            p.Projection(name, type_, stream_key if expression == key_column else expression,
                         expression == key_column)
            for name, expression, type_ in items)
        for source in (left.source, right.source):
            check_runnable(statement, source, scope.rich)
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
            raise rejected(statement, "Invalid result type. Your SELECT query produces a STREAM. Please use "
                                      "CREATE STREAM AS SELECT statement instead.")
        query = p.Query(
            name=statement.name, kind=p.STREAM_TABLE_JOIN, sink=sink.name, left=left_src.name,
            projection=projection, right=right_src.name, join_type=join.type, left_key=stream_key,
            repartition=rekeyed or left_src.key_format != join_key_format,
            repartition_right=right_src.key_format != join_key_format, line=statement.line)
        return sink, query

    # ---- table-table joins -------------------------------------------------------------------------------------------

    def _table_join(self, statement: s.CreateAs, scope: Scope, join: s.Join) -> tuple[p.Source, p.Query]:
        """``CREATE TABLE ... AS SELECT ... FROM t1 JOIN t2 ON t1.pk = t2.pk``: ksqlDB's ``verifyJoin`` for two
        tables."""
        left, right = scope.sides
        first, second = self._halves(statement, scope, join.on)
        written = f"{self._shown(first)} = {self._shown(second)}"
        left_half, right_half = (first, second) if first[0] is left else (second, first)
        if not _is_key(right_half[1], right.source):
            raise rejected(statement, "Invalid join condition: table-table joins require to join on the "
                                      f"primary key of the right input table. Got {written}.")
        if not _is_key(left_half[1], left.source):
            if join.type == "FULL":
                raise rejected(statement, "Invalid join type: full-outer join not supported for foreign-key "
                                          f"table-table join. Got {left.source.name} [FULL] OUTER JOIN "
                                          f"{right.source.name}.")
            if join.type == "RIGHT":
                raise rejected(statement, "RIGHT OUTER JOIN on a foreign key is not supported")
        self._same_types(statement, first, second)
        if not _is_key(left_half[1], left.source):
            raise unsupported(statement, f"foreign-key joins ({written})")
        props = with_properties(statement, statement.properties)
        items = scope.projection(statement, statement.query.select, join=True)
        if scope.synthetic is not None:
            name = self._synthetic_items(statement, scope.synthetic, items)
            key_of: p.Expression = p.JoinKey()
            shown_key = name
        else:
            halves = [left_half[1], right_half[1]]
            key_of = self._key_of(statement, scope.sides, halves, items)  # type: ignore[arg-type]
            shown_key = key_of.name  # type: ignore[attr-defined]
        self._key_once(statement, shown_key, [item[0] for item in items if item[1] == key_of])
        if join.within is not None:
            raise rejected(statement, "A window definition was provided for a Table-Table join. These joins "
                                      "are not windowed. Please drop the window definition (i.e. the WITHIN "
                                      "clause) and try to execute your Table-Table join again.")
        # The key is the primary key both rows share, whichever side holds a row (ksqlDB keys the result by it).
        where, projection = self._keyed(statement, scope, items, key_of)
        sink = self._join_sink(statement, props, projection, (left.source.key_format, left.source.value_format),
                               left.source.partitions, p.TABLE)
        query = p.Query(
            name=statement.name, kind=p.TABLE_TABLE_JOIN, sink=sink.name, left=left.source.name,
            projection=projection, right=right.source.name, join_type=join.type,
            repartition_right=left.source.key_format != right.source.key_format, line=statement.line, where=where)
        return sink, query

    # ---- stream-stream joins -----------------------------------------------------------------------------------------

    def _stream_join(self, statement: s.CreateAs, scope: Scope, join: s.Join) -> tuple[p.Source, p.Query]:
        """``CREATE STREAM ... AS SELECT ... FROM s1 JOIN s2 WITHIN ... ON ...``: ksqlDB's checks for two streams,
        its key (the left ON column the projection names first, else the right one; FULL's synthetic ROWKEY) and
        the re-keying of each side joined on anything but its key column."""
        left, right = sides = scope.sides
        left_half, right_half = self._stream_condition(statement, scope, join)
        left_key, right_key = left_half[1], right_half[1]
        props = with_properties(statement, statement.properties)
        if scope.synthetic is not None:  # ROWKEY holds what ON joins on: the left half's type
            scope = replace(scope, synthetic=(scope.synthetic[0], left_half[2]))
        items = scope.projection(statement, statement.query.select, join=True)
        if scope.synthetic is not None:
            key_of: p.Expression = p.JoinKey()
            self._key_once(statement, f"`{self._synthetic_items(statement, scope.synthetic, items)}`",
                           [name for name, expr, _ in items if isinstance(expr, p.JoinKey)])
        else:
            viable = [e for e in (left_key, right_key) if isinstance(e, p.ColumnOf)]
            key_of = self._key_of(statement, sides, viable, items, plural=True)  # type: ignore[arg-type]
            label = self._label(sides, key_of)  # type: ignore[arg-type]
            column = key_of.name  # type: ignore[attr-defined]
            clashing = sum(1 for x in sides if x.source.column(column)) > 1
            self._key_once(statement, f"`{label}_{column}`" if clashing else f"`{column}`",
                           [name for name, expr, _ in items if expr == key_of])
        where, projection = self._keyed(statement, scope, items, key_of)
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

    def _stream_condition(self, statement: s.Statement, scope: Scope, join: s.Join
                          ) -> tuple[tuple[Side, p.Expression, str], tuple[Side, p.Expression, str]]:
        """ksqlDB's checks of two streams and of the ON that joins them; the left and the right half of ON."""
        left, right = sides = scope.sides
        kafka = [x.source.name for x in sides if x.source.value_format == "KAFKA"]
        if kafka:
            raise rejected(statement, f"Source(s) {', '.join(kafka)} are using the 'KAFKA' value format. This "
                                      "format does not yet support JOIN.")
        window_types = [self._windowed.get(x.source.name, (None,))[0] for x in sides]
        self._compatible_windows(statement, sides, window_types)
        on = join.on
        if isinstance(on, s.Other) and on.kind == "AND":
            raise rejected(statement, "Invalid join condition: joins on multiple conditions are not yet "
                                      f"supported. Got {_conjunction(on)}.")
        for ref in columns_in(on):
            known = [x for x in sides if ref.qualifier in (None, x.label)]
            pseudo = ref.name in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO
            if not pseudo and not any(x.source.column(ref.name) for x in known):
                raise rejected(statement, f"Line: {ref.line}, Col: {ref.column}: JOIN ON column '{ref}' cannot "
                                          "be resolved.")
        first, second = self._halves(statement, scope, on)
        left_half, right_half = (first, second) if first[0] is left else (second, first)
        self._same_types(statement, first, second)
        left_key, right_key = left_half[1], right_half[1]
        if any(window_types):
            rekeyed = not (_is_key(left_key, left.source) and _is_key(right_key, right.source))
            if rekeyed or window_types[0] != window_types[1]:
                raise rejected(statement, "Implicit repartitioning of windowed sources is not supported. See "
                                          "https://github.com/confluentinc/ksql/issues/4385.")
            raise unsupported(statement, f"a join of the windowed sources {left.source.name} and "
                                         f"{right.source.name} (WINDOW_TYPE)")
        if "MAP" in re.findall(r"\w+", left_half[2]):
            raise rejected(statement, "Map keys, including types that contain maps, are not supported as they "
                                      "may lead to unexpected behavior due to inconsistent serialization. Key "
                                      f"column name: `{left.label}_{getattr(left_key, 'name', 'ROWKEY')}`. "
                                      f"Column type: {types.message_name(left_half[2])}. See "
                                      "https://github.com/confluentinc/ksql/issues/6621 for more.")
        return left_half, right_half

    def _compatible_windows(self, statement: s.Statement, sides: tuple[Side, ...],
                            windows: list[str | None]) -> None:
        """ksqlDB's analyzer: a windowed source joins only a windowed one, a session-windowed one only another."""
        if (windows[0] is None) != (windows[1] is None):
            shown = [f"`{x.label}` is {t.split()[0] if t else 'not'} windowed" for x, t in zip(sides, windows)]
            raise rejected(statement, "Can not join windowed source to non-windowed source. " + " ".join(shown))
        if windows[0] is not None and windows[1] is not None:
            left, right = (t.split()[0] for t in (windows[0], windows[1]))
            if (left == "SESSION") != (right == "SESSION"):
                raise rejected(statement, f"Incompatible windowed sources. Left source: {left} Right source: "
                                          f"{right} Session windowed sources can only be joined to other session "
                                          "windowed sources, and may still not result in expected behaviour as "
                                          "session bounds must be an exact match for the join to work Hopping "
                                          "and tumbling windowed sources can only be joined to other hopping and "
                                          "tumbling windowed sources")

    def _window(self, statement: s.Statement, join: s.Join) -> tuple[int, int, int | None]:
        """(before, after, grace) of ``WITHIN`` in milliseconds; ksqlDB's refusal of a join without one."""
        if join.window is None:
            raise rejected(statement, "Stream-Stream joins must have a WITHIN clause specified. None was "
                                      "provided. To learn about how to specify a WITHIN clause with a "
                                      "stream-stream join, please visit: https://docs.confluent.io/current/"
                                      "ksql/docs/syntax-reference.html#create-stream-as-select")
        window = join.window
        before, after = (_milliseconds(statement, d) for d in (window.before, window.after))
        grace = None if window.grace is None else _milliseconds(statement, window.grace)
        return before, after, grace

    def _reserved(self, statement: s.Statement, select: tuple[s.SelectItem, ...]) -> None:
        """ksqlDB's refusal of a SELECT that names an output column after a pseudo column."""
        for item in select:
            if item.alias in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO + WINDOW_BOUNDS:
                raise rejected(statement, f"Reserved column name in select: `{item.alias}`. Please remove or "
                                          "alias the column.")

    def _aggregation(self, statement: s.CreateAs, scope: Scope, query: s.Query) -> PlanError:
        """GROUP BY / HAVING over a stream-stream join: ksqlDB's checks of the join, then of its WHERE and its
        HAVING over the join's columns (``LogicalPlanner.buildAggregateNode``), then refused: streamapp does not
        aggregate."""
        self._stream_condition(statement, scope, query.joins[0])
        if query.where is not None:
            scope.where(statement, query.where)
        if query.having is not None:
            scope.where(statement, query.having, "HAVING")
        return unsupported(statement, "GROUP BY / HAVING in a persistent query (an aggregation)")

    # ---- what the joins share: ON's halves, the join key, the sink ---------------------------------------------------

    def _prepared(self, statement: s.Statement, sides: tuple[Side, ...], on: s.Expression,
                  select: tuple[s.SelectItem, ...] = ()) -> None:
        """ksqlDB's checks of ``ON``'s columns (and of ``select``'s, given for a stream-stream join) when it
        prepares the statement (``AstBuilder``), before any other."""
        refs = [c for item in select for c in columns_in(item.expression)] + columns_in(on)
        qualifiers = [item.source for item in select if item.kind == "source"] + [r.qualifier for r in refs]
        for qualifier in qualifiers:  # every qualifier first, then every unqualified name (ksqlDB's order)
            if qualifier is not None and not any(x.label == qualifier for x in sides):
                raise rejected(statement, f"Failed to prepare statement: '{qualifier}' is not a valid "
                                          "stream/table name or alias.")
        for ref in refs:
            if ref.qualifier is not None:
                continue
            found = [x for x in sides if x.source.column(ref.name)]
            if len(found) > 1:
                raise rejected(statement, f"Exception while preparing statement: Line: {ref.line}, Col: "
                                          f"{ref.column}: Column '{ref.name}' is ambiguous. Could be "
                                          + " or ".join(f"{x.label}.{ref.name}" for x in found) + ".")

    @staticmethod
    def _synthetic_key(sides: tuple[Side, ...]) -> tuple[str, str]:
        """A FULL join's key column: ``ROWKEY``, else ``ROWKEY_n`` with the first n no source column takes; of the
        left key's type (a stream-stream join's takes ON's left half's, :meth:`_stream_join`: its left stream may
        have no key column)."""
        taken = {c.name for x in sides for c in x.source.columns}
        n = 0
        while (name := "ROWKEY" if n == 0 else f"ROWKEY_{n}") in taken:
            n += 1
        keys = sides[0].source.key_columns
        return name, keys[0].type if keys else "STRING"

    def _halves(self, statement: s.Statement, scope: Scope, on: s.Expression
                ) -> tuple[tuple[Side, p.Expression, str], tuple[Side, p.Expression, str]]:
        """The two halves of ``ON a = b`` as written, each with the side it reads: one side each."""
        if not isinstance(on, s.Comparison) or on.op != "=":
            raise rejected(statement, f"Unsupported join expression: {on}")
        first, second = self._side_of(statement, scope, on.left, on), self._side_of(statement, scope, on.right, on)
        if first[0] is second[0]:
            raise rejected(statement, f"Each side of the join must reference exactly one source and not the "
                                      f"same source. Left side references {first[0].label} and right "
                                      f"references {second[0].label}")
        return first, second

    def _side_of(self, statement: s.Statement, scope: Scope, expression: s.Expression,
                 on: s.Expression) -> tuple[Side, p.Expression, str]:
        """Which side one half of ``ON`` reads, what it computes and its type."""
        if isinstance(expression, s.Literal):
            raise rejected(statement, f"Invalid comparison expression '{expression}' in join '{on}'. Each "
                                      "side of the join comparision must contain references from exactly one "
                                      "source.")
        resolved, type_ = scope.expression(statement, expression)
        side = next(x for x in scope.sides if x.side == side_read(resolved))
        return side, resolved, type_

    def _shown(self, found: tuple[Side, p.Expression, str]) -> str:
        """A half of ON as ksqlDB's messages print it: ``S.ID``, ``AS_VALUE(S.ID)``."""
        side, expression, _ = found
        if isinstance(expression, p.ColumnOf):
            return f"{side.label}.{expression.name}"
        if isinstance(expression, p.AsValue) and isinstance(expression.argument, p.ColumnOf):
            return f"AS_VALUE({side.label}.{expression.argument.name})"
        return str(expression)

    def _same_types(self, statement: s.Statement, first: tuple[Side, p.Expression, str],
                    second: tuple[Side, p.Expression, str]) -> None:
        """ksqlDB's refusal of a join of two join keys of different types (a CAST makes them one)."""
        if first[2] != second[2]:
            raise rejected(statement, f"Invalid join condition: types don't match. Got {self._shown(first)}"
                                      f"{{{types.message_name(first[2])}}} = {self._shown(second)}"
                                      f"{{{types.message_name(second[2])}}}.")

    def _key_of(self, statement: s.CreateAs, sides: tuple[Side, ...], viable: list[p.ColumnOf],
                items: list[tuple[str, p.Expression, str]], plural: bool = False) -> p.ColumnOf:
        """The join's key column: the first viable one the projection names (ksqlDB's ``buildJoinKey``)."""
        in_projection = [v for v in viable if any(expr == v for _, expr, _ in items)]
        if not in_projection:
            names = " or ".join(f"{self._label(sides, v)}.{v.name}" for v in viable)
            # ksqlDB says "expressions" of several (``PlanNode.throwKeysNotIncludedError``); the stream-table and
            # table-table messages keep the singular their tests pin
            expressions = "expressions" if plural and len(viable) > 1 else "expression"
            raise rejected(statement, f"Key missing from projection (ie, SELECT). The query used to build "
                                      f"`{statement.name}` must include the join {expressions} {names} in its "
                                      "projection (eg, SELECT "
                                      f"{self._label(sides, viable[0])}.{viable[0].name}...).")
        return in_projection[0]

    @staticmethod
    def _label(sides: tuple[Side, ...], expression: p.ColumnOf) -> str:
        """The alias (else the name) of the side a column is read from."""
        return next(side.label for side in sides if side.side == expression.side)

    def _synthetic_items(self, statement: s.CreateAs, synthetic: tuple[str, str],
                         items: list[tuple[str, p.Expression, str]]) -> str:
        """The synthetic key's name, its column added to ``items`` for a ``*``; ksqlDB's refusal when SELECT
        names it nowhere."""
        name = synthetic[0]
        if any(item.kind == "all" for item in statement.query.select):  # ``*`` names the synthetic key too
            items.insert(0, (name, p.JoinKey(), synthetic[1]))
        if not any(isinstance(expr, p.JoinKey) for _, expr, _ in items):
            raise rejected(statement, "Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS. "
                                      f"The query used to build `{statement.name}` must include the join "
                                      f"expression {name} in its projection (eg, SELECT {name}...). {name} "
                                      "was added as a synthetic key column because the join criteria did "
                                      "not match any source column. This expression must be included in "
                                      "the projection and may be aliased.")
        return name

    def _keyed(self, statement: s.CreateAs, scope: Scope, items: list[tuple[str, p.Expression, str]],
               key_of: p.Expression) -> tuple[p.Expression | None, tuple[p.Projection, ...]]:
        """(the WHERE, the projection) of a table-table or stream-stream join, whose key column holds the join key
        (:class:`~streamapp.sql.plan.JoinKey`: either side's, whichever holds a row); both sources runnable."""
        where = None if statement.query.where is None else scope.where(statement, statement.query.where)
        projection = tuple(p.Projection(name, type_, p.JoinKey() if expression == key_of else expression,
                                        expression == key_of)
                           for name, expression, type_ in items)
        for side in scope.sides:
            check_runnable(statement, side.source, scope.rich)
        return where, projection

    def _join_sink(self, statement: s.CreateAs, props: dict[str, Any], projection: tuple[p.Projection, ...],
                   formats: tuple[str, str], partitions: int | None, kind: str) -> p.Source:
        """The sink of a join whose result is a ``kind`` (STREAM or TABLE); ksqlDB's refusal of the other CREATE."""
        sink = self._sink(statement, props, tuple(x for x in projection if x.key),
                          tuple(x for x in projection if not x.key), formats, partitions)
        self._check_value(statement, sink)
        if sink.kind != kind:
            word = kind.upper()
            raise rejected(statement, f"Invalid result type. Your SELECT query produces a {word}. Please use "
                                      f"CREATE {word} AS SELECT statement instead.")
        return sink

    # ---- INSERT INTO -------------------------------------------------------------------------------------------------

    def _insert_into(self, statement: s.InsertInto) -> PlanError:
        """``INSERT INTO stream SELECT ...``: ksqlDB's checks of it (``AstSanitizer``: the target is a stream;
        ``EngineExecutor.validateExistingSink``: the query's result has the target's schema), then refused."""
        target = self.sources.get(statement.name)
        if target is None:
            return rejected(statement, f"Source `{statement.name}` does not exist.")
        if target.kind != p.STREAM:
            return rejected(statement, f"INSERT INTO can only be used to insert into a stream. "
                                       f"{statement.name} is a table.")
        query = statement.query
        kinds = {self.sources[r.name].kind for r in (query.source, *(j.right for j in query.joins))
                 if r.name in self.sources}
        kind = "TABLE" if kinds == {p.TABLE} else "STREAM"
        result, _ = self._create_as(s.CreateAs(statement.line, statement.text, kind=kind, name=statement.name,
                                               properties=statement.properties, query=query,
                                               if_not_exists=False, or_replace=False))
        if result.kind != target.kind:
            return rejected(statement, f"Incompatible data sink and query result. Data sink ({target.name}) "
                                       f"type is K{target.kind.upper()} but select query result is "
                                       f"K{result.kind.upper()}.")
        if not _compatible_schema(result, target):
            return rejected(statement, "Incompatible schema between results and sink. Result schema is "
                                       f"{_schema(result)} Sink schema is {_schema(target)}")
        return unsupported(statement, f"INSERT INTO {target.name} (a second query writing into a stream)")


#: The longest duration ksqlDB and Kafka Streams hold: a Java long of milliseconds.
_MAX_MILLISECONDS = 2**63 - 1
#: ksqlDB's time units of a WITHIN or GRACE PERIOD, in milliseconds (singular and plural both accepted).
_UNITS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}


def _milliseconds(statement: s.Statement, duration: s.Duration) -> int:
    """A WITHIN or GRACE PERIOD duration in milliseconds; a unit or an amount ksqlDB does not take is refused."""
    unit = duration.unit[:-1] if duration.unit.endswith("S") else duration.unit
    if unit not in _UNITS:
        raise rejected(statement, f"Invalid time unit: {duration.unit}. Valid units are: MILLISECONDS, "
                                  "SECONDS, MINUTES, HOURS, DAYS")
    if not isinstance(duration.amount, int):
        raise rejected(statement, f"Invalid window size: {duration.amount} {duration.unit}: a whole number "
                                  "is expected")
    milliseconds = duration.amount * _UNITS[unit]
    if milliseconds > _MAX_MILLISECONDS:
        raise rejected(statement, f"{duration.amount} {duration.unit} is more milliseconds than a Java long "
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
