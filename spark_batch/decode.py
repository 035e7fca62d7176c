"""Records -> typed columns: the join outputs (Spark SQL's ``from_json``), orders and users (``ksql_json``).

Two input shapes are accepted: Kafka-shaped rows (``key``, ``value`` as JSON,
``partition``, ``offset``, ``timestamp_ms``; what the Kafka readers produce and
a raw export holds) and already-decoded exports (one column per field).  Both
come out as the same canonical, lower-case columns.

The inputs are read as the worker's model reads them (``spark_batch.ksql_json``), each row
with its ``kind`` (null, ``tombstone``, ``null_key``, ``non_utf8_key``, ``undecodable``).
The outputs are what the two engines write: an object of the upper-case columns, any of
them null (both engines write NULL columns).  An output record is **undecodable** when its
value is not a JSON object (null, not JSON, an array...), a column holds a value of another
type (``"PRODUCT_ID": "abc"``, a fraction for a BIGINT; ``"NaN"``/``"Infinity"`` are a
DOUBLE's), or it has no ``TS`` (the order's record timestamp: neither engine writes an order
without one).  A null key is not: Kafka Streams writes a null-key order that way.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from . import ksql_json
from .errors import ReconcileError
from .ksql_json import KINDS, NON_UTF8_KEY, NULL_KEY, TOMBSTONE, UNDECODABLE, ddl
from .roles import OUTPUT_ROLES
from .window import TimeWindow

#: The output value's columns: the user's and the order's, in upper case (USER_ID is the Kafka key).
OUTPUT_FIELDS = {name.upper(): kind for name, kind in {**ksql_json.USER_FIELDS, **ksql_json.ORDER_FIELDS}.items()}
#: Spark's JSON reader sets this column to the record's text when it cannot read it as OUTPUT_FIELDS.
_CORRUPT = "_corrupt"
#: What makes an order the same order in both outputs.
IDENTITY = ("user_id", "ts", "product_id", "qty", "unit_price", "channel")
#: Canonical column types; exports are cast to them (a value that does not fit becomes null: undecodable).
TYPES = {**{name.lower(): kind for name, kind in OUTPUT_FIELDS.items()},
         "partition": "int", "offset": "bigint", "timestamp_ms": "bigint"}
#: The identity columns of fixed width (all but the strings).
FIXED_IDENTITY = tuple(c for c in IDENTITY if TYPES.get(c, "string") != "string")
OUTPUT_COLUMNS = (*IDENTITY, "name", "age", "partition", "offset")
#: ``kind``: null, or what sets the order apart (``null_key``: no user to find; ``non_utf8_key``: the worker refuses it).
ORDER_COLUMNS = (*IDENTITY, "partition", "offset", "kind")
USER_COLUMNS = ("user_key", "name", "age", "partition", "offset", "timestamp_ms")
#: Input kinds counted in summary.json (a row of null kind is an ordinary record).
COUNTED_KINDS = KINDS


def identity_value(column: str) -> Column:
    """An identity column as grouping and joins compare it: ``unit_price`` -0.0 = 0.0."""
    if column == "unit_price":
        return F.when(F.col(column) == 0, F.lit(0.0)).otherwise(F.col(column))
    return F.col(column)


def is_raw(frame: DataFrame) -> bool:
    return "value" in frame.columns


def in_window(frame: DataFrame, window: TimeWindow) -> DataFrame:
    """Rows whose record timestamp (``timestamp_ms``/``timestamp``, else the order's ``ts``) is in the window,
    and rows without one: a line of an export that Spark could not parse comes as a row of nulls, which
    ``valid_outputs`` then counts as undecodable instead of the window dropping it without a word."""
    by_lower = {c.lower(): c for c in frame.columns}
    name = by_lower.get("timestamp_ms") or by_lower.get("timestamp") or by_lower.get("ts")
    if name is None:
        raise ReconcileError(f"an export has no timestamp_ms, timestamp or ts column; it has {', '.join(frame.columns)}")
    moment = _millis(frame, name)
    return frame.where(moment.isNull() | ((moment >= window.start_ms) & (moment < window.end_ms)))


def output_columns(frame: DataFrame) -> DataFrame:
    """Join output records (Faust's or ksqlDB's, tagged ``pair`` and ``side``) as pair, side + ``OUTPUT_COLUMNS``
    + ``undecodable`` (see the module's docstring)."""
    if not is_raw(frame):
        return _decoded(frame, ("pair", "side", *OUTPUT_COLUMNS), "a join output export")
    value = F.from_json(F.col("value").cast("string"), ddl({**OUTPUT_FIELDS, _CORRUPT: "string"}),
                        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    undecodable = F.col("value").isNull() | value.isNull() | value[_CORRUPT].isNotNull() | value["TS"].isNull()
    columns = [value[name].alias(name.lower()) for name in OUTPUT_FIELDS]
    return frame.select("pair", "side", F.col("key").cast("string").alias("user_id"), *columns, "partition", "offset",
                        undecodable.alias("undecodable")).select("pair", "side", *OUTPUT_COLUMNS, "undecodable")


def valid_outputs(frame: DataFrame, observation: Observation | None = None, role: tuple[str, str] | None = None) -> DataFrame:
    """``output_columns`` rows that are decodable; ``observation`` gets, per pair and side,
    ``rows:<pair>:<side>`` and ``undecodable:<pair>:<side>`` (the rows left out).

    ``role`` (pair, side): the frame is that one output alone (an export), so two counters per
    row suffice instead of eight (an observation's metrics are evaluated row by row).
    """
    bad = F.col("undecodable")
    if observation is not None:
        metrics = []
        for pair, side in [role] if role else list(OUTPUT_ROLES.values()):
            mine = F.lit(True) if role else (F.col("pair") == pair) & (F.col("side") == side)
            metrics += [F.count_if(mine).alias(f"rows:{pair}:{side}"), F.count_if(mine & bad).alias(f"undecodable:{pair}:{side}")]
        frame = frame.observe(observation, *metrics)
    return frame.where(~bad).drop("undecodable")


def all_orders(frame: DataFrame) -> DataFrame:
    """Every record of the orders stream as ``ORDER_COLUMNS``, its ``kind`` saying whether and how the engines read it."""
    if is_raw(frame):
        return ksql_json.orders(frame).select(*ORDER_COLUMNS)
    frame = _decoded(frame, ORDER_COLUMNS[:-1], "an orders export")
    kind = (F.when(F.col("undecodable") | F.col("ts").isNull() | (F.col("ts") < 0), F.lit(UNDECODABLE))
            .when(F.col("user_id").isNull(), F.lit(NULL_KEY)))
    return frame.select(*ORDER_COLUMNS[:-1], kind.alias("kind"))


def decodable() -> Column:
    """Over an ``all_orders``/``all_users`` frame: the record is not ``undecodable``."""
    return F.col("kind").isNull() | (F.col("kind") != UNDECODABLE)


def all_users(frame: DataFrame) -> DataFrame:
    """Every record of the users topic as ``USER_COLUMNS`` + ``kind``; a tombstone keeps its key and time."""
    if is_raw(frame):
        decoded = ksql_json.users(frame).withColumnRenamed("user_id", "user_key")
        return decoded.select(*USER_COLUMNS, "kind")
    frame = _decoded(frame.withColumnRenamed("user_id", "user_key"), USER_COLUMNS, "a users export")
    kind = (F.when(F.col("undecodable"), F.lit(UNDECODABLE)).when(F.col("user_key").isNull(), F.lit(NULL_KEY))
            .when(F.col("name").isNull() & F.col("age").isNull(), F.lit(TOMBSTONE)))
    return frame.select(*USER_COLUMNS, kind.alias("kind"))


def users(frame: DataFrame, kinds: Observation | None = None) -> DataFrame:
    """The users a table of either engine holds (Kafka Streams' under the key read with U+FFFD), as ``USER_COLUMNS``;
    a tombstone keeps its key and time.  ``kinds`` gets every record counted by kind (``kind_counts``)
    by the scan that reads them anyway."""
    every = all_users(frame)
    if kinds is not None:
        every = every.observe(kinds, *kind_counts())
    return every.where(F.col("user_key").isNotNull() & decodable()).select(*USER_COLUMNS)


def kind_counts() -> list[Column]:
    """Aggregates over an ``all_orders``/``all_users`` frame: ``rows`` and one count per kind (``COUNTED_KINDS``)."""
    return [F.count(F.lit(1)).alias("rows"), *[F.count_if(F.col("kind") == k).alias(k) for k in COUNTED_KINDS]]


def kind_totals() -> list[Column]:
    """``kind_counts`` summed over rows that hold partial ones (0 over no rows, not null)."""
    return [F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in ("rows", *COUNTED_KINDS)]


def _decoded(frame: DataFrame, wanted: tuple[str, ...], what: str) -> DataFrame:
    """Pick ``wanted`` columns case-insensitively; ``offset`` defaults to row order, ``timestamp_ms`` to ``ts``.

    ``undecodable``: a value that does not fit its column's type (null after the cast, not before).  Only
    the columns whose export type is not already the canonical one are cast and checked: a typed
    export's (Parquet's) column cannot fail its cast, and checking it anyway made every output row read
    and test every column, ``offset`` included, in the classification's scan.
    """
    by_lower = {c.lower(): c for c in frame.columns}
    if "timestamp_ms" in wanted and "timestamp_ms" not in by_lower:
        if "timestamp" in by_lower:
            frame = frame.withColumn("timestamp_ms", _millis(frame, by_lower["timestamp"]))
            by_lower["timestamp_ms"] = "timestamp_ms"
    if "offset" in wanted and "offset" not in by_lower:
        frame = frame.withColumn("offset", F.monotonically_increasing_id())
        by_lower["offset"] = "offset"
    missing = [c for c in wanted if c not in by_lower]
    if missing:
        raise ReconcileError(f"{what} lacks column(s) {', '.join(missing)}; it has {', '.join(frame.columns)}")
    source = dict(frame.dtypes)
    retyped = {c for c in wanted if source[by_lower[c]] != TYPES.get(c, "string")}
    cast = {c: F.col(by_lower[c]).try_cast(TYPES.get(c, "string")) if c in retyped else F.col(by_lower[c]) for c in wanted}
    unfit = [F.col(by_lower[c]).isNotNull() & cast[c].isNull() for c in wanted if c in TYPES and c in retyped]
    undecodable = F.lit(False)
    for column in unfit:
        undecodable = undecodable | column
    if "ts" in wanted:
        undecodable = undecodable | cast["ts"].isNull()
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
