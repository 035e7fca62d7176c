"""Dead letters: a record the worker cannot use, kept byte for byte with where it came from and why.

The dead-letter record carries the original key and value unchanged (so it can
be replayed once fixed) and puts the context in headers, which every Kafka
client and ``kcat`` can show.

A dead letter that would itself be too large for the dead-letter topic
(:meth:`DeadLetter.fitted`) keeps a prefix of the key and value, with the full
size and SHA-256 of each in headers: the source coordinates, the reason and a
fingerprint of the payload always get through, so nothing is lost without a trace.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

REASON = "streamapp.reason"
FIELD = "streamapp.field"
SOURCE_TOPIC = "streamapp.source.topic"
SOURCE_PARTITION = "streamapp.source.partition"
SOURCE_OFFSET = "streamapp.source.offset"
#: Set on a cut-down dead letter: which of ``key``, ``value`` were cut to a prefix (``key,value``).
TRUNCATED = "streamapp.truncated"
#: The original length and SHA-256 (hex) of a part that was cut: ``streamapp.key.size`` etc.
SIZE = "streamapp.{part}.size"
SHA256 = "streamapp.{part}.sha256"

#: Set on the dead letter of a record with neither key nor value: Kafka clients refuse to write such a
#: record (aiokafka: "Need at least one: key or value"), so its letter's value is empty and this says it was null.
NULL_VALUE = "streamapp.value.null"

#: Bytes of each cut part a cut-down dead letter keeps.
PREFIX_BYTES = 1024
#: Longest reason a dead letter carries (the decoders' reasons are far shorter).
REASON_LIMIT = 500

#: How large a record would be: (key, value, headers) -> bytes (``streamapp.limits.record_size``).
Sizer = Callable[[bytes | None, bytes | None, list[tuple[str, bytes]]], int]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    source_topic: str
    source_partition: int
    source_offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    field: str | None = None
    #: Parts cut to a prefix ("key", "value"), each with its original size and SHA-256 hex.
    truncated: tuple[str, ...] = ()
    original_sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    sha256: dict[str, str] = dataclasses.field(default_factory=dict)

    def headers(self) -> dict[str, bytes]:
        headers = {
            REASON: _clip(self.reason).encode("utf-8", "backslashreplace"),
            SOURCE_TOPIC: self.source_topic.encode("utf-8", "backslashreplace"),
            SOURCE_PARTITION: str(self.source_partition).encode(),
            SOURCE_OFFSET: str(self.source_offset).encode(),
        }
        if self.field is not None:
            headers[FIELD] = self.field.encode("utf-8", "backslashreplace")
        if self.key is None and self.value is None:
            headers[NULL_VALUE] = b"1"
        if self.truncated:
            headers[TRUNCATED] = ",".join(self.truncated).encode()
            for part in self.truncated:
                headers[SIZE.format(part=part)] = str(self.original_sizes[part]).encode()
                headers[SHA256.format(part=part)] = self.sha256[part].encode()
        return headers

    def payload(self) -> tuple[bytes | None, bytes | None]:
        """The key and value to write: the record's own, but an empty value for a record with neither
        (a client cannot write it; the :data:`NULL_VALUE` header says so, and :func:`from_record` reads it back)."""
        return self.key, b"" if self.key is None and self.value is None else self.value

    def fitted(self, limit: int, size: Sizer) -> "DeadLetter":
        """This dead letter, or one cut down to fit ``limit`` bytes: the value, then the key, to a prefix.

        Prefixes shrink until the record fits; in the end only the headers (reason,
        coordinates, sizes and SHA-256 of the payload) are left, which always fit a
        topic that takes any record at all.
        """
        letter = self
        parts = [part for part in ("value", "key") if getattr(self, part) is not None]
        for keep in (PREFIX_BYTES, PREFIX_BYTES // 8, 0):
            if size(letter.key, letter.value, list(letter.headers().items())) <= limit:
                return letter
            for part in parts:
                letter = letter._cut(part, keep)
                if size(letter.key, letter.value, list(letter.headers().items())) <= limit:
                    return letter
        return letter

    def _cut(self, part: str, keep: int) -> "DeadLetter":
        original: bytes = getattr(self, part)
        if part in self.truncated:
            if len(original) <= keep:
                return self
            return dataclasses.replace(self, **{part: original[:keep]})
        if len(original) <= keep:
            return self
        return dataclasses.replace(
            self, **{part: original[:keep]},
            truncated=tuple(p for p in ("key", "value") if p in self.truncated or p == part),
            original_sizes={**self.original_sizes, part: len(original)},
            sha256={**self.sha256, part: hashlib.sha256(original).hexdigest()},
        )

    def to_dict(self) -> dict[str, object]:
        """For people and JSON views; bytes shown as text where they are UTF-8."""
        return {
            "source_topic": self.source_topic,
            "source_partition": self.source_partition,
            "source_offset": self.source_offset,
            "reason": self.reason,
            "field": self.field,
            "key": _text(self.key),
            "value": _text(self.value),
            "truncated": list(self.truncated),
            "original_sizes": dict(self.original_sizes),
            "sha256": dict(self.sha256),
        }


def _clip(reason: str) -> str:
    """One line (a header shown by kcat and logs), at most REASON_LIMIT characters."""
    text = reason.replace("\r", " ").replace("\n", " ")
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3] + "..."


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    return data.decode("utf-8", "backslashreplace")


def from_record(
    key: bytes | None,
    value: bytes | None,
    headers: Mapping[str, bytes] | Iterable[tuple[str, bytes]] | None,
) -> DeadLetter:
    """Read a record of the dead-letter topic back (any client's headers, dict or list of pairs)."""
    pairs = dict(headers.items() if isinstance(headers, Mapping) else (headers or []))

    def get(name: str) -> str | None:
        raw = pairs.get(name)
        return None if raw is None else raw.decode("utf-8")

    truncated = tuple(part for part in (get(TRUNCATED) or "").split(",") if part)
    return DeadLetter(
        source_topic=get(SOURCE_TOPIC) or "",
        source_partition=int(get(SOURCE_PARTITION) or -1),
        source_offset=int(get(SOURCE_OFFSET) or -1),
        key=key,
        value=None if key is None and not value and get(NULL_VALUE) else value,
        reason=get(REASON) or "",
        field=get(FIELD),
        truncated=truncated,
        original_sizes={part: int(get(SIZE.format(part=part)) or -1) for part in truncated},
        sha256={part: get(SHA256.format(part=part)) or "" for part in truncated},
    )
