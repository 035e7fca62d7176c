"""A source's records (the streams and tables a join reads) decoded in Spark exactly as the worker decodes them.

ksqlDB's rules are defined once, in :class:`streamapp.sql.formats.Codec`.  Spark SQL reads the common record
(a KAFKA key of any type, one flat JSON object of exactly the value columns, each of
its own JSON type), where the coercions are the identity; the codec itself, in an Arrow UDF, reads every other
row.  Each row carries ``kind``: null, ``tombstone``, ``null_key``, ``non_utf8_key`` or ``undecodable``.
See docs/reference/reconciliation.md#records-read; ``tests/test_reconcile_inputs.py`` checks both ways against
the codec on the same bytes.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import DataType, StructType

from streamapp.model.records import MAX_NUMBER_LENGTH, RecordError
from streamapp.sql import plan as p
from streamapp.sql.formats import Codec, json_text

from .roles import spark_type

#: Values a row's ``kind`` takes besides null (a row as both engines read it).
TOMBSTONE, NULL_KEY, NON_UTF8_KEY, UNDECODABLE = "tombstone", "null_key", "non_utf8_key", "undecodable"
KINDS = (TOMBSTONE, NULL_KEY, NON_UTF8_KEY, UNDECODABLE)
#: The name of a decoded record's key value, whatever the source calls its key column.
KEY = "key_value"


def ddl(columns: dict[str, str]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns.items())


def value_columns(source: p.Source) -> dict[str, str]:
    """A source's value columns, lower-cased -> Spark SQL type."""
    return {c.name.lower(): spark_type(c.type) for c in source.value_columns}


def key_type(source: p.Source) -> str:
    """The Spark SQL type of the source's key value (a source without a key: string, always null)."""
    return spark_type(source.key_columns[0].type) if source.key_columns else "string"


def _string_key(source: p.Source) -> bool:
    return bool(source.key_columns) and source.key_format == "KAFKA" and source.key_columns[0].type == "STRING"


def sql_key(source: p.Source, key: Column) -> tuple[Column, Column] | None:
    """(the key's value, whether SQL reads it as the codec does) for a key format and type SQL reads, else None:
    every type of a KAFKA key (``streamapp.sql.declarations.KAFKA_KEY_TYPES``); a BYTES key as its base64 text."""
    if not source.key_columns or source.key_format != "KAFKA":
        return None
    kind = source.key_columns[0].type
    if kind == "STRING":
        return key.cast("string"), key.isNotNull() & F.is_valid_utf8(key)
    if kind == "BYTES":
        return F.base64(key), key.isNotNull()
    size = {"BIGINT": 8, "INT": 4, "DOUBLE": 8}.get(kind)
    if size is None:
        return None
    ok = key.isNotNull() & (F.octet_length(key) == size)
    bits = F.conv(F.hex(key), 16, -10).cast("bigint")  # signed for 8 bytes, unsigned for 4
    value = {"BIGINT": bits, "INT": F.when(bits >= 1 << 31, bits - (1 << 32)).otherwise(bits).cast("int"),
             "DOUBLE": _double(bits)}[kind]
    return F.when(ok, value), ok  # a key of another size is never read (ANSI casts would fail on it)


def _double(bits: Column) -> Column:
    """A long's bits as an IEEE-754 double, as ``Double.longBitsToDouble`` reads them, in SQL arithmetic. Exact: the
    significand (< 2**53) and a power of two (``pow`` of integers is exact) are doubles, and so is their product."""
    exponent = F.shiftright(bits, 52).bitwiseAND(0x7FF)
    fraction = bits.bitwiseAND((1 << 52) - 1)
    magnitude = (F.when(exponent == 0x7FF, F.when(fraction == 0, F.lit(float("inf"))).otherwise(F.lit(float("nan"))))
                 .when(exponent == 0, fraction.cast("double") * F.pow(F.lit(2.0), F.lit(-1074.0)))
                 .otherwise((fraction + (1 << 52)).cast("double") * F.pow(F.lit(2.0), (exponent - 1075).cast("double"))))
    return F.when(bits < 0, -magnitude).otherwise(magnitude)


_WS = "[ \\t\\n\\r]*"
#: Read by Spark's JSON parser, a bare ``NaN`` or a single-quoted name must fail as in Jackson's defaults.
_JSON_OPTIONS = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false", "mode": "PERMISSIVE",
                 "columnNameOfCorruptRecord": "_corrupt"}
#: The JSON token a column of each type must start with for the SQL path (the types the SQL path reads).
_TOKEN_START = {"bigint": "[-0-9]", "double": "[-0-9]", "string": '"'}


@dataclass(frozen=True)
class SqlPath:
    """The rows the SQL path reads exactly as the codec does (``text`` on the raw record, ``fits`` on
    ``parsed``), and the row it reads (``row`` of ``parsed``).

    The value has no backslash (so every ``"`` delimits a string, and a name matched in the text is
    a name), one ``{`` and no ``[`` (flat), at most ``MAX_NUMBER_LENGTH`` bytes (no number Jackson
    refuses), its names exactly the fields, each value starting as its type's token; ``from_json``
    then checks the types (a fraction or an out-of-range integer for a BIGINT is a corrupt record).
    """

    source: p.Source

    @property
    def columns(self) -> dict[str, str]:
        return value_columns(self.source)

    @property
    def possible(self) -> bool:
        """Whether any record of the source can take the SQL path."""
        return (self.source.value_format == "JSON" and self.source.wrap_single_value is not False
                and bool(self.columns) and all(kind in _TOKEN_START for kind in self.columns.values())
                and sql_key(self.source, F.col("key")) is not None)

    @property
    def parsed(self) -> Column:
        return F.from_json(F.col("value").cast("string"), ddl({**self.columns, "_corrupt": "string"}), _JSON_OPTIONS)

    @property
    def text(self) -> Column:
        if not self.possible:
            return F.lit(False)
        text = F.col("value").cast("string")
        read = sql_key(self.source, F.col("key"))
        assert read is not None
        condition = (
            read[1] & F.col("value").isNotNull() & F.is_valid_utf8(F.col("value"))
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
        read = sql_key(self.source, F.col("key"))
        key = read[0] if read is not None else F.lit(None).cast(key_type(self.source))
        fields = [F.when(parsed[n] == 0, F.lit(0.0)).otherwise(parsed[n]).alias(n) if kind == "double"
                  else parsed[n].alias(n) for n, kind in self.columns.items()]
        return F.struct(key.alias(KEY), *fields, F.lit(None).cast("string").alias("kind"))

    def condition(self) -> Column:
        """Whether a row takes the SQL path, as one column (for tests; the job stages it, see ``_decoded``)."""
        return F.coalesce(self.text & self.fits(self.parsed), F.lit(False))


def struct_type(source: p.Source) -> StructType:
    """What both ways give per record: the key's value, the value columns, the kind."""
    every = {KEY: key_type(source), **value_columns(source), "kind": "string"}
    return DataType.fromDDL(ddl(every))  # type: ignore[return-value]


def _spark_value(value: Any, kind: str) -> Any:
    """A codec value as the Spark column of ``kind`` holds it (a nested or other value: its JSON text)."""
    if value is None:
        return None
    if kind == "string" and not isinstance(value, str):
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        return json_text(value)
    if kind.startswith("decimal") and not isinstance(value, Decimal):
        return Decimal(str(value))
    return value


def codec_value(value: Any, ksql_type: str) -> Any:
    """A Spark column's value as the codec takes it for a column of ``ksql_type`` (``_spark_value`` undone for a
    BYTES value, held as its base64 text)."""
    if ksql_type == "BYTES" and isinstance(value, str):
        return base64.b64decode(value)
    return value


def codec_row(codec: Codec, key: bytes | None, value: bytes | None, stream: bool) -> dict[str, Any]:
    """One record through the codec, as a struct row (see the module for ``kind``).

    A null or non-UTF-8 STRING key is the worker's refusal, not ksqlDB's: the value is decoded
    anyway, and the key is what Kafka Streams reads (null, or U+FFFD per bad byte).
    """
    source = codec.source
    columns = value_columns(source)
    problem, key_value = None, None
    if key is None and source.key_columns and source.key_format != "NONE":
        problem = NULL_KEY
    elif key is not None:
        try:
            key_value = codec.decode_key(key)
        except RecordError:
            if not _string_key(source):
                return {KEY: None, **dict.fromkeys(columns), "kind": UNDECODABLE}
            problem, key_value = NON_UTF8_KEY, key.decode("utf-8", "replace")
    empty = {KEY: _spark_value(key_value, key_type(source)), **dict.fromkeys(columns)}
    try:
        row = codec.decode_value(value)
    except RecordError:
        return {**empty, "kind": UNDECODABLE}
    if row is None:
        return {**empty, "kind": UNDECODABLE if stream else problem or TOMBSTONE}
    decoded = {c.name.lower(): _spark_value(row.get(c.name), columns[c.name.lower()]) for c in source.value_columns}
    if stream and source.timestamp is not None:
        moment = decoded.get(source.timestamp.lower())
        if moment is None or moment < 0:  # no event time: Kafka Streams drops the record
            return {**empty, "kind": UNDECODABLE}
    return {**empty, **decoded, "kind": problem}


def _codec_udf(source: p.Source, stream: bool) -> Callable[..., Column]:
    struct = struct_type(source)
    arrow_type = to_arrow_type(struct)
    codecs: list[Codec] = []  # built once per Python worker from the (small, plain) source, not shipped

    def decode_batch(wanted: pa.Array, keys: pa.Array, values: pa.Array) -> pa.Array:
        if not codecs:
            codecs.append(Codec(source))
        codec = codecs[0]
        rows = [codec_row(codec, k, v, stream) if w else None
                for w, k, v in zip(wanted.to_pylist(), keys.to_pylist(), values.to_pylist())]
        return pa.array(rows, arrow_type)

    return F.arrow_udf(decode_batch, struct)


def read(frame: DataFrame, source: p.Source, stream: bool) -> DataFrame:
    """Kafka-shaped records of ``source`` (``key``, ``value`` bytes, ...) -> ``KEY``, its value columns
    (lower-cased), ``kind``, the rest; each row by SQL where ``SqlPath`` holds, else by the codec.

    ``stream``: a null value is no record (undecodable), and the ``TIMESTAMP=`` column must hold a
    non-negative time (what the SQL path checks too); else a null value is the row's tombstone,
    which keeps its key and time.  Staged in three projections, so that Spark parses each value
    once: written as one expression, ``from_json`` and the checks were inlined into the UDF's
    arguments and into every column (``benchmarks/reconcile_inputs.py``).
    """
    path = SqlPath(source)
    rest = [c for c in frame.columns if c not in ("key", "value")]
    typed = sql_key(source, F.col("key"))
    tombstone = (F.col("value").isNull() & typed[1]) if typed is not None and not stream else F.lit(False)
    staged = frame.select("key", "value", *rest, path.parsed.alias("_parsed") if path.possible else F.lit(None).alias("_parsed"),
                          path.text.alias("_text"), tombstone.alias("_tombstone"))
    row = path.row(F.col("_parsed")) if path.possible else F.lit(None)
    timed = F.lit(True)
    if stream and source.timestamp is not None and path.possible:
        timed = row[source.timestamp.lower()] >= 0
    plain = F.coalesce(F.col("_text") & path.fits(F.col("_parsed")) & timed, F.lit(False)) if path.possible else F.lit(False)
    staged = staged.select("key", "value", *rest, "_parsed", "_tombstone", (~plain & ~F.col("_tombstone")).alias("_slow"))
    slow = F.col("_slow")
    by_codec = _codec_udf(source, stream)(slow, F.when(slow, F.col("key")), F.when(slow, F.col("value")))
    columns = value_columns(source)
    null_row = F.struct((typed[0] if typed else F.lit(None).cast(key_type(source))).alias(KEY),
                        *[F.lit(None).cast(k).alias(n) for n, k in columns.items()], F.lit(TOMBSTONE).alias("kind"))
    chosen = F.when(slow, by_codec).when(F.col("_tombstone"), null_row)
    if path.possible:
        chosen = chosen.otherwise(row)
    return staged.select(chosen.alias("_decoded"), *rest).select("_decoded.*", *rest)


def output_key(source: p.Source, key: Column) -> tuple[Column, Column]:
    """(an output record's key value, whether it is one ksqlDB's key format could have written) for a sink.

    A null key is written (a stream record with a null key joined with nothing); a STRING key is read as
    Kafka Streams reads it (U+FFFD for each bad byte).  A JSON key is its bare JSON value; a DELIMITED
    one its text, cast.
    """
    kind = key_type(source)
    typed = sql_key(source, key)
    if typed is not None:
        value, ok = typed
        return value, key.isNull() | ok | F.lit(_string_key(source))
    if not source.key_columns or source.key_format == "NONE":
        return F.lit(None).cast(kind), F.lit(True)
    if source.key_format == "JSON":
        value = F.from_json(F.concat(F.lit('{"k":'), key.cast("string"), F.lit("}")), f"k {kind}")["k"]
    else:
        value = key.cast("string").try_cast(kind)
    return value, key.isNull() | value.isNotNull()


__all__ = ["KEY", "KINDS", "NON_UTF8_KEY", "NULL_KEY", "SqlPath", "TOMBSTONE", "UNDECODABLE", "codec_row", "codec_value", "ddl",
           "key_type", "output_key", "read", "sql_key", "struct_type", "value_columns"]
