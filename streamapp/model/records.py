"""Read JSON values as ksqlDB's JSON format does: the rules the plan's decoders (``streamapp.sql.formats``) use.

Every rule is one of ksqlDB's Jackson reader (``KsqlJsonDeserializer``, ``JsonSerdeUtils.toLong/toDouble``
in the ksql repository). A record that cannot be read raises :class:`RecordError`, whose ``reason``
names the field and the value, so the worker dead-letters it instead of stopping; the decoders raise
nothing else, whatever the bytes. Where the worker departs from ksqlDB, it dead-letters.
See docs/reference/records.md#how-each-input-is-read (each rule) and docs/explanation/ksqldb-semantics.md.
"""
from __future__ import annotations

import json
import math
import re
import unicodedata
from array import array
from decimal import Decimal
from itertools import accumulate
from typing import Any, Callable

from ..errors import StreamappError

#: Longest part of a bad value quoted in a reason; keeps dead letters and logs readable.
QUOTE_LIMIT = 60

#: Largest record timestamp Kafka can store (a signed 64-bit integer of milliseconds).
MAX_TIMESTAMP_MS = 2**63 - 1
#: ksqlDB's BIGINT is a signed 64-bit integer (Java's long).
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
#: Deepest nesting of JSON arrays/objects a value may have.  Jackson, which ksqlDB reads
#: JSON with, refuses more than 1000 levels since 2.15 (500 in Jackson 3); Python's json
#: parser recurses and, under the worker's own stack, fails a little below 1000, so 500.
MAX_NESTING = 500
#: Longest JSON number Jackson reads (StreamReadConstraints.maxNumberLength, since 2.15).
MAX_NUMBER_LENGTH = 1000


class RecordError(StreamappError, ValueError):
    """A record the join cannot use; ``reason`` says which field is wrong and why."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 3] + "..."


#: A JSON string, escapes included: its brackets do not nest anything.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
#: Opening brackets -> +1, closing -> -1 (as a signed byte), anything else -> 0.
_BRACKETS = bytes(1 if c in b"[{" else 255 if c in b"]}" else 0 for c in range(256))


def nesting_depth(value: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count).

    Linear in the size of the value and free of recursion, so it is safe on any bytes;
    for text that is not valid JSON it is an estimate, which is enough to refuse it.
    """
    steps = _JSON_STRING.sub(b"", value).translate(_BRACKETS).replace(b"\x00", b"")
    return max(accumulate(array("b", steps)), default=0)


def _check_nesting(value: bytes) -> None:
    # Counting brackets is a fast C scan; only a value with many of them is measured properly.
    if value.count(b"[") + value.count(b"{") > MAX_NESTING:
        depth = nesting_depth(value)
        if depth > MAX_NESTING:
            raise RecordError(f"value nests arrays/objects {depth} deep, deeper than the limit of {MAX_NESTING}",
                              "value")


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone UTF-16 surrogate (from a ``\\ud800`` escape): not encodable as UTF-8."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# -- Jackson's reading of the JSON text ----------------------------------------------------------


def _number(text: str, make: Callable[[str], Any]) -> Any:
    if len(text.lstrip("-")) > MAX_NUMBER_LENGTH:
        raise ValueError(f"a number of {len(text)} characters, longer than Jackson's limit of {MAX_NUMBER_LENGTH}")
    return make(text)


def not_json_number(name: str) -> Any:
    """Jackson's refusal of a bare ``NaN``/``Infinity`` token (Python's JSON decoder would take it)."""
    raise ValueError(f"{name} is not a JSON number")


def _parse_int(text: str) -> int:
    return _number(text, int)


def _parse_float(text: str) -> Decimal:
    """Floats stay exact decimals, as ksqlDB reads them (USE_BIG_DECIMAL_FOR_FLOATS, exact BigDecimals)."""
    return _number(text, Decimal)


_JSON_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_int=_parse_int, parse_constant=not_json_number)


def decode_document(value: bytes | None) -> Any:
    """The JSON document a value holds, as Jackson reads it: floats as exact :class:`~decimal.Decimal`.

    None for a null value.  Refused (RecordError on ``value``): text that is not JSON in
    UTF-8/16/32, bare ``NaN``/``Infinity`` tokens (Python would take them, Jackson does not),
    numbers longer than Jackson's limit and nesting deeper than :data:`MAX_NESTING`.
    """
    if value is None:
        return None
    _check_nesting(value)
    encoding = json.detect_encoding(value)
    try:
        # Strict: json.loads(bytes) would let UTF-8-encoded surrogates (b"\\xed\\xa0\\x80") through.
        text = value.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
        raise RecordError(f"value is not {name} ({exc.reason} at byte {exc.start})", "value") from None
    try:
        # Jackson's readTree reads the first JSON value and ignores what follows (FAIL_ON_TRAILING_TOKENS is off).
        return _DECODER.raw_decode(text, len(text) - len(text.lstrip(_JSON_WHITESPACE)))[0]
    except RecursionError:
        raise RecordError("value nests arrays/objects too deep for the worker to parse", "value") from None
    except ValueError as exc:
        raise RecordError(f"value is not valid JSON ({_one_line(exc)}): {_quote(value)}", "value") from None


def decode_object(value: bytes | None) -> dict[str, Any] | None:
    """The JSON object a value must be; None for a tombstone (a null value, or JSON ``null``)."""
    decoded = decode_document(value)
    if decoded is None or isinstance(decoded, dict):
        return decoded
    kind = "number" if isinstance(decoded, (int, Decimal)) and not isinstance(decoded, bool) else type(decoded).__name__
    raise RecordError(f"value is a JSON {kind}, expected an object: {_quote(value)}", "value")


def column(obj: dict[str, Any], name: str) -> Any:
    """The field of column ``name`` (upper case): exactly named, else the last one equal to it upper-cased."""
    if name in obj:
        return obj[name]
    found = None
    for field, node in obj.items():
        if field.upper() == name:
            found = node
    return found


# -- ksqlDB's coercions (JsonSerdeUtils.toLong, toDouble; KsqlJsonDeserializer.processString) ----

_TWO_64 = 2**64
#: Long.parseLong: a sign, then decimal digits (Character.digit: any Unicode Nd digit of the BMP).
_JAVA_LONG = re.compile(r"[+-]?\d+")
#: Double.parseDouble after String.trim(): Java's decimal and hexadecimal floating-point literals.
_JAVA_DOUBLE = re.compile(r"([+-]?(?:NaN|Infinity))|([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?", re.ASCII)
_JAVA_HEX_DOUBLE = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?",
                              re.ASCII)
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
#: The zeros among the digits Long.parseLong takes (leading zeros do not count toward a long's 19 digits).
_ZERO_DIGITS = "".join(c for c in map(chr, range(0x10000)) if unicodedata.decimal(c, None) == 0)


def _as_long(node: int | Decimal) -> int:
    """JsonNode.asLong: the integer part, its low 64 bits as a signed long (Java's BigInteger.longValue)."""
    if isinstance(node, Decimal):
        sign, digits, exponent = node.as_tuple()
        if exponent >= 0:  # no fraction; only the low 64 bits of a huge exponent matter
            whole = int("".join(map(str, digits)) or "0") * pow(10, exponent, _TWO_64)
            node = -whole if sign else whole
        else:
            node = int(node)  # truncated toward zero
    return (node - BIGINT_MIN) % _TWO_64 + BIGINT_MIN


def parse_long(text: str) -> int | None:
    """Long.parseLong, or None where it throws."""
    if not _JAVA_LONG.fullmatch(text) or not text.isascii() and any(ord(c) > 0xFFFF for c in text):
        return None
    if len(text) > 20:  # int() converts at most 4300 digits: leading zeros go first, then a long has 19 at most
        digits = text.lstrip("+-").lstrip(_ZERO_DIGITS) or "0"
        if len(digits) > 19:
            return None
        text = text[0] + digits if text[0] in "+-" else digits
    value = int(text)
    return value if BIGINT_MIN <= value <= BIGINT_MAX else None


def parse_double(text: str) -> float | None:
    """Double.parseDouble, or None where it throws."""
    text = text.strip(_JAVA_TRIM)
    decimal = _JAVA_DOUBLE.fullmatch(text)
    if decimal:
        special, number = decimal.groups()
        return float(special.replace("Infinity", "inf")) if special else float(number)
    hexadecimal = _JAVA_HEX_DOUBLE.fullmatch(text)
    if hexadecimal:
        sign, body = hexadecimal.groups()
        try:
            return float.fromhex(sign + "0x" + body)
        except OverflowError:
            return -math.inf if sign == "-" else math.inf
    return None


def _to_double(node: int | Decimal) -> float:
    """JsonNode.doubleValue: the nearest double; a decimal zero has no sign (BigDecimal), too large is infinite."""
    if isinstance(node, Decimal) and node.is_zero():
        return 0.0
    try:
        return float(node)
    except OverflowError:
        return -math.inf if node < 0 else math.inf


def big_decimal_text(node: Decimal) -> str:
    """BigDecimal.toString (the same scientific-notation rule as Python's Decimal), without a zero's sign."""
    return str(node.copy_abs() if node.is_zero() else node)


_JACKSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JACKSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _jackson_string(text: str) -> str:
    """A JSON string as Jackson writes it to a String: short escapes, else \\u00XX in upper case."""
    return '"' + _JACKSON_ESCAPED.sub(
        lambda m: _JACKSON_ESCAPES.get(m.group(), f"\\u{ord(m.group()):04X}"), text) + '"'


def jackson_json(node: Any) -> str:
    """Compact JSON as ksqlDB's ObjectMapper writes a parsed value back (a VARCHAR read from an object)."""
    if node is None:
        return "null"
    if node is True or node is False:
        return "true" if node else "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, Decimal):
        return big_decimal_text(node)
    if isinstance(node, str):
        return _jackson_string(node)
    if isinstance(node, list):
        return "[" + ",".join(map(jackson_json, node)) + "]"
    return "{" + ",".join(f"{_jackson_string(k)}:{jackson_json(v)}" for k, v in node.items()) + "}"


def varchar_text(node: Any) -> str:
    """KsqlJsonDeserializer.processString: text as is, numbers and booleans as their text,
    an object as compact JSON, an array as ``[a, b]`` of its items' text (``null`` for a null)."""
    if isinstance(node, str):
        return node
    if isinstance(node, dict):
        return jackson_json(node)
    if isinstance(node, list):
        return "[" + ", ".join("null" if item is None else varchar_text(item) for item in node) + "]"
    if node is True or node is False:
        return "true" if node else "false"
    if isinstance(node, Decimal):
        return big_decimal_text(node)
    return str(node)


def _json_kind(node: Any) -> str:
    if node is True or node is False:
        return "a JSON boolean"
    return {dict: "a JSON object", list: "a JSON array", str: "a string"}.get(type(node), "a JSON value")


def _number_column(node: Any, name: str, sql_type: str, from_number: Callable[[Any], Any],
                   from_text: Callable[[str], Any], texts: str) -> Any:
    """A numeric column from its JSON node: None (NULL), a number, a string Java parses, else RecordError."""
    if node is None:
        return None
    if isinstance(node, (int, Decimal)) and not isinstance(node, bool):
        return from_number(node)
    if isinstance(node, str):
        value = from_text(node)
        if value is not None:
            return value
    raise RecordError(f"field {name!r} is {_quote(_plain(node))} ({_json_kind(node)}), expected {'an' if sql_type[0] in 'AEIOU' else 'a'} {sql_type}: "
                      f"a JSON number or a string of {texts}", name)


def bigint(node: Any, name: str) -> int | None:
    """A BIGINT column (JsonSerdeUtils.toLong); RecordError naming ``name`` where ksqlDB cannot read it."""
    return _number_column(node, name, "BIGINT", _as_long, parse_long, "a 64-bit integer")


INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def _as_int(node: int | Decimal) -> int:
    """JsonNode.intValue: the integer part, its low 32 bits as a signed int."""
    return (_as_long(node) - INT_MIN) % 2**32 + INT_MIN


def _parse_int_text(text: str) -> int | None:
    """Integer.parseInt, or None where it throws."""
    value = parse_long(text)
    return value if value is not None and INT_MIN <= value <= INT_MAX else None


def integer(node: Any, name: str) -> int | None:
    """An INT column (JsonSerdeUtils.toInteger); RecordError naming ``name`` where ksqlDB cannot read it."""
    return _number_column(node, name, "INT", _as_int, _parse_int_text, "a 32-bit integer")


def boolean(node: Any, name: str) -> bool | None:
    """A BOOLEAN column (JsonSerdeUtils.toBoolean): a JSON boolean, or the string true or false in any case."""
    if node is None or node is True or node is False:
        return node
    if isinstance(node, str) and node.lower() in ("true", "false"):
        return node.lower() == "true"
    raise RecordError(f"field {name!r} is {_quote(_plain(node))} ({_json_kind(node)}), expected a BOOLEAN: "
                      "true, false or a string of either", name)


def decimal(node: Any, name: str, precision: int, scale: int) -> Decimal | None:
    """A DECIMAL(precision, scale) column: a JSON number or a numeric string, at the column's scale (half up),
    refused when its integer digits do not fit (ksqlDB's DecimalUtil.ensureFit)."""
    if node is None:
        return None
    value: Decimal | None = None
    if isinstance(node, (int, Decimal)) and not isinstance(node, bool):
        value = Decimal(node)
    elif isinstance(node, str):
        try:
            value = Decimal(node.strip())
        except ArithmeticError:
            value = None
    if value is None or not value.is_finite():
        raise RecordError(f"field {name!r} is {_quote(_plain(node))} ({_json_kind(node)}), expected a "
                          f"DECIMAL({precision}, {scale})", name)
    try:
        fitted = value.quantize(Decimal(1).scaleb(-scale), rounding="ROUND_HALF_UP")
    except ArithmeticError:  # more digits than the context holds (1e400): far too many for any DECIMAL
        fitted = None
    if fitted is None or len(fitted.as_tuple().digits) > precision and not fitted.is_zero():
        raise RecordError(f"field {name!r} is {value}, which does not fit DECIMAL({precision}, {scale})", name)
    return fitted


def double(node: Any, name: str) -> float | None:
    """A DOUBLE column (JsonSerdeUtils.toDouble); RecordError naming ``name`` where ksqlDB cannot read it."""
    return _number_column(node, name, "DOUBLE", _to_double, parse_double, "a number")


def varchar(node: Any, name: str) -> str | None:
    """A VARCHAR column from its JSON node (None: NULL); RecordError when its text has no UTF-8 form."""
    if node is None:
        return None
    text = node if type(node) is str else varchar_text(node)
    if has_lone_surrogate(text):
        raise RecordError(f"field {name!r} holds a lone surrogate: no UTF-8 form, so ksqlDB could not write it "
                          f"({_quote(text)})", name)
    return text


def _plain(node: Any) -> Any:
    """A node as quoted in a reason: a Decimal as its JSON text."""
    return float(node) if isinstance(node, Decimal) and len(str(node)) < 20 else node


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= QUOTE_LIMIT * 2 else text[: QUOTE_LIMIT * 2 - 3] + "..."
