"""Dead letters: a record the worker cannot use, kept byte for byte with where it came from and why.

The dead-letter record carries the original key and value unchanged (so it can
be replayed once fixed) and puts the context in headers, which every Kafka
client and ``kcat`` can show.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

REASON = "streamapp.reason"
FIELD = "streamapp.field"
SOURCE_TOPIC = "streamapp.source.topic"
SOURCE_PARTITION = "streamapp.source.partition"
SOURCE_OFFSET = "streamapp.source.offset"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    source_topic: str
    source_partition: int
    source_offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    field: str | None = None

    def headers(self) -> dict[str, bytes]:
        headers = {
            REASON: self.reason.encode("utf-8"),
            SOURCE_TOPIC: self.source_topic.encode("utf-8"),
            SOURCE_PARTITION: str(self.source_partition).encode(),
            SOURCE_OFFSET: str(self.source_offset).encode(),
        }
        if self.field is not None:
            headers[FIELD] = self.field.encode("utf-8")
        return headers

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
        }


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

    return DeadLetter(
        source_topic=get(SOURCE_TOPIC) or "",
        source_partition=int(get(SOURCE_PARTITION) or -1),
        source_offset=int(get(SOURCE_OFFSET) or -1),
        key=key,
        value=value,
        reason=get(REASON) or "",
        field=get(FIELD),
    )
