"""Validation of the web API's inputs: every bad value becomes a 400 naming the field and the value.

Pure functions over plain strings, so every rule is tested without a server.
"""
from __future__ import annotations

import math
import re
import struct
from datetime import datetime, timezone
from typing import Mapping
from urllib.parse import unquote_to_bytes

from ...errors import StreamappError
from ...model.records import RecordError
from ...sql import plan as p
from ...sql.formats import Codec, reader
from ..window_stores import MAX_TIME, MIN_TIME

#: Largest page ``/tables/{table}`` returns; a bigger ``limit`` is refused, not silently clipped.
MAX_LIMIT = 500
DEFAULT_LIMIT = 50
#: Largest partition count the calculator accepts (Kafka's practical ceiling per topic).
MAX_PARTITIONS = 100_000
#: Longest key accepted in a path, in bytes; Kafka keys can be bigger but a lookup key is not.
MAX_KEY_BYTES = 4096
KEY_ENCODINGS = ("utf-8", "hex")


class WebInputError(StreamappError):
    """A request parameter the API cannot use; ``field`` names it, the message says why."""

    status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


#: An integer as a URL writes one: ASCII digits (Python's int() also reads '１２' and '1_000').
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _int(field: str, raw: str, low: int, high: int) -> int:
    try:
        if not _INTEGER.fullmatch(raw.strip()):
            raise ValueError(raw)
        value = int(raw.strip())  # ValueError past Python's 4,300 digits too
    except ValueError:
        raise WebInputError(field, f"{field}={raw[:80]!r}: expected an integer") from None
    if not low <= value <= high:
        raise WebInputError(field, f"{field}={value}: must be between {low} and {high}")
    return value


def required(query: Mapping[str, str], field: str) -> str:
    raw = query.get(field)
    if raw is None or raw.strip() == "":
        raise WebInputError(field, f"{field} is required")
    return raw


def partitions(raw: str | None) -> int:
    if raw is None or raw.strip() == "":
        raise WebInputError("partitions", "partitions is required, e.g. ?partitions=6")
    return _int("partitions", raw, 1, MAX_PARTITIONS)


def partition(raw: str, num_partitions: int) -> int:
    return _int("partition", raw, 0, num_partitions - 1)


def limit(raw: str | None) -> int:
    return DEFAULT_LIMIT if raw is None or raw.strip() == "" else _int("limit", raw, 1, MAX_LIMIT)


def _one_of(field: str, raw: str, names: list[str], none: str) -> str:
    if raw not in names:
        raise WebInputError(field, f"{field}={raw!r}: expected one of {', '.join(names) or none}")
    return raw


def table(raw: str, names: list[str]) -> str:
    """One of the declared tables' names."""
    return _one_of("table", raw, names, "(none: no table)")


def store(raw: str, names: list[str]) -> str:
    """One of the windowed joins' stores' names."""
    return _one_of("store", raw, names, "(none: no windowed join)")


def time_bound(field: str, raw: str) -> int:
    """A time in epoch milliseconds: the integer itself, or an ISO-8601 time (UTC unless it names its offset)."""
    text = raw.strip()
    if text.lstrip("-").isdigit() and len(text) > _LONGEST_TIME:  # int() refuses 4,300 digits; ISO would read them
        raise WebInputError(field, f"{field}={raw[:80]!r}… ({len(text)} digits): must be between {MIN_TIME} and "
                                   f"{MAX_TIME}")
    try:
        if not _INTEGER.fullmatch(text):
            raise ValueError(text)
        value = int(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise WebInputError(field, f"{field}={raw[:80]!r}: expected milliseconds since the epoch or an ISO-8601 "
                                       f"time, e.g. 2026-11-27T06:00:00Z") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
        value = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if not MIN_TIME <= value <= MAX_TIME:
        raise WebInputError(field, f"{field}={value}: must be between {MIN_TIME} and {MAX_TIME}")
    return value


#: Digits of the longest time a window store holds, its sign included.
_LONGEST_TIME = max(len(str(MIN_TIME)), len(str(MAX_TIME)))


def time_range(query: Mapping[str, str]) -> tuple[int | None, int | None]:
    """The ``from`` and ``to`` of a window store's read, both included (None: not given, no bound)."""
    bounds = {field: time_bound(field, raw) if (raw := query.get(field, "")).strip() else None
              for field in ("from", "to")}
    start, end = bounds["from"], bounds["to"]
    if start is not None and end is not None and start > end:
        raise WebInputError("from", f"from={query['from']!r} is after to={query['to']!r}: an empty range")
    return start, end


def path_key(raw_path: str, field: str = "key") -> str:
    """The last segment of a path as the client sent it (``request.raw_path``), its percent escapes undone as UTF-8.

    The router's own decoding cannot be used: it keeps an escape that is not UTF-8 as
    its text, so ``%ff`` and ``%25ff`` would look up the same key; invalid escapes are a 400 here.
    """
    segment = raw_path.split("?", 1)[0].rsplit("/", 1)[-1]
    return _unescaped(field, segment, f"{field}={segment[:80]!r}")


def _unescaped(field: str, escaped: str, shown: str) -> str:
    """``escaped``'s percent escapes undone as UTF-8 text, or a 400 naming ``field`` that starts with ``shown``."""
    try:
        return unquote_to_bytes(escaped).decode("utf-8")
    except UnicodeDecodeError:
        raise WebInputError(field, f"{shown}: its percent escapes are not UTF-8 text; give the key's bytes "
                                   f"in hex with encoding=hex") from None


def key(raw: str, encoding: str | None = None, field: str = "key") -> bytes:
    """Key bytes from a path segment: UTF-8 text (ksqlDB STRING keys) or hex for any bytes."""
    encoding = (encoding or "utf-8").lower()
    if encoding not in KEY_ENCODINGS:
        raise WebInputError("encoding", f"encoding={encoding!r}: expected one of {', '.join(KEY_ENCODINGS)}")
    if raw == "":
        raise WebInputError(field, f"{field} is empty: give at least one character")
    if encoding == "hex":
        try:
            data = bytes.fromhex(raw)
        except ValueError:
            raise WebInputError(field, f"{field}={raw[:80]!r}: not hex (encoding=hex wants pairs of 0-9a-f)") from None
    else:
        data = raw.encode("utf-8", "surrogateescape")
    if len(data) > MAX_KEY_BYTES:
        raise WebInputError(field, f"{field} is {len(data)} bytes: at most {MAX_KEY_BYTES} are accepted")
    if not data:
        raise WebInputError(field, f"{field} is empty: give at least one byte")
    return data


def table_key(raw: str, encoding: str | None, source: p.Source, field: str = "key") -> bytes:
    """A table's key bytes from a path segment: its key column's value as text, encoded as the table stores it
    (a STRING key's UTF-8, a BIGINT's 8 bytes, ...), or any bytes in hex (``encoding=hex``)."""
    column = source.key_columns[0] if source.key_columns else None
    if (encoding or "").lower() == "hex" or column is None or (
            column.type in ("STRING", "BYTES") and source.key_format == "KAFKA"):  # the text's own bytes
        return key(raw, encoding, field)
    if encoding is not None and encoding.lower() not in KEY_ENCODINGS:
        key(raw, encoding, field)  # refuses the encoding
    if not raw.strip():
        raise WebInputError(field, f"{field} is empty: give a {column.type}")
    text = raw if column.type == "STRING" else raw.strip()
    try:
        value = reader(column.type)(text, column.name)
        if isinstance(value, float) and not math.isfinite(value):  # 1e309: JSON has no infinity, no key holds one
            raise ValueError(value)
        data = Codec(source).encode_key(value)
    except (RecordError, ValueError, OverflowError, struct.error):
        raise WebInputError(field, f"{field}={raw[:80]!r}: not a {column.type} ({source.name}'s key "
                                   f"{column.name})") from None
    assert data is not None
    return data


def key_text(data: bytes, codec: Codec) -> str:
    """A stored key as the text ``/tables/{table}/{key}`` takes back (hex when it does not decode)."""
    try:
        value = codec.decode_key(data)
    except RecordError:
        return data.hex()
    if isinstance(value, str):  # a JSON key's string without its quotes: the text it is looked up by
        return value
    return data.decode("utf-8", "replace") if isinstance(value, bytes) or value is None else str(value)


def after(raw: str | None, source: p.Source, encoding: str | None = None) -> bytes | None:
    """The ``after`` cursor of ``/tables/{table}``: the last key of the previous page (in hex with ``encoding=hex``,
    as ``next_after_hex`` gives it)."""
    if raw is None or raw == "":
        return None
    return table_key(raw, encoding, source, field="after")


def query_parts(raw_query: str) -> list[tuple[str, str]]:
    """(name, ``name=value`` as sent) of each parameter of a raw query string, the name's escapes undone."""
    return [(unquote_to_bytes(part.partition("=")[0].replace("+", " ")).decode("utf-8", "replace"), part)
            for part in raw_query.split("&") if part]


def query_text(raw_query: str, name: str) -> str | None:
    """The query parameter ``name`` read from the raw query string, its escapes as UTF-8 or a 400: aiohttp's
    ``request.query`` turns ``%ff`` into U+FFFD, a different key, where a path segment's escapes are refused.
    Only ``name``'s value is judged: a bad escape in another parameter is not its fault."""
    for found, part in query_parts(raw_query):
        if found == name:
            return _unescaped(name, part.partition("=")[2].replace("+", " "), repr(part[:80]))
    return None
