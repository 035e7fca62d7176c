"""How a topic's keys are encoded, and the one logical key behind each encoding.

A join compares key *bytes*, and a partitioner hashes them, so ``u1`` written as
raw UTF-8, as a JSON string (``"u1"``, Faust's default) and as Avro in the
Confluent wire format (``00 <schema id> 04 75 31``) are three different keys to
Kafka though they are one user.  The doctor needs both views: the encoding (to
say which serializer wrote a topic) and the logical key (to see that two topics
hold the same users).  Everything here is pure: no Schema Registry is asked, the
payload after the schema id is read by its shape alone.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..model.key_forms import json_unquoted

AVRO = "confluent_avro"
PROTOBUF = "confluent_protobuf"
JSON_SCHEMA = "confluent_json_schema"
JSON_STRING = "json_string"
JSON_NUMBER = "json_number"
UTF8 = "utf8_string"
INT64 = "int64_be"
INT32 = "int32_be"
OPAQUE = "opaque_bytes"

#: Strictest first: a topic's encoding is the first that reads (nearly) all of its keys.
#: JSON before UTF-8 (``"u1"`` is UTF-8 too); UTF-8 before the integers (``order-01`` is 8 bytes).
PREFERENCE = (AVRO, PROTOBUF, JSON_SCHEMA, JSON_STRING, JSON_NUMBER, UTF8, INT64, INT32, OPAQUE)
CONFLUENT = (AVRO, PROTOBUF, JSON_SCHEMA)

LABELS = {
    AVRO: "Confluent wire format, Avro",
    PROTOBUF: "Confluent wire format, Protobuf",
    JSON_SCHEMA: "Confluent wire format, JSON Schema",
    JSON_STRING: "JSON-quoted string",
    JSON_NUMBER: "JSON number",
    UTF8: "UTF-8 string",
    INT64: "8-byte big-endian integer",
    INT32: "4-byte big-endian integer",
    OPAQUE: "opaque bytes",
}

#: Share of sampled keys an encoding must read to be named the topic's; the rest are reported as mixed.
MIN_SHARE = 0.95

_JSON_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: The magic byte and 4-byte schema id of the Confluent wire format.
_WIRE_HEADER = 5


@dataclass(frozen=True)
class Reading:
    """One way to read a key: its encoding, the logical key (text), and the schema id of wire-format keys."""

    encoding: str
    value: str
    schema_id: int | None = None


def _text(value: Any) -> str:
    """The logical key as text: strings as they are, integers in decimal, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def opaque_value(key: bytes) -> str:
    """How a key no encoding reads is shown and compared: its bytes in hex."""
    return "0x" + key.hex()


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """An unsigned LEB128 varint at ``pos``: (value, next position), None when cut off or over 64 bits."""
    value, shift = 0, 0
    while pos < len(data) and shift < 70:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _avro(payload: bytes) -> str | None:
    """An Avro string or long filling the whole payload (the two key types Avro keys are in practice)."""
    head = _varint(payload, 0)
    if head is None:
        return None
    number, pos = head
    if pos == len(payload):
        return str(_zigzag(number))
    length = _zigzag(number)
    if length >= 0 and pos + length == len(payload):
        try:
            return payload[pos:].decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _protobuf(payload: bytes) -> str | None:
    """Confluent's message indexes (zigzag count, ``[0]`` as one 0 byte), then a message read by its wire types.

    A message of one string or integer field is that value; any other message is its bytes in hex.
    """
    head = _varint(payload, 0)
    if head is None:
        return None
    count, pos = _zigzag(head[0]), head[1]
    for _ in range(count):
        index = _varint(payload, pos)
        if index is None:
            return None
        pos = index[1]
    if count < 0 or pos >= len(payload):
        return None
    fields = _protobuf_fields(payload, pos)
    if fields is None:
        return None
    if len(fields) == 1:
        return fields[0]
    return opaque_value(payload[pos:])


def _protobuf_fields(data: bytes, pos: int) -> list[str] | None:
    """Each field's value as text (strings decoded, varints in decimal); None when the bytes are no message."""
    values = []
    while pos < len(data):
        tag = _varint(data, pos)
        if tag is None or tag[0] >> 3 == 0:
            return None
        wire, pos = tag[0] & 7, tag[1]
        if wire == 0:
            number = _varint(data, pos)
            if number is None:
                return None
            values.append(str(number[0]))
            pos = number[1]
        elif wire == 2:
            length = _varint(data, pos)
            if length is None or length[1] + length[0] > len(data):
                return None
            raw = data[length[1]:length[1] + length[0]]
            try:
                values.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                values.append(opaque_value(raw))
            pos = length[1] + length[0]
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                return None
            values.append(str(int.from_bytes(data[pos:pos + width], "little")))
            pos += width
        else:
            return None
    return values


def _json_scalar(payload: bytes) -> str | None:
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return _text(value)


def _wire_payload(key: bytes) -> bytes | None:
    """The payload after the Confluent wire format's header; None when ``key`` is not in that format."""
    if len(key) <= _WIRE_HEADER or key[0] != 0:
        return None
    if key[1:_WIRE_HEADER] == b"\0\0\0\0":  # Schema Registry's ids start at 1: an integer key with leading zero bytes
        return None
    return key[_WIRE_HEADER:]


def _schema_id(key: bytes) -> int:
    return int.from_bytes(key[1:_WIRE_HEADER], "big")


def _wire(read: Callable[[bytes], str | None]) -> Callable[[bytes], str | None]:
    def reader(key: bytes) -> str | None:
        payload = _wire_payload(key)
        return None if payload is None else read(payload)
    return reader


def _json_string(key: bytes) -> str | None:
    inner = json_unquoted(key)
    return None if inner is None else inner.decode("utf-8")


def _json_number(key: bytes) -> str | None:
    return _text(json.loads(key)) if _JSON_NUMBER.fullmatch(key) else None


def _utf8(key: bytes) -> str | None:
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _integer(width: int) -> Callable[[bytes], str | None]:
    return lambda key: str(int.from_bytes(key, "big", signed=True)) if len(key) == width else None


#: Encoding -> the logical key of a key read that way, None when the key is not so encoded.
READERS: dict[str, Callable[[bytes], str | None]] = {
    AVRO: _wire(_avro),
    PROTOBUF: _wire(_protobuf),
    JSON_SCHEMA: _wire(_json_scalar),
    JSON_STRING: _json_string,
    JSON_NUMBER: _json_number,
    UTF8: _utf8,
    INT64: _integer(8),
    INT32: _integer(4),
    OPAQUE: opaque_value,
}


def readings(key: bytes) -> list[Reading]:
    """Every encoding ``key`` can be read as, strictest first; the last is always opaque bytes."""
    found = []
    for encoding in PREFERENCE:
        value = READERS[encoding](key)
        if value is not None:
            found.append(Reading(encoding, value, _schema_id(key) if encoding in CONFLUENT else None))
    return found


def read_as(key: bytes, encoding: str) -> str:
    """The logical key of ``key`` read as ``encoding``; its hex when it does not read so (a mixed topic's stray key)."""
    value = READERS[encoding](key)
    return opaque_value(key) if value is None else value


@dataclass(frozen=True)
class KeyEncoding:
    """A topic's key encoding, from a sample of its keys."""

    encoding: str
    #: Share of the sampled keys that read as ``encoding`` (below 1: the topic mixes encodings).
    share: float
    keys: int
    schema_ids: tuple[int, ...] = ()
    #: The other encodings met, with their counts, when the keys are mixed.
    others: tuple[tuple[str, int], ...] = ()

    @property
    def label(self) -> str:
        text = LABELS[self.encoding]
        if self.schema_ids:
            text += f" (schema id {', '.join(map(str, self.schema_ids))})"
        return text

    @property
    def mixed(self) -> bool:
        return self.share < 1.0

    @property
    def confluent(self) -> bool:
        return self.encoding in CONFLUENT

    def to_dict(self) -> dict[str, Any]:
        return {"encoding": self.encoding, "label": self.label, "share": round(self.share, 4), "keys": self.keys,
                "schema_ids": list(self.schema_ids), "others": dict(self.others)}


def classify_keys(keys: Sequence[bytes]) -> tuple[KeyEncoding | None, list[str]]:
    """The strictest encoding that reads at least :data:`MIN_SHARE` of ``keys``, and each key's logical value.

    Each encoding is tried over the keys in :data:`PREFERENCE` order and given up
    as soon as more keys fail it than :data:`MIN_SHARE` allows, so a topic costs
    about one reading per key (the doctor reads 200 topics' samples at a time).
    """
    if not keys:
        return None, []
    allowed = len(keys) - math.ceil(MIN_SHARE * len(keys))
    for encoding in PREFERENCE:
        read, values, failed = READERS[encoding], [], 0
        for key in keys:
            value = read(key)
            if value is None:
                failed += 1
                if failed > allowed:
                    break
            values.append(value)
        else:  # few enough keys failed: this is the encoding (opaque bytes reads every key)
            break
    strays = [key for key, value in zip(keys, values) if value is None]
    others = Counter(next(r.encoding for r in readings(key)) for key in strays)
    ids = sorted({_schema_id(k) for k, v in zip(keys, values) if v is not None}) if encoding in CONFLUENT else []
    found = KeyEncoding(encoding, 1 - len(strays) / len(keys), len(keys), tuple(ids), tuple(sorted(others.items())))
    return found, [opaque_value(k) if v is None else v for k, v in zip(keys, values)]


def classify(keys: Sequence[bytes]) -> KeyEncoding | None:
    """The strictest encoding that reads at least :data:`MIN_SHARE` of ``keys``; None for no keys."""
    return classify_keys(keys)[0]


def normalized(keys: Sequence[bytes], encoding: KeyEncoding | None) -> list[str]:
    """Each key's logical value under the topic's encoding, so keys of differently encoded topics compare."""
    if encoding is None:
        return []
    read = READERS[encoding.encoding]
    return [opaque_value(key) if (value := read(key)) is None else value for key in keys]
