"""The stream-table LEFT JOIN of one order with its user, as ksqlDB writes it.

Pure: the output record of ``DEMO_USER_ORDERS_MERGED`` (and ``..._REPARTITION``)
for an order and the user found in the same partition, or None on a miss.
Key = USER_ID as plain UTF-8 (ksqlDB's KAFKA STRING key, not repeated in the
value); value = compact JSON with UPPERCASE columns in the CSAS select order and
explicit nulls on a miss; record timestamp = the order's ``ts``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .records import Order, User

#: Value columns of the merged streams, in ksqlDB's select order.
COLUMNS = ("NAME", "AGE", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS")


@dataclass(frozen=True, slots=True)
class JoinedRecord:
    key: bytes
    value: bytes
    timestamp_ms: int
    matched: bool

    @property
    def columns(self) -> dict[str, Any]:
        return json.loads(self.value)


def join_columns(order: Order, user: User | None) -> dict[str, Any]:
    return {
        "NAME": user.name if user else None,
        "AGE": user.age if user else None,
        "PRODUCT_ID": order.product_id,
        "QTY": order.qty,
        "UNIT_PRICE": order.unit_price,
        "CHANNEL": order.channel,
        "TS": order.ts,
    }


def join_record(order: Order, user: User | None) -> JoinedRecord:
    """The LEFT JOIN output for ``order``; ``user`` is the partition-local lookup result."""
    value = json.dumps(join_columns(order, user), separators=(",", ":"), ensure_ascii=False)
    return JoinedRecord(order.user_id.encode("utf-8"), value.encode("utf-8"), order.ts, user is not None)


def faust_timestamp(timestamp_ms: int) -> float:
    """Seconds for Faust's ``send(timestamp=...)``, which sends ``int(seconds * 1000.0)``.

    ``ts / 1000 * 1000`` can come back one below ``ts`` in floating point; half a
    millisecond of headroom makes the truncation land exactly on ``ts``.
    """
    return (timestamp_ms + 0.5) / 1000.0
