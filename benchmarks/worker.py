"""Joined orders per second for one worker, next to a raw aiokafka consume→produce pipe, in one run.

Both processors run as child processes on the same freshly started Apache
Kafka broker (one KRaft node, :class:`streamapp.kafka.broker.EmbeddedBroker`) and are
timed the same way: each is started and has joined its group,
then the clock starts when the orders start being produced (by confluent-kafka,
far faster than either processor, so each works through a backlog) and stops
when the last of them has come out of both output topics.  Each rate is given
per wall-clock second and per CPU second the processor used (its user + system
time), which stays comparable when other work shares the machine's cores.  The
pipe does the same Kafka work as the worker (read each order, write one record
to each of two topics) the way a plain aiokafka application does, one ``send``
per record, and no decoding, lookup or encoding.  Each round measures a pipe
and then a worker, each on topics and with a log of its own, and checks that
every output record of the round's worker carries its user (the users were all
loaded before its orders); the table gives the best and the median of the
rounds.  Then the worker's RSS with ``--rss-users`` users loaded into both tables.

    .venv/bin/python benchmarks/worker.py [--orders 50000] [--users 10000] [--rounds 2]
                                          [--rss-users 1000000]
    .venv/bin/python benchmarks/worker.py pipe ...   (the baseline's child process; used internally)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console
from rich.table import Table

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.model.join import MISS_HEAD
from streamapp.model.topology import owned_topics
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from workerkit import isolated, make_order, wait_for_users  # noqa: E402

console = Console(width=160)
#: How an output value without its user (a join miss) starts.
MISS = MISS_HEAD.encode()


def produce_many(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2", "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def users_records(count: int, seed: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    return [(uuid.UUID(int=rng.getrandbits(128)).hex.encode(),
             json.dumps({"name": f"User {i}", "age": rng.randint(18, 90)}).encode()) for i in range(count)]


def orders_records(user_keys: list[bytes], count: int, seed: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    return [(k, json.dumps(make_order(k.decode(), rng)).encode()) for k in rng.choices(user_keys, k=count)]


@dataclass(frozen=True)
class Rate:
    """Orders per wall-clock second, and per CPU second of the processor (robust to other load on the machine)."""

    wall: float
    cpu: float


def best(rates: list[Rate]) -> Rate:
    return Rate(max(r.wall for r in rates), max(r.cpu for r in rates))


def live_rate(
    settings: Settings, orders: list[tuple[bytes, bytes]], outputs: list[str], pid: int
) -> tuple[Rate, int]:
    """From the first order produced to the last one out of every output, the processor already running.

    Also how many of the output records carry no user (a join miss; always 0 for the pipe, which copies).
    """
    process = psutil.Process(pid)
    start, cpu_start = time.monotonic(), cpu_seconds(process)
    produce_many(settings.bootstrap_servers, settings.orders_topic, orders)
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(t, p, 0) for t in outputs for p in range(settings.partitions)])
    counts = dict.fromkeys(outputs, 0)
    misses = 0
    deadline = time.monotonic() + 900
    try:
        while min(counts.values()) < len(orders):
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out: {counts} of {len(orders)}")
            for msg in consumer.consume(10_000, 0.2):
                if not msg.error():
                    counts[msg.topic()] += 1
                    misses += msg.value().startswith(MISS)
        rate = Rate(len(orders) / (time.monotonic() - start), len(orders) / (cpu_seconds(process) - cpu_start))
        return rate, misses
    finally:
        consumer.close()


def cpu_seconds(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


def wait_users(worker: WorkerProcess, count: int, timeout: float) -> None:
    wait_for_users([worker], count, timeout)


def start_worker(base: Settings, tmp: Path) -> WorkerProcess:
    """A worker with its own topics, data dir, group and log: a round never reads another round's log."""
    settings = isolated(base, data_dir=str(tmp / uuid.uuid4().hex), app_id=f"bench-{uuid.uuid4().hex[:8]}")
    return WorkerProcess(settings, tmp / f"worker-{settings.app_id}.log").start(timeout=120)


def bench_worker(base: Settings, tmp: Path, users: list[tuple[bytes, bytes]],
                 orders: list[tuple[bytes, bytes]]) -> Rate:
    worker = start_worker(base, tmp)
    settings = worker.settings
    try:
        produce_many(settings.bootstrap_servers, settings.users_topic, users)
        wait_users(worker, len(users), timeout=600)
        assert worker.proc is not None
        outputs = [settings.merged_topic, settings.merged_repartition_topic]
        rate, misses = live_rate(settings, orders, outputs, worker.proc.pid)
        if misses:
            raise RuntimeError(f"{misses:,} of {len(outputs) * len(orders):,} output records carry no user: this "
                               f"round's orders were not all joined with its users: {worker.tail(3)}")
        return rate
    finally:
        worker.stop()


def bench_pipe(base: Settings, orders: list[tuple[bytes, bytes]]) -> Rate:
    settings = isolated(base)
    ensure_topics(settings.bootstrap_servers, owned_topics(settings))
    outputs = [settings.merged_topic, settings.merged_repartition_topic]
    child = subprocess.Popen([sys.executable, __file__, "pipe", "--bootstrap", settings.bootstrap_servers,
                              "--source", settings.orders_topic, "--outputs", ",".join(outputs)],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        return live_rate(settings, orders, outputs, child.pid)[0]
    finally:
        child.terminate()
        child.wait(30)


async def pipe(bootstrap: str, source: str, outputs: list[str]) -> None:
    """The baseline: aiokafka consumer → aiokafka producer, each record to every output, nothing else."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=f"pipe-{uuid.uuid4().hex}",
                                auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await consumer.start()
    await producer.start()
    while not consumer.assignment():  # joined the group: from here on it is only the pipe's work
        await consumer.getmany(timeout_ms=100)
    print("ready", flush=True)
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=100, max_records=10_000)
            for records in batches.values():
                for msg in records:
                    for topic in outputs:
                        await producer.send(topic, msg.value, key=msg.key, timestamp_ms=msg.timestamp)
    finally:
        await producer.stop()
        await consumer.stop()


def rss_with_users(base: Settings, tmp: Path, count: int) -> tuple[float, float, float]:
    """(RSS MiB before loading, RSS MiB with ``count`` users in both tables, seconds to load)."""
    worker = start_worker(base, tmp)
    settings = worker.settings
    try:
        assert worker.proc is not None
        process = psutil.Process(worker.proc.pid)
        before = process.memory_info().rss / 2**20
        start = time.monotonic()
        produce_many(settings.bootstrap_servers, settings.users_topic, users_records(count, seed=99))
        wait_users(worker, count, timeout=3600)
        return before, process.memory_info().rss / 2**20, time.monotonic() - start
    finally:
        worker.stop()


def run(args: argparse.Namespace) -> None:
    users = users_records(args.users, seed=1)
    orders = orders_records([k for k, _ in users], args.orders, seed=2)
    table = Table(title=f"Worker throughput: {args.orders:,} orders, {args.users:,} users, Apache Kafka, "
                        f"best of {args.rounds} rounds and the median of each round's ratio")
    for column in ("raw aiokafka pipe", "worker", "worker ÷ pipe", "median of rounds",
                   "pipe per CPU-s", "worker per CPU-s", "worker ÷ pipe (CPU)", "median of rounds (CPU)"):
        table.add_column(column, justify="right")
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = broker.settings(Settings()).replace(web_port=free_port())
        pipes: list[Rate] = []
        workers: list[Rate] = []
        for round_ in range(1, args.rounds + 1):
            pipes.append(bench_pipe(base, orders))
            workers.append(bench_worker(base.replace(web_port=free_port()), tmp, users, orders))
            console.print(f"round {round_}: pipe {pipes[-1].wall:,.0f}/s ({pipes[-1].cpu:,.0f} per CPU-s), "
                          f"worker {workers[-1].wall:,.0f}/s ({workers[-1].cpu:,.0f} per CPU-s), every order enriched")
        pipe_rate, worker_rate = best(pipes), best(workers)
        paired = list(zip(workers, pipes))
        table.add_row(f"{pipe_rate.wall:,.0f}/s", f"{worker_rate.wall:,.0f}/s",
                      f"{worker_rate.wall / pipe_rate.wall:.2f}×",
                      f"{statistics.median(w.wall / p.wall for w, p in paired):.2f}×",
                      f"{pipe_rate.cpu:,.0f}", f"{worker_rate.cpu:,.0f}", f"{worker_rate.cpu / pipe_rate.cpu:.2f}×",
                      f"{statistics.median(w.cpu / p.cpu for w, p in paired):.2f}×")
        console.print(table)
        if args.rss_users:
            before, after, seconds = rss_with_users(base.replace(web_port=free_port()), tmp, args.rss_users)
            console.print(
                f"Worker RSS: {before:,.0f} MiB empty, {after:,.0f} MiB with {args.rss_users:,} users in both "
                f"tables ({after / before:.2f}× the empty worker; loaded in {seconds:,.0f} s, "
                f"{args.rss_users / seconds:,.0f} users/s)"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    child = sub.add_parser("pipe")
    child.add_argument("--bootstrap", required=True)
    child.add_argument("--source", required=True)
    child.add_argument("--outputs", required=True)
    parser.add_argument("--orders", type=int, default=50_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rss-users", type=int, default=1_000_000, help="0 skips the RSS measurement")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.mode == "pipe":
        asyncio.run(pipe(args.bootstrap, args.source, args.outputs.split(",")))
    else:
        run(args)


if __name__ == "__main__":
    main()
