"""The decoders built from the plan against the demo's hand-written ones, on the same records, in one run.

The worker reads the seed's users and orders with :class:`streamapp.sql.engine.Reader`
(a :class:`~streamapp.sql.formats.Codec` built from the declared columns); the demo's
``decode_user`` / ``decode_order``, the decoders the worker ran before the plan (kept here,
no longer in ``streamapp``), are the hand-written baseline.  Rounds alternate the
two on the same bytes (typical records: the demo producer's shape), and the table
gives each round's ratio and their median: plan ÷ hand-written time per record, and
the join of one order into both outputs (decode, two lookups' worth of projection,
encode) per record for scale.

    .venv/bin/python benchmarks/decoders.py [--records 200000] [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from streamapp.model.records import (BIGINT_MAX, BIGINT_MIN, MAX_NESTING, MAX_TIMESTAMP_MS, RecordError, bigint, column,
                                     decode_object, double, has_lone_surrogate, varchar)
from streamapp.settings import Settings
from streamapp.sql.engine import Query, Reader
from streamapp.sql.topology import load_plan

CHANNELS = ("store", "web", "partner", "catalog")


# -- the baseline: the demo's hand-written decoders, as the worker ran them before the plan ------------------------


@dataclass(frozen=True, slots=True)
class User:
    """A row of ksqlDB's ``DEMO_USER``: every column nullable."""

    user_id: str
    name: str | None
    age: int | None


@dataclass(frozen=True, slots=True)
class Order:
    """A row of ``demo_user_orders``: ``ts`` is its record timestamp, so it is set; the rest nullable."""

    user_id: str | None
    ts: int
    product_id: int | None
    qty: int | None
    unit_price: float | None
    channel: str | None


def _plain_object(key: bytes | None, value: bytes | None) -> tuple[str, dict[str, Any]] | None:
    """The fast paths' start: the user id and the JSON object of a plain UTF-8 record, else None (check it fully)."""
    if not key or value is None or value.count(b"[") + value.count(b"{") > MAX_NESTING:
        return None
    try:
        obj = json.loads(value.decode("utf-8"))
        user_id = key.decode("utf-8")
    except (ValueError, RecursionError):
        return None
    return (user_id, obj) if type(obj) is dict else None


def decode_user(key: bytes | None, value: bytes | None) -> User | None:
    """A user, or None for a tombstone; the common record takes a fast path of exact type checks."""
    found = _plain_object(key, value)
    if found is not None and len(found[1]) == 2:
        user_id, obj = found
        name, age = obj.get("name", obj), obj.get("age", obj)
        if (type(name) is str and (name.isascii() or not has_lone_surrogate(name))
                and type(age) is int and BIGINT_MIN <= age <= BIGINT_MAX):
            return User(user_id, name, age)
    return _checked(_checked_user, key, value)


#: The order's fields, as the fast path finds them.
_ORDER_FIELDS = frozenset(("ts", "product_id", "qty", "unit_price", "channel"))


def decode_order(key: bytes | None, value: bytes | None) -> Order:
    """An order; the common valid record takes a fast path of exact type checks, anything else ksqlDB's rules."""
    found = _plain_object(key, value)
    if found is not None and found[1].keys() == _ORDER_FIELDS:
        user_id, obj = found
        ts, product_id, qty = obj["ts"], obj["product_id"], obj["qty"]
        unit_price, channel = obj["unit_price"], obj["channel"]
        if (type(ts) is int and 0 <= ts <= MAX_TIMESTAMP_MS
                and type(channel) is str and (channel.isascii() or not has_lone_surrogate(channel))
                and type(product_id) is int and BIGINT_MIN <= product_id <= BIGINT_MAX
                and type(qty) is int and BIGINT_MIN <= qty <= BIGINT_MAX
                and ((type(unit_price) is float and math.isfinite(unit_price) and unit_price != 0.0)
                     or (type(unit_price) is int and BIGINT_MIN <= unit_price <= BIGINT_MAX))):
            return Order(user_id, ts, product_id, qty, float(unit_price), channel)
    return _checked(_checked_order, key, value)


def _user_id(key: bytes) -> str:
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"key {key[:20]!r} is not UTF-8 ({exc.reason} at byte {exc.start})", "key") from None


def _checked(decode: Callable[[bytes | None, bytes | None], Any], key: bytes | None, value: bytes | None) -> Any:
    try:
        return decode(key, value)
    except RecordError:
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure is this record's, not the worker's
        raise RecordError(f"value could not be decoded ({type(exc).__name__})", "value") from None


def _checked_user(key: bytes | None, value: bytes | None) -> User | None:
    if key is None:
        raise RecordError("key is null: a table row needs a user id", "key")
    user_id = _user_id(key)
    obj = decode_object(value)
    if obj is None:
        return None
    return User(user_id, varchar(column(obj, "NAME"), "name"), bigint(column(obj, "AGE"), "age"))


def _checked_order(key: bytes | None, value: bytes | None) -> Order:
    user_id = None if key is None else _user_id(key)
    obj = decode_object(value)
    if obj is None:
        raise RecordError("value is null: an order needs a value", "value")
    ts = bigint(column(obj, "TS"), "ts")
    if ts is None or ts < 0:
        raise RecordError(f"field 'ts' is {ts}, expected epoch milliseconds >= 0", "ts")
    return Order(user_id, ts, bigint(column(obj, "PRODUCT_ID"), "product_id"), bigint(column(obj, "QTY"), "qty"),
                 double(column(obj, "UNIT_PRICE"), "unit_price"), varchar(column(obj, "CHANNEL"), "channel"))


# -- the run ------------------------------------------------------------------------------------------------------


def records(count: int, seed: int) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    rng = random.Random(seed)
    ids = [f"{rng.getrandbits(128):032x}".encode() for _ in range(max(count // 10, 1))]
    users = [(uid, json.dumps({"name": f"User {i}", "age": rng.randint(18, 90)}).encode()) for i, uid in enumerate(ids)]
    orders = [(rng.choice(ids), json.dumps({"ts": 1_677_844_000_000 + i, "product_id": rng.randint(1, 5000),
                                            "qty": rng.randint(1, 9), "unit_price": round(rng.uniform(1, 100), 2),
                                            "channel": rng.choice(CHANNELS)}).encode()) for i in range(count)]
    return users, orders


def seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    plan = load_plan(Settings())
    users_reader, orders_reader = Reader(plan.source("DEMO_USER")), Reader(plan.source("DEMO_USER_ORDERS"))
    merged = Query(plan, plan.joins[0])
    users, orders = records(args.records, seed=1)
    row = ({"NAME": "User 1", "AGE": 40}, 0)

    def plan_orders() -> None:
        for key, value in orders:
            orders_reader.read(key, value, 0)

    def hand_orders() -> None:
        for key, value in orders:
            decode_order(key, value)

    def plan_users() -> None:
        for key, value in users:
            users_reader.read(key, value, 0)

    def hand_users() -> None:
        for key, value in users:
            decode_user(key, value)

    def join_orders() -> None:  # what the worker does per order: decode once, one output per join
        for key, value in orders:
            _, left = orders_reader.read(key, value, 0)
            merged.output(left, row, True)  # type: ignore[arg-type]
            merged.output(left, None, False)  # type: ignore[arg-type]

    pairs = {"orders": (plan_orders, hand_orders, len(orders)), "users": (plan_users, hand_users, len(users))}
    ratios: dict[str, list[float]] = {name: [] for name in pairs}
    per_record: dict[str, list[float]] = {name: [] for name in [*pairs, "join"]}
    for round_ in range(args.rounds):
        for name, (built, hand, count) in pairs.items():
            first, second = (built, hand) if round_ % 2 == 0 else (hand, built)
            a, b = seconds(first), seconds(second)
            plan_s, hand_s = (a, b) if first is built else (b, a)
            ratios[name].append(plan_s / hand_s)
            per_record[name].append(plan_s / count * 1e6)
        per_record["join"].append(seconds(join_orders) / len(orders) * 1e6)
    table = Table(title=f"Decoders built from the plan ÷ hand-written, {args.records:,} orders, "
                        f"{len(users):,} users, {args.rounds} alternating rounds")
    table.add_column("records")
    table.add_column("plan ÷ hand-written, by round")
    table.add_column("median", justify="right")
    table.add_column("plan µs/record (median)", justify="right")
    for name in pairs:
        table.add_row(name, ", ".join(f"{r:.2f}" for r in ratios[name]), f"{statistics.median(ratios[name]):.3f}×",
                      f"{statistics.median(per_record[name]):.2f}")
    table.add_row("join (decode + 2 outputs)", "", "", f"{statistics.median(per_record['join']):.2f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
