"""Poison records on Apache Kafka: single records that used to stop the worker, again after every restart.

Each poison record is interleaved with valid traffic on a real worker and a real
broker.  The worker must stay up (no crash, no restarted agent, no traceback),
every valid order must be joined exactly once in both outputs, and every poison
record must be in the dead-letter topic with its reason: byte for byte when it
fits there, else cut to a prefix with the SHA-256 and size of what was cut.
Users that are poison must reach neither table (the orders for them are misses).

Some topics are created ahead with smaller ``max.message.bytes`` than the broker's,
so the worker's limits read at start (not just the producer's) are what refuse them.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from streamapp.kafka.admin import admin_client
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.model.dead_letters import PREFIX_BYTES, DeadLetter, from_record
from streamapp.model.records import MAX_NESTING
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import (
    orders_read, Dataset, Order, TopicTail, check_output, committed_offsets, isolated, make_dataset, murmur2_partition, produce,
    stats, wait_for_outputs, wait_for_users as wait_for_loaded, worker_settings,
)

#: Limits of the topics created ahead (the broker's own is 1,048,588; the producer's 1,000,000).
DEAD_LETTER_MAX = 200_000
MERGED_REPARTITION_MAX = 150_000
USERS_CHANGELOG_MAX = 250_000
GOOD_ORDER = {"ts": 0, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}


@dataclass(frozen=True)
class Poison:
    name: str
    role: str  # "users" or "orders"
    key: bytes | None
    value: bytes | None
    field: str
    words: tuple[str, ...]  # fragments the reason must contain
    truncated: tuple[str, ...] = ()  # parts the dead letter must have cut to a prefix

    def identity(self, topics: dict[str, str]) -> tuple[str, str, str]:
        return (topics[self.role], _sha(self.key), _sha(self.value))


def _sha(data: bytes | None) -> str:
    return "null" if data is None else hashlib.sha256(data).hexdigest()


def letter_identity(letter: DeadLetter) -> tuple[str, str, str]:
    """The source topic and the SHA-256 of the original key and value, whether the letter was cut or not."""
    return (letter.source_topic,
            letter.sha256["key"] if "key" in letter.truncated else _sha(letter.key),
            letter.sha256["value"] if "value" in letter.truncated else _sha(letter.value))


def order_value(**changes: object) -> bytes:
    return json.dumps({**GOOD_ORDER, "ts": int(time.time() * 1000) - 60_000, **changes}).encode()


def poisons(settings: Settings, tag: str = "") -> list[Poison]:
    """The six records of issue 13, and others of the same families."""
    merged, merged_r = settings.merged_topic, settings.merged_repartition_topic
    users_changelog = f"{settings.app_id}-demo_user-changelog"
    two_hours_ahead = int(time.time() * 1000) + 2 * 3_600_000
    nested_600 = b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web", "x": ' + \
        b"[" * 600 + b"]" * 600 + b"}"
    k = tag.encode()
    return [
        # 1. A user of about 1 MB: its repartition row is larger than the producer takes.
        Poison("user 1 MB", "users", b"pu-big" + k, json.dumps({"name": "x" * 1_040_000, "age": 1}).encode(),
               "value", ("copied row for " + settings.users_repartition_topic, "max_request_size"), ("value",)),
        # 5. A user named with a lone surrogate: never into the table.
        Poison("user name \\ud800", "users", b"pu-surrogate" + k, b'{"name": "\\ud800", "age": 3}', "NAME",
               ("'NAME'", "lone surrogate")),
        # 6. A user nested 10,000 deep.
        Poison("user nested 10,000", "users", b"pu-deep" + k, b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "value",
               ("10000 deep", f"limit of {MAX_NESTING}")),
        # Own: a 300 kB user fits the producer but not the users table's changelog topic.
        Poison("user 300 kB, changelog limit", "users", b"pu-300k" + k,
               json.dumps({"name": "y" * 300_000, "age": 4}).encode(), "value",
               (f"changelog row for {users_changelog}", f"max.message.bytes of topic {users_changelog}"),
               ("value",)),
        # Own: a tombstone whose 1 MB key is larger than the producer takes (repartitioned tombstone).
        Poison("users tombstone, 1 MB key", "users", b"K" * 1_040_000, None, "value",
               ("copied tombstone", "max_request_size"), ("key",)),
        # 2. 1,000,000 NUL bytes: the dead letter itself is too large and is cut.
        Poison("order of 1,000,000 NUL bytes", "orders", b"po-nul" + k, b"\x00" * 1_000_000, "value",
               ("not valid JSON",), ("value",)),
        # 3. Nested 10,000 deep, both ways.
        Poison("order [[[ 10,000", "orders", b"po-deep-array" + k, b"[" * 10_000 + b"]" * 10_000, "value",
               ("10000 deep",)),
        Poison('order {"a": 10,000', "orders", b"po-deep-object" + k, b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
               "value", ("10000 deep",)),
        # 4. A lone surrogate in the channel (escaped), and own: the same as raw bytes (not UTF-8).
        Poison("order channel \\ud800", "orders", b"po-surrogate" + k, order_value()[:-1] + b', "channel": "\\ud800"}',
               "CHANNEL", ("'CHANNEL'", "lone surrogate")),
        Poison("order channel raw surrogate bytes", "orders", b"po-raw-surrogate" + k,
               order_value()[:-1] + b', "channel": "\xed\xa0\x80"}', "value", ("not UTF-8",)),
        # Own: nesting just past the limit, below Python's recursion limit.
        Poison("order nested 601", "orders", b"po-nested-601" + k, nested_600, "value", ("601 deep",)),
        # Own: joined records too large, for the producer (1 MB channel; 1 MB key) and for a topic's limit.
        Poison("order channel 1 MB", "orders", b"po-channel-1mb" + k, order_value(channel="c" * 1_010_000), "value",
               (f"joined record for {merged} ", "max_request_size"), ("value",)),
        Poison("order key 1 MB", "orders", b"k" * 1_000_000, order_value(), "value",
               (f"joined record for {merged} ", "max_request_size"), ("key",)),
        Poison("order channel 160 kB, topic limit", "orders", b"po-channel-160k" + k,
               order_value(channel="d" * 160_000), "value",
               (f"joined record for {merged_r}", f"max.message.bytes of topic {merged_r}")),
        # Own: ts two hours ahead: Kafka 4 refuses record timestamps more than 1 h ahead, and the
        # refused batch used to take the valid orders sharing it along, silently.
        Poison("order ts 2 h ahead", "orders", b"po-future" + k, order_value(ts=two_hours_ahead), "TS",
               ("ahead of now", "message.timestamp.after.max.ms")),
    ]


def create_limited_topics(settings: Settings) -> None:
    """The topics whose limit is below the broker's, created before the worker (which keeps existing topics)."""
    n = settings.partitions
    topics = [
        NewTopic(settings.dead_letter_topic, n, 1, config={"max.message.bytes": str(DEAD_LETTER_MAX)}),
        NewTopic(settings.merged_repartition_topic, n, 1, config={"max.message.bytes": str(MERGED_REPARTITION_MAX)}),
        NewTopic(f"{settings.app_id}-demo_user-changelog", n, 1,
                 config={"max.message.bytes": str(USERS_CHANGELOG_MAX), "cleanup.policy": "compact"}),
    ]
    admin = admin_client(settings.bootstrap_servers)
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(30)


def with_poison_users(dataset: Dataset, poison: list[Poison], now_ms: int) -> Dataset:
    """Valid orders stamped just now (the broker takes them), plus one for each poison user: a miss."""
    orders = [replace(o, ts=now_ms - 3_600_000 + i) for i, o in enumerate(dataset.orders)]
    users = [p for p in poison if p.role == "users" and p.value is not None]
    extra = [Order(p.key.decode(), now_ms - 1000 + i, 900_000 + i, 1, 1.0, "web") for i, p in enumerate(users)]
    return Dataset(dataset.users, orders + extra)


def interleave(valid: list, bad: list) -> list:
    """Each bad record between two valid ones, spread evenly."""
    step = max(len(valid) // (len(bad) + 1), 1)
    out: list = []
    for i, record in enumerate(valid):
        if i and i % step == 0 and bad:
            out.append(bad.pop(0))
        out.append(record)
    return out + bad


def read_letters(tail: TopicTail, expected: int, worker: WorkerProcess, timeout: float) -> list[DeadLetter]:
    deadline = time.monotonic() + timeout
    while len(tail.records) < expected:
        assert time.monotonic() < deadline, f"{len(tail.records)} of {expected} dead letters: {worker.tail()}"
        assert worker.proc is not None and worker.proc.poll() is None, worker.tail()
        tail.poll(0.5)
    return [from_record(r.key, r.value, r.headers) for r in tail.records]


def check_letters(letters: list[DeadLetter], bad: list[Poison], settings: Settings) -> None:
    """Exactly one dead letter per poison record, with its reason, cut exactly where expected."""
    topics = {"users": settings.users_topic, "orders": settings.orders_topic}
    by_identity = {p.identity(topics): p for p in bad}
    assert len(by_identity) == len(bad)
    got = Counter(letter_identity(d) for d in letters)
    assert got == Counter(by_identity.keys()), {by_identity[i].name: n for i, n in got.items() if i in by_identity}
    for letter in letters:
        poison = by_identity[letter_identity(letter)]
        assert letter.field == poison.field, (poison.name, letter.reason, letter.field)
        assert all(w in letter.reason for w in poison.words), (poison.name, letter.reason)
        assert len(letter.reason) < 300 and "\n" not in letter.reason, letter.reason
        assert letter.truncated == poison.truncated, (poison.name, letter.truncated)
        for part in ("key", "value"):
            original, kept = getattr(poison, part), getattr(letter, part)
            if part in letter.truncated:
                assert original is not None and kept == original[: len(kept)] and len(kept) <= PREFIX_BYTES
                assert letter.original_sizes[part] == len(original), poison.name
            else:
                assert kept == original, poison.name
        assert 0 <= letter.source_partition < settings.partitions and letter.source_offset >= 0


def wait_for_users(worker: WorkerProcess, count: int, timeout: float = 120) -> None:
    """Until the worker says (``/stats``) it loaded ``count`` users into both tables, and is healthy then."""
    wait_for_loaded([worker], count, timeout)
    assert_healthy(worker)


def finish(tails: list[TopicTail], dataset: Dataset, bad: list[Poison], worker: WorkerProcess,
           settings: Settings, joins_every_order: bool = True) -> list[DeadLetter]:
    """Wait for every valid order in both outputs and every dead letter, then check them all; the dead letters."""
    wait_for_outputs(tails[:2], dataset, [worker], timeout=180)
    letters = read_letters(tails[2], len(bad), worker, timeout=120)
    for tail in tails:
        tail.drain()
    assert_healthy(worker)
    if joins_every_order:  # this process joined each valid order once: no duplicate is still on its way
        assert orders_read(stats(worker), worker.settings) == len(dataset.orders)
    for tail in tails[:2]:
        check = check_output(dataset, tail.records, settings.partitions)
        assert (check.missing, check.wrong, check.duplicates) == ([], [], 0), (tail.topic, check)
    letters = [from_record(r.key, r.value, r.headers) for r in tails[2].records]
    check_letters(letters, bad, settings)
    return letters


def assert_healthy(worker: WorkerProcess) -> None:
    """Up, and nothing in its log says a record stopped or restarted any part of it."""
    assert worker.proc is not None and worker.proc.poll() is None, worker.tail()
    log = worker.log()
    for sign in ("Traceback", "Crashed reason", "Restarting dead", "We experienced a crash", "refused a batch",
                 "not written"):
        assert sign not in log, f"{sign!r} in the worker's log: {worker.tail(40)}"


@pytest.fixture
def settings(broker: EmbeddedBroker, tmp_path: Path) -> Settings:
    base = broker.settings(Settings()).replace(data_dir=str(tmp_path / "data"), broker_session_timeout=10.0)
    return isolated(base, "poison")


def test_poison_records_in_valid_traffic(settings: Settings, tmp_path: Path) -> None:
    n = settings.partitions
    create_limited_topics(settings)
    bad = poisons(settings)
    now_ms = int(time.time() * 1000)
    dataset = with_poison_users(make_dataset(users=40, orders=400, seed=13), bad, now_ms)
    order_records = [(o.user_id.encode(), o.value(), o.ts) for o in dataset.orders]
    # A valid order nested exactly to the limit (the order object is one level) is joined like any other.
    key, value, ts = order_records[7]
    order_records[7] = (key, value[:-1] + b', "x": ' + b"[" * (MAX_NESTING - 1) + b"]" * (MAX_NESTING - 1) + b"}", ts)

    started = time.monotonic()
    worker = WorkerProcess(worker_settings(settings, tmp_path, "w"), tmp_path / "worker.log").start(timeout=180)
    tails = [TopicTail(settings.bootstrap_servers, t, n)
             for t in (settings.merged_topic, settings.merged_repartition_topic, settings.dead_letter_topic)]
    try:
        bad_users = [(p.key, p.value) for p in bad if p.role == "users"]
        bad_orders = [(p.key, p.value) for p in bad if p.role == "orders"]
        produce(settings.bootstrap_servers, settings.users_topic, interleave(dataset.user_records(), bad_users))
        read_letters(tails[2], len(bad_users), worker, timeout=120)
        wait_for_users(worker, len(dataset.users))
        produce(settings.bootstrap_servers, settings.orders_topic, interleave(order_records, bad_orders))
        finish(tails, dataset, bad, worker, settings)
        for tail in tails[:2]:
            misses = {r.key for r in tail.records if json.loads(r.value)["NAME"] is None}
            assert misses == {p.key for p in bad if p.role == "users" and p.value is not None}, tail.topic
        print(f"poison: {len(bad)} poison records, {len(dataset.orders)} valid orders, "
              f"{time.monotonic() - started:.1f} s")
    finally:
        for tail in tails:
            tail.close()
        code = worker.stop()
    assert code == 0, worker.tail()


def keys_for_partition(partition: int, n: int, count: int, prefix: str) -> list[bytes]:
    keys: list[bytes] = []
    i = 0
    while len(keys) < count:
        key = f"{prefix}-{i}".encode()
        if murmur2_partition(key, n) == partition:
            keys.append(key)
        i += 1
    return keys


def test_restarted_worker_passes_poison_at_the_head_of_a_partition(settings: Settings, tmp_path: Path) -> None:
    """Orders up to a committed offset, then poison records first in a partition: a restarted worker goes past them."""
    n, target = settings.partitions, 2
    create_limited_topics(settings)
    now_ms = int(time.time() * 1000)
    dataset = make_dataset(users=30, orders=240, seed=31)
    dataset = Dataset(dataset.users, [replace(o, ts=now_ms - 3_600_000 + i) for i, o in enumerate(dataset.orders)])
    first, second = Dataset(dataset.users, dataset.orders[:120]), Dataset(dataset.users, dataset.orders[120:])
    chosen = {"user name \\ud800", "user nested 10,000", "user 1 MB", "order of 1,000,000 NUL bytes",
              "order [[[ 10,000", "order channel \\ud800", "order ts 2 h ahead", "order channel 1 MB"}
    bad = [p for p in poisons(settings) if p.name in chosen]
    assert len(bad) == len(chosen)
    heads = iter(keys_for_partition(target, n, len(bad), "head"))
    bad = [replace(p, key=next(heads)) for p in bad]  # every poison record in the target partition
    worker_dir = worker_settings(settings, tmp_path, "w")
    tails = [TopicTail(settings.bootstrap_servers, t, n)
             for t in (settings.merged_topic, settings.merged_repartition_topic, settings.dead_letter_topic)]
    worker = WorkerProcess(worker_dir, tmp_path / "worker-1.log").start(timeout=180)
    try:
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users(worker, len(dataset.users))
        produce(settings.bootstrap_servers, settings.orders_topic,
                [(o.user_id.encode(), o.value(), o.ts) for o in first.orders])
        wait_for_outputs(tails[:2], first, [worker], timeout=180)
        assert worker.stop() == 0, worker.tail()
        head = committed_offsets(settings, settings.orders_topic)[target]
        users_head = committed_offsets(settings, settings.users_topic)[target]

        # The poison records first in the target partition of both inputs, then the rest of the orders.
        produce(settings.bootstrap_servers, settings.users_topic, [(p.key, p.value) for p in bad if p.role == "users"])
        produce(settings.bootstrap_servers, settings.orders_topic,
                [(p.key, p.value) for p in bad if p.role == "orders"])
        produce(settings.bootstrap_servers, settings.orders_topic,
                [(o.user_id.encode(), o.value(), o.ts) for o in second.orders])

        worker = WorkerProcess(worker_dir, tmp_path / "worker-2.log").start(timeout=180)
        letters = finish(tails, dataset, bad, worker, settings, joins_every_order=False)
        topics = {"users": settings.users_topic, "orders": settings.orders_topic}
        at_head = sorted(d.source_offset for d in letters if d.source_topic == topics["orders"])
        assert at_head == list(range(head, head + len(at_head))), (head, at_head)
        assert {d.source_partition for d in letters} == {target}
        assert min(d.source_offset for d in letters if d.source_topic == topics["users"]) == users_head
    finally:
        for tail in tails:
            tail.close()
        code = worker.stop()
    assert code == 0, worker.tail()
    assert committed_offsets(settings, settings.orders_topic)[target] > head + len(at_head) - 1
