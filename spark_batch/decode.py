"""Records -> typed columns: the join outputs, orders and users, with Spark SQL's ``from_json``.

Two input shapes are accepted: Kafka-shaped rows (``key``, ``value`` as JSON,
``partition``, ``offset``, ``timestamp_ms``; what the Kafka readers produce and
a raw export holds) and already-decoded exports (one column per field).  Both
come out as the same canonical, lower-case columns.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from .errors import ReconcileError
from .roles import OUTPUT_ROLES
from .window import TimeWindow

#: ksqlDB's output value: UPPERCASE columns, USER_ID is the Kafka key (see the ksqlDB reference).
OUTPUT_VALUE = "NAME string, AGE bigint, PRODUCT_ID bigint, QTY bigint, UNIT_PRICE double, CHANNEL string, TS bigint"
ORDER_VALUE = "ts bigint, product_id bigint, qty bigint, unit_price double, channel string"
USER_VALUE = "name string, age bigint"
#: What makes an order the same order in both outputs.
IDENTITY = ("user_id", "ts", "product_id", "qty", "unit_price", "channel")
#: Canonical column types; exports are cast to them (a value that does not fit becomes null: undecodable).
TYPES = {"ts": "bigint", "product_id": "bigint", "qty": "bigint", "unit_price": "double", "age": "bigint",
         "partition": "int", "offset": "bigint", "timestamp_ms": "bigint"}
OUTPUT_COLUMNS = (*IDENTITY, "name", "age", "partition", "offset")
ORDER_COLUMNS = (*IDENTITY, "partition", "offset")
USER_COLUMNS = ("user_key", "name", "age", "partition", "offset", "timestamp_ms")


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
    """Join output records (Faust's or ksqlDB's, tagged ``pair`` and ``side``) as pair, side + ``OUTPUT_COLUMNS``."""
    if is_raw(frame):
        fields = ("ts", "product_id", "qty", "unit_price", "channel", "name", "age")
        return _from_json(frame, OUTPUT_VALUE, "user_id", {f.upper(): f for f in fields}, ("pair", "side"), ("partition", "offset"))
    return _decoded(frame, ("pair", "side", *OUTPUT_COLUMNS), "a join output export")


def _from_json(
    frame: DataFrame, schema: str, key_as: str, fields: dict[str, str], before: tuple[str, ...], after: tuple[str, ...]
) -> DataFrame:
    """Kafka-shaped rows -> the key as a string column plus the value's JSON ``fields`` (json name -> column)."""
    value = F.from_json(F.col("value").cast("string"), schema)
    columns = [value[name].alias(alias) for name, alias in fields.items()]
    return frame.select(*before, F.col("key").cast("string").alias(key_as), *columns, *after)


def _lacks_identity() -> Column:
    return F.col("user_id").isNull() | F.col("ts").isNull() | F.col("product_id").isNull()


def valid_outputs(frame: DataFrame, observation: Observation | None = None, role: tuple[str, str] | None = None) -> DataFrame:
    """``output_columns`` rows that carry an order identity; ``observation`` gets, per pair and side,
    ``rows:<pair>:<side>`` and ``undecodable:<pair>:<side>`` (rows left out for lacking one).

    ``role`` (pair, side): the frame is that one output alone (an export), so two counters per
    row suffice instead of eight (an observation's metrics are evaluated row by row).
    """
    bad = _lacks_identity()
    if observation is not None:
        metrics = []
        for pair, side in [role] if role else list(OUTPUT_ROLES.values()):
            mine = F.lit(True) if role else (F.col("pair") == pair) & (F.col("side") == side)
            metrics += [F.count_if(mine).alias(f"rows:{pair}:{side}"), F.count_if(mine & bad).alias(f"undecodable:{pair}:{side}")]
        frame = frame.observe(observation, *metrics)
    return frame.where(~bad)


def orders(frame: DataFrame) -> DataFrame:
    """The orders stream as ``ORDER_COLUMNS``."""
    if is_raw(frame):
        fields = ("ts", "product_id", "qty", "unit_price", "channel")
        frame = _from_json(frame, ORDER_VALUE, "user_id", {f: f for f in fields}, (), ("partition", "offset"))
    else:
        frame = _decoded(frame, ORDER_COLUMNS, "an orders export")
    return frame.where(~_lacks_identity())


def users(frame: DataFrame) -> DataFrame:
    """The users table topic as ``USER_COLUMNS``; a tombstone (null value) keeps its key and time."""
    if is_raw(frame):
        frame = _from_json(frame, USER_VALUE, "user_key", {"name": "name", "age": "age"}, (), ("partition", "offset", "timestamp_ms"))
    else:
        frame = _decoded(frame.withColumnRenamed("user_id", "user_key"), USER_COLUMNS, "a users export")
    return frame.where(F.col("user_key").isNotNull())


def _decoded(frame: DataFrame, wanted: tuple[str, ...], what: str) -> DataFrame:
    """Pick ``wanted`` columns case-insensitively; ``offset`` defaults to row order, ``timestamp_ms`` to ``ts``."""
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
    return frame.select(*[F.col(by_lower[c]).try_cast(TYPES.get(c, "string")).alias(c) for c in wanted])


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
