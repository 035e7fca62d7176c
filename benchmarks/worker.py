"""Joined orders per second for one worker, next to a raw aiokafka consume→produce pipe, in one run.

Both run as child processes on one freshly started Apache Kafka node and are timed alike: started and in
their group, the clock starts when the orders start being produced (far faster than either processes them)
and stops when the last is out of both output topics; rates are per wall-clock second and per CPU second
of the processor.  The pipe does the worker's Kafka work (read each order, write it to two topics, one
``send`` each) and nothing else.  Kafka Streams (the plan's program) and, with ``--quix-python``, Quix
Streams are timed the same way.  Untimed, every output is checked: each order exactly once, with its own
user (:func:`check_outputs`).  Then, with ``--rss-users``, the worker's RSS with that many users loaded.

    .venv/bin/python benchmarks/worker.py [--orders 400000] [--users 10000] [--rounds 3]
                                          [--rss-users 1000000] [--quix-python PATH] [--no-kafka-streams]
    .venv/bin/python benchmarks/worker.py pipe ...   (the baseline's child process; used internally)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console
from rich.table import Table

from streamapp.kafka.admin import admin_client, ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.kafka.reader import TopicReader
from streamapp.sql.topology import topology
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from workerkit import group_progress, isolated, make_order, wait_for_users  # noqa: E402

console = Console(width=160)
#: The order's columns in a joined value, in the order the orders' JSON holds them (``make_order``).
ORDER_COLUMNS = ("TS", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL")

#: Shortest timed window of a round that tells processors apart on a shared machine.
MIN_ROUND_SECONDS = 20.0


def produce_many(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]] | list[Any]) -> None:
    """Each (key, value[, timestamp]) to ``topic`` with the Java client's partitioner, as fast as the broker takes them."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2", "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})
    for key, value, *stamp in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, timestamp=(stamp[0] or 0) if stamp else 0)
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


def live_rate(
    settings: Settings, orders: list[tuple[bytes, bytes]], outputs: list[str], pid: int | list[int],
    users: dict[bytes, dict[str, Any]] | None,
) -> Rate:
    """From the first order produced to the last one out of every output, the processor already running.

    The clock stops when every output's end offsets add up to the orders (asked of the
    broker, cheap and independent of any reader); then, untimed, the outputs are read
    back and checked (:func:`check_outputs`): every order exactly once in each output,
    with its own user, so that count was the orders and not duplicates.  A counting
    consumer in the timed loop once stopped seeing records the broker held, and the
    round waited for it.
    """
    rate = timed(settings, settings.orders_topic, orders, outputs, pid)
    for topic in outputs:
        with TopicReader(settings.bootstrap_servers, topic, range(settings.partitions)) as reader:
            problem = check_outputs(orders, users, [(r.key, r.value) for r in reader.read_to_end(timeout=300)])
        if problem is not None:
            raise RuntimeError(f"{topic}: {problem}")
    return rate


def timed(settings: Settings, source: str, records: list[Any], outputs: list[str], pid: int | list[int]) -> Rate:
    """Produce ``records`` to ``source`` and time them until every output's end offsets add up to them."""
    processes = [psutil.Process(p) for p in ([pid] if isinstance(pid, int) else pid)]  # a group: CPU summed
    start, cpu_start = time.monotonic(), sum(map(cpu_seconds, processes))
    produce_many(settings.bootstrap_servers, source, records)
    watermarks = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex}"})
    deadline = time.monotonic() + 900
    try:
        while True:
            held = {t: sum(watermarks.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                           for p in range(settings.partitions)) for t in outputs}
            if min(held.values()) >= len(records):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out: {held} of {len(records)}")
            time.sleep(0.1)
        cpu = sum(map(cpu_seconds, processes)) - cpu_start
        return Rate(len(records) / (time.monotonic() - start), len(records) / cpu)
    finally:
        watermarks.close()


def check_outputs(orders: list[tuple[bytes, bytes]], users: dict[bytes, dict[str, Any]] | None,
                  records: list[tuple[bytes | None, bytes | None]]) -> str | None:
    """What is wrong with one output of the orders (None: nothing): each order must be there exactly once, and,
    for a join (``users`` given), carry its own user's NAME and AGE as ksqlDB writes them; for the pipe, its bytes."""
    if users is None:
        expected, found = Counter(orders), Counter(records)
    else:
        expected = Counter((k, *json.loads(v).values()) for k, v in orders)
        found = Counter()
        for key, value in records:
            row = json.loads(value or b"null") or {}
            user = users.get(key or b"") or {}
            if (row.get("NAME"), row.get("AGE")) != (user.get("name"), user.get("age")):
                return f"an order of {key!r} carries {row.get('NAME')!r}, {row.get('AGE')!r}, not its user's"
            found[(key, *(row.get(c) for c in ORDER_COLUMNS))] += 1
    if found == expected:
        return None
    missing, extra = expected - found, found - expected
    return (f"{sum(missing.values()):,} orders missing, {sum(extra.values()):,} extra or duplicated "
            f"(of {len(orders):,})")


def users_by_key(users: list[tuple[bytes, bytes]]) -> dict[bytes, dict[str, Any]]:
    """Each user's columns by key: what a joined order must carry."""
    return {key: json.loads(value) for key, value in users}


def cpu_seconds(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


def wait_users(worker: WorkerProcess, count: int, timeout: float) -> None:
    wait_for_users([worker], count, timeout)


def start_worker(base: Settings, tmp: Path) -> WorkerProcess:
    """A worker with its own topics, data dir, group and log: a round never reads another round's log."""
    settings = isolated(base, data_dir=str(tmp / uuid.uuid4().hex), app_id=f"bench-{uuid.uuid4().hex[:8]}")
    return WorkerProcess(settings, tmp / f"worker-{settings.app_id}.log").start(timeout=120)


def bench_worker(base: Settings, tmp: Path, users: list[tuple[bytes, bytes]],
                 orders: list[tuple[bytes, bytes]], check: Callable[[WorkerProcess], None] | None = None) -> Rate:
    """The worker's rate; ``check``: asked of the started worker first (benchmarks/metrics.py: is it on or off)."""
    worker = start_worker(base, tmp)
    settings = worker.settings
    try:
        if check is not None:
            check(worker)
        produce_many(settings.bootstrap_servers, settings.users_topic, users)
        wait_users(worker, len(users), timeout=600)
        assert worker.proc is not None
        outputs = [settings.merged_topic, settings.merged_repartition_topic]
        try:
            return live_rate(settings, orders, outputs, worker.proc.pid, users_by_key(users))
        except RuntimeError as exc:
            raise RuntimeError(f"the worker: {exc}: {worker.tail(3)}") from None
    finally:
        worker.stop()


def bench_pipe(base: Settings, orders: list[tuple[bytes, bytes]]) -> Rate:
    settings = isolated(base)
    ensure_topics(settings.bootstrap_servers, topology(settings).owned_topics())
    outputs = [settings.merged_topic, settings.merged_repartition_topic]
    child = subprocess.Popen([sys.executable, __file__, "pipe", "--bootstrap", settings.bootstrap_servers,
                              "--source", settings.orders_topic, "--outputs", ",".join(outputs)],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        return live_rate(settings, orders, outputs, child.pid, None)
    finally:
        child.terminate()
        child.wait(30)


async def pipe_loop(bootstrap: str, sources: Sequence[str],
                    forward: Callable[[Any, Any, Any], Awaitable[None]]) -> None:
    """A raw aiokafka consumer → producer: ``forward(producer, tp, record)`` for each record read from ``sources``.

    Prints ``ready`` once it has joined its group: from there on it is only the pipe's work.
    """
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # the group coordinator's start-up retries
    consumer = AIOKafkaConsumer(*sources, bootstrap_servers=bootstrap, group_id=f"pipe-{uuid.uuid4().hex}",
                                auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await consumer.start()
    await producer.start()
    while not consumer.assignment():
        await consumer.getmany(timeout_ms=100)
    print("ready", flush=True)
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=100, max_records=10_000)
            for tp, records in batches.items():
                for msg in records:
                    await forward(producer, tp, msg)
    finally:
        await producer.stop()
        await consumer.stop()


async def pipe(bootstrap: str, source: str, outputs: list[str]) -> None:
    """The baseline: each order to every output, one ``send`` per record, nothing else."""
    async def forward(producer: Any, _tp: Any, msg: Any) -> None:
        for topic in outputs:
            await producer.send(topic, msg.value, key=msg.key, timestamp_ms=msg.timestamp)

    await pipe_loop(bootstrap, [source], forward)


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


def group_assigned(bootstrap: str, group: str, members: int | None = None) -> bool:
    """True once ``group`` is stable and each of its members (``members`` of them, if given) holds partitions
    (joined: only its work is left)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the answer is in
    try:
        described = admin.describe_consumer_groups([group])[group].result(10)
    except Exception:  # noqa: BLE001 - not there yet
        return False
    return described.state.name == "STABLE" and bool(described.members) and all(
        m.assignment.topic_partitions for m in described.members) and members in (None, len(described.members))


def bench_quix(base: Settings, tmp: Path, python: str, users: list[tuple[bytes, bytes]],
               orders: list[tuple[bytes, bytes]]) -> Rate:
    """Quix Streams' ``join_asof(how="left")`` twice (``benchmarks/peers/quix.py``), timed like the worker."""
    settings = isolated(base)
    ensure_topics(settings.bootstrap_servers, topology(settings).owned_topics())
    outputs = [settings.merged_topic, settings.merged_repartition_topic]
    group = f"quix-{uuid.uuid4().hex[:8]}"
    log = (tmp / f"{group}.log").open("wb")
    child = subprocess.Popen(
        [python, str(Path(__file__).parent / "peers" / "quix.py"), "--bootstrap", settings.bootstrap_servers,
         "--group", group, "--state-dir", str(tmp / group), "--users", settings.users_topic,
         "--orders", settings.orders_topic, "--repartition", settings.users_repartition_topic,
         "--merged", outputs[0], "--merged-repartition", outputs[1]], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not group_assigned(settings.bootstrap_servers, group):
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Quix Streams did not join its group: {(tmp / f'{group}.log').read_text()[-2000:]}")
            time.sleep(0.5)
        produce_many(settings.bootstrap_servers, settings.users_topic, users)
        # Loaded: every user is in the repartition topic and in both join stores' changelogs.
        while True:
            topics = [t for t in admin_client(settings.bootstrap_servers).list_topics(timeout=10).topics
                      if t.startswith(f"changelog__{group}")] + [settings.users_repartition_topic]
            held = end_offsets(settings.bootstrap_servers, topics, settings.partitions)
            if len(held) == 3 and min(held.values()) >= len(users):
                break
            if child.poll() is not None or time.monotonic() > deadline + 600:
                raise RuntimeError(f"Quix Streams did not load the users ({held}): "
                                   f"{(tmp / f'{group}.log').read_text()[-2000:]}")
            time.sleep(0.5)
        try:
            return live_rate(settings, orders, outputs, child.pid, users_by_key(users))
        except RuntimeError as exc:
            raise RuntimeError(f"Quix Streams: {exc}") from None
    finally:
        child.terminate()
        child.wait(30)
        log.close()


def end_offsets(bootstrap: str, topics: list[str], partitions: int) -> dict[str, int]:
    """How many records each topic holds (the sum of its partitions' end offsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        return {topic: sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                           for p in range(partitions)) for topic in topics}
    finally:
        consumer.close()


def bench_streams(base: Settings, tmp: Path, users: list[tuple[bytes, bytes]],
                  orders: list[tuple[bytes, bytes]]) -> Rate:
    """Kafka Streams running the seed's plan as ksqlDB runs it (``streamapp ksql-equivalent --statements``: one
    application per query), timed like the worker: loaded first, then the clock over its two join outputs."""
    from streamapp.kafka.ksql_equivalent import KsqlEquivalent, cluster_plan

    settings = isolated(base, app_id=f"ks-{uuid.uuid4().hex[:8]}")
    ensure_topics(settings.bootstrap_servers, {settings.users_topic: settings.partitions,
                                                settings.orders_topic: settings.partitions})
    plan = cluster_plan(settings)
    program = KsqlEquivalent(settings, state_dir=tmp / settings.app_id, heap="1g", plan=plan).start()
    try:
        produce_many(settings.bootstrap_servers, settings.users_topic, users)
        joins = [(f"{program.application_id}-{q.name}", plan.source(q.right).topic) for q in plan.joins]
        deadline = time.monotonic() + 600
        while not all(group_progress(settings.bootstrap_servers, group, table, settings.partitions)
                      >= (True, len(users)) for group, table in joins):
            if not program.running or time.monotonic() > deadline:
                raise RuntimeError(f"Kafka Streams did not load the users: {program.failure_message()}")
            time.sleep(0.5)
        assert program.pid is not None
        outputs = [plan.sink_of(q).topic for q in plan.joins]
        try:
            return live_rate(settings, orders, outputs, program.pid, users_by_key(users))
        except RuntimeError as exc:
            raise RuntimeError(f"Kafka Streams: {exc}") from None
    finally:
        program.stop()


def run(args: argparse.Namespace) -> None:
    users = users_records(args.users, seed=1)
    orders = orders_records([k for k, _ in users], args.orders, seed=2)
    names = ["worker", *(["Kafka Streams"] if args.kafka_streams else []),
             *(["Quix Streams"] if args.quix_python else [])]
    table = Table(title=f"Orders joined: {args.orders:,} orders, {args.users:,} users, Apache Kafka, "
                        f"{args.rounds} rounds, each ÷ the pipe measured in the same round")
    for column in ("round", "pipe", *names, *(f"{n} ÷ pipe" for n in names), "pipe per CPU-s",
                   *(f"{n} per CPU-s" for n in names), *(f"{n} ÷ pipe (CPU)" for n in names), "load"):
        table.add_column(column, justify="right")
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = broker.settings(Settings()).replace(web_port=free_port())
        rounds: list[tuple[Rate, list[Rate]]] = []
        for round_ in range(1, args.rounds + 1):
            pipe_rate = bench_pipe(base, orders)
            peers = [bench_worker(base.replace(web_port=free_port()), tmp, users, orders)]
            if args.kafka_streams:
                peers.append(bench_streams(base, tmp, users, orders))
            if args.quix_python:
                peers.append(bench_quix(base, tmp, args.quix_python, users, orders))
            rounds.append((pipe_rate, peers))
            seconds = [len(orders) / rate.wall for rate in (pipe_rate, *peers)]
            short = f" [a window under {MIN_ROUND_SECONDS:.0f} s: raise --orders]" \
                if min(seconds) < MIN_ROUND_SECONDS else ""
            table.add_row(str(round_), f"{pipe_rate.wall:,.0f}/s", *(f"{r.wall:,.0f}/s" for r in peers),
                          *(f"{r.wall / pipe_rate.wall:.2f}×" for r in peers), f"{pipe_rate.cpu:,.0f}",
                          *(f"{r.cpu:,.0f}" for r in peers), *(f"{r.cpu / pipe_rate.cpu:.2f}×" for r in peers),
                          f"{os.getloadavg()[0]:.1f}")
            console.print(f"round {round_}: " + ", ".join(
                f"{name} {rate.wall:,.0f}/s in {secs:.1f} s ({rate.cpu:,.0f} per CPU-s)"
                for name, rate, secs in zip(["pipe", *names], [pipe_rate, *peers], seconds))
                + f"; every order of this round enriched{short}")
        table.add_row("median", "", *("" for _ in names),
                      *(f"{statistics.median(p[i].wall / pipe.wall for pipe, p in rounds):.2f}×"
                        for i in range(len(names))), "", *("" for _ in names),
                      *(f"{statistics.median(p[i].cpu / pipe.cpu for pipe, p in rounds):.2f}×"
                        for i in range(len(names))), "")
        table.add_row("lowest", "", *("" for _ in names),
                      *(f"{min(p[i].wall / pipe.wall for pipe, p in rounds):.2f}×" for i in range(len(names))),
                      "", *("" for _ in names),
                      *(f"{min(p[i].cpu / pipe.cpu for pipe, p in rounds):.2f}×" for i in range(len(names))), "")
        console.print(table)
        for i, name in enumerate(names[1:], 1):
            console.print(f"Worker ÷ {name}, median of rounds: "
                          f"{statistics.median(p[0].wall / p[i].wall for _, p in rounds):.2f}× wall, "
                          f"{statistics.median(p[0].cpu / p[i].cpu for _, p in rounds):.2f}× per CPU-s")
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
    parser.add_argument("--orders", type=int, default=400_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rss-users", type=int, default=0, help="0 skips the RSS measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quix-python", default="", help="an interpreter with quixstreams: adds the Quix Streams peer")
    parser.add_argument("--no-kafka-streams", dest="kafka_streams", action="store_false",
                        help="leave out the Kafka Streams peer (the seed's plan as ksqlDB runs it)")
    args = parser.parse_args(argv)
    if args.mode == "pipe":
        asyncio.run(pipe(args.bootstrap, args.source, args.outputs.split(",")))
    else:
        run(args)


if __name__ == "__main__":
    main()
