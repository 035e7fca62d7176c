"""The demo's records: users (the table) and one order per user (the stream).

Shapes follow the original ``python_partitioner_murmur2`` demo and its ksqlDB
objects: a user is keyed by a 32-hex id with value ``{"name", "age"}``; an order
is keyed by the same id with value ``{"ts", "product_id", "qty", "unit_price",
"channel"}`` and its record timestamp is ``ts``.  The record types are the
worker's (:mod:`streamapp.records`), so what is produced is what it decodes.
Generation is pure (a seeded ``random.Random``) so a run can be reproduced.
"""
from __future__ import annotations

import json
import random
from typing import Sequence

from ..model.records import Order, User

CHANNELS = ("store", "web", "partner", "catalog")
FIRST_NAMES = (
    "Luella", "Amari", "Noor", "Mateo", "Ingrid", "Kofi", "Yuki", "Rosa", "Dmitri", "Ayla",
    "Tomas", "Priya", "Elif", "Jonah", "Mei", "Oskar", "Zara", "Idris", "Freya", "Santiago",
)
LAST_NAMES = (
    "Clements", "Okafor", "Haddad", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Reyes", "Brennan",
    "Kowalski", "Achebe", "Varga", "Sato", "Mbeki", "Horvath", "Quinn", "Petrov", "Almeida", "Fischer",
)


def key(record: User | Order) -> bytes:
    """ksqlDB's KAFKA STRING key: the user id's UTF-8 bytes, never JSON-quoted."""
    return record.user_id.encode("utf-8")


def user_value(user: User) -> bytes:
    return json.dumps(user.to_table_value()).encode("utf-8")


def order_fields(order: Order) -> dict[str, object]:
    """The value columns, in ksqlDB's ``demo_user_orders`` order (the key column left out)."""
    return {"ts": order.ts, "product_id": order.product_id, "qty": order.qty,
            "unit_price": order.unit_price, "channel": order.channel}


def order_value(order: Order) -> bytes:
    return json.dumps(order_fields(order)).encode("utf-8")


def make_users(count: int, rng: random.Random) -> list[User]:
    """``count`` users with distinct 32-hex ids, so every run's keys are new to the topics."""
    ids: set[str] = set()
    users = []
    while len(users) < count:
        user_id = f"{rng.getrandbits(128):032x}"
        if user_id in ids:
            continue
        ids.add(user_id)
        users.append(User(user_id, f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}", rng.randint(18, 90)))
    return users


def make_orders(users: Sequence[User], rng: random.Random, start_ms: int) -> list[Order]:
    """One order per user, 1 ms apart, so the stream's timestamps are increasing."""
    return [
        Order(
            user_id=user.user_id,
            ts=start_ms + i,
            product_id=rng.randint(1000, 1999),
            qty=rng.randint(1, 10),
            unit_price=round(rng.uniform(1.0, 100.0), 2),
            channel=rng.choice(CHANNELS),
        )
        for i, user in enumerate(users)
    ]
