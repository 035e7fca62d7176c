"""A windowed stream-stream join (``stream_join.sql``: orders × shipments, LEFT JOIN WITHIN 1 HOUR GRACE PERIOD
30 MINUTES) in the worker, next to a raw aiokafka pipe of the same records, and the worker's memory as it runs.

Orders and shipments (as many, event times spread over ``--hours``) are produced in event-time order to their two
topics.  Each round times the worker and the pipe (``stream_join.py pipe``: both topics read, each record written to
one output) alike, alternating which goes first: from the first record produced until the output holds them all.
The worker's last unmatched orders wait for stream time to pass their window: once it has read every record, a
shipment no order matches, later than every window, goes to each partition each second until they are out (as a
stream that goes on would close them).  Untimed, the worker's output must hold exactly the rows
:func:`expected_rows` derives from the records (checked against the pure engine, ``streamapp.sql.stream_join``,
before the rounds), the pipe's every record once.  Every ``--sample-seconds`` the worker's RSS, its data directory
(RocksDB) and records read are sampled: the curve is printed and written to ``--csv``; after the first retention
(2.5 hours of event time) it should stay flat, as the stores hold only a retention's records.

Also ``--stacks`` (where the worker's CPU goes), ``--kafka-streams`` (the same join on Kafka Streams) and
``--write-alike`` (the pipe writing as many records as the worker wrote: any engine's ceiling); see ``--help``.

    .venv/bin/python benchmarks/stream_join.py [--orders 1000000] [--rounds 3] [--write-alike] [--kafka-streams]
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console

from streamapp.kafka.ksql_equivalent import KsqlEquivalent, cluster_plan, query_application_id
from streamapp.kafka.admin import describe, ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.kafka.reader import TopicReader
from streamapp.settings import Settings
from streamapp.sql import plan as p
from streamapp.sql.engine import Record
from streamapp.sql.planner import plan_text
from streamapp.sql.stream_join import StreamJoin
from streamapp.sql.topology import topology
from streamapp.worker.process import WorkerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from procfs import task_cpu  # noqa: E402
from worker import Rate, cpu_seconds, pipe_loop  # noqa: E402
from workerkit import murmur2_partition, stats  # noqa: E402

console = Console(width=160)
STATEMENTS = Path(__file__).with_name("stream_join.sql")
HOUR, MINUTE = 3_600_000, 60_000
#: The join's window either way and its grace (``stream_join.sql``), and so a record's retention in a window store.
WINDOW, GRACE = HOUR, 30 * MINUTE
RETENTION = 2 * WINDOW + GRACE
CARRIERS = ("dhl", "ups", "fedex", "post")
#: The third engine's name in the figures (``--kafka-streams``).
STREAMS = "Kafka Streams"
#: The pipe writing as many records as the worker writes (its rows and changelog records): ``--write-alike``.
ALIKE = "the pipe writing as the worker"
#: The clients ``--write-alike`` writes the copies with: the worker's own, then librdkafka's C producer.
WRITERS = ("aiokafka", "librdkafka")
#: Ticks (one a second, each later than every window) that write nothing once every record was read: the worker
#: has written all it will, and its output is checked as it is.
STALLED_TICKS = 60


class Event(NamedTuple):
    """One record to produce: ``side`` is "orders" or "shipments"; ``id`` the key (BIGINT)."""

    side: str
    id: int
    value: dict[str, Any]
    timestamp: int


#: A row of the join's output as compared: (order id, ITEM, QTY, CARRIER, timestamp).
Row = tuple[int, Any, Any, Any, int]


def generate(orders: int, hours: float, t0: int, seed: int = 37) -> list[Event]:
    """``orders`` orders over ``hours`` of event time from ``t0``, and as many shipments, in event-time order.

    By the order's id mod 10: 0-6 shipped once within 30 minutes, 7 shipped twice (two joined rows), 8 shipped
    65-85 minutes later (outside the window: the order's row has no carrier), 9 never shipped.
    """
    rng = random.Random(seed)
    span = int(hours * HOUR)
    events: list[Event] = []
    for i in range(orders):
        ts = t0 + i * span // max(orders, 1)
        events.append(Event("orders", i, {"item": f"item-{rng.randrange(1000)}", "qty": rng.randint(1, 9)}, ts))
        kind = i % 10
        delays = ([rng.randrange(30 * MINUTE)] if kind < 7 else [rng.randrange(30 * MINUTE) for _ in range(2)]
                  if kind == 7 else [rng.randrange(65 * MINUTE, 85 * MINUTE)] if kind == 8 else [])
        events += [Event("shipments", i, {"carrier": rng.choice(CARRIERS)}, ts + d) for d in delays]
    events.sort(key=lambda e: (e.timestamp, e.side != "orders"))
    return events


def expected_rows(events: Iterable[Event]) -> Counter[Row]:
    """What the LEFT JOIN writes, derived from the records alone: each order with every shipment of its id within
    an hour either way (at the later time), or once with no carrier (at its own)."""
    shipments: dict[int, list[Event]] = {}
    orders: list[Event] = []
    for event in events:
        (orders.append(event) if event.side == "orders" else shipments.setdefault(event.id, []).append(event))
    rows: Counter[Row] = Counter()
    for order in orders:
        item, qty = order.value["item"], order.value["qty"]
        matched = [s for s in shipments.get(order.id, ()) if abs(s.timestamp - order.timestamp) <= WINDOW]
        for s in matched:
            rows[(order.id, item, qty, s.value["carrier"], max(order.timestamp, s.timestamp))] += 1
        if not matched:
            rows[(order.id, item, qty, None, order.timestamp)] += 1
    return rows


def key_bytes(id_: int) -> bytes:
    return struct.pack(">q", id_)


def encoded(events: Iterable[Event], tag: str) -> list[tuple[str, bytes, bytes, int]]:
    """(topic, key, value, timestamp) of each event, the topics named by ``tag``."""
    return [(f"{e.side}_{tag}", key_bytes(e.id), json.dumps(e.value, separators=(",", ":")).encode(), e.timestamp)
            for e in events]


def decoded(key: bytes | None, value: bytes | None, timestamp: int) -> Row:
    """An output record as a :data:`Row`."""
    row = json.loads(value or b"null") or {}
    id_ = struct.unpack(">q", key)[0] if key is not None and len(key) == 8 else key
    return id_, row.get("ITEM"), row.get("QTY"), row.get("CARRIER"), timestamp  # type: ignore[return-value]


def check_rows(expected: Counter[Row], rows: Iterable[Row]) -> str | None:
    """What differs between the join's output and :func:`expected_rows` (None: nothing), as multisets."""
    found = Counter(rows)
    if found == expected:
        return None
    missing, extra = expected - found, found - expected
    example = next(iter(missing or extra))
    return (f"{sum(missing.values()):,} rows missing, {sum(extra.values()):,} extra or duplicated "
            f"(of {sum(expected.values()):,}), e.g. {'missing' if missing else 'extra'} {example}")


#: What an order's id says of its shipments (:func:`generate`), by the id's last digit.
KINDS = {**dict.fromkeys(range(7), "shipped once"), 7: "shipped twice", 8: "shipped too late", 9: "never shipped"}


def differences(expected: Counter[Row], rows: Iterable[Row], partitions: int, t0: int, shown: int = 10) -> list[str]:
    """The rows missing and extra, for people: counts by the order's kind (:data:`KINDS`), joined or not, partition
    and hour of event time, then the first ``shown`` of each (event time in hours from ``t0``, partition)."""
    found = Counter(rows)
    lines = []
    for name, diff in (("missing", expected - found), ("extra", found - expected)):
        if not diff:
            continue
        rows_ = sorted(diff.elements(), key=lambda r: (r[4], str(r)))
        tally = Counter((KINDS.get(r[0] % 10, "?") if isinstance(r[0], int) else "?", r[3] is not None) for r in rows_)
        where = Counter(murmur2_partition(key_bytes(r[0]), partitions) for r in rows_ if isinstance(r[0], int))
        hours = Counter(int((r[4] - t0) // HOUR) for r in rows_)
        lines.append(f"{len(rows_):,} {name}: " + ", ".join(f"{n:,} {kind} {'joined' if joined else 'unjoined'}"
                                                           for (kind, joined), n in sorted(tally.items())))
        lines.append(f"  by partition {dict(sorted(where.items()))}; by hour of event time {dict(sorted(hours.items()))}")
        lines += [f"  {name} id {r[0]} ({KINDS.get(r[0] % 10, '?') if isinstance(r[0], int) else '?'}) carrier {r[3]} "
                  f"at {(r[4] - t0) / HOUR:.3f} h, partition "
                  f"{murmur2_partition(key_bytes(r[0]), partitions) if isinstance(r[0], int) else '?'}"
                  for r in rows_[:shown]]
    return lines


def check_copies(records: list[tuple[str, bytes, bytes, int]], copied: Iterable[tuple[bytes | None, bytes | None]]
                 ) -> str | None:
    """What is wrong with the pipe's output (None: nothing): every record read once, its bytes kept."""
    expected, found = Counter((k, v) for _, k, v, _ in records), Counter(copied)
    if found == expected:
        return None
    missing, extra = expected - found, found - expected
    return f"{sum(missing.values()):,} records missing, {sum(extra.values()):,} extra or duplicated (of {len(records):,})"


def engine_rows(events: Iterable[Event], tag: str = "x") -> Counter[Row]:
    """The pure engine's output on the records (one task, a look for closed windows at every record), and a last
    shipment later than every window: as :func:`expected_rows` if the engine and it agree."""
    plan = plan_text(STATEMENTS.read_text(encoding="utf-8").replace("{tag}", tag))
    query = next(q for q in plan.queries if q.kind == p.STREAM_STREAM_JOIN)
    ticks = iter(range(0, 2**62, 10**6))
    join = StreamJoin(plan, query, clock=lambda: next(ticks))
    records = encoded(events, tag)
    last = max((r[3] for r in records), default=0) + RETENTION + MINUTE
    rows: Counter[Row] = Counter()
    for offset, (topic, key, value, timestamp) in enumerate([*records, (f"shipments_{tag}", key_bytes(-1), b"{}", last)]):
        for out in join.process(Record(topic, key, value, timestamp, 0, offset)):
            rows[decoded(out.record.key, out.record.value, out.record.timestamp)] += 1
    return rows


def produce(bootstrap: str, records: Iterable[tuple[str, bytes, bytes, int]], step: int = 5 * MINUTE) -> None:
    """Each (topic, key, value, timestamp) in turn, with the Java client's partitioner, as fast as the broker takes
    them, flushed at every ``step`` of event time: both topics then reach the broker within a step of each other.
    Unflushed, one topic's batches could land seconds before the other's (the first send to a topic waits for its
    metadata): a worker reading a partition that far ahead of its partner closes its windows before the partner's
    records come, as Kafka Streams would, and the rows are not the event-time order's (3,000 orders: a partition's
    orders all unjoined)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2", "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})
    flushed_to = None
    for topic, key, value, timestamp in records:
        if flushed_to is None or timestamp >= flushed_to + step:
            assert producer.flush(120) == 0
            flushed_to = timestamp
        while True:
            try:
                producer.produce(topic, value=value, key=key, timestamp=timestamp)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def end_offsets(watermarks: Consumer, topic: str, partitions: int) -> int:
    return sum(watermarks.get_watermark_offsets(TopicPartition(topic, n), timeout=10)[1] for n in range(partitions))


def read_output(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    with TopicReader(bootstrap, topic, range(partitions)) as reader:
        return list(reader.read_to_end(timeout=300))


@dataclass
class Sample:
    seconds: float
    read: int
    rss_mib: float
    state_mib: float
    #: ``streamapp_window_store_bytes`` summed over the stores and partitions, by part (memtables, sst_files).
    store_mib: dict[str, float]


def directory_bytes(path: Path) -> int:
    """The size of the files under ``path`` (RocksDB's files come and go as it compacts: those gone are skipped)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def store_bytes(metrics: str) -> dict[str, float]:
    """MiB of the windowed join's stores by part (memtables, sst_files), from the worker's ``/metrics`` text."""
    parts: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("streamapp_window_store_bytes{"):
            labels, value = line.rsplit(" ", 1)
            part = labels.split('part="', 1)[1].split('"', 1)[0]
            parts[part] = parts.get(part, 0.0) + float(value) / 2**20
    return parts


class Sampler(threading.Thread):
    """The worker's RSS, data directory size and records read, every ``every`` seconds until :meth:`stop`."""

    def __init__(self, worker: WorkerProcess, topics: list[str], every: float) -> None:
        super().__init__(daemon=True)
        assert worker.proc is not None
        self.worker, self.topics, self.every = worker, topics, every
        self.process = psutil.Process(worker.proc.pid)
        self.samples: list[Sample] = []
        self._done = threading.Event()
        self._start = time.monotonic()

    def read(self) -> int:
        try:
            records = stats(self.worker)["records"]
        except Exception:  # noqa: BLE001 - a busy worker's web view may time out: this sample says so
            return -1
        return sum(records.get(t, 0) for t in self.topics)

    def stores(self) -> dict[str, float]:
        try:
            text = self.worker.get("/metrics").text
        except Exception:  # noqa: BLE001 - as for read(): the sample goes without
            return {}
        return store_bytes(text)

    def sample(self) -> None:
        self.samples.append(Sample(time.monotonic() - self._start, self.read(), self.process.memory_info().rss / 2**20,
                                   directory_bytes(Path(self.worker.settings.data_dir)) / 2**20, self.stores()))

    def run(self) -> None:
        while not self._done.wait(self.every):
            self.sample()

    def stop(self) -> list[Sample]:
        self._done.set()
        self.join(30)
        self.sample()
        return self.samples


def new_topics(base: Settings) -> str:
    """A new tag and its orders and shipments topics: each engine of a round reads topics of its own."""
    tag = uuid.uuid4().hex[:8]
    ensure_topics(base.bootstrap_servers, {f"orders_{tag}": base.partitions, f"shipments_{tag}": base.partitions})
    return tag


def settings_for(base: Settings, tmp: Path, tag: str) -> Settings:
    """Settings running the statements on the run's topics (``tag``), with an app id and data directory of their own."""
    path = tmp / f"stream-join-{tag}.sql"
    path.write_text(STATEMENTS.read_text(encoding="utf-8").replace("{tag}", tag), encoding="utf-8")
    app = uuid.uuid4().hex[:8]
    return base.replace(statements=str(path), app_id=f"bench-{app}", web_port=free_port(),
                        data_dir=str(tmp / app), dead_letter_topic=f"dead_{app}")


def tick_keys(partitions: int) -> list[bytes]:
    """A key no order has (a negative id) for each partition, as murmur2 places them."""
    keys: dict[int, bytes] = {}
    i = -1
    while len(keys) < partitions:
        keys.setdefault(murmur2_partition(key_bytes(i), partitions), key_bytes(i))
        i -= 1
    return [keys[n] for n in range(partitions)]


#: The worker's ``sitecustomize`` under ``--stacks``: between a ``.start`` and a ``.stop`` file next to the output,
#: every 5 ms of the process's CPU (``ITIMER_PROF``) the main thread's stack is counted where the signal finds it:
#: what the process spends its CPU on, a long C call in the Python frame that made it.  (A sampling thread would be
#: let in by the GIL mostly where the main thread releases it, a socket write or a RocksDB call, and count those.)
#: Then the stacks and each thread's CPU seconds are written there.
STACK_SAMPLER = '''
import collections, json, os, signal, sys, threading, time

INTERVAL = 0.005
_counts = collections.Counter()
_on = False

def _cpu():
    """CPU seconds by thread name (Python's, else the kernel's)."""
    from procfs import task_cpu  # copied beside this file
    names = {t.native_id: t.name for t in threading.enumerate()}
    cpu = collections.Counter()
    for tid, (comm, seconds) in task_cpu(os.getpid()).items():
        cpu[names.get(tid, comm)] += seconds
    return cpu

def _on_prof(signum, frame):
    if not _on:
        return
    stack = []
    while frame is not None:
        stack.append(frame.f_code)
        frame = frame.f_back
    _counts[tuple(stack)] += 1

def _control(path):
    global _on
    while not os.path.exists(path + ".start"):
        time.sleep(0.1)
    started, _on = _cpu(), True
    signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)
    while not os.path.exists(path + ".stop"):
        time.sleep(0.1)
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    _on = False
    time.sleep(0.1)  # a signal already taken runs its handler
    cpu = _cpu()
    cpu.subtract(started)
    stacks = {";".join(f"{c.co_filename}:{c.co_firstlineno}:{c.co_name}" for c in reversed(k)): v
              for k, v in list(_counts.items())}
    with open(path + ".part", "w") as out:
        json.dump({"cpu": dict(cpu), "stacks": stacks, "interval": INTERVAL}, out)
    os.replace(path + ".part", path)

if os.environ.get("STREAM_JOIN_STACKS"):
    signal.signal(signal.SIGPROF, _on_prof)
    threading.Thread(target=_control, args=(os.environ["STREAM_JOIN_STACKS"],), daemon=True,
                     name="stack-sampler").start()
'''


def sampled_worker(settings: Settings, log: Path, stacks: Path | None) -> WorkerProcess:
    """The worker, its main thread's stacks sampled into ``stacks`` (:data:`STACK_SAMPLER`) when one is given."""
    if stacks is None:
        return WorkerProcess(settings, log)
    site = log.parent / f"sampler-{settings.app_id}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STACK_SAMPLER, encoding="utf-8")
    shutil.copy(Path(__file__).with_name("procfs.py"), site)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return WorkerProcess(settings, log, extra_env={"PYTHONPATH": path, "STREAM_JOIN_STACKS": str(stacks)})


def stop_sampling(stacks: Path) -> dict[str, Any]:
    """The sampler's stacks and CPU seconds once it has written them (empty after 10 s without)."""
    stacks.with_name(stacks.name + ".stop").touch()
    deadline = time.monotonic() + 10
    while not stacks.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return json.loads(stacks.read_text(encoding="utf-8")) if stacks.exists() else {}


#: A sampled stack whose leaf is one of these is the event loop waiting, not working.
IDLE = (":select", ":poll", ":_worker", ":wait")


def stack_summary(sampled: dict[str, Any], records: int, top: int = 30) -> list[str]:
    """Lines for people: each thread's CPU µs a record; where the process's CPU samples found the main thread, by
    function, what it spends itself (its own) and with what it calls (inclusive), as shares of the samples that found
    it working and µs a record (the process's CPU over its samples); the samples that found it waiting (the other
    threads' CPU) counted apart."""
    lines = ["CPU µs a record by thread: " + ", ".join(
        f"{name} {seconds * 1e6 / records:.1f}" for name, seconds in sorted(sampled.get("cpu", {}).items(),
                                                                          key=lambda kv: -kv[1]) if seconds > 0)]
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    busy = idle = 0
    for stack, count in sampled.get("stacks", {}).items():
        frames = stack.split(";")
        if frames[-1].endswith(IDLE):
            idle += count
            continue
        busy += count
        own[frames[-1]] += count
        for frame in dict.fromkeys(frames):  # once a sample, however deep
            inclusive[frame] += count
    cpu = sum(sampled.get("cpu", {}).values())  # the timer ticks coarser than it is set: the process's CPU says
    each = (cpu / (busy + idle) if cpu and busy + idle else sampled.get("interval", 0.005)) * 1e6 / records
    lines.append(f"main thread: {busy:,} samples working ({busy * each:.1f} µs a record), {idle:,} waiting")
    for title, counts in (("own", own), ("inclusive", inclusive)):
        lines.append(f"  {title}:")
        lines += [f"  {100 * n / max(busy, 1):5.1f}% {n * each:6.2f} µs {short(frame)}"
                  for frame, n in counts.most_common(top)]
    return lines


def short(frame: str) -> str:
    """``path:line:function`` with the path from the project or site-packages on."""
    for marker in ("/site-packages/", str(Path(__file__).resolve().parent.parent) + "/"):
        if marker in frame:
            return frame.split(marker, 1)[1]
    return frame


def await_rows(bootstrap: str, output: str, partitions: int, wanted: int, records: list[tuple[str, bytes, bytes, int]],
               sources: list[str], read: Callable[[], int], alive: Callable[[], bool], tail: Callable[[], str]) -> None:
    """Until ``output`` holds ``wanted`` rows.  Once ``read()`` says every record was read (not before: a later
    record would close windows still being read), a shipment later than every window goes to each partition each
    second, as a stream that goes on would close the last unmatched orders' windows; after :data:`STALLED_TICKS`
    ticks that wrote nothing it returns, and the check says what is missing."""
    last = max(r[3] for r in records) + RETENTION + MINUTE
    deadline, asked, ticks, written = time.monotonic() + 3600, 0.0, 0, -1
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        while (now_written := end_offsets(watermarks, output, partitions)) < wanted:
            if time.monotonic() > deadline or not alive():
                raise RuntimeError(f"{now_written:,} of {wanted:,} rows in {output}: {tail()}")
            if time.monotonic() - asked > 1.1:  # read them all? then a tick; asked once a second, not to load it
                asked = time.monotonic()
                if read() >= len(records):
                    ticks = ticks + 1 if now_written == written else 0
                    if ticks > STALLED_TICKS:  # the rows below tell which are missing
                        console.print(f"{now_written:,} of {wanted:,} rows, unchanged over {ticks} ticks after every "
                                      f"record was read: checking what is there")
                        return
                    written, last = now_written, last + 1
                    produce(bootstrap, [(sources[1], k, b'{"carrier":"tick"}', last) for k in tick_keys(partitions)])
            time.sleep(0.1)
    finally:
        watermarks.close()


def check_output(expected: Counter[Row], bootstrap: str, output: str, partitions: int,
                 records: list[tuple[str, bytes, bytes, int]], log: Path) -> None:
    """Untimed: ``output`` must hold exactly ``expected``; else the differences, the engine's log kept."""
    found = [decoded(r.key, r.value, r.timestamp) for r in read_output(bootstrap, output, partitions)]
    problem = check_rows(expected, found)
    if problem:
        t0 = min(r[3] for r in records)
        kept = Path(tempfile.gettempdir()) / f"stream_join-{log.name}"  # the run's directory goes
        shutil.copy(log, kept)
        raise RuntimeError("\n".join([f"{output}: {problem} (the log: {kept})",
                                       *differences(expected, found, partitions, t0)]))


def tree_cpu_seconds(process: psutil.Process) -> float:
    """CPU seconds of ``process`` and its living children (a JVM has none, but a launcher script would)."""
    total = cpu_seconds(process)
    for child in process.children(recursive=True):
        try:
            total += cpu_seconds(child)
        except psutil.NoSuchProcess:
            pass
    return total


def thread_cpu(pid: int, own: str) -> Counter[str]:
    """CPU seconds of a process's threads by name, the numbers at the end dropped (``C2 CompilerThread0`` and ``1``
    together), those whose name starts with ``own`` (a Kafka Streams client's: its stream thread) as one: in a JVM,
    the work apart from the JIT compilers and the collector."""
    cpu = Counter[str]()
    for name, seconds in task_cpu(pid).values():
        cpu["stream thread" if name.startswith(own[:15]) else name.rstrip("0123456789")] += seconds
    return cpu


def committed(probe: Consumer, topics: list[str], partitions: int) -> int:
    """The offsets the group of ``probe`` (a consumer that never joins it) has committed on ``topics``, summed: the
    records it has processed (fewer between commits)."""
    offsets = probe.committed([TopicPartition(t, n) for t in topics for n in range(partitions)], timeout=10)
    return sum(max(tp.offset, 0) for tp in offsets)


def bench_worker(settings: Settings, tmp: Path, tag: str, records: list[tuple[str, bytes, bytes, int]],
                 expected: Counter[Row], every: float, stacks: Path | None = None
                 ) -> tuple[Rate, list[Sample], dict[str, Any], int]:
    """The worker's rate on the records, its samples, (``stacks``) its sampled stacks and the records it wrote (rows
    and changelog records); then, untimed, its output checked against ``expected``."""
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    output = topology(settings).stream_joins[0].output
    worker = sampled_worker(settings, tmp / f"worker-{settings.app_id}.log", stacks).start(timeout=180)
    sampled: dict[str, Any] = {}
    sources = [f"orders_{tag}", f"shipments_{tag}"]
    sampler = Sampler(worker, sources, every)
    try:
        assert worker.proc is not None
        process = psutil.Process(worker.proc.pid)
        wanted = sum(expected.values())
        sampler.start()
        if stacks is not None:
            stacks.with_name(stacks.name + ".start").touch()
            time.sleep(0.2)  # the sampler looks every 0.1 s
        start, cpu_start = time.monotonic(), cpu_seconds(process)
        produce(bootstrap, records)
        await_rows(bootstrap, output, n, wanted, records, sources, sampler.read,
                   lambda: worker.proc is not None and worker.proc.poll() is None, lambda: f"the worker: {worker.tail(5)}")
        rate = Rate(len(records) / (time.monotonic() - start), len(records) / (cpu_seconds(process) - cpu_start))
        if stacks is not None:
            sampled = stop_sampling(stacks)
        samples = sampler.stop()
    finally:
        if sampler.is_alive():
            sampler.stop()
        worker.stop()
    check_output(expected, bootstrap, output, n, records, Path(worker.log_path))
    return rate, samples, sampled, sum(expected.values()) + changelog_records(bootstrap, settings.app_id)


def bench_streams(settings: Settings, tmp: Path, tag: str, records: list[tuple[str, bytes, bytes, int]],
                  expected: Counter[Row], extra: dict[str, str] | None = None) -> Rate:
    """Kafka Streams (``streamapp ksql-equivalent``'s program, PlanStreams: ksqlDB's topology of the same statements)
    timed as the worker is: started first, from the first record produced until its output holds the rows (the same
    closing ticks, once its group has committed every record), its JVM's CPU; then, untimed, its output checked
    against ``expected``.  Its settings are the program's own, not tuned here: commit.interval.ms 1000, no record
    cache (statestore.cache.max.bytes 0), Kafka Streams' defaults otherwise (one stream thread, at-least-once,
    max.task.idle.ms 0), -Xmx384m -XX:+UseSerialGC; ``extra`` properties over them."""
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    plan = cluster_plan(settings)
    query = next(q for q in plan.queries if q.kind == p.STREAM_STREAM_JOIN)
    output, sources = plan.source(query.sink).topic, [f"orders_{tag}", f"shipments_{tag}"]
    lines: list[str] = []  # all it prints (the program keeps only the last lines), written out once it stopped
    streams = KsqlEquivalent(settings, state_dir=tmp / f"ks-{tag}", plan=plan, on_line=lines.append,
                             streams_properties=extra or {}).start(timeout=180)
    probe = Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                      "group.id": query_application_id(settings, query.name)})
    try:
        assert streams.pid is not None
        process = psutil.Process(streams.pid)
        threads = thread_cpu(process.pid, settings.app_id)
        start, cpu_start = time.monotonic(), tree_cpu_seconds(process)
        produce(bootstrap, records)
        await_rows(bootstrap, output, n, sum(expected.values()), records, sources,
                   lambda: committed(probe, sources, n), lambda: streams.running,
                   lambda: f"Kafka Streams: {streams.tail(5)}")
        rate = Rate(len(records) / (time.monotonic() - start), len(records) / (tree_cpu_seconds(process) - cpu_start))
        threads = thread_cpu(process.pid, settings.app_id) - threads
        console.print(f"  {STREAMS}' CPU seconds by thread while timed: " + ", ".join(
            f"{name} {seconds:.1f}" for name, seconds in threads.most_common(6)), markup=False, highlight=False)
    finally:
        probe.close()
        streams.stop()
        log = tmp / f"kafka-streams-{settings.app_id}.log"
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check_output(expected, bootstrap, output, n, records, log)
    return rate


def bench_pipe(settings: Settings, tag: str, records: list[tuple[str, bytes, bytes, int]], extra: int = 0,
               writer: str = "aiokafka") -> Rate:
    """The baseline: a raw aiokafka consumer of both topics writing each record to one output, timed alike.

    ``extra``: the pipe also writes that many more records (copies of those read, spread evenly over them) to a
    second topic, so that it writes as many records as the worker (rows and changelog records): what consuming and
    producing alone cost an engine that writes what the join writes; ``writer``: the client writing the copies,
    aiokafka (the worker's) or librdkafka (confluent-kafka's C producer, batching in its own thread)."""
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    output, copies = f"pipe_{uuid.uuid4().hex[:8]}", f"pipe_copies_{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, {output: n, **({copies: n} if extra else {})})
    child = subprocess.Popen([sys.executable, __file__, "pipe", "--bootstrap", bootstrap,
                              "--sources", f"orders_{tag},shipments_{tag}", "--output", output,
                              *(["--copies-to", copies, "--copies", str(extra), "--records", str(len(records)),
                                 "--copies-via", writer] if extra else [])], stdout=subprocess.PIPE)
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        process = psutil.Process(child.pid)
        start, cpu_start = time.monotonic(), cpu_seconds(process)
        produce(bootstrap, records)
        deadline = time.monotonic() + 3600
        while (end_offsets(watermarks, output, n) < len(records)
               or (extra and end_offsets(watermarks, copies, n) < extra)):
            if time.monotonic() > deadline or child.poll() is not None:
                raise RuntimeError(f"the pipe: {end_offsets(watermarks, output, n):,} of {len(records):,}")
            time.sleep(0.1)
        rate = Rate(len(records) / (time.monotonic() - start), len(records) / (cpu_seconds(process) - cpu_start))
        if extra and end_offsets(watermarks, copies, n) != extra:
            raise RuntimeError(f"the pipe wrote {end_offsets(watermarks, copies, n):,} copies, not {extra:,}")
    finally:
        watermarks.close()
        child.terminate()
        child.wait(30)
    problem = check_copies(records, ((r.key, r.value) for r in read_output(bootstrap, output, n)))
    if problem:
        raise RuntimeError(f"{output}: {problem}")
    return rate


def changelog_records(bootstrap: str, app_id: str) -> int:
    """How many records the worker ``app_id`` wrote to its changelogs (Faust names them ``<app id>-…-changelog``)."""
    topics = [t for t in describe(bootstrap).values() if t.name.startswith(f"{app_id}-")
              and t.name.endswith("-changelog")]
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        return sum(end_offsets(watermarks, t.name, t.partitions) for t in topics)
    finally:
        watermarks.close()


async def pipe(bootstrap: str, sources: list[str], output: str, copies_to: str | None = None, copies: int = 0,
               records: int = 1, via: str = "aiokafka") -> None:
    """The baseline's child: each record of ``sources`` to ``output``, one ``send`` each, nothing else; with
    ``copies_to``, ``copies`` more sends there spread evenly over the first ``records`` records read, by ``via``."""
    read = 0
    fast = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 2_000_000}
                    ) if via == "librdkafka" else None

    async def forward(producer: Any, _tp: Any, msg: Any) -> None:
        nonlocal read
        await producer.send(output, msg.value, key=msg.key, timestamp_ms=msg.timestamp)
        if copies_to is None or read >= records:
            return
        read += 1
        for _ in range(read * copies // records - (read - 1) * copies // records):
            if fast is None:
                await producer.send(copies_to, msg.value, key=msg.key, timestamp_ms=msg.timestamp)
            else:
                fast.produce(copies_to, msg.value, key=msg.key, timestamp=msg.timestamp)
        if fast is not None and (read % 1000 == 0 or read == records):
            fast.poll(0)  # delivery reports
            if read == records:
                fast.flush()

    await pipe_loop(bootstrap, sources, forward)


def compared(other: Rate, pipe: Rate, worker: Rate) -> dict[str, Rate]:
    """Another engine's rate beside the round's: itself, it ÷ the pipe, the worker ÷ it."""
    return {"rate": other, "÷ pipe": Rate(other.wall / pipe.wall, other.cpu / pipe.cpu),
            "worker ÷": Rate(worker.wall / other.wall, worker.cpu / other.cpu)}


def curve(samples: list[Sample], total: int, rows: int = 12) -> list[Sample]:
    """About ``rows`` samples spread evenly over the records read, the last one included."""
    read = [s for s in samples if s.read >= 0]
    step = max(total // rows, 1)
    picked, mark = [], 0
    for s in read:
        if s.read >= mark:
            picked.append(s)
            mark = (s.read // step + 1) * step
    if read and picked[-1] is not read[-1]:
        picked.append(read[-1])
    return picked


def flatness(samples: list[Sample], total: int, share: float) -> str:
    """The highest RSS and state of the stream's second quarter after the retention against its last quarter."""
    done = [s for s in samples if s.read >= 0]
    after = [s for s in done if s.read >= share * total]
    if len(after) < 4:
        return "too few samples after the first retention to tell"
    half = len(after) // 2
    early, late = after[:half], after[half:]
    return (f"after the first retention ({share:.0%} of the records): highest RSS {max(s.rss_mib for s in early):,.0f} "
            f"then {max(s.rss_mib for s in late):,.0f} MiB, highest state {max(s.state_mib for s in early):,.0f} then "
            f"{max(s.state_mib for s in late):,.0f} MiB of data directory (the first and second half of the samples)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    child = sub.add_parser("pipe", help="the baseline's child process (used internally)")
    child.add_argument("--bootstrap", required=True)
    child.add_argument("--sources", required=True)
    child.add_argument("--output", required=True)
    child.add_argument("--copies-to", default=None)
    child.add_argument("--copies", type=int, default=0)
    child.add_argument("--records", type=int, default=1)
    child.add_argument("--copies-via", choices=WRITERS, default=WRITERS[0])
    parser.add_argument("--orders", type=int, default=1_000_000, help="orders, and as many shipments")
    parser.add_argument("--hours", type=float, default=10.0, help="the event time the records span")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6, help="of the topics: fewer, larger stores")
    parser.add_argument("--sample-seconds", type=float, default=3.0)
    parser.add_argument("--csv", default=str(Path(tempfile.gettempdir()) / "stream_join_curve.csv"))
    parser.add_argument("--no-engine-check", dest="engine_check", action="store_false",
                        help="skip checking the expected rows against the pure engine first")
    parser.add_argument("--stacks", type=Path, default=None,
                        help="sample the worker's main thread and threads' CPU while timed; the JSON written here")
    parser.add_argument("--kafka-streams", action="store_true",
                        help="also run the join on Kafka Streams (the ksql-equivalent program) each round, timed alike")
    parser.add_argument("--streams-property", action="append", default=[], metavar="KEY=VALUE",
                        help="with --kafka-streams: a Kafka Streams property over the program's own (repeatable)")
    parser.add_argument("--write-alike", nargs="?", const=WRITERS[0], default=None, choices=WRITERS,
                        help="also time the pipe writing as many records as the worker wrote (rows and changelogs), "
                             "the copies by aiokafka (the worker's client, the default) or librdkafka")
    parser.add_argument("--bootstrap", default=None, help="a running broker to use instead of starting one (tests)")
    args = parser.parse_args(argv)
    if args.mode == "pipe":
        asyncio.run(pipe(args.bootstrap, args.sources.split(","), args.output, args.copies_to, args.copies,
                         args.records, args.copies_via))
        return
    for name in ("orders", "rounds", "partitions"):
        if getattr(args, name) < 1:
            parser.exit(2, f"--{name} {getattr(args, name)}: must be at least 1\n")
    if any("=" not in kv for kv in args.streams_property):
        parser.exit(2, f"--streams-property {args.streams_property}: each must be KEY=VALUE\n")
    tuned = dict(kv.split("=", 1) for kv in args.streams_property)
    if args.hours <= 0 or args.sample_seconds <= 0:
        parser.exit(2, f"--hours {args.hours} / --sample-seconds {args.sample_seconds}: must be above 0\n")
    t0 = (int(time.time() * 1000) - int(args.hours * HOUR) - RETENTION - 2 * HOUR) // 1000 * 1000
    events = generate(args.orders, args.hours, t0)
    expected = expected_rows(events)
    console.print(f"{args.orders:,} orders, {len(events) - args.orders:,} shipments over {args.hours:g} hours: "
                  f"{sum(expected.values()):,} rows expected")
    if args.engine_check:
        started = time.monotonic()
        problem = check_rows(expected, engine_rows(events).elements())
        if problem:
            raise SystemExit(f"the expected rows are not the pure engine's: {problem}")
        console.print(f"the pure engine writes exactly those rows ({time.monotonic() - started:.0f} s in one task)")
    if args.kafka_streams:
        console.print(f"{STREAMS}: the program's own settings" + "".join(f", {k}={v}" for k, v in tuned.items()))
    ratios: list[Rate] = []
    table: list[tuple[int, Sample]] = []
    stacks: dict[str, Any] = {"cpu": Counter(), "stacks": Counter(), "interval": 0.005}
    engines = ["pipe", "worker", *([STREAMS] if args.kafka_streams else [])]
    streams: dict[str, list[Rate]] = {"rate": [], "÷ pipe": [], "worker ÷": []}  # Kafka Streams' figures by round
    alikes: dict[str, list[Rate]] = {"rate": [], "÷ pipe": [], "worker ÷": []}  # the pipe writing as the worker writes
    with (nullcontext(None) if args.bootstrap else EmbeddedBroker()) as broker, \
            tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = (broker.settings(Settings()) if broker else Settings().replace(bootstrap_servers=args.bootstrap)
                ).replace(partitions=args.partitions)
        for round_ in range(1, args.rounds + 1):
            tag = new_topics(base)
            settings = settings_for(base, tmp, tag)
            records = encoded(events, tag)
            loads = [os.getloadavg()[0]]
            first = (round_ - 1) % len(engines)  # each engine first in turn, the others after it in order
            turn = engines[first:] + engines[:first]
            rates: dict[str, Rate] = {}
            for engine in turn:
                own = new_topics(base) if engine != "pipe" else tag  # the engines read topics of their own
                if engine == "pipe":
                    rates[engine] = bench_pipe(settings, tag, records)
                elif engine == "worker":
                    rates[engine], samples, sampled, writes = bench_worker(
                        settings_for(base, tmp, own), tmp, own, encoded(events, own), expected, args.sample_seconds,
                        tmp / f"stacks-{own}.json" if args.stacks else None)
                    for part in ("cpu", "stacks"):
                        stacks[part].update(sampled.get(part, {}))
                else:
                    rates[engine] = bench_streams(settings_for(base, tmp, own), tmp, own, encoded(events, own), expected,
                                                  tuned)
                loads.append(os.getloadavg()[0])
            if args.write_alike:  # last: it writes as many records as this round's worker did
                own = new_topics(base)
                rates[ALIKE] = bench_pipe(settings_for(base, tmp, own), own, encoded(events, own),
                                          max(writes - len(records), 0), args.write_alike)
                loads.append(os.getloadavg()[0])
            pipe_rate, rate = rates["pipe"], rates["worker"]
            ratios.append(Rate(rate.wall / pipe_rate.wall, rate.cpu / pipe_rate.cpu))
            table += [(round_, s) for s in samples]
            console.print(
                f"round {round_} ({f'{turn[0]} first' if len(turn) == 2 else ', '.join(turn)}): pipe "
                f"{pipe_rate.wall:,.0f}/s ({len(records) / pipe_rate.wall:.1f} s, {pipe_rate.cpu:,.0f} per CPU-s), "
                f"worker {rate.wall:,.0f}/s ({len(records) / rate.wall:.1f} s, {rate.cpu:,.0f} per CPU-s): "
                f"{ratios[-1].wall:.2f}× the pipe, {ratios[-1].cpu:.2f}× per CPU-s; load {min(loads):.1f}-"
                f"{max(loads):.1f}; the worker wrote exactly the expected rows, the pipe every record once")
            for engine, figures in ((ALIKE, alikes), (STREAMS, streams)):
                for name, figure in (compared(rates[engine], pipe_rate, rate) if engine in rates else {}).items():
                    figures[name].append(figure)
            if ALIKE in rates:
                console.print(
                    f"  {ALIKE} by {args.write_alike} ({writes:,} records for {len(records):,} read: {writes / len(records):.2f} a record) "
                    f"{rates[ALIKE].wall:,.0f}/s, {rates[ALIKE].cpu:,.0f} per CPU-s: {alikes['÷ pipe'][-1].wall:.2f}× "
                    f"the pipe, {alikes['÷ pipe'][-1].cpu:.2f}× per CPU-s; the worker {alikes['worker ÷'][-1].cpu:.2f}× "
                    f"it per CPU-s")
            if STREAMS in rates:
                ks = rates[STREAMS]
                console.print(
                    f"  {STREAMS} {ks.wall:,.0f}/s ({len(records) / ks.wall:.1f} s, {ks.cpu:,.0f} per CPU-s): "
                    f"{streams['÷ pipe'][-1].wall:.2f}× the pipe, {streams['÷ pipe'][-1].cpu:.2f}× per CPU-s; the "
                    f"worker {streams['worker ÷'][-1].wall:.2f}× {STREAMS}, {streams['worker ÷'][-1].cpu:.2f}× per "
                    f"CPU-s; {STREAMS} wrote exactly the expected rows")
            console.print(f"  {'records read':>14} {'seconds':>8} {'RSS MiB':>8} {'data dir MiB':>13} "
                          f"{'memtables MiB':>14} {'SST MiB':>8}")
            for s in curve(samples, len(records)):
                console.print(f"  {s.read:>14,} {s.seconds:>8.0f} {s.rss_mib:>8.0f} {s.state_mib:>13.1f} "
                              f"{s.store_mib.get('memtables', 0):>14.1f} {s.store_mib.get('sst_files', 0):>8.1f}")
            console.print("  " + flatness(samples, len(records), min(RETENTION / (args.hours * HOUR), 1.0)))
    with open(args.csv, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["round", "seconds", "records_read", "rss_mib", "data_dir_mib", "memtables_mib", "sst_mib"])
        writer.writerows([r, f"{s.seconds:.1f}", s.read, f"{s.rss_mib:.1f}", f"{s.state_mib:.2f}",
                          f"{s.store_mib.get('memtables', 0):.2f}", f"{s.store_mib.get('sst_files', 0):.2f}"]
                         for r, s in table)
    if args.stacks:
        args.stacks.write_text(json.dumps(stacks), encoding="utf-8")
        for line in stack_summary(stacks, len(events) * args.rounds):
            console.print(line, markup=False, highlight=False)
    console.print(f"Orders × shipments joined ({args.orders:,} orders, {args.rounds} rounds): worker ÷ pipe median "
                  f"{statistics.median(r.wall for r in ratios):.2f}× wall (lowest {min(r.wall for r in ratios):.2f}×), "
                  f"{statistics.median(r.cpu for r in ratios):.2f}× per CPU second; the curve in {args.csv}")
    if alikes["÷ pipe"]:
        console.print(f"{ALIKE} by {args.write_alike} ÷ pipe median "
                      f"{statistics.median(r.cpu for r in alikes['÷ pipe']):.2f}× per CPU second "
                      f"({statistics.median(r.wall for r in alikes['÷ pipe']):.2f}× wall): the most an engine that "
                      f"writes what the join writes with {args.write_alike} could reach; the worker ÷ it median "
                      f"{statistics.median(r.cpu for r in alikes['worker ÷']):.2f}× per CPU second")
    if streams["rate"]:
        median = {name: Rate(statistics.median(r.wall for r in rates_), statistics.median(r.cpu for r in rates_))
                  for name, rates_ in streams.items()}
        console.print(
            f"{STREAMS} (PlanStreams as `streamapp ksql-equivalent` runs it, -Xmx{KsqlEquivalent.heap}"
            f"{''.join(f', {k}={v}' for k, v in tuned.items())}): median "
            f"{median['rate'].wall:,.0f} records/s, {median['rate'].cpu:,.0f} per CPU second; {STREAMS} ÷ pipe median "
            f"{median['÷ pipe'].wall:.2f}× wall, {median['÷ pipe'].cpu:.2f}× per CPU second; worker ÷ {STREAMS} "
            f"median {median['worker ÷'].wall:.2f}× wall, {median['worker ÷'].cpu:.2f}× per CPU second")


if __name__ == "__main__":
    main()
