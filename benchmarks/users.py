"""Users loaded per second into both tables, next to a raw aiokafka pipe doing the same Kafka work, in one run.

Both processors run as child processes on one freshly started Apache Kafka node
(:class:`streamapp.kafka.broker.EmbeddedBroker`) and are timed the same way: each
is started and has joined its group, then the clock starts when the users start
being produced (by confluent-kafka, far faster than either) and stops when the
last of them is done.  The pipe reads each user and writes one changelog record
(same partition, on a topic of its own) and one repartition record
(murmur2), one ``send`` per record, as a plain aiokafka application does: done
when both topics hold every user.  The worker is done when its ``/stats`` says
every user is in both tables (the users table, and the repartitioned table loaded
from the repartition topic it wrote: more Kafka work than the pipe's).  Rates are
per wall-clock second and per CPU second of the processor (user + system).  Each
round measures a pipe and then a worker on topics of their own; the table gives
every round's ratio and their median, then the worker's RSS with the last round's
users loaded.

    .venv/bin/python benchmarks/users.py [--users 1000000] [--rounds 2]
    .venv/bin/python benchmarks/users.py pipe ...   (the baseline's child process; used internally)
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import psutil
from rich.console import Console
from rich.table import Table

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.sql.topology import topology
from streamapp.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker import Rate, cpu_seconds, end_offsets, pipe_loop, produce_many, start_worker, users_records  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from workerkit import isolated, loaded, stats  # noqa: E402

console = Console(width=160)
TIMEOUT = 3600


def timed(pid: int, produce: Callable[[], object], done: Callable[[], bool], count: int) -> Rate:
    """From the first user produced until ``done()``, the processor (``pid``) already running."""
    process = psutil.Process(pid)
    start, cpu_start = time.monotonic(), cpu_seconds(process)
    produce()
    deadline = start + TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {TIMEOUT} s")
        time.sleep(0.2)
    return Rate(count / (time.monotonic() - start), count / (cpu_seconds(process) - cpu_start))


def bench_pipe(base: Settings, users: list[tuple[bytes, bytes]]) -> Rate:
    settings = isolated(base)
    changelog = f"{settings.app_id}-users-changelog"
    ensure_topics(settings.bootstrap_servers, {**topology(settings).owned_topics(), changelog: settings.partitions})
    outputs = [changelog, settings.users_repartition_topic]
    child = subprocess.Popen([sys.executable, __file__, "pipe", "--bootstrap", settings.bootstrap_servers,
                              "--source", settings.users_topic, "--changelog", changelog,
                              "--repartition", settings.users_repartition_topic], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        return timed(child.pid, lambda: produce_many(settings.bootstrap_servers, settings.users_topic, users),
                     lambda: min(end_offsets(settings.bootstrap_servers, outputs, settings.partitions).values())
                     >= len(users), len(users))
    finally:
        child.terminate()
        child.wait(30)


def bench_worker(base: Settings, tmp: Path, users: list[tuple[bytes, bytes]]) -> tuple[Rate, float, float]:
    """The worker's rate, and its RSS in MiB before and after loading."""
    worker = start_worker(base, tmp)
    settings = worker.settings
    try:
        assert worker.proc is not None
        rss_before = psutil.Process(worker.proc.pid).memory_info().rss / 2**20

        def done() -> bool:
            try:
                totals = stats(worker)
            except httpx.TimeoutException:  # a loaded machine: ask again
                return False
            return min(loaded(totals, settings)) >= len(users)

        rate = timed(worker.proc.pid, lambda: produce_many(settings.bootstrap_servers, settings.users_topic, users),
                     done, len(users))
        totals = stats(worker)
        if (*loaded(totals, settings), totals["dead_lettered"]) != (len(users), len(users), 0):
            raise RuntimeError(f"the worker loaded {totals} of {len(users):,} users: {worker.tail(3)}")
        return rate, rss_before, psutil.Process(worker.proc.pid).memory_info().rss / 2**20
    finally:
        worker.stop()


async def pipe(bootstrap: str, source: str, changelog: str, repartition: str) -> None:
    """The baseline: one changelog record (the user's partition) and one repartition record (murmur2) per user."""
    async def forward(producer: Any, tp: Any, msg: Any) -> None:
        await producer.send(changelog, msg.value, key=msg.key, partition=tp.partition, timestamp_ms=msg.timestamp)
        await producer.send(repartition, msg.value, key=msg.key, timestamp_ms=msg.timestamp)

    await pipe_loop(bootstrap, [source], forward)


def run(args: argparse.Namespace) -> None:
    users = users_records(args.users, seed=3)
    table = Table(title=f"Users into both tables: {args.users:,} users per round, Apache Kafka, "
                        f"load average {os.getloadavg()[0]:.1f} at the start")
    for column in ("round", "raw aiokafka pipe", "worker", "worker ÷ pipe", "pipe per CPU-s", "worker per CPU-s",
                   "worker ÷ pipe (CPU)", "worker s", "load"):
        table.add_column(column, justify="right")
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = broker.settings(Settings()).replace(web_port=free_port())
        ratios: list[tuple[float, float]] = []
        rss = (0.0, 0.0)
        for round_ in range(1, args.rounds + 1):
            pipe_rate = bench_pipe(base, users)
            worker_rate, *rss_pair = bench_worker(base.replace(web_port=free_port()), tmp, users)
            rss = (rss_pair[0], rss_pair[1])
            ratios.append((worker_rate.wall / pipe_rate.wall, worker_rate.cpu / pipe_rate.cpu))
            table.add_row(str(round_), f"{pipe_rate.wall:,.0f}/s", f"{worker_rate.wall:,.0f}/s",
                          f"{ratios[-1][0]:.2f}×", f"{pipe_rate.cpu:,.0f}", f"{worker_rate.cpu:,.0f}",
                          f"{ratios[-1][1]:.2f}×", f"{args.users / worker_rate.wall:,.1f}",
                          f"{os.getloadavg()[0]:.1f}")
            console.print(f"round {round_}: pipe {pipe_rate.wall:,.0f}/s, worker {worker_rate.wall:,.0f}/s "
                          f"({args.users / worker_rate.wall:,.1f} s), every user in both tables")
        table.add_row("median", "", "", f"{statistics.median(r[0] for r in ratios):.2f}×", "", "",
                      f"{statistics.median(r[1] for r in ratios):.2f}×", "", "")
        console.print(table)
        console.print(f"Worker RSS: {rss[0]:,.0f} MiB started, {rss[1]:,.0f} MiB with {args.users:,} users in "
                      f"both tables")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    child = sub.add_parser("pipe")
    for name in ("--bootstrap", "--source", "--changelog", "--repartition"):
        child.add_argument(name, required=True)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.mode == "pipe":
        asyncio.run(pipe(args.bootstrap, args.source, args.changelog, args.repartition))
    else:
        run(args)


if __name__ == "__main__":
    main()
