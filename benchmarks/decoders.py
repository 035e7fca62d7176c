"""The decoders built from the plan against the demo's hand-written ones, on the same records, in one run.

The worker reads the seed's users and orders with :class:`streamapp.sql.engine.Reader`
(a :class:`~streamapp.sql.formats.Codec` built from the declared columns); the demo's
``decode_user`` / ``decode_order`` (``streamapp/model/records.py``), which the
reconciliation still reads with, are the hand-written baseline.  Rounds alternate the
two on the same bytes (typical records: the demo producer's shape), and the table
gives each round's ratio and their median: plan ÷ hand-written time per record, and
the join of one order into both outputs (decode, two lookups' worth of projection,
encode) per record for scale.

    .venv/bin/python benchmarks/decoders.py [--records 200000] [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Callable

from rich.console import Console
from rich.table import Table

from streamapp.model.records import decode_order, decode_user
from streamapp.settings import Settings
from streamapp.sql.engine import Query, Reader
from streamapp.sql.topology import load_plan

CHANNELS = ("store", "web", "partner", "catalog")


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
