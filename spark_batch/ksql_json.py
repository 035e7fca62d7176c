"""The input records (users, orders) decoded in Spark exactly as ``streamapp.model.records`` decodes them.

ksqlDB's JSON rules are defined once, in the model (``decode_user``, ``decode_order``).  Spark
applies them in two ways, and a row takes exactly one:

- **Spark SQL** for the common record, the one the producers write: a UTF-8 key, and a value
  that is one flat JSON object, without escapes, of exactly the model's fields in lower case, each
  of its own JSON type (an integer within 64 bits for a BIGINT, a number for a DOUBLE, a string
  for a VARCHAR).  There ksqlDB's coercions are the identity and ``from_json`` reads what the
  model reads (``-0.0`` aside, made ``0.0`` as ksqlDB's ``BigDecimal`` does).
- **the model's own decoder**, in an Arrow UDF, for every other row (case-insensitive names,
  ``"41"`` for a BIGINT, nulls, missing fields, trailing text, other encodings, bad records...).
  The UDF is sent nulls for the rows SQL took, so it decodes only the others.

The Spark schema comes from the model's dataclasses (``User``, ``Order``), so a column added
there is read here.  Each row carries ``kind``: null (a row both engines read), ``tombstone``
(a user's null value or JSON ``null``: the user deleted), ``null_key`` (the value
decoded; an order both engines join with NULL user columns, a user both ignore) or ``non_utf8_key`` (the
value decoded; the worker dead-letters such a record, Kafka Streams reads the
key with U+FFFD for each bad byte, as Java's ``String`` decoder does), or ``undecodable`` (neither engine can use it: a tombstone of an order, a value ksqlDB cannot read,
an order without a valid ``ts``).  ``tests/test_reconcile_inputs.py`` checks both ways against
the model on the same bytes.
"""
from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass
import typing
from typing import Any, Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from streamapp.model.records import MAX_NUMBER_LENGTH, Order, RecordError, User, decode_order, decode_user

#: Python type of a model field -> its Spark SQL type.
SQL_TYPES = {int: "bigint", float: "double", str: "string"}
#: Values a row's ``kind`` takes besides null (a row as both engines read it).
TOMBSTONE, NULL_KEY, NON_UTF8_KEY, UNDECODABLE = "tombstone", "null_key", "non_utf8_key", "undecodable"
KINDS = (TOMBSTONE, NULL_KEY, NON_UTF8_KEY, UNDECODABLE)


def value_columns(record: type) -> dict[str, str]:
    """A model record's value columns (every field but the key, ``user_id``) -> Spark SQL type."""
    hints = typing.get_type_hints(record)
    columns = {}
    for field in dataclasses.fields(record):
        if field.name == "user_id":
            continue
        hint = hints[field.name]
        if isinstance(hint, types.UnionType):
            hint = next(t for t in typing.get_args(hint) if t is not type(None))
        columns[field.name] = SQL_TYPES[hint]
    return columns


ORDER_FIELDS = value_columns(Order)
USER_FIELDS = value_columns(User)


def ddl(columns: dict[str, str]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns.items())


_SPARK_TYPES = {"bigint": LongType(), "double": DoubleType(), "string": StringType()}


def struct_type(columns: dict[str, str]) -> StructType:
    """What both ways give per record: the key as a user id, the value columns, the kind."""
    every = {"user_id": "string", **columns, "kind": "string"}
    return StructType([StructField(name, _SPARK_TYPES[kind]) for name, kind in every.items()])

_WS = "[ \\t\\n\\r]*"
#: Read by Spark's JSON parser, a bare ``NaN`` or a single-quoted name must fail as in Jackson's defaults.
_JSON_OPTIONS = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false", "mode": "PERMISSIVE",
                 "columnNameOfCorruptRecord": "_corrupt"}
#: The JSON token a column of each type must start with for the SQL path.
_TOKEN_START = {"bigint": "[-0-9]", "double": "[-0-9]", "string": '"'}


@dataclass(frozen=True)
class SqlPath:
    """The rows the SQL path reads exactly as the model does (``text`` on the raw record, ``fits`` on
    ``parsed``), and the row it reads (``row`` of ``parsed``).

    The value has no backslash (so every ``"`` delimits a string, and a name matched in the text is
    a name), one ``{`` and no ``[`` (flat), at most ``MAX_NUMBER_LENGTH`` bytes (no number Jackson
    refuses), its names exactly the fields, each value starting as its type's token; ``from_json``
    then checks the types (a fraction or an out-of-range integer for a BIGINT is a corrupt record).
    """

    columns: dict[str, str]

    @property
    def parsed(self) -> Column:
        return F.from_json(F.col("value").cast("string"), ddl({**self.columns, "_corrupt": "string"}), _JSON_OPTIONS)

    @property
    def text(self) -> Column:
        text = F.col("value").cast("string")
        condition = (
            F.col("key").isNotNull() & F.is_valid_utf8(F.col("key"))
            & F.col("value").isNotNull() & F.is_valid_utf8(F.col("value"))
            & (F.octet_length("value") <= MAX_NUMBER_LENGTH)
            & text.rlike(f"^{_WS}\\{{[^\\\\{{\\[]*$")
            & (F.array_sort(F.json_object_keys(text)) == F.array_sort(F.array(*map(F.lit, self.columns))))
        )
        for name, kind in self.columns.items():
            condition = condition & text.rlike(f'"{name}"{_WS}:{_WS}{_TOKEN_START[kind]}')
        return condition

    def fits(self, parsed: Column) -> Column:
        condition = parsed["_corrupt"].isNull()
        for name in self.columns:
            condition = condition & parsed[name].isNotNull()
        return condition

    def row(self, parsed: Column) -> Column:
        fields = [F.when(parsed[n] == 0, F.lit(0.0)).otherwise(parsed[n]).alias(n) if kind == "double"
                  else parsed[n].alias(n) for n, kind in self.columns.items()]
        return F.struct(F.col("key").cast("string").alias("user_id"), *fields, F.lit(None).cast("string").alias("kind"))

    def condition(self) -> Column:
        """Whether a row takes the SQL path, as one column (for tests; the job stages it, see ``_decoded``)."""
        return F.coalesce(self.text & self.fits(self.parsed), F.lit(False))


def _model_row(decode: Callable[[bytes | None, bytes | None], Any], columns: dict[str, str],
               key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """One record through the model's decoder, as a struct row; ``None`` for a user's tombstone.

    A null or non-UTF-8 key is the worker's refusal, not ksqlDB's: the value is decoded under a
    stand-in key, and the user id is what Kafka Streams reads (null, or U+FFFD per bad byte).
    """
    problem, user_id = None, None
    if key is None:
        problem = NULL_KEY
    else:
        try:
            user_id = key.decode("utf-8")
        except UnicodeDecodeError:
            problem, user_id = NON_UTF8_KEY, key.decode("utf-8", "replace")
    try:
        record = decode(b"" if problem else key, value)
    except RecordError:
        return {"user_id": user_id, **dict.fromkeys(columns), "kind": UNDECODABLE}
    if record is None:
        return {"user_id": user_id, **dict.fromkeys(columns), "kind": problem or TOMBSTONE}
    return {"user_id": user_id, **{name: getattr(record, name) for name in columns}, "kind": problem}


def _model_udf(decode: Callable[[bytes | None, bytes | None], Any], columns: dict[str, str]) -> Callable[..., Column]:
    struct = struct_type(columns)
    arrow_type = to_arrow_type(struct)

    def decode_batch(wanted: pa.Array, keys: pa.Array, values: pa.Array) -> pa.Array:
        rows = [_model_row(decode, columns, k, v) if w else None
                for w, k, v in zip(wanted.to_pylist(), keys.to_pylist(), values.to_pylist())]
        return pa.array(rows, arrow_type)

    return F.arrow_udf(decode_batch, struct)


_ORDER_UDF = _model_udf(decode_order, ORDER_FIELDS)
_USER_UDF = _model_udf(decode_user, USER_FIELDS)


def _decoded(frame: DataFrame, columns: dict[str, str], model: Callable[..., Column], tombstones: bool,
             also: Callable[[Column], Column] = lambda row: F.lit(True)) -> DataFrame:
    """Each row by SQL where ``SqlPath`` (and ``also`` on its row) holds, else by the model's decoder.

    Staged in three projections, so that Spark parses each value once: written as one expression,
    ``from_json`` and the checks were inlined into the UDF's arguments and into every column
    (``benchmarks/reconcile_inputs.py``).
    """
    path = SqlPath(columns)
    rest = [c for c in frame.columns if c not in ("key", "value")]
    tombstone = F.col("value").isNull() & F.col("key").isNotNull() & F.is_valid_utf8(F.col("key")) if tombstones else F.lit(False)
    staged = frame.select("key", "value", *rest, path.parsed.alias("_parsed"), path.text.alias("_text"),
                          tombstone.alias("_tombstone"))
    row = path.row(F.col("_parsed"))
    plain = F.coalesce(F.col("_text") & path.fits(F.col("_parsed")) & also(row), F.lit(False))
    staged = staged.select("key", "value", *rest, "_parsed", "_tombstone", (~plain & ~F.col("_tombstone")).alias("_slow"))
    slow = F.col("_slow")
    by_model = model(slow, F.when(slow, F.col("key")), F.when(slow, F.col("value")))
    null_row = F.struct(F.col("key").cast("string").alias("user_id"), *[F.lit(None).cast(k).alias(n) for n, k in columns.items()],
                        F.lit(TOMBSTONE).alias("kind"))
    chosen = F.when(slow, by_model).when(F.col("_tombstone"), null_row).otherwise(row)
    return staged.select(chosen.alias("_decoded"), *rest).select("_decoded.*", *rest)


def orders(frame: DataFrame) -> DataFrame:
    """Kafka-shaped orders (``key``, ``value`` bytes, ...) -> ``user_id``, the order's columns, ``kind``, the rest."""
    # a negative ts is no record timestamp (Kafka Streams drops the order): the model says so
    return _decoded(frame, ORDER_FIELDS, _ORDER_UDF, tombstones=False, also=lambda row: row["ts"] >= 0)


def users(frame: DataFrame) -> DataFrame:
    """Kafka-shaped users -> ``user_id``, name, age, ``kind``, the rest; a tombstone (a null value, JSON
    ``null``) is a row of NULL columns of kind ``tombstone``, so that its key and time stay known."""
    return _decoded(frame, USER_FIELDS, _USER_UDF, tombstones=True)
