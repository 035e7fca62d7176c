"""Records -> typed columns, for one group of pairs (:class:`~spark_batch.roles.Group`): the join outputs (Spark
SQL's ``from_json``), the stream and the tables (``ksql_json``, the plan's codecs).

Two input shapes are accepted: Kafka-shaped rows (``key``, ``value`` as JSON, ``partition``,
``offset``, ``timestamp_ms``; what the Kafka readers produce and a raw export holds) and
already-decoded exports (one column per field, named as the source's or the output's columns
in lower case).  Both come out as the same canonical, lower-case columns: the group's
identity and table fields (``roles.Field``), then ``partition`` and ``offset``.

The inputs are read as the worker reads them (``spark_batch.ksql_json``), each row with its
``kind`` (null, ``tombstone``, ``null_key``, ``non_utf8_key``, ``undecodable``).  The outputs
are what the two engines write: an object of the sink's value columns, any of them null (both
engines write NULL columns).  An output record is **undecodable** when its value is not a JSON
object (null, not JSON, an array...), a column holds a value of another type (text for a
BIGINT, a fraction for a BIGINT; ``"NaN"``/``"Infinity"`` are a DOUBLE's), its key is not one
the sink's key format writes, or it has no event time (the stream's ``TIMESTAMP=`` column:
neither engine writes a record without one).  A null key is not: Kafka Streams writes a
null-key record that way.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from streamapp.sql import plan as p

from . import ksql_json
from .errors import ReconcileError
from .ksql_json import KINDS, NON_UTF8_KEY, NULL_KEY, TOMBSTONE, UNDECODABLE, ddl
from .roles import Field, Group, Pair, TwoSidedPair, spark_type
from .window import TimeWindow

#: Spark's JSON reader sets this column to the record's text when it cannot read it as the sink's columns.
_CORRUPT = "_corrupt"
#: A table row as the causes read it: its key (typed as the table's key), where and when it was written
#: (its value columns, lower-cased, come between the key and these: ``table_columns``).
TABLE_COLUMNS = ("table_key", "partition", "offset", "timestamp_ms")


def table_columns(table: p.Source) -> tuple[str, ...]:
    """A table's decoded rows: ``table_key``, its value columns (lower-cased), partition, offset, timestamp_ms."""
    return ("table_key", *[c.name.lower() for c in table.value_columns], *TABLE_COLUMNS[1:])
#: Input kinds counted in summary.json (a row of null kind is an ordinary record).
COUNTED_KINDS = KINDS
#: Columns every decoded frame carries after its fields.
_PLACE = {"partition": "int", "offset": "bigint", "timestamp_ms": "bigint"}


def output_fields(group: Group | TwoSidedPair) -> tuple[str, ...]:
    """The columns of a group's decoded output rows: identity, table fields, partition, offset."""
    return (*[f.name for f in group.identity], *[f.name for f in group.joined], "partition", "offset")


def stream_fields(group: Group) -> tuple[str, ...]:
    """The columns of a group's stream records: identity, partition, offset, kind."""
    return (*[f.name for f in group.identity], "partition", "offset", "kind")


def identity_value(field: Field) -> Column:
    """An identity column as grouping and joins compare it: a DOUBLE's -0.0 = 0.0."""
    if field.spark == "double":
        return F.when(F.col(field.name) == 0, F.lit(0.0)).otherwise(F.col(field.name))
    return F.col(field.name)


def is_raw(frame: DataFrame) -> bool:
    return "value" in frame.columns


def in_window(frame: DataFrame, window: TimeWindow, time: str | None = None) -> DataFrame:
    """Rows whose record timestamp (``timestamp_ms``/``timestamp``, else the event-time column ``time``) is in the
    window, and rows without one: a line of an export that Spark could not parse comes as a row of nulls, which
    ``valid_outputs`` then counts as undecodable instead of the window dropping it without a word."""
    by_lower = {c.lower(): c for c in frame.columns}
    name = by_lower.get("timestamp_ms") or by_lower.get("timestamp") or (by_lower.get(time) if time else None)
    if name is None:
        wanted = ", ".join(["timestamp_ms", "timestamp", *([time] if time else [])])
        raise ReconcileError(f"an export has none of the columns {wanted}; it has {', '.join(frame.columns)}")
    moment = _millis(frame, name)
    return frame.where(moment.isNull() | ((moment >= window.start_ms) & (moment < window.end_ms)))


def _sink(pair: Pair | TwoSidedPair, plan: p.Plan) -> p.Source:
    return plan.source(pair.sink)


def output_columns(frame: DataFrame, group: Group | TwoSidedPair, plan: p.Plan, pair: Pair | TwoSidedPair | None = None,
                   tombstones: bool = False) -> DataFrame:
    """Join output records (Faust's or ksqlDB's, tagged ``pair`` and ``side``) as pair, side + ``output_fields``
    + ``undecodable`` (see the module's docstring).  ``pair``: the frame holds that pair's output alone; else
    each row is decoded by its ``pair`` column's sink.  ``tombstones`` (a table-table join's changelog): a null
    value is the key's deletion, flagged ``tombstone`` (in an export: every compared column null), not undecodable."""
    pairs = [pair] if pair is not None else list(group.pairs)
    fields = {f.name: f for f in (*group.identity, *group.joined)}
    if not is_raw(frame):
        types = {**{name: f.spark for name, f in fields.items()}, **_PLACE}
        by_lower = {c.lower(): c for c in frame.columns}
        if group.time.source is None and group.time.name not in by_lower:  # the record timestamp is the event time
            stamp = by_lower.get("timestamp_ms") or by_lower.get("timestamp")
            frame = frame.withColumn(group.time.name, _millis(frame, stamp) if stamp else F.lit(None).cast("bigint"))
        decoded = _decoded(frame, ("pair", "side", *output_fields(group)), types, "a join output export", group.time.name)
        if tombstones:
            gone = F.lit(True)
            for f in group.joined:
                gone = gone & F.col(f.name).isNull() if f is not group.time else gone
            decoded = decoded.withColumn("tombstone", gone)
        return decoded
    sinks = {pr.name: _sink(pr, plan) for pr in pairs}
    value_types: dict[str, str] = {}
    for sink in sinks.values():
        value_types.update({c.name: spark_type(c.type) for c in sink.value_columns})
    value = F.from_json(F.col("value").cast("string"), ddl({**value_types, _CORRUPT: "string"}),
                        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    undecodable = F.col("value").isNull() | value.isNull() | value[_CORRUPT].isNotNull()
    if tombstones:
        undecodable = F.col("value").isNotNull() & (value.isNull() | value[_CORRUPT].isNotNull())
    columns: dict[str, Column] = {}
    for name, f in fields.items():
        columns[name] = _by_pair([(pr.name, _where(f, group, sinks[pr.name])) for pr in pairs], value, f.spark)
    keys = [(pr.name, ("key", _key_only(sinks[pr.name]))) for pr in pairs]
    keyed = _by_pair(keys, value, "boolean", lambda sink: ksql_json.output_key(sink, F.col("key"))[1])
    undecodable = undecodable | ~keyed | columns[group.time.name].isNull()
    extra = [F.col("value").isNull().alias("tombstone")] if tombstones else []
    return frame.select("pair", "side", *[c.alias(n) for n, c in columns.items()], "partition", "offset", *extra,
                        undecodable.alias("undecodable"))


#: Where an output field is in a sink's record: (``"timestamp"``), (``"key"``, the sink), (``"value"``, the column), (``"none"``).
_Where = tuple


def _where(f: Field, group: Group | TwoSidedPair, sink: p.Source) -> _Where:
    if f.source is None and f.name == group.time.name and f.output not in {c.name for c in sink.columns}:
        return ("timestamp",)  # the output record's timestamp: the stream record's event time
    if f.output in {c.name for c in sink.key_columns}:
        return ("key", _key_only(sink))
    if f.output in {c.name for c in sink.value_columns}:
        return ("value", f.output)
    return ("none",)


def _key_only(sink: p.Source) -> p.Source:
    """The sink as far as its key is read: two sinks keyed alike compare equal."""
    return dataclasses.replace(sink, name="", kind=p.STREAM, topic="", value_columns=(), value_format="JSON",
                               wrap_single_value=None, timestamp=None, partitions=None, line=0)


def _by_pair(choices: list[tuple[str, _Where]], value: Column, spark: str, key: Any = None) -> Column:
    """The column of the row's pair, read where its sink has it; one expression when every pair's sink has it
    in the same place (the seed's two sinks: so each value is read once, not once per pair)."""
    def read(where: _Where) -> Column:
        if where[0] == "timestamp":
            return F.col("timestamp_ms").cast(spark)
        if where[0] == "key":
            return (key or (lambda sink: ksql_json.output_key(sink, F.col("key"))[0]))(where[1]).cast(spark)
        if where[0] == "value":
            return value[where[1]].cast(spark)
        return F.lit(None).cast(spark)

    places = [where for _, where in choices]
    if all(where == places[0] for where in places):
        return read(places[0])
    chosen = F.when(F.col("pair") == choices[0][0], read(choices[0][1]))
    for name, where in choices[1:]:
        chosen = chosen.when(F.col("pair") == name, read(where))
    return chosen


def valid_outputs(frame: DataFrame, roles: list[tuple[str, str]], observation: Observation | None = None,
                  alone: bool = False) -> DataFrame:
    """``output_columns`` rows that are decodable; ``observation`` gets, per (pair, side) of ``roles``,
    ``rows:<pair>:<side>`` and ``undecodable:<pair>:<side>`` (the rows left out).

    ``alone``: the frame is the one role's output (an export), so two counters per row suffice
    (an observation's metrics are evaluated row by row).
    """
    bad = F.col("undecodable")
    if observation is not None:
        metrics = []
        for pair, side in roles:
            mine = F.lit(True) if alone else (F.col("pair") == pair) & (F.col("side") == side)
            metrics += [F.count_if(mine).alias(f"rows:{pair}:{side}"), F.count_if(mine & bad).alias(f"undecodable:{pair}:{side}")]
        frame = frame.observe(observation, *metrics)
    return frame.where(~bad).drop("undecodable")


def all_orders(frame: DataFrame, group: Group) -> DataFrame:
    """Every record of the group's stream as ``stream_fields``, its ``kind`` saying whether and how the engines read it."""
    stream = group.stream
    by_source = {f.source.lower(): f for f in group.identity if f.source is not None}
    time = group.time
    if is_raw(frame):
        decoded = ksql_json.read(frame, stream, stream=True)
        key = stream.key_columns[0].name.lower() if stream.key_columns else None
        columns = [(F.col(ksql_json.KEY) if key is not None and source == key else F.col(f"`{source}`")).cast(f.spark).alias(f.name)
                   for source, f in by_source.items()]
        if time.source is None:
            columns.append(F.col("timestamp_ms").alias(time.name))
        ordered = {c: None for c in stream_fields(group)}
        return decoded.select(*columns, "partition", "offset", "kind").select(*ordered)
    renamed = frame
    by_lower = {c.lower(): c for c in frame.columns}
    for source, f in by_source.items():
        if source in by_lower and source != f.name:
            renamed = renamed.withColumnRenamed(by_lower[source], f.name)
    if time.source is None and "timestamp_ms" not in by_lower and "timestamp" in by_lower:
        renamed = renamed.withColumn("timestamp_ms", _millis(frame, by_lower["timestamp"]))
    if time.source is None:
        renamed = renamed.withColumn(time.name, F.col("timestamp_ms"))
    wanted = stream_fields(group)[:-1]
    types = {**{f.name: f.spark for f in group.identity}, **_PLACE}
    decoded = _decoded(renamed, wanted, types, "a stream export", time.name)
    moment, key = F.col(time.name), F.col(group.join_key.name)
    kind = (F.when(F.col("undecodable") | moment.isNull() | (moment < 0), F.lit(UNDECODABLE))
            .when(key.isNull(), F.lit(NULL_KEY)))
    return decoded.select(*wanted, kind.alias("kind"))


def decodable() -> Column:
    """Over an ``all_orders``/``all_users`` frame: the record is not ``undecodable``."""
    return F.col("kind").isNull() | (F.col("kind") != UNDECODABLE)


def all_users(frame: DataFrame, table: p.Source) -> DataFrame:
    """Every record of a table's topic as ``table_columns`` + ``kind``; a tombstone keeps its key and time."""
    if is_raw(frame):
        decoded = ksql_json.read(frame, table, stream=False).withColumnRenamed(ksql_json.KEY, "table_key")
        return decoded.select(*table_columns(table), "kind")
    key = table.key_columns[0].name.lower() if table.key_columns else "table_key"
    values = [c.name.lower() for c in table.value_columns]
    by_lower = {c.lower(): c for c in frame.columns}
    if key in by_lower:
        frame = frame.withColumnRenamed(by_lower[key], "table_key")
    types = {"table_key": ksql_json.key_type(table), **ksql_json.value_columns(table), **_PLACE}
    frame = _decoded(frame, ("table_key", *values, "partition", "offset", "timestamp_ms"), types, "a table export")
    empty = F.lit(True)
    for value in values:
        empty = empty & F.col(value).isNull()
    kind = (F.when(F.col("undecodable"), F.lit(UNDECODABLE)).when(F.col("table_key").isNull(), F.lit(NULL_KEY))
            .when(empty, F.lit(TOMBSTONE)))
    return frame.select(*table_columns(table), kind.alias("kind"))


def users(frame: DataFrame, table: p.Source, kinds: Observation | None = None) -> DataFrame:
    """The rows a table of either engine holds (Kafka Streams' under the key read with U+FFFD), as ``table_columns``;
    a tombstone keeps its key and time.  ``kinds`` gets every record counted by kind (``kind_counts``)
    by the scan that reads them anyway."""
    every = all_users(frame, table)
    if kinds is not None:
        every = every.observe(kinds, *kind_counts())
    return every.where(F.col("table_key").isNotNull() & decodable()).select(*table_columns(table))


def kind_counts() -> list[Column]:
    """Aggregates over an ``all_orders``/``all_users`` frame: ``rows`` and one count per kind (``COUNTED_KINDS``)."""
    return [F.count(F.lit(1)).alias("rows"), *[F.count_if(F.col("kind") == k).alias(k) for k in COUNTED_KINDS]]


def kind_totals() -> list[Column]:
    """``kind_counts`` summed over rows that hold partial ones (0 over no rows, not null)."""
    return [F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in ("rows", *COUNTED_KINDS)]


def _decoded(frame: DataFrame, wanted: tuple[str, ...], types: dict[str, str], what: str,
             time: str | None = None) -> DataFrame:
    """Pick ``wanted`` columns case-insensitively; ``offset`` defaults to row order, ``timestamp_ms`` to ``timestamp``.

    ``undecodable``: a value that does not fit its column's type (null after the cast, not before), or no
    event time (``time``).  Only the columns whose export type is not already the canonical one are cast and
    checked: a typed export's (Parquet's) column cannot fail its cast, and checking it anyway made every
    output row read and test every column, ``offset`` included, in the classification's scan.
    """
    by_lower = {c.lower(): c for c in frame.columns}
    if "timestamp_ms" in wanted and "timestamp_ms" not in by_lower:
        if "timestamp" in by_lower:
            frame = frame.withColumn("timestamp_ms", _millis(frame, by_lower["timestamp"]))
        elif time is not None and time in by_lower:
            frame = frame.withColumn("timestamp_ms", F.col(by_lower[time]).try_cast("bigint"))
        else:
            frame = frame.withColumn("timestamp_ms", F.lit(None).cast("bigint"))
        by_lower["timestamp_ms"] = "timestamp_ms"
    if "offset" in wanted and "offset" not in by_lower:
        frame = frame.withColumn("offset", F.monotonically_increasing_id())
        by_lower["offset"] = "offset"
    missing = [c for c in wanted if c not in by_lower]
    if missing:
        raise ReconcileError(f"{what} lacks column(s) {', '.join(missing)}; it has {', '.join(frame.columns)}")
    source = dict(frame.dtypes)
    retyped = {c for c in wanted if source[by_lower[c]] != types.get(c, "string")}
    cast = {c: F.col(by_lower[c]).try_cast(types.get(c, "string")) if c in retyped else F.col(by_lower[c]) for c in wanted}
    unfit = [F.col(by_lower[c]).isNotNull() & cast[c].isNull() for c in wanted if c in types and c in retyped]
    undecodable = F.lit(False)
    for column in unfit:
        undecodable = undecodable | column
    if time is not None and time in wanted:
        undecodable = undecodable | cast[time].isNull()
    return frame.select(*[cast[c].alias(c) for c in wanted], undecodable.alias("undecodable"))


def _millis(frame: DataFrame, column: str) -> Column:
    kind = dict(frame.dtypes)[column]
    return F.unix_millis(F.col(column)) if kind.startswith("timestamp") else F.col(column).cast("bigint")


def raw_export(frame: DataFrame, what: str) -> DataFrame:
    """A Kafka-shaped export normalized to the readers' columns (key/value as bytes, times in ms)."""
    by_lower = {c.lower(): c for c in frame.columns}
    missing = [c for c in ("key", "value", "partition") if c not in by_lower]
    if missing:
        raise ReconcileError(f"{what} lacks column(s) {', '.join(missing)}; it has {', '.join(frame.columns)}")
    time_column = by_lower.get("timestamp_ms") or by_lower.get("timestamp")
    return frame.select(
        F.col(by_lower["key"]).cast("binary").alias("key"),
        F.col(by_lower["value"]).cast("binary").alias("value"),
        F.col(by_lower["partition"]).cast("int").alias("partition"),
        (F.col(by_lower["offset"]) if "offset" in by_lower else F.monotonically_increasing_id()).cast("bigint").alias("offset"),
        (_millis(frame, time_column) if time_column else F.lit(None).cast("bigint")).alias("timestamp_ms"),
    )


__all__ = ["COUNTED_KINDS", "NON_UTF8_KEY", "NULL_KEY", "TABLE_COLUMNS", "TOMBSTONE", "UNDECODABLE", "all_orders",
           "all_users", "decodable", "identity_value", "in_window", "is_raw", "kind_counts", "kind_totals",
           "output_columns", "output_fields", "raw_export", "stream_fields", "table_columns", "users", "valid_outputs"]
