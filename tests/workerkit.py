"""What the worker's tests share: isolated settings, data, real producers, reading outputs, asking the workers.

Everything talks to the session's real Apache Kafka broker; the worker is the real
``faust -A streamapp worker`` child process, and tests wait on what it says
itself (``/stats``, ``/health``) and on its output topics, never on its log.

The expected join output is computed here from the produced users and orders,
independently of the plan's engine (``streamapp.sql.engine``): key = USER_ID as UTF-8, value = compact
JSON with ksqlDB's UPPERCASE columns in select order, record timestamp = TS,
partition = murmur2 (the pure-Python reference hash) of the key.
"""
from __future__ import annotations

import contextlib
import hashlib
import subprocess
import json
import random
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, Sequence, TypeVar

import aiohttp
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamapp.kafka.broker import free_port
from streamapp.kafka.reader import Record, TopicReader
from streamapp.partitioners.hashes import murmur2
from streamapp.settings import Settings
from streamapp.sql.plan import Plan
from streamapp.sql.planner import plan_file
from streamapp.worker.process import WorkerProcess

#: The seed's order channels, as the tests' orders carry them.
CHANNELS = ("store", "web", "partner", "catalog")

DAY = "2026-11-21"
DAY_START_MS = int(datetime(2026, 11, 21, tzinfo=timezone.utc).timestamp() * 1000)
DAY_MS = 86_400_000
T = TypeVar("T")
#: What makes an order the same order in an output (the reconciliation's identity).
Identity = tuple[str, int, int, int, float, str]


def murmur2_partition(key: bytes, n: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n


def fetched(topic: str, partition: int, *offsets: int) -> list[Any]:
    """Records as aiokafka's fetch returns them (what the worker's batch handlers are handed)."""
    from aiokafka.structs import ConsumerRecord

    return [ConsumerRecord(topic, partition, offset, 1_700_000_000_000 + offset, 0, b"k", b"v", None, 1, 1, [])
            for offset in offsets]


def isolated(settings: Settings, tag: str = "t", **changes: Any) -> Settings:
    """Settings whose topics, app id and web port belong to one test only (``changes`` win)."""
    suffix = f"{tag}_{uuid.uuid4().hex[:8]}"
    names: dict[str, Any] = {
        name: f"{getattr(settings, name)}_{suffix}"
        for name in ("users_topic", "orders_topic", "users_repartition_topic", "merged_topic",
                     "merged_repartition_topic", "dead_letter_topic", "ksqldb_merged_topic",
                     "ksqldb_merged_repartition_topic")
    }
    return settings.replace(**{"app_id": f"{tag}-{suffix}", "web_port": free_port(), **names, **changes})


@dataclass(frozen=True)
class Declared:
    """Statements declared for one test: its tag (in every topic name), its plan and the worker's settings."""

    tag: str
    plan: Plan
    settings: Settings

    def topic(self, name: str) -> str:
        """A topic of the statements, ``{name}_{tag}`` (their ``KAFKA_TOPIC``)."""
        return f"{name}_{self.tag}"

    def output(self, name: str) -> str:
        """The worker's topic for a ``CREATE ... AS SELECT``'s ``{name}_{tag}`` (its output prefix first)."""
        return f"{self.settings.output_prefix}{name}_{self.tag}"


def declare(settings: Settings, tmp_path: Path, statements: str, app: str, **changes: Any) -> Declared:
    """Write ``statements`` (``{tag}`` in every topic name) with a new tag, plan them, and give a worker of them
    its own app id (``{app}-{tag}``), web port and dead-letter topic (``changes`` win)."""
    tag = uuid.uuid4().hex[:8]
    path = tmp_path / f"{app}-{tag}.sql"
    path.write_text(statements.format(tag=tag), encoding="utf-8")
    own: dict[str, Any] = {"statements": str(path), "app_id": f"{app}-{tag}", "web_port": free_port(),
                           "dead_letter_topic": f"dead_{tag}"}
    return Declared(tag, plan_file(path), settings.replace(**{**own, **changes}))


@dataclass(frozen=True, slots=True)
class Order:
    """An order the scenarios produce (the seed's ``DEMO_USER_ORDERS`` columns), its identity and its value."""

    user_id: str
    ts: int
    product_id: int
    qty: int
    unit_price: float
    channel: str

    @property
    def identity(self) -> Identity:
        return (self.user_id, self.ts, self.product_id, self.qty, self.unit_price, self.channel)

    def value(self) -> bytes:
        return json.dumps({"ts": self.ts, "product_id": self.product_id, "qty": self.qty,
                           "unit_price": self.unit_price, "channel": self.channel}).encode()


@dataclass
class Dataset:
    users: dict[str, dict[str, Any]]
    orders: list[Order]

    def user_records(self) -> list[tuple[bytes, bytes]]:
        return [(uid.encode(), json.dumps(row).encode()) for uid, row in self.users.items()]

    def order_records(self) -> list[tuple[bytes, bytes, int]]:
        return [(o.user_id.encode(), o.value(), o.ts) for o in self.orders]

    def expected_value(self, order: Order) -> bytes:
        """ksqlDB's LEFT JOIN output value for ``order`` (every user is known before its orders)."""
        user = self.users.get(order.user_id)
        columns = {"NAME": user["name"] if user else None, "AGE": user["age"] if user else None,
                   "PRODUCT_ID": order.product_id, "QTY": order.qty, "UNIT_PRICE": order.unit_price,
                   "CHANNEL": order.channel, "TS": order.ts}
        return json.dumps(columns, separators=(",", ":"), ensure_ascii=False).encode()


def make_dataset(users: int, orders: int, seed: int) -> Dataset:
    """Users with 32-hex ids; orders inside ``DAY``, each unique (``product_id`` is its sequence number)."""
    rng = random.Random(seed)
    rows = {f"{rng.getrandbits(128):032x}": {"name": f"User {i}", "age": rng.randint(18, 90)} for i in range(users)}
    ids = list(rows)
    made = [
        Order(rng.choice(ids), DAY_START_MS + rng.randrange(DAY_MS), i + 1, rng.randint(1, 9),
              round(rng.uniform(1, 100), 2), rng.choice(CHANNELS))
        for i in range(orders)
    ]
    return Dataset(rows, made)


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int]],
            partitioner: str = "murmur2") -> int:
    """Produce with real librdkafka (``murmur2`` is bit-for-bit the Java client's for non-empty keys)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": partitioner, "linger.ms": 5,
                         "message.max.bytes": 2_000_000})  # librdkafka's own partitioner of that name
    failures: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for record in records:
        key, value = record[0], record[1]
        extra = {"timestamp": record[2]} if len(record) > 2 else {}
        for _ in range(600):  # a full queue drains as the broker acknowledges: a minute at most
            try:
                producer.produce(topic, key=key, value=value, on_delivery=report, **extra)
                break
            except BufferError:
                producer.poll(0.1)
        else:
            raise AssertionError(f"{topic}: the producer's queue stayed full for a minute")
        producer.poll(0)
        count += 1
    remaining = producer.flush(60)
    assert remaining == 0 and not failures, f"{topic}: {remaining} undelivered, errors {failures[:3]}"
    return count


class BackgroundProducer(threading.Thread):
    """Produce records in chunks at a steady pace, so that a crash lands in the middle of the stream.

    With ``hold_at`` it stops after that many records until :meth:`resume`, so the
    rest of the stream is certainly produced after the crash, however slow the
    machine is.  ``pause`` may be changed while it runs (e.g. to 0 once what the
    slow pace was for, a worker joining, is done).
    """

    def __init__(self, bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes, int]],
                 chunk: int, pause: float, hold_at: int | None = None) -> None:
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, records, chunk)
        self.pause = pause
        self.hold_at = hold_at
        self.released = threading.Event()
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        bootstrap, topic, records, chunk = self.args
        try:
            for start in range(0, len(records), chunk):
                if self.hold_at is not None and self.produced >= self.hold_at:
                    self.released.wait(600)
                self.produced += produce(bootstrap, topic, records[start:start + chunk])
                time.sleep(self.pause)
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def resume(self) -> None:
        self.released.set()

    def finish(self, timeout: float) -> None:
        self.resume()
        self.join(timeout)
        assert not self.is_alive(), f"producer still running after {timeout:.0f}s ({self.produced} produced)"
        assert self.error is None, f"producer failed: {self.error!r}"


class TopicTail:
    """Every record of a topic from the beginning, kept while the scenario runs (one :class:`TopicReader`)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.records: list[Record] = []
        self.reader = TopicReader(bootstrap, topic, range(partitions))

    def poll(self, seconds: float = 0.5) -> int:
        """Read what arrives within ``seconds``; returns how many records were new."""
        new = self.reader.read(seconds)
        self.records += new
        return len(new)

    def drain(self) -> None:
        """Read every record written so far: up to each partition's end as of now."""
        self.records += self.reader.read_to_end(timeout=60.0)

    def close(self) -> None:
        self.reader.close()


def output_tails(settings: Settings) -> list[TopicTail]:
    """A tail on each join output, the direct one first, then the repartitioned one."""
    return [TopicTail(settings.bootstrap_servers, topic, settings.partitions)
            for topic in (settings.merged_topic, settings.merged_repartition_topic)]


def holds_at_least(tail: TopicTail, count: int) -> bool:
    """Read what arrives for a moment, then whether ``tail`` holds ``count`` records (for :func:`wait_until`)."""
    tail.poll(0.2)
    return len(tail.records) >= count


def output_identity(record: Record) -> Identity:
    value = json.loads(record.value or b"null")
    return (record.key.decode() if record.key else "", value["TS"], value["PRODUCT_ID"], value["QTY"],
            value["UNIT_PRICE"], value["CHANNEL"])


@dataclass(frozen=True)
class OutputCheck:
    """What one join output holds against the orders produced."""

    records: int
    distinct: int
    duplicates: int  # records beyond the first of their order
    duplicated_orders: int  # orders with more than one record
    missing: list[Identity]
    wrong: list[str]


def check_output(dataset: Dataset, records: Sequence[Record], partitions: int) -> OutputCheck:
    """Compare an output topic with the expected ksqlDB-format record of every order."""
    by_identity = {o.identity: o for o in dataset.orders}
    counts: Counter[Identity] = Counter()
    wrong: list[str] = []
    for rec in records:
        ident = output_identity(rec)
        counts[ident] += 1
        order = by_identity.get(ident)
        if order is None:
            wrong.append(f"unexpected record {rec}")
            continue
        if rec.value != dataset.expected_value(order):
            wrong.append(f"value {rec.value!r} != {dataset.expected_value(order)!r}")
        if rec.timestamp != order.ts or rec.partition != murmur2_partition(rec.key or b"", partitions):
            wrong.append(f"timestamp/partition of {rec} (expected ts {order.ts})")
    missing = [ident for ident in by_identity if ident not in counts]
    return OutputCheck(
        records=len(records), distinct=len(counts), duplicates=sum(n - 1 for n in counts.values()),
        duplicated_orders=sum(1 for n in counts.values() if n > 1), missing=missing, wrong=wrong[:5],
    )


def assert_every_order_joined(dataset: Dataset, tails: Sequence[TopicTail], partitions: int) -> dict[str, dict[str, int]]:
    """Each tailed output holds every order, each record exact; returns its figures (records, duplicates) by topic."""
    figures: dict[str, dict[str, int]] = {}
    for tail in tails:
        check = check_output(dataset, tail.records, partitions)
        assert check.missing == [] and check.wrong == [], (tail.topic, check.missing[:3], check.wrong)
        assert check.distinct == len(dataset.orders), tail.topic
        figures[tail.topic] = {"records": check.records, "duplicates": check.duplicates,
                               "duplicated_orders": check.duplicated_orders}
    return figures


def wait_for_outputs(tails: Sequence[TopicTail], dataset: Dataset, workers: Sequence[WorkerProcess],
                     timeout: float) -> None:
    """Until every order has at least one record in each tailed output (or fail with the workers' logs)."""
    wanted = {o.identity for o in dataset.orders}
    seen: list[set[Identity]] = [set() for _ in tails]
    done = [0 for _ in tails]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, tail in enumerate(tails):
            tail.poll(0.3)
            seen[i].update(output_identity(r) for r in tail.records[done[i]:])
            done[i] = len(tail.records)
        if all(wanted <= s for s in seen):
            return
        for worker in workers:
            assert worker.proc is None or worker.proc.poll() is None, f"worker exited: {worker.tail()}"
    have = [len(wanted & s) for s in seen]
    logs = "\n---\n".join(w.tail(10) for w in workers)
    raise AssertionError(f"after {timeout:.0f}s the outputs hold {have} of {len(wanted)} orders\n{logs}")


def start_together(child: Any, *workers: WorkerProcess, timeout: float = 120.0) -> None:
    """Start ``child`` (the Kafka Streams program) here and ``workers`` each in a thread at the same time; return
    once every one is ready (a start is mostly a process's own imports and JVM); the first failure is raised.

    ``child`` starts in this thread: a :class:`~streamapp.kafka.child.ChildProcess` is killed when the thread
    that forked it ends (``PR_SET_PDEATHSIG``), and a pool's threads end with it.  Not two workers of one new
    app: one may still be creating the app's topics when the other has joined, and the group then rebalances
    after both said ready (a failure seen once at load 40: rows counted twice by /stats).
    """
    with ThreadPoolExecutor(max(len(workers), 1)) as pool:
        starting = [pool.submit(worker.start, timeout=timeout) for worker in workers]
        try:
            child.start(timeout=timeout)
        finally:
            wait(starting)
        for started in starting:
            started.result()


def background_scenario(name: str, scenario: Callable[[Settings, Path], None]) -> Any:
    """A module-scoped fixture ``name`` that starts ``scenario(module_broker_settings, a directory of its own)`` in a
    thread at its first use, so that it runs beside the tests that run meanwhile (a scenario that is mostly waiting:
    worker starts, session timeouts, paced streams). Its future is what the test asserting it waits on, where its
    failure is raised; the fixture's end waits for the scenario's, so nothing it started outlives the module."""

    @pytest.fixture(scope="module", name=name)
    def started(module_broker_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[None]]:
        with ThreadPoolExecutor(1) as pool:
            yield pool.submit(scenario, module_broker_settings, tmp_path_factory.mktemp(name))

    return started


def worker_settings(settings: Settings, tmp_path: Path, name: str) -> Settings:
    return settings.replace(web_port=free_port(), data_dir=str(tmp_path / f"data-{name}"))


async def http_get(url: str, token: str | None = None, timeout: float = 20.0) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            body = await response.read()
            try:
                return response.status, json.loads(body)
            except ValueError:
                return response.status, body.decode("utf-8", "replace")


async def table_rows(base_url: str, table: str, partitions: int, token: str | None = None) -> list[tuple[int, str, Any]]:
    """Every row of one table, (partition, key hex, row), paged through the worker's ``/tables/{table}`` view."""
    rows: list[tuple[int, str, Any]] = []
    for partition in range(partitions):
        after = ""
        while True:
            query = f"?partition={partition}&limit=500" + (f"&after={after}" if after else "")
            status, body = await http_get(f"{base_url}/tables/{table}{query}", token)
            if status != 200:
                raise AssertionError(f"/tables/{table}{query}: {status} {body}")
            rows += [(partition, r["key_hex"], r["row"]) for r in body["rows"]]
            if body["next_after"] is None:
                break
            after = body["next_after"]
    return rows


def digest(rows: Iterable[tuple[Any, ...]]) -> str:
    """One sha256 over every row, order-independent."""
    h = hashlib.sha256()
    for row in sorted(json.dumps(r, sort_keys=True) for r in rows):
        h.update(row.encode())
        h.update(b"\n")
    return h.hexdigest()


def make_users(count: int, seed: int) -> dict[str, dict[str, object]]:
    rng = random.Random(seed)
    return {
        uuid.UUID(int=rng.getrandbits(128)).hex: {"name": f"User {i}", "age": rng.randint(18, 90)}
        for i in range(count)
    }


def make_order(user_id: str, rng: random.Random) -> dict[str, object]:
    return {
        "ts": 1_677_844_000_000 + rng.randint(0, 10**8),
        "product_id": rng.randint(1, 5000),
        "qty": rng.randint(1, 9),
        "unit_price": round(rng.uniform(1, 100), 2),
        "channel": rng.choice(CHANNELS),
    }


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> list[Record]:
    """Follow ``topic`` from the beginning until ``expected`` records arrived (or the timeout), then read it to its end.

    What is written by then is all there, so an extra (duplicate or stray) record shows without a grace period.
    """
    with TopicReader(bootstrap, topic, range(partitions)) as reader:
        records = reader.read_to_end()
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            records += reader.read(0.5)
        return records + reader.read_to_end()


def stats(worker: WorkerProcess) -> dict[str, Any]:
    """The worker's own totals since it started (``/stats?scope=local``): users, orders, joins, dead letters."""
    response = worker.get("/stats?scope=local")
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()["counters"]["totals"]


def wait_until(condition: Callable[[], T], timeout: float, what: Callable[[], str] | str,
               workers: Sequence[WorkerProcess] = ()) -> T:
    """Ask ``condition()`` until it answers something true, and return that; fail naming ``what`` when time
    runs out or one of ``workers`` exits (with its last log lines)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker in workers:
            assert worker.proc is not None and worker.proc.poll() is None, f"worker exited: {worker.tail()}"
        answer = condition()
        if answer:
            return answer
        time.sleep(0.3)
    described = what if isinstance(what, str) else what()
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {described}: "
                         + "\n---\n".join(w.tail(10) for w in workers))


def loaded(totals: dict[str, Any], settings: Settings) -> tuple[int, int]:
    """Users loaded into the table of the users topic and into the repartitioned one, from ``/stats`` totals."""
    rows = totals["rows"]
    return rows.get(settings.users_topic, 0), rows.get(settings.users_repartition_topic, 0)


def orders_read(totals: dict[str, Any], settings: Settings) -> int:
    """Orders the worker read, from ``/stats`` totals."""
    return totals["records"].get(settings.orders_topic, 0)


def wait_for_users(workers: Sequence[WorkerProcess], count: int, timeout: float = 90.0) -> None:
    """Until the workers together say (``/stats``) they loaded ``count`` users into both tables."""
    def totals() -> tuple[int, int]:
        per = [loaded(stats(w), w.settings) for w in workers]
        return sum(p[0] for p in per), sum(p[1] for p in per)

    wait_until(lambda: totals() == (count, count), timeout,
               lambda: f"{count} users in both tables, have {totals()}: {workers[0].tail(5)}")


def to_json(value: dict[str, object]) -> bytes:
    return json.dumps(value).encode()


def group_offsets(bootstrap: str, group: str | None, topics: Iterable[str], partitions: int, ends: bool = True
                  ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Each partition's end offset (its high watermark; unless not ``ends``), and ``group``'s committed offset
    (negative: none; none asked when ``group`` is None), by ``(topic, partition)``: one consumer for both."""
    parts = [TopicPartition(t, p) for t in topics for p in range(partitions)]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "workerkit-ends"})
    try:
        found = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in parts} \
            if ends else {}
        done = {} if group is None else {(tp.topic, tp.partition): tp.offset
                                         for tp in consumer.committed(parts, timeout=30)}
    finally:
        consumer.close()
    return found, done


def end_offsets(bootstrap: str, topics: Iterable[str], partitions: int) -> dict[tuple[str, int], int]:
    """Each partition's end offset (its high watermark), by ``(topic, partition)``."""
    return group_offsets(bootstrap, None, topics, partitions)[0]


def committed_by(bootstrap: str, group: str, topics: Iterable[str], partitions: int) -> dict[tuple[str, int], int]:
    """``group``'s committed offset of each partition, by ``(topic, partition)`` (negative: none committed)."""
    return group_offsets(bootstrap, group, topics, partitions, ends=False)[1]


def committed_offsets(settings: Settings, topic: str) -> dict[int, int]:
    """The worker group's committed offset of each partition of ``topic`` (negative: none committed)."""
    done = committed_by(settings.bootstrap_servers, settings.app_id, [topic], settings.partitions)
    return {partition: offset for (_, partition), offset in done.items()}


def group_progress(bootstrap: str, group: str, topic: str, partitions: int) -> tuple[bool, int]:
    """Whether ``group`` has committed the end of every partition of ``topic``, and how many records it holds."""
    ends, done = group_offsets(bootstrap, group, [topic], partitions)
    return all(done[tp] >= end for tp, end in ends.items()), sum(ends.values())


def caught_up(bootstrap: str, group: str, topics: Iterable[str], partitions: int) -> bool:
    """Whether ``group`` has committed the end of every partition of ``topics`` that holds records."""
    ends, done = group_offsets(bootstrap, group, topics, partitions)
    return all(done[tp] >= end for tp, end in ends.items() if end > 0)


def end_process(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM a process a test started, then SIGKILL it if it has not exited within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


#: The timestamp of offset 0 in :func:`write_records` (as :func:`fetched` stamps its records).
RECORD_TS = 1_700_000_000_000


def write_records(bootstrap: str, topic: str, partition: int, count: int, first_ts: int = RECORD_TS,
                  step_ms: int = 1) -> None:
    """Write ``count`` records to one partition with real librdkafka, timestamped ``first_ts`` then every
    ``step_ms``."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=b"k", value=b"v%d" % i, partition=partition, timestamp=first_ts + i * step_ms)
    assert producer.flush(30) == 0


def write_transactions(bootstrap: str, topic: str, partition: int, sizes: Sequence[int], first_ts: int = RECORD_TS
                       ) -> None:
    """Write one committed transaction of each of ``sizes`` records to one partition, one producer after the other:
    each commit marker takes the offset after its records (a gap in the offsets a consumer reads), before the next
    transaction's records (the broker lets a transaction begin only once the one before it is complete)."""
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"tx-{topic}-{partition}-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    written = 0
    for size in sizes:
        producer.begin_transaction()
        for _ in range(size):
            producer.produce(topic, key=b"k", value=b"t%d" % written, partition=partition, timestamp=first_ts + written)
            written += 1
        producer.commit_transaction(30)


def group_committed(settings: Settings, tps: Iterable[Any]) -> dict[Any, int | None]:
    """The committed offset of each of ``tps`` (Faust TPs) in the group of ``settings.app_id``, as the broker answers
    it now (None: nothing committed)."""
    from faust.types import TP

    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": settings.app_id})
    try:
        answered = consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in tps], timeout=30)
        return {TP(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in answered}
    finally:
        consumer.close()


def commit_group(settings: Settings, offsets: dict[Any, int]) -> None:
    """Commit ``offsets`` (Faust TP -> offset) for the group of ``settings.app_id`` on the broker, as an earlier owner
    of the partitions would have."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": settings.app_id,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


async def fetch_once(consumer: Any, timeout: float = 10.0) -> None:
    """One turn of the fetch loop of a consumer whose topics are all batch topics: Faust's getmany (a real fetch, back
    as soon as records come, else after ``timeout``), then the batch path."""
    async for _ in consumer.getmany(timeout):
        raise AssertionError("every topic here is a batch topic: Faust delivers none of their messages")


@contextlib.asynccontextmanager
async def consumer_on_broker(settings: Settings, assigned: Iterable[Any], handlers: dict[str, Any]
                             ) -> AsyncIterator[Any]:
    """A real app's consumer (:func:`~streamapp.worker.app.create_app` of ``settings``) whose aiokafka consumer thread
    is started against the broker, in the app's group, with ``assigned`` (Faust TPs) assigned to it.

    The assignment is aiokafka's manual one (``assign``): the committed offsets, positions and fetches are the
    broker's, with no group rebalance (whose callbacks would start the whole app).  As Faust does after an
    assignment, the partitions are made active (``_set_active_tps``, what ``on_partitions_assigned`` does) and
    sought to their committed offsets (``perform_seek``, the recovery's).  ``handlers``: topic -> batch handler,
    registered with ``app.batch_agent`` and indexed as the conductor does when it subscribes, so their topics' acks
    are on.  Nothing else runs (no fetch loop, agents, tables or producer): the test drives ``consumer.getmany``.
    Call inside the event loop the test runs: the consumer thread answers to it.
    """
    from aiokafka import TopicPartition as AioTopicPartition

    from streamapp.worker.app import create_app

    app = create_app(settings)
    consumer = app.consumer
    for topic, handler in handlers.items():
        app.batch_agent(app.topic(topic))(handler)
    await app.topics._update_indices()
    thread = consumer._thread
    await thread.start()
    try:
        parts = [AioTopicPartition(tp.topic, tp.partition) for tp in assigned]

        async def assign() -> None:  # in the consumer thread, whose loop aiokafka runs on
            thread._consumer.assign(parts)

        await thread.call_thread(assign)
        consumer._set_active_tps(consumer.assignment())
        await consumer.perform_seek()
        yield consumer
    finally:
        await thread.stop()
