"""Joined orders per second under ``processing_guarantee=exactly_once`` next to ``at_least_once``, in one run.

Same broker, users, orders and code; each round runs an at_least_once worker, then an exactly_once one, each on
topics, a group and a log of its own, and each ratio is taken within its round.  The clock starts when the orders
start being produced and stops when every order's outputs are readable: for at_least_once, the outputs' end
offsets add up to the orders; for exactly_once, the group's committed orders offset reaches their end (outputs
are committed with it, and end offsets would count the commit markers too).  Untimed, the outputs are read back
(``read_committed``): every order exactly once in each, with its own user.  Rates are per wall-clock second and
per CPU second of the worker process.

    .venv/bin/python benchmarks/exactly_once.py [--orders 200000] [--users 10000] [--rounds 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

import psutil
from confluent_kafka import Consumer, TopicPartition
from rich.console import Console
from rich.table import Table

from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.kafka.reader import TopicReader
from streamapp.settings import Settings
from streamapp.worker.transactions import COMMIT_INTERVAL

from worker import (Rate, check_outputs, cpu_seconds, orders_records, produce_many, start_worker,  # noqa: E402
                    users_by_key, users_records, wait_users)

console = Console(width=160)
GUARANTEES = ("at_least_once", "exactly_once")


def held_sum(settings: Settings, topic: str, group: str | None) -> int:
    """The sum over ``topic``'s partitions of their end offsets, or (``group``) of the group's committed offsets."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers,
                         "group.id": group or f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p) for p in range(settings.partitions)]
        if group is not None:
            return sum(max(tp.offset, 0) for tp in consumer.committed(parts, timeout=10))
        return sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts)
    finally:
        consumer.close()


def timed(settings: Settings, orders: list[tuple[bytes, bytes]], pid: int, done: Callable[[], bool]) -> Rate:
    process = psutil.Process(pid)
    start, cpu_start = time.monotonic(), cpu_seconds(process)
    produce_many(settings.bootstrap_servers, settings.orders_topic, orders)
    deadline = time.monotonic() + 1800
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for every order's outputs")
        time.sleep(0.1)
    return Rate(len(orders) / (time.monotonic() - start), len(orders) / (cpu_seconds(process) - cpu_start))


def bench(base: Settings, tmp: Path, guarantee: str, users: list[tuple[bytes, bytes]],
          orders: list[tuple[bytes, bytes]]) -> Rate:
    worker = start_worker(base.replace(web_port=free_port(), processing_guarantee=guarantee), tmp)
    settings = worker.settings
    outputs = [settings.merged_topic, settings.merged_repartition_topic]
    try:
        produce_many(settings.bootstrap_servers, settings.users_topic, users)
        wait_users(worker, len(users), timeout=900)
        assert worker.proc is not None
        if guarantee == "exactly_once":
            def done() -> bool:
                return held_sum(settings, settings.orders_topic, settings.app_id) >= len(orders)
        else:
            def done() -> bool:
                return min(held_sum(settings, topic, None) for topic in outputs) >= len(orders)
        rate = timed(settings, orders, worker.proc.pid, done)
        for topic in outputs:
            with TopicReader(settings.bootstrap_servers, topic, range(settings.partitions)) as reader:
                records = reader.read_to_end(timeout=300)
            problem = check_outputs(orders, users_by_key(users), [(r.key, r.value) for r in records])
            if problem is not None:  # every order once with its user, under either guarantee on a clean run
                raise RuntimeError(f"{guarantee}: {topic}: {problem}: {worker.tail(3)}")
        return rate
    finally:
        worker.stop()


def run(args: argparse.Namespace) -> None:
    users = users_records(args.users, seed=1)
    orders = orders_records([k for k, _ in users], args.orders, seed=2)
    table = Table(title=f"Orders joined: {args.orders:,} orders, {args.users:,} users, Apache Kafka, {args.rounds} "
                        f"rounds; exactly_once commits every {COMMIT_INTERVAL * 1000:.0f} ms")
    for column in ("round", "at_least_once", "exactly_once", "ratio", "at_least_once per CPU-s",
                   "exactly_once per CPU-s", "ratio (CPU)", "load"):
        table.add_column(column, justify="right")
    ratios: list[tuple[float, float]] = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = broker.settings(Settings())
        for round_ in range(1, args.rounds + 1):
            alo, eos = (bench(base, tmp, g, users, orders) for g in GUARANTEES)
            ratios.append((eos.wall / alo.wall, eos.cpu / alo.cpu))
            table.add_row(str(round_), f"{alo.wall:,.0f}/s", f"{eos.wall:,.0f}/s", f"{ratios[-1][0]:.2f}×",
                          f"{alo.cpu:,.0f}", f"{eos.cpu:,.0f}", f"{ratios[-1][1]:.2f}×", f"{os.getloadavg()[0]:.1f}")
            console.print(f"round {round_}: at_least_once {alo.wall:,.0f}/s ({alo.cpu:,.0f} per CPU-s), exactly_once "
                          f"{eos.wall:,.0f}/s ({eos.cpu:,.0f} per CPU-s), load {os.getloadavg()[0]:.1f}")
        table.add_row("median", "", "", f"{statistics.median(r[0] for r in ratios):.2f}×", "", "",
                      f"{statistics.median(r[1] for r in ratios):.2f}×", "")
        console.print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
