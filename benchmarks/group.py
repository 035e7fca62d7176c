"""The worker as a consumer group (issue 19): 1, 2 and 3 workers over 6 partitions, on one broker, in one run.

Each size gets its own topics and group. Its workers are started, and once the group is
stable with every member holding partitions, the users are loaded; then, as in
``benchmarks/worker.py``, the clock runs from the first order produced to the last one out
of both outputs, and every output record is checked to carry its user. Rates are given per
wall-clock second (the group's throughput) and per CPU second summed over the group's
workers: the machine has 2 cores, so the wall figure of 3 workers cannot be 3 times one
worker's, while the per-CPU figure shows what a group costs beyond its members' work
(coordination, duplicated reads, each worker's fixed cost). That fixed cost is measured
too: the CPU a loaded worker uses in 5 idle seconds before the orders arrive (polls,
heartbeats, timers). Each figure is divided by the 1-worker figure of the same round.

    .venv/bin/python benchmarks/group.py [--orders 200000] [--users 10000] [--rounds 2] [--sizes 1,2,3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker import (Rate, group_assigned, live_rate, orders_records, produce_many, users_by_key,  # noqa: E402
                    users_records)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from workerkit import isolated, wait_for_users  # noqa: E402

console = Console(width=160)


#: How long a loaded, idle group is watched for what a worker costs doing nothing.
IDLE_SECONDS = 5.0


def idle_cpu(pids: list[int], seconds: float) -> float:
    """CPU seconds per second per worker while the group waits for work (polls, heartbeats, timers)."""
    processes = [psutil.Process(p) for p in pids]
    before = sum(sum(p.cpu_times()[:2]) for p in processes)
    time.sleep(seconds)
    return (sum(sum(p.cpu_times()[:2]) for p in processes) - before) / seconds / len(processes)


def bench_group(base: Settings, tmp: Path, size: int, users: list[tuple[bytes, bytes]],
                orders: list[tuple[bytes, bytes]]) -> tuple[Rate, float]:
    """``size`` workers in one group on topics of their own: orders joined per second and per CPU second,
    and the CPU a worker of the group uses while idle."""
    settings = isolated(base, f"group{size}", app_id=f"bench-group-{uuid.uuid4().hex[:8]}")
    workers = [WorkerProcess(settings.replace(web_port=free_port(), data_dir=str(tmp / f"{settings.app_id}-{i}")),
                             tmp / f"{settings.app_id}-{i}.log") for i in range(size)]
    try:
        for worker in workers:
            worker.start(timeout=180)
        deadline = time.monotonic() + 300
        while not group_assigned(settings.bootstrap_servers, settings.app_id, members=size):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{size} workers did not form a stable group: {workers[-1].tail(5)}")
            time.sleep(0.5)
        produce_many(settings.bootstrap_servers, settings.users_topic, users)
        wait_for_users(workers, len(users), timeout=900)
        outputs = [settings.merged_topic, settings.merged_repartition_topic]
        pids = [w.proc.pid for w in workers if w.proc is not None]
        idle = idle_cpu(pids, IDLE_SECONDS)
        try:
            return live_rate(settings, orders, outputs, pids, users_by_key(users)), idle
        except RuntimeError as exc:
            raise RuntimeError(f"{size} workers: {exc}") from None
    finally:
        for worker in workers:
            worker.stop()


def run(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    users = users_records(args.users, seed=1)
    orders = orders_records([k for k, _ in users], args.orders, seed=2)
    table = Table(title=f"A group of workers: {args.orders:,} orders, {args.users:,} users, 6 partitions, "
                        f"Apache Kafka, {args.rounds} rounds; each ÷ 1 worker in the same round")
    for column in ("round", "workers", "orders/s", "÷ 1 worker", "per CPU-s", "÷ 1 worker (CPU)",
                   "idle CPU per worker", "load"):
        table.add_column(column, justify="right")
    ratios: dict[int, list[tuple[float, float]]] = {s: [] for s in sizes}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        base = broker.settings(Settings()).replace(partitions=6)
        for round_ in range(1, args.rounds + 1):
            measured = {size: bench_group(base, Path(tmpdir), size, users, orders) for size in sizes}
            rates = {size: rate for size, (rate, _) in measured.items()}
            one = rates[sizes[0]]
            for size, (rate, idle) in measured.items():
                ratios[size].append((rate.wall / one.wall, rate.cpu / one.cpu))
                table.add_row(str(round_), str(size), f"{rate.wall:,.0f}", f"{rate.wall / one.wall:.2f}×",
                              f"{rate.cpu:,.0f}", f"{rate.cpu / one.cpu:.2f}×", f"{idle:.3f} CPU",
                              f"{os.getloadavg()[0]:.1f}")
            console.print(f"round {round_}: " + ", ".join(
                f"{s} worker(s) {r.wall:,.0f}/s ({r.cpu:,.0f} per CPU-s)" for s, r in rates.items())
                + "; every order of each size enriched")
        for size in sizes:
            table.add_row("median", str(size), "", f"{statistics.median(w for w, _ in ratios[size]):.2f}×", "",
                          f"{statistics.median(c for _, c in ratios[size]):.2f}×", "", "")
    console.print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="1,2,3", help="group sizes, the first is the baseline")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
