"""A source's key and value bytes <-> column values, in ksqlDB's KAFKA, JSON, DELIMITED and NONE formats.

One :class:`Codec` per source (or sink) of a plan, built once: decoding reads with
ksqlDB's JSON coercions (:mod:`streamapp.model.records`), so every executor reads a
record the same way, and a record that cannot be read raises
:class:`~streamapp.model.records.RecordError` naming the field and the value.

- KAFKA key: INT 4 bytes and BIGINT 8 bytes big-endian, DOUBLE 8-byte IEEE-754,
  STRING UTF-8, BYTES as they are (``KafkaSerdeFactory`` in the ksql repository);
- JSON: a single-column key is the bare JSON value; a value is an object of its
  columns, or the bare value of its one column with ``WRAP_SINGLE_VALUE=false``;
- DELIMITED: comma-separated text, an empty field NULL;
- NONE: no key (whatever bytes the record has are ignored).
"""
from __future__ import annotations

import csv
import io
import json
import math
import struct
from decimal import Decimal
from typing import Any, Callable

from ..model.records import (RecordError, big_decimal_text, bigint, boolean, column, decimal, decode_document, double,
                             integer, parse_double, parse_long, varchar)
from . import plan as p
from .syntax import parse_type

#: Column type -> reads that type's JSON node (node, column name) -> value.
_READERS: dict[str, Callable[[Any, str], Any]] = {
    "BIGINT": bigint, "INT": integer, "DOUBLE": double, "STRING": varchar, "BOOLEAN": boolean,
}
_KAFKA_STRUCTS = {"INT": struct.Struct(">i"), "BIGINT": struct.Struct(">q"), "DOUBLE": struct.Struct(">d")}


def reader(column_type: str) -> Callable[[Any, str], Any]:
    """The function that reads a JSON node as a column of ``column_type`` (nested types: the node as it is)."""
    found = _READERS.get(column_type)
    if found is not None:
        return found
    parsed = parse_type(column_type)
    if parsed.base == "DECIMAL":
        precision, scale = parsed.params
        return lambda node, name: decimal(node, name, precision, scale)  # type: ignore[arg-type]
    return lambda node, name: node


def _text_node(text: str, column_type: str) -> Any:
    """A DELIMITED field (text) as the JSON node ksqlDB's reader would see for that type."""
    if text == "":
        return None
    if column_type in ("INT", "BIGINT"):
        number = parse_long(text)
        return text if number is None else number
    if column_type == "DOUBLE" or column_type.startswith("DECIMAL"):
        number = parse_double(text)
        return text if number is None else Decimal(text.strip()) if math.isfinite(number) else text
    return text


# ---- writing values as ksqlDB writes them -----------------------------------------------------------------------------

_NON_FINITE = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def json_text(node: Any) -> str:
    """Compact JSON of a column value as ksqlDB's JSON format writes it (a NaN DOUBLE as ``"NaN"``)."""
    kind = type(node)
    if kind is str:
        return json.encoder.encode_basestring(node)  # type: ignore[attr-defined]
    if node is None:
        return "null"
    if kind is bool:
        return "true" if node else "false"
    if kind is int:
        return int.__repr__(node)
    if kind is float:
        return float.__repr__(node) if math.isfinite(node) else _NON_FINITE[repr(node)]
    if kind is Decimal:
        return big_decimal_text(node)
    if kind is list:
        return "[" + ",".join(map(json_text, node)) + "]"
    if kind is dict:
        return "{" + ",".join(f"{json.encoder.encode_basestring(str(k))}:{json_text(v)}"  # type: ignore[attr-defined]
                              for k, v in node.items()) + "}"
    return json.dumps(node)


def _delimited_field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return big_decimal_text(value)
    return str(value)


class Codec:
    """Reads and writes one source's records: key bytes <-> the key value, value bytes <-> a row of columns."""

    def __init__(self, source: p.Source) -> None:
        self.source = source
        self.key_format = source.key_format
        self.value_format = source.value_format
        self.key_column = source.key_columns[0] if source.key_columns else None
        self._key_reader = reader(self.key_column.type) if self.key_column else None
        self._columns = tuple((c.name, reader(c.type), c.type) for c in source.value_columns)
        self._unwrapped = source.wrap_single_value is False

    # ---- keys --------------------------------------------------------------------------------------------------------

    def decode_key(self, data: bytes | None) -> Any:
        """The key column's value (None: a null key, or a source without key columns)."""
        column_ = self.key_column
        if column_ is None or data is None or self.key_format == "NONE":
            return None
        name = column_.name
        if self.key_format == "KAFKA":
            fixed = _KAFKA_STRUCTS.get(column_.type)
            if fixed is not None:
                if len(data) != fixed.size:
                    raise RecordError(f"key {data[:20]!r} is {len(data)} bytes: a KAFKA-format {column_.type} key "
                                      f"{name} is {fixed.size}", "key")
                return fixed.unpack(data)[0]
            if column_.type == "BYTES":
                return data
            return varchar(_utf8(data, "key"), name)
        text = _utf8(data, "key")
        if self.key_format == "DELIMITED":
            return self._key_reader(_text_node(text, column_.type), name)  # type: ignore[misc]
        return self._key_reader(decode_document(data), name)  # type: ignore[misc]

    def encode_key(self, value: Any) -> bytes | None:
        column_ = self.key_column
        if value is None or column_ is None or self.key_format == "NONE":
            return None
        if self.key_format == "KAFKA":
            fixed = _KAFKA_STRUCTS.get(column_.type)
            if fixed is not None:
                return fixed.pack(value)
            return value if isinstance(value, bytes) else str(value).encode("utf-8")
        if self.key_format == "DELIMITED":
            return _delimited_field(value).encode("utf-8")
        return json_text(value).encode("utf-8")

    # ---- values ------------------------------------------------------------------------------------------------------

    def decode_value(self, data: bytes | None) -> dict[str, Any] | None:
        """The value columns by name; None for a null value (a table's tombstone, a stream record ksqlDB drops)."""
        if data is None:
            return None
        if self.value_format == "DELIMITED":
            return self._decode_delimited(data)
        document = decode_document(data)
        if document is None:
            return None
        if self._unwrapped:
            name, read, _ = self._columns[0]
            return {name: read(document, name)}
        if not isinstance(document, dict):
            raise RecordError(f"value is {json_text(document)[:60]}, expected a JSON object", "value")
        return {name: read(column(document, name.upper()) if name not in document else document[name], name)
                for name, read, _ in self._columns}

    def _decode_delimited(self, data: bytes) -> dict[str, Any]:
        text = _utf8(data, "value")
        fields = next(csv.reader(io.StringIO(text)), [])
        if len(fields) != len(self._columns):
            raise RecordError(f"value {text[:60]!r} has {len(fields)} fields, the source has "
                              f"{len(self._columns)} value columns", "value")
        return {name: read(_text_node(field, type_), name) for (name, read, type_), field in zip(self._columns, fields)}

    def encode_value(self, row: dict[str, Any] | None) -> bytes | None:
        if row is None:
            return None
        if self.value_format == "DELIMITED":
            out = io.StringIO()
            csv.writer(out, lineterminator="").writerow([_delimited_field(row.get(n)) for n, _, _ in self._columns])
            return out.getvalue().encode("utf-8")
        if self._unwrapped:
            return json_text(row.get(self._columns[0][0])).encode("utf-8")
        return ("{" + ",".join(f"{json.encoder.encode_basestring(n)}:{json_text(row.get(n))}"  # type: ignore[attr-defined]
                               for n, _, _ in self._columns) + "}").encode("utf-8")


def _utf8(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{field} {data[:20]!r} is not UTF-8 ({exc.reason} at byte {exc.start})", field) from None
