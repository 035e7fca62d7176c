"""Dead letters: a record the worker cannot use, kept whole with where it came from and why.

As Kafka Connect's dead-letter queue: the original key, value, headers and timestamp
unchanged (so it can be replayed once fixed), the context in ``streamapp.*`` headers
first, then the record's own headers.  A source header cannot pass for ours: one
named ``streamapp.*`` or ``original.*`` is kept as ``original.`` + its name
(:func:`letter_header_name`; :func:`from_record` undoes it).

A dead letter too large for the dead-letter topic (:meth:`DeadLetter.fitted`) keeps
a prefix of the key and value, with the full size and SHA-256 of each in headers,
and as a last resort drops the record's own headers (their count kept): the
coordinates, the reason and a fingerprint of the payload always get through.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

#: Every header streamapp writes starts so; a source header never does once renamed.
PREFIX = "streamapp."
#: Put before a source header's name that starts with :data:`PREFIX`, or with itself (so renaming can be undone).
RENAMED = "original."
REASON = "streamapp.reason"
FIELD = "streamapp.field"
SOURCE_TOPIC = "streamapp.source.topic"
SOURCE_PARTITION = "streamapp.source.partition"
SOURCE_OFFSET = "streamapp.source.offset"
#: The source record's timestamp (ms): the letter's own timestamp too, unless the dead-letter topic refuses it.
SOURCE_TIMESTAMP = "streamapp.source.timestamp"
#: Set when the record's own headers were dropped to fit (the last resort of :meth:`DeadLetter.fitted`): how many.
HEADERS_DROPPED = "streamapp.headers.dropped"
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

#: A record's headers as Kafka holds them: names may repeat, a value may be null.
Headers = tuple[tuple[str, bytes | None], ...]
#: How large a record would be: (key, value, headers) -> bytes (``streamapp.kafka.limits.record_size``).
Sizer = Callable[[bytes | None, bytes | None, list[tuple[str, bytes | None]]], int]


def letter_header_name(name: str) -> str:
    """A source header's name on the dead letter: ``original.`` before one that starts with ``streamapp.`` or
    ``original.``, so no source header is read as streamapp's, and every name comes back
    (:func:`source_header_name`)."""
    return RENAMED + name if name.startswith((PREFIX, RENAMED)) else name


def source_header_name(name: str) -> str:
    """The source header's own name, from its name on the dead letter."""
    return name[len(RENAMED):] if name.startswith(RENAMED) else name


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
    #: The source record's own headers, in order, under their own names.
    original_headers: Headers = ()
    #: The source record's timestamp in ms (None: it had none).
    timestamp: int | None = None
    #: How many of the source record's headers were dropped to fit (then ``original_headers`` is empty).
    headers_dropped: int = 0

    def record_headers(self) -> list[tuple[str, bytes | None]]:
        """Every header the dead letter is written with: streamapp's (:meth:`headers`), then the record's own."""
        return [*self.headers().items(),
                *((letter_header_name(name), value) for name, value in self.original_headers)]

    def headers(self) -> dict[str, bytes]:
        """streamapp's own headers: why, from where, what was cut."""
        headers = {
            REASON: _clip(self.reason).encode("utf-8", "backslashreplace"),
            SOURCE_TOPIC: self.source_topic.encode("utf-8", "backslashreplace"),
            SOURCE_PARTITION: str(self.source_partition).encode(),
            SOURCE_OFFSET: str(self.source_offset).encode(),
        }
        if self.timestamp is not None:
            headers[SOURCE_TIMESTAMP] = str(self.timestamp).encode()
        if self.field is not None:
            headers[FIELD] = self.field.encode("utf-8", "backslashreplace")
        if self.key is None and self.value is None:
            headers[NULL_VALUE] = b"1"
        if self.truncated:
            headers[TRUNCATED] = ",".join(self.truncated).encode()
            for part in self.truncated:
                headers[SIZE.format(part=part)] = str(self.original_sizes[part]).encode()
                headers[SHA256.format(part=part)] = self.sha256[part].encode()
        if self.headers_dropped:
            headers[HEADERS_DROPPED] = str(self.headers_dropped).encode()
        return headers

    def payload(self) -> tuple[bytes | None, bytes | None]:
        """The key and value to write: the record's own, but an empty value for a record with neither
        (a client cannot write it; the :data:`NULL_VALUE` header says so, and :func:`from_record` reads it back)."""
        return self.key, b"" if self.key is None and self.value is None else self.value

    def fitted(self, limit: int, size: Sizer) -> "DeadLetter":
        """This dead letter, or one cut down to fit ``limit`` bytes: the value, then the key, to a prefix.

        Prefixes shrink until the record fits; should even no payload be too large, the
        record's own headers are dropped and the prefixes tried again.  In the end only
        streamapp's headers (reason, coordinates, sizes and SHA-256 of the payload) are
        left, which always fit a topic that takes any record at all.
        """
        letter = self
        for start in (self, self._without_headers()):
            letter = start._cut_to(limit, size)
            if size(letter.key, letter.value, letter.record_headers()) <= limit:
                return letter
        return letter

    def _cut_to(self, limit: int, size: Sizer) -> "DeadLetter":
        letter = self
        parts = [part for part in ("value", "key") if getattr(self, part) is not None]
        for keep in (PREFIX_BYTES, PREFIX_BYTES // 8, 0):
            if size(letter.key, letter.value, letter.record_headers()) <= limit:
                return letter
            for part in parts:
                letter = letter._cut(part, keep)
                if size(letter.key, letter.value, letter.record_headers()) <= limit:
                    return letter
        return letter

    def _without_headers(self) -> "DeadLetter":
        if not self.original_headers:
            return self
        return dataclasses.replace(self, original_headers=(),
                                   headers_dropped=self.headers_dropped + len(self.original_headers))

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
            "timestamp": self.timestamp,
            "headers": [[name, _text(value)] for name, value in self.original_headers],
            "headers_dropped": self.headers_dropped,
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
    headers: Mapping[str, bytes] | Iterable[tuple[str, bytes | None]] | None,
) -> DeadLetter:
    """Read a record of the dead-letter topic back (any client's headers, dict or list of pairs): streamapp's
    headers say why and from where, every other header is the source record's, under its own name again."""
    items = list(headers.items() if isinstance(headers, Mapping) else (headers or []))
    pairs = {name: raw for name, raw in items if name.startswith(PREFIX)}

    def get(name: str) -> str | None:
        raw = pairs.get(name)
        return None if raw is None else raw.decode("utf-8")

    truncated = tuple(part for part in (get(TRUNCATED) or "").split(",") if part)
    stamp = get(SOURCE_TIMESTAMP)
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
        original_headers=tuple((source_header_name(name), raw) for name, raw in items if not name.startswith(PREFIX)),
        timestamp=None if stamp is None else int(stamp),
        headers_dropped=int(get(HEADERS_DROPPED) or 0),
    )
