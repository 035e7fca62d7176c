"""CREATE STREAM / CREATE TABLE -> :class:`~streamapp.sql.plan.Source`, with ksqlDB's checks of what they declare.

The WITH clause's properties, formats, WRAP_SINGLE_VALUE, TIMESTAMP and PARTITIONS are checked here, for a declared
source and (by the planner) for a query's sink alike, in ksqlDB's order.  :func:`check_runnable` says what
streamapp can read and write; the planner calls it after ksqlDB's own rules, so that ksqlDB's refusals come first.
See docs/reference/statements.md.
"""
from __future__ import annotations

from typing import Any

from . import plan as p
from . import syntax as s
from .refusals import rejected, unsupported

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


def with_properties(statement: s.Statement, properties: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The WITH clause by name: a property streamapp does not know is refused by name rather than ignored."""
    found: dict[str, Any] = {}
    for name, value in properties:
        if name not in SOURCE_PROPERTIES:
            raise unsupported(statement, f"WITH property {name}")
        found[name] = value
    if "FORMAT" in found and ("KEY_FORMAT" in found or "VALUE_FORMAT" in found):
        raise rejected(statement, "Cannot supply both 'FORMAT' and 'KEY_FORMAT' or 'VALUE_FORMAT' properties")
    return found


def declared_source(statement: s.CreateSource, default_key_format: str) -> tuple[p.Source, str | None]:
    """(the source, its window type and size if it is windowed): streamapp reads no windowed source, but the
    planner keeps them for ksqlDB's refusals of joins of them, which come first.  ``default_key_format``: the key
    format of a source with key columns and no KEY_FORMAT."""
    window = {k: v for k, v in statement.properties if k in WINDOW_PROPERTIES}
    windowed = None
    props = with_properties(statement, tuple(x for x in statement.properties if x[0] not in WINDOW_PROPERTIES))
    if window:
        kind = str(window.get("WINDOW_TYPE", "")).upper()
        if kind not in ("SESSION", "HOPPING", "TUMBLING"):
            raise rejected(statement, f"Unknown window type: '{window.get('WINDOW_TYPE')}'")
        windowed = f"{kind} {window.get('WINDOW_SIZE', '')}".strip()
    if "KAFKA_TOPIC" not in props:
        raise rejected(statement, 'Missing required property "KAFKA_TOPIC" which has no default value.')
    if statement.columns is None:
        raise unsupported(statement, f"{statement.name} has no column list: its columns would come from a "
                                     "schema registry; declare them")
    key_constraint = "KEY" if statement.kind == "STREAM" else "PRIMARY KEY"
    for column in statement.columns:
        if column.constraint in ("HEADERS", "HEADER"):
            raise unsupported(statement, f"header column {column.name}")
        if column.constraint not in (None, key_constraint):
            if statement.kind == "TABLE":
                raise rejected(statement, f"Column `{column.name}` is a 'KEY' column: please use "
                                          "'PRIMARY KEY' for tables.")
            raise rejected(statement, f"Column `{column.name}` is a 'PRIMARY KEY' column: please use "
                                      "'KEY' for streams.")
    keys = tuple(p.Column(c.name, str(c.type)) for c in statement.columns if c.constraint)
    values = tuple(p.Column(c.name, str(c.type)) for c in statement.columns if not c.constraint)
    names = [c.name for c in statement.columns]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise rejected(statement, f"Duplicate column names: {duplicate}")
    if statement.kind == "TABLE" and not keys:
        raise rejected(statement, "Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
    key_format, value_format = formats_of(statement, props, default_key=default_key_format if keys else "NONE")
    if key_format == "NONE" and keys:
        raise rejected(statement, "The 'NONE' format can only be used when no columns are defined. "
                                  f"Got: [{', '.join(f'`{k.name}` {k.type} KEY' for k in keys)}]")
    source = p.Source(
        name=statement.name, kind=p.STREAM if statement.kind == "STREAM" else p.TABLE,
        topic=str(props["KAFKA_TOPIC"]), key_columns=keys, value_columns=values,
        key_format=key_format, value_format=value_format,
        wrap_single_value=wrap_single_value(statement, props, values),
        timestamp=timestamp_column(statement, props, keys + values),
        partitions=partition_count(statement, props), line=statement.line)
    return source, windowed


def formats_of(statement: s.Statement, props: dict[str, Any], default_key: str,
               inherited: tuple[str, str] | None = None) -> tuple[str, str]:
    """(key format, value format): FORMAT sets both; a sink ``inherited`` its source's where WITH names none."""
    both = props.get("FORMAT")
    key = str(props.get("KEY_FORMAT", both or (inherited[0] if inherited else default_key))).upper()
    value = props.get("VALUE_FORMAT", both or (inherited[1] if inherited else None))
    if value is None:
        raise rejected(statement, 'Missing required property "VALUE_FORMAT" which has no default value.')
    value = str(value).upper()
    for part, name in (("key", key), ("value", value)):
        if name not in KEY_FORMATS + VALUE_FORMATS + REGISTRY_FORMATS + ("KAFKA",):
            raise rejected(statement, f"Unknown format: {name}")
    return key, value


def wrap_single_value(statement: s.Statement, props: dict[str, Any], values: tuple[p.Column, ...]) -> bool | None:
    """WRAP_SINGLE_VALUE (None: not set, the format's default), which only a single value column can take."""
    if "WRAP_SINGLE_VALUE" not in props:
        return None
    wrap = props["WRAP_SINGLE_VALUE"]
    if not isinstance(wrap, bool):
        raise rejected(statement, f"Invalid value for WRAP_SINGLE_VALUE: {wrap!r} (true or false)")
    if len(values) != 1:
        raise rejected(statement, "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")
    return wrap


def timestamp_column(statement: s.Statement, props: dict[str, Any], columns: tuple[p.Column, ...]) -> str | None:
    """The TIMESTAMP column's name (None: records keep their own timestamps), one of ``columns``."""
    if "TIMESTAMP" not in props:
        return None
    wanted = str(props["TIMESTAMP"])
    name = wanted if wanted.startswith("`") else wanted.upper()
    name = name.strip("`")
    column = next((c for c in columns if c.name == name), None)
    if column is None:
        raise rejected(statement, f"The TIMESTAMP column set in the WITH clause does not exist in the "
                                  f"schema: '{name}'")
    if column.type != "BIGINT":
        raise unsupported(statement, f"TIMESTAMP column {name} of type {column.type}: only BIGINT "
                                     "epoch milliseconds")
    return name


def partition_count(statement: s.Statement, props: dict[str, Any]) -> int | None:
    """PARTITIONS (None: not set, the topic's or the source's count)."""
    if "PARTITIONS" not in props:
        return None
    count = props["PARTITIONS"]
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise rejected(statement, f"Invalid number of partitions: {count!r}")
    return count


def check_runnable(statement: s.Statement, source: p.Source, rich: bool) -> None:
    """What streamapp can read and write: checked after ksqlDB's own rules, so ksqlDB's errors come first.
    ``rich``: the query is a stream-stream join, which reads a key of several JSON columns."""
    if source.key_format not in KEY_FORMATS:
        raise unsupported(statement, f"{source.name}'s key format {source.key_format} (streamapp reads "
                                     f"{', '.join(KEY_FORMATS)})")
    if source.value_format not in VALUE_FORMATS:
        raise unsupported(statement, f"{source.name}'s value format {source.value_format} (streamapp reads "
                                     f"{', '.join(VALUE_FORMATS)})")
    if len(source.key_columns) > 1 and not (rich and source.key_format == "JSON"):
        raise unsupported(statement, f"{source.name} has {len(source.key_columns)} key columns (streamapp "
                                     "reads a key of several columns in a stream-stream join, in JSON)")
    for column in source.key_columns:
        if source.key_format in ("KAFKA", "DELIMITED") and column.type not in KAFKA_KEY_TYPES:
            raise rejected(statement, f"The '{source.key_format}' format does not support type "
                                      f"'{column.type.split('(')[0].split('<')[0]}'")
