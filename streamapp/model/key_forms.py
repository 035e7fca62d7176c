"""The same key in the two serializations clients mix up: raw bytes and a JSON string.

Faust and Quix Streams serialize string keys as JSON by default (``b'"user1"'``)
while ksqlDB's KAFKA format and most producers write the raw bytes
(``b'user1'``); the two hash to different partitions and never compare equal.
Quoting is ASCII-escaped (``é`` -> ``"\u00e9"``), as Faust's JSON key serializer writes it; the
fingerprint and the web views both quote through :func:`json_quoted`.
"""
from __future__ import annotations

import json
import re

#: Bytes that ``json.dumps`` would escape; a key without them is quoted as is (the fast path).
_PLAIN = re.compile(rb'[\x00-\x1f"\\\x7f-\xff]')


def json_quoted(key: bytes) -> bytes | None:
    """The key as a JSON string (what a JSON key serializer writes); None when it is not UTF-8."""
    if _PLAIN.search(key) is None:
        return b'"' + key + b'"'
    try:
        return json.dumps(key.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        return None


def json_unquoted(key: bytes) -> bytes | None:
    """The UTF-8 string inside a JSON-string key; None when the key is not exactly a JSON string."""
    if len(key) < 2 or key[:1] != b'"' or key[-1:] != b'"':
        return None
    if _PLAIN.search(key, 1, len(key) - 1) is None:
        return key[1:-1]
    try:
        value = json.loads(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value.encode("utf-8") if isinstance(value, str) else None
