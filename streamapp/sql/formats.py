"""A source's key and value bytes <-> column values, in ksqlDB's KAFKA, JSON, DELIMITED and NONE formats.

One :class:`Codec` per source (or sink) of a plan, built once: decoding reads with
ksqlDB's JSON coercions (:mod:`streamapp.model.records`), so every executor reads a
record the same way, and a record that cannot be read raises
:class:`~streamapp.model.records.RecordError` naming the field and the value.

- KAFKA key: INT 4 bytes and BIGINT 8 bytes big-endian, DOUBLE 8-byte IEEE-754,
  STRING UTF-8, BYTES as they are (``KafkaSerdeFactory`` in the ksql repository);
- JSON: a single-column key is the bare JSON value, a key of several columns an object of them
  (ksqlDB's STRUCT key; :meth:`Codec.decode_key` gives it as a dict by column); a value is an object of
  its columns, or the bare value of its one column with ``WRAP_SINGLE_VALUE=false``;
- DELIMITED: comma-separated text, an empty field NULL;
- NONE: no key (whatever bytes the record has are ignored).
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import struct
from decimal import Decimal
from typing import Any, Callable

from ..model.records import (BIGINT_MAX, BIGINT_MIN, INT_MAX, INT_MIN, MAX_NESTING, MAX_NUMBER_LENGTH, RecordError,
                             big_decimal_text, bigint, boolean, column, decimal, decode_document, decode_object, double,
                             has_lone_surrogate, integer, not_json_number, parse_double, parse_long, varchar)
from . import plan as p
from .syntax import parse_type

#: Column type -> reads that type's JSON node (node, column name) -> value.
_READERS: dict[str, Callable[[Any, str], Any]] = {
    "BIGINT": bigint, "INT": integer, "DOUBLE": double, "STRING": varchar, "BOOLEAN": boolean,
}


#: Column types whose common JSON value the fast path takes as it is, by kind.
_KINDS = {"STRING": 0, "BIGINT": 1, "INT": 2, "DOUBLE": 3, "BOOLEAN": 4}
#: A DECIMAL column's kind in a fast-path spec: its reader (:func:`reader`) takes a JSON number read as Decimal.
_Kind = int | Callable[[Any, str], Any]
#: The fast path's parsers refuse the bare NaN and Infinity tokens, as Jackson does (Python's would take them).
_PLAIN = json.JSONDecoder(parse_constant=not_json_number)
_PLAIN_LOADS = _PLAIN.decode
#: The fast path's parser for a source with DECIMAL columns: numbers with a fraction or exponent as exact
#: Decimals, as Jackson reads them (a float would round 1.0049999999999999 to 1.005 before the scale does).
_EXACT = json.JSONDecoder(parse_float=Decimal, parse_constant=not_json_number)
_EXACT_LOADS = _EXACT.decode
#: The standard library's C scanners behind ``loads``: a text that is one JSON value with nothing around it is read
#: by one call; anything else (whitespace, extra data, an error) goes through ``loads``, which says what it is.
_SCANS = {_PLAIN_LOADS: json.scanner.make_scanner(_PLAIN),  # type: ignore[attr-defined]
          _EXACT_LOADS: json.scanner.make_scanner(_EXACT)}  # type: ignore[attr-defined]
#: The characters of a JSON number.
_NUMBER_CHARS = b"-+.0123456789eE"
#: A run of number characters longer than Jackson's longest number: such a value takes ksqlDB's rules, which
#: refuse the number (the fast path's parsers do not count digits; a long string of digits is a false alarm).
_LONG_NUMBER = re.compile(rb"[-+.0-9eE]{%d}" % (MAX_NUMBER_LENGTH + 1))


def _may_hold_long_number(data: bytes) -> bool:
    """Whether ``data`` may hold a number longer than Jackson's limit.  Such a run covers one of the bytes at every
    ``MAX_NUMBER_LENGTH``-th position, so those few bytes are looked at first: most long values end there."""
    probes = data[MAX_NUMBER_LENGTH::MAX_NUMBER_LENGTH]
    return len(probes.translate(None, _NUMBER_CHARS)) < len(probes) and _LONG_NUMBER.search(data) is not None


def _kind(column_type: str) -> _Kind | None:
    found = _KINDS.get(column_type)
    return reader(column_type) if found is None and column_type.startswith("DECIMAL") else found


#: Each kind's check of a field's value ``v`` (None: not plain), as :func:`_plain_reader` writes it.
_CHECKS = {
    0: ["if type(v) is not str or not (v.isascii() or not has_lone_surrogate(v)): return None"],
    1: ["if type(v) is not int or not BIGINT_MIN <= v <= BIGINT_MAX: return None"],
    2: ["if type(v) is not int or not INT_MIN <= v <= INT_MAX: return None"],
    3: ["t = type(v)",
        "if t is Decimal: v = float(v); t = float",  # read exactly (a source with DECIMAL columns): Jackson's double
        "if t is float:",
        "    if v == 0.0 or v - v != 0.0: return None",  # a zero's sign is ksqlDB's to decide; NaN, infinities
        "elif t is int and BIGINT_MIN <= v <= BIGINT_MAX: v = float(v)",
        "else: return None"],
    4: ["if type(v) is not bool: return None"],
}


def _plain_reader(spec: tuple[tuple[str, str, _Kind], ...]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """``row(obj)``: the row of an object holding exactly ``spec``'s fields, each already its column's value as
    ksqlDB reads it, else None; generated for one spec, as :mod:`dataclasses` generates its methods.

    Exact type checks only: a number in a string, a float for a BIGINT, -0.0, NaN and anything else go
    field by field (ksqlDB's rules), which give the same answer for what passes here.  A DECIMAL's number
    goes through its column's reader, the same function the field-by-field path calls.
    """
    namespace: dict[str, Any] = {"Decimal": Decimal, "has_lone_surrogate": has_lone_surrogate, "INT_MIN": INT_MIN,
                                 "INT_MAX": INT_MAX, "BIGINT_MIN": BIGINT_MIN, "BIGINT_MAX": BIGINT_MAX}
    lines = []
    for n, (name, field, kind) in enumerate(spec):
        namespace[f"f{n}"], namespace[f"n{n}"] = field, name
        lines.append(f"v = obj[f{n}]")
        if type(kind) is int:
            lines += _CHECKS[kind]
        else:
            namespace[f"k{n}"] = kind
            lines += ["if type(v) is not Decimal and type(v) is not int: return None", f"v = k{n}(v, n{n})"]
        lines.append(f"v{n} = v")
    row = ", ".join(f"n{n}: v{n}" for n in range(len(spec)))
    source = "def row(obj):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {{{row}}}\n"
    exec(source, namespace)  # noqa: S102 - names, fields and readers are in the namespace, never in the source
    return namespace["row"]  # type: ignore[no-any-return]


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


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is written by json_text")


#: The standard library's C encoder, built once: compact, no ASCII escaping, NaN and anything not plain refused.
_ENCODER = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _refuse, json.encoder.encode_basestring, None, ":", ",", False, False, False)


def _compact(value: Any) -> str:
    """Compact JSON of plain values (strings, numbers, booleans, nulls): byte for byte what :func:`json_text`
    writes for them; TypeError or ValueError for anything else."""
    return "".join(_ENCODER(value, 0))


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


def plain_json(value: Any) -> str:
    """A plain value (a string, a finite number, a boolean, a null) as :func:`json_text` writes it; TypeError for
    anything else (a DECIMAL, a NaN or an infinity, a nested value), which the caller writes with json_text."""
    kind = type(value)
    if kind is str:
        return _encode_string(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value - value == 0.0:  # finite
            return float.__repr__(value)
        raise TypeError("a non-finite DOUBLE is written by json_text")
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    raise TypeError(f"{kind.__name__} is written by json_text")


_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]


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
        #: A key of several columns (JSON only: the planner refuses the rest): each column's name and reader.
        self._key_fields = tuple((c.name, reader(c.type)) for c in source.key_columns) \
            if len(source.key_columns) > 1 else ()
        self._columns = tuple((c.name, reader(c.type), c.type) for c in source.value_columns)
        self._unwrapped = source.wrap_single_value is False
        #: The value columns' names in order: a row of exactly these, in this order, is written by the C encoder.
        self._names = tuple(c.name for c in source.value_columns)
        kinds = [_kind(c.type) for c in source.value_columns]
        self._loads = _EXACT_LOADS if any(type(k) is not int for k in kinds if k is not None) else _PLAIN_LOADS
        plain = self.value_format == "JSON" and not self._unwrapped and bool(kinds) and None not in kinds
        lower = [c.name.lower() for c in source.value_columns]
        #: The fast path's specs: the field names of an object written with the columns' own names, or in lower
        #: case (what most producers write), each with its column and the kind of its plain JSON value.
        self._fast: list[tuple[Any, Callable[[dict[str, Any]], dict[str, Any] | None]]] = [] if not plain else [
            (dict.fromkeys(fields).keys(), _plain_reader(tuple(zip(self._names, fields, kinds))))  # type: ignore
            for fields in (lower, list(self._names)) if len(set(fields)) == len(fields)]
        self._scan = _SCANS[self._loads]
        self._string_key = (self.key_format == "KAFKA" and self.key_column is not None
                            and self.key_column.type == "STRING")

    # ---- keys --------------------------------------------------------------------------------------------------------

    def decode_key(self, data: bytes | None) -> Any:
        """The key column's value (None: a null key, or a source without key columns); a key of several columns:
        a dict of their values by name (each None in a null key)."""
        if self._key_fields:
            return self._decode_key_fields(data)
        if self._string_key and data is not None:  # the common key: its UTF-8, which strict decoding checks
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
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

    def _decode_key_fields(self, data: bytes | None) -> dict[str, Any]:
        """A JSON object key as ksqlDB reads a STRUCT key: each column from its field (named as the column, or in
        another case), a missing field NULL."""
        if data is None or self.key_format == "NONE":
            return {name: None for name, _ in self._key_fields}
        document = decode_document(data)
        if document is None:
            return {name: None for name, _ in self._key_fields}
        if not isinstance(document, dict):
            raise RecordError(f"key {data[:60]!r} is not a JSON object: a key of the columns "
                              f"{', '.join(name for name, _ in self._key_fields)} is one", "key")
        return {name: read(column(document, name.upper()) if name not in document else document[name], name)
                for name, read in self._key_fields}

    def encode_key(self, value: Any) -> bytes | None:
        if self._key_fields:
            if value is None or self.key_format == "NONE":
                return None
            return ("{" + ",".join(f"{_encode_string(n)}:{json_text(value.get(n))}" for n, _ in self._key_fields)
                    + "}").encode("utf-8")
        if self._string_key and type(value) is str:  # the common key: its UTF-8
            return value.encode("utf-8")
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
        """The value columns by name; None for a null value (a table's tombstone, a stream record ksqlDB drops).

        The common JSON value (an object with exactly one field per column, each named as the column or
        in lower case, each of its column's own JSON type) takes a fast path of exact type checks; anything
        else goes through ksqlDB's rules field by field, which give the same answer.
        """
        if data is None:
            return None
        if self._fast and (len(data) <= MAX_NESTING or data.count(b"[") + data.count(b"{") <= MAX_NESTING) and (
                len(data) <= MAX_NUMBER_LENGTH or not _may_hold_long_number(data)):
            try:
                text = data.decode("utf-8")
                try:
                    obj, end = self._scan(text, 0)
                except StopIteration:  # not a value where it starts (whitespace, an error): loads says which
                    end = -1
                if end != len(text):
                    obj = self._loads(text)
            except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
                obj = None
            if type(obj) is dict:
                keys = obj.keys()
                for fields, plain_row in self._fast:
                    if keys == fields:
                        try:
                            row = plain_row(obj)
                        except RecordError:  # every refusal is ksqlDB's rules', below: they may find another first
                            row = None
                        if row is not None:
                            return row
                        break
        if self.value_format == "DELIMITED":
            return self._decode_delimited(data)
        if self._unwrapped:
            document = decode_document(data)
            if document is None:
                return None
            name, read, _ = self._columns[0]
            return {name: read(document, name)}
        document = decode_object(data)  # an object, or a RecordError naming what it is instead
        if document is None:
            return None
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
        if tuple(row) == self._names:
            try:  # strings, numbers, booleans and nulls: the C encoder writes them as json_text does
                return _compact(row).encode("utf-8")
            except (TypeError, ValueError):  # a DECIMAL, a NaN or an infinity: json_text writes it as ksqlDB does
                pass
        return ("{" + ",".join(f"{json.encoder.encode_basestring(n)}:{json_text(row.get(n))}"  # type: ignore[attr-defined]
                               for n, _, _ in self._columns) + "}").encode("utf-8")


def _utf8(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{field} {data[:20]!r} is not UTF-8 ({exc.reason} at byte {exc.start})", field) from None
