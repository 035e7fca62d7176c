"""The Faust worker and the Kafka Streams program (ksqlDB's joins) on the same input topics, record for record.

Both engines run on the session broker and read the same users and orders; each output is compared with its
counterpart as a multiset of (partition, key, parsed JSON value, record timestamp).  Values are compared
parsed: Jackson writes some doubles as ``1.0E7`` and characters beyond the BMP as surrogate pairs.  The
inputs cover both partitioners, updates, tombstones, unknown users, nullable and missing fields, every
coercion of ksqlDB's JSON format, malformed records, and users and orders produced concurrently.

Where the engines legitimately differ, the test states the difference exactly (docs/explanation/ksqldb-semantics.md):
a key that is not UTF-8 (dead-lettered by the worker, read with U+FFFD by Java); a null-key order, joined by both
with NULL user columns in a partition each producer draws (compared without it, each engine's in one partition);
the concurrent phase, where only the user columns may differ, by being NULL on one side.  Progress is read from
the engines themselves: each consumer group has committed the end of every input topic.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pytest
from confluent_kafka import Producer

from streamapp.kafka.ksql_equivalent import KsqlEquivalent, cluster_plan, query_application_id
from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.reader import TopicReader
from streamapp.model.dead_letters import from_record
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from test_ksql_equivalent import CRC_USERS, JAVA_USERS as KQ_USERS, order, user
from workerkit import caught_up, committed_by, end_offsets, isolated, worker_settings

pytestmark = pytest.mark.long

N = 4
#: ksqlDB's processing log line, as the program writes it for a record it cannot read.
SKIPPED = re.compile(r"skipped unreadable record topic=(\S+) partition=(\d+) offset=(\d+)")
#: Not an expectation on speed: only how long a broken run may hang before it fails.
PATIENCE = 240.0


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int


class Producers:
    """One librdkafka producer per partitioner; each record delivered before the next (the order is the log's)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._producers: dict[str, Producer] = {}

    def send(self, topic: str, records: Iterable[tuple[bytes | None, bytes | None, int]],
             partitioner: str = "murmur2_random", one_by_one: bool = True) -> list[Sent]:
        if partitioner not in self._producers:
            self._producers[partitioner] = Producer({"bootstrap.servers": self.bootstrap, "partitioner": partitioner,
                                                     "enable.idempotence": True, "linger.ms": 5})
        producer = self._producers[partitioner]
        reports: list[tuple[Any, Any]] = []
        for key, value, timestamp in records:
            producer.produce(topic, key=key, value=value, timestamp=timestamp,
                             on_delivery=lambda err, msg: reports.append((err, msg)))
            producer.flush(30) if one_by_one else producer.poll(0)
        assert producer.flush(60) == 0, f"{topic}: undelivered records"
        assert all(err is None for err, _ in reports), [str(err) for err, _ in reports if err is not None][:3]
        return [Sent(m.key(), m.value(), m.partition(), m.offset(), m.timestamp()[1]) for _, m in reports]

    def close(self) -> None:
        """Drop the producers (librdkafka's threads go with them), before the session's broker does."""
        self._producers.clear()


class Engines:
    """The worker and the program on one set of topics, and what they wrote."""

    def __init__(self, settings: Settings, worker: WorkerProcess, program: KsqlEquivalent) -> None:
        self.settings, self.worker, self.program = settings, worker, program
        s = settings
        self.faust_inputs = (s.users_topic, s.orders_topic, s.users_repartition_topic)
        plan = cluster_plan(s)  # Kafka Streams: one application per query, each reading its own inputs
        self.ks_groups = tuple((query_application_id(s, q.name),
                                tuple(plan.source(name).topic for name in (q.left, q.right) if name))
                               for q in plan.queries)
        assert {t for _, topics in self.ks_groups for t in topics} == {
            s.users_topic, s.orders_topic, s.ksqldb_users_repartition_topic}
        self.pairs = ((s.merged_topic, s.ksqldb_merged_topic), (s.merged_repartition_topic, s.ksqldb_merged_repartition_topic))
        self.readers = {topic: TopicReader(s.bootstrap_servers, topic, range(N))
                        for pair in self.pairs for topic in pair}
        self.readers[s.dead_letter_topic] = TopicReader(s.bootstrap_servers, s.dead_letter_topic, range(N))
        self.records: dict[str, list[Any]] = {topic: [] for topic in self.readers}

    def settle(self) -> None:
        """Until both consumer groups have committed every input's end (the inputs' own topics first: the
        repartition topics grow while the users are read), then read every output to its end."""
        s, deadline = self.settings, time.monotonic() + PATIENCE
        for group, topics in ((s.app_id, self.faust_inputs), *self.ks_groups):
            while True:
                ends = end_offsets(s.bootstrap_servers, topics, N)
                if caught_up(s.bootstrap_servers, group, topics, N) and ends == end_offsets(s.bootstrap_servers, topics, N):
                    break
                assert self.worker.proc is not None and self.worker.proc.poll() is None, self.worker.tail()
                assert self.program.running, self.program.failure_message()
                assert time.monotonic() < deadline, (
                    f"{group} has not caught up after {PATIENCE:.0f}s: committed "
                    f"{committed_by(s.bootstrap_servers, group, topics, N)}, ends {ends}\n"
                    f"{self.worker.tail(10)}")
                time.sleep(0.5)
        for topic, reader in self.readers.items():
            self.records[topic] += reader.read_to_end()

    def output(self, topic: str) -> Counter[tuple[int, bytes | None, str, int]]:
        return Counter((r.partition, r.key, canonical(r.value), r.timestamp) for r in self.records[topic])

    def dead_letters(self) -> set[tuple[str, int, int]]:
        letters = [from_record(r.key, r.value, r.headers) for r in self.records[self.settings.dead_letter_topic]]
        return {(d.source_topic, d.source_partition, d.source_offset) for d in letters}

    def ks_skipped(self) -> set[tuple[str, int, int]]:
        """The records the program logged as unreadable (ksqlDB's processing log)."""
        return {(m.group(1), int(m.group(2)), int(m.group(3)))
                for m in map(SKIPPED.search, self.program.log_lines) if m}

    def close(self) -> None:
        for reader in self.readers.values():
            reader.close()


def canonical(value: bytes | None) -> str:
    """A JSON value parsed and written again with sorted keys: equal for equal columns, whatever the bytes."""
    return "null" if value is None else json.dumps(json.loads(value), sort_keys=True)


@pytest.fixture
def send(broker_settings: Settings):
    producers = Producers(broker_settings.bootstrap_servers)
    yield producers
    producers.close()


@pytest.fixture
def engines(broker_settings: Settings, tmp_path: Path):
    settings = isolated(broker_settings, "agree", partitions=N)
    settings = settings.replace(ksqldb_users_repartition_topic=f"{settings.ksqldb_users_repartition_topic}_{settings.app_id}")
    ensure_topics(settings.bootstrap_servers, {settings.users_topic: N, settings.orders_topic: N})
    worker = WorkerProcess(worker_settings(settings, tmp_path, "w"), tmp_path / "worker.log").start(timeout=180)
    try:
        program = KsqlEquivalent(settings, state_dir=tmp_path / "ks").start()
    except BaseException:
        worker.stop()
        raise
    found = Engines(settings, worker, program)
    try:
        yield found
    finally:
        found.close()
        program.stop()
        code = worker.stop()
        assert code == 0, worker.tail()


#: A key that is not UTF-8 (the worker's dead letter) and what Java's String decoder makes of it.
BAD_KEY = b"\xff\xfej-bad"
BAD_KEY_AS_JAVA_READS_IT = BAD_KEY.decode("utf-8", "replace").encode()


#: The Kafka Streams program's own test inputs (test_ksql_equivalent), and more classes.
JAVA_USERS: list[tuple[bytes | None, bytes | None]] = [*KQ_USERS,
    (b"j-max", b'{"name": {"first": "Max", "n": [1.50, 1e5, null]}, "age": 1e1}'),  # VARCHAR from an object
    (b"j-ned", b'{"name": ["a", null, 2], "age": 18446744073709551621}'),            # from an array; age wraps
    (b"j-oz", b'{"name": "Oz", "age": NaN}'),                    # not JSON (Jackson refuses the NaN token)
    (b"j-pam", b'{"name": "Pam", "age": 7} trailing'),           # Jackson reads the first value, ignores the rest
    (b"j-quin", b'\xef\xbb\xbf{"name": "Quin", "age": 8}'),      # a UTF-8 byte order mark
    (b"j-rex", '{"name": "Rex", "age": 9}'.encode("utf-16-le")),  # UTF-16, detected as Jackson does
    (BAD_KEY, user("Bad key", 1)),                               # not UTF-8: the worker's dead letter
    (b"", user("Empty", 3)),                                     # an empty key: the STRING ""
]


def orders_for(keys: Iterable[bytes | None], ts: Iterable[int]) -> list[tuple[bytes | None, bytes | None, int]]:
    stamps = iter(ts)
    made = []
    for key in keys:
        t = next(stamps)
        made.append((key, order(t), t))
    return made


def odd_orders(ts: Iterable[int]) -> list[tuple[bytes | None, bytes | None, int]]:
    """Orders of every decoding class: coerced, nullable, missing, case, malformed."""
    stamps = iter(ts)
    t = [next(stamps) for _ in range(17)]
    return [
        (b"j-ann", json.dumps({"TS": t[0], "PRODUCT_ID": 7, "QTY": "3", "UNIT_PRICE": "12.5", "CHANNEL": "store"}).encode(), t[0]),
        (b"j-gus", json.dumps({"ts": t[1], "product_id": 8, "qty": None, "unit_price": 5}).encode(), t[1]),
        (b"j-ann", order(t[2], channel=None), t[2]),                               # null channel: joined, null
        (b"j-bob", order(t[3], unit_price="NaN"), t[3]),                            # DOUBLE NaN, written "NaN"
        (b"j-bob", order(t[4], unit_price="Infinity", qty=2.9), t[4]),
        (b"j-cy", json.dumps({"ts": str(t[5]), "channel": {"a": [1, "x"]}, "qty": -0.0}).encode(), t[5]),
        (b"j-dee", order(t[6], channel=["x", None, 2], product_id="  5"), t[6]),    # " 5": not a long: skipped
        (b"j-dee", order(t[7], product_id="+5", unit_price=" 1e3f "), t[7]),
        (b"j-ann", b"not json", t[8]),                                              # skipped
        (b"j-ann", b'{"ts": "soon", "product_id": 1}', t[9]),                       # ts unreadable: skipped
        (b"j-ann", b'{"product_id": 1, "qty": 1}', t[10]),                          # no ts: dropped
        (b"j-ann", json.dumps({"ts": -5, "product_id": 1}).encode(), t[11]),         # negative ts: dropped
        (b"j-ann", None, t[12]),                                                    # a null order: ignored
        (b"j-ann", b"null", t[13]),                                                 # JSON null: the same
        (b"j-ann", order(t[14], qty=True), t[14]),                                  # BIGINT from a boolean: skipped
        (b"j-ann", order(t[15], extra=float("nan")), t[15]),                        # a NaN token: not JSON
        (None, b"not json either", t[16]),                                          # a null key does not save it
    ]


def assert_outputs_agree(engines: Engines, null_keys: int) -> None:
    """Each output equal to its counterpart, except for what only Kafka Streams joins: an order with a key that
    is not UTF-8 (read with U+FFFD), once per output; the ``null_keys`` null-key orders compared without their
    partition (each engine's producer draws it at random), each engine's in one partition per output."""
    for faust, ks in engines.pairs:
        mine, theirs = engines.output(faust), engines.output(ks)
        only_ks = Counter({r: n for r, n in theirs.items() if r[1] == BAD_KEY_AS_JAVA_READS_IT})
        assert [r[1] for r in only_ks.elements()] == [BAD_KEY_AS_JAVA_READS_IT], (ks, only_ks)
        theirs -= only_ks
        # ksqlDB's rule for a null-key order (docs/reference/reconciliation.md, "Causes"): joined with NULL user
        # columns and a null key
        nulls = {side: Counter({r: n for r, n in out.items() if r[1] is None}) for side, out in (("w", mine), ("k", theirs))}
        rows = {side: Counter((value, ts) for (_, _, value, ts), n in found.items() for _ in range(n))
                for side, found in nulls.items()}
        assert rows["w"] == rows["k"] and sum(rows["k"].values()) == null_keys, (faust, ks, nulls)
        assert all((json.loads(value)["NAME"], json.loads(value)["AGE"]) == (None, None) for value, _ in rows["k"])
        for side, found in nulls.items():  # the sticky partition: a few small records stay in the one drawn
            assert len({partition for partition, *_ in found}) == 1 and all(0 <= p < N for p, *_ in found), (side, found)
        print(f"null-key orders in {faust}: partition {[p for p, *_ in nulls['w']]} (worker), "
              f"{[p for p, *_ in nulls['k']]} (Kafka Streams)")
        mine, theirs = mine - nulls["w"], theirs - nulls["k"]
        assert mine == theirs, (f"{faust} vs {ks}:\n only the worker: {sorted((mine - theirs).items(), key=repr)[:8]}\n"
                                f" only Kafka Streams: {sorted((theirs - mine).items(), key=repr)[:8]}")


def test_the_worker_writes_what_kafka_streams_writes(engines: Engines, send: Producers) -> None:
    s = engines.settings
    clock = iter(range(int(time.time() * 1000) - 3_600_000, 2**62))

    # 1. Users through both partitioners, loaded before any order (as ksqlDB's docs ask for a deterministic join).
    users = send.send(s.users_topic, [(k, v, next(clock)) for k, v in JAVA_USERS])
    users += send.send(s.users_topic, [(k, v, next(clock)) for k, v in CRC_USERS], "consistent_random")
    engines.settle()
    keys = [k for k, _ in JAVA_USERS + CRC_USERS if k is not None] + [b"nobody", b"j-fay", b"j-hal"]

    # 2. One order per user (and unknown users), by both partitioners, then the odd ones.
    orders = send.send(s.orders_topic, orders_for(dict.fromkeys(keys), clock))
    orders += send.send(s.orders_topic, orders_for([k for k, _ in CRC_USERS[:6]], clock), "consistent_random")
    orders += send.send(s.orders_topic, odd_orders(clock))
    orders += send.send(s.orders_topic, orders_for([None, b"", None], clock))   # null keys, an empty key
    engines.settle()

    # 3. The table changes under the stream: an update to null, deletes, a new user, then orders again.
    updates = send.send(s.users_topic, [
        (b"j-ann", b'{"name": null, "age": 31}', next(clock)),  # name set to NULL, not dropped
        (b"j-bob", None, next(clock)), (b"j-cy", b"null", next(clock)), (b"j-new", user("New", 1), next(clock)),
        (b"j-nobody-yet", None, next(clock)),                    # a tombstone for a user never seen
    ])
    updates += send.send(s.users_topic, [(b"c-00", user("C0 B", 100), next(clock))], "consistent_random")
    engines.settle()
    orders += send.send(s.orders_topic, orders_for([b"j-ann", b"j-bob", b"j-cy", b"j-new", b"c-00", b"j-nobody-yet",
                                                    None], clock))
    engines.settle()
    assert_outputs_agree(engines, null_keys=3)

    # Spot checks of the classes on the worker's own output (the comparison alone would pass two equal mistakes).
    repartitioned = {(r.key, canonical(r.value)) for r in engines.records[s.merged_repartition_topic]}
    def has(key: bytes, **columns: Any) -> bool:
        return any(k == key and all(json.loads(v).get(c) == x for c, x in columns.items()) for k, v in repartitioned)
    assert has(b"j-ann", NAME=None, AGE=31)                       # the update to a null name took effect
    assert has(b"j-ann", NAME="Ann", AGE=30, PRODUCT_ID=7, QTY=3, UNIT_PRICE=12.5, CHANNEL="store")
    assert has(b"j-ann", NAME="Ann", CHANNEL=None)                # a null channel is joined
    assert has(b"j-bob", NAME="Bob", AGE=41, UNIT_PRICE="NaN")
    assert has(b"j-bob", NAME="Bob", UNIT_PRICE="Infinity", QTY=2)
    assert has(b"j-bob", NAME=None, AGE=None)                     # after its tombstone
    assert has(b"j-cy", NAME="Cy", AGE=None, CHANNEL='{"a":[1,"x"]}', QTY=0, PRODUCT_ID=None)
    assert has(b"j-dee", NAME=None, AGE=27, PRODUCT_ID=5, UNIT_PRICE=1000.0)
    assert has(b"j-ivy", NAME="IVY") and has(b"j-jo", NAME="Jo") and has(b"j-lee", NAME="42", AGE=9)
    assert has(b"j-max", NAME='{"first":"Max","n":[1.50,1E+5,null]}', AGE=10)
    assert has(b"j-ned", NAME="[a, null, 2]", AGE=5) and has(b"j-pam", NAME="Pam")
    assert has(b"j-quin", NAME="Quin") and has(b"j-rex", NAME="Rex") and has(b"j-eve", NAME="Eve", AGE=50)
    assert has(b"j-new", NAME="New") and has(b"c-00", NAME="C0 B") and has(b"nobody", NAME=None)
    assert has(b"", NAME="Empty", AGE=3)                           # an empty key is the user id ""

    # Dead letters: everything Kafka Streams skipped as unreadable, plus what only the worker refuses.
    letters, skipped = engines.dead_letters(), engines.ks_skipped()
    assert skipped <= letters, skipped - letters
    extra = {(s.users_topic if r in users + updates else s.orders_topic, r.partition, r.offset)
             for r in users + updates + orders
             if (r.key is None and r not in orders) or r.key == BAD_KEY       # a null-key user, a key not UTF-8
             or (r in orders and (r.value in (None, b"null") or b'"product_id": 1, "qty": 1}' in r.value
                                  or b'"ts": -5' in r.value))}                         # no usable ts, null order
    assert letters - skipped == extra, (sorted(letters - skipped - extra), sorted(extra - (letters - skipped)))


def test_users_and_orders_produced_concurrently(engines: Engines, send: Producers) -> None:
    """Orders arrive while their users are still being written: both engines write every order once, with the
    same order columns; whether an order found its user can differ, and then only by NULL user columns."""
    s = engines.settings
    start = int(time.time() * 1000) - 3_600_000
    count = 600
    keys = [f"u-{i:04d}".encode() for i in range(count)]
    users = [(k, user(f"User {i}", i), start + 2 * i) for i, k in enumerate(keys)]
    # Each order's ts just after its user's record timestamp, some for a user written much later (a miss in
    # event time for both), and a third by crc32 placement (a miss for the direct joins of most).
    orders = [(k, order(start + 2 * i + 1), start + 2 * i + 1) for i, k in enumerate(keys)]
    writer = threading.Thread(target=send.send, args=(s.users_topic, users), kwargs={"one_by_one": False})
    writer.start()
    send.send(s.orders_topic, orders[: count * 2 // 3], one_by_one=False)
    send.send(s.orders_topic, orders[count * 2 // 3:], "consistent_random", one_by_one=False)
    writer.join(120)
    assert not writer.is_alive()
    engines.settle()
    rows = {k: {"NAME": f"User {i}", "AGE": i} for i, k in enumerate(keys)}
    order_columns = ("PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS")
    found: dict[str, Counter[str]] = {}
    for faust, ks in engines.pairs:
        mine, theirs = engines.records[faust], engines.records[ks]
        assert len(mine) == len(theirs) == count, (faust, len(mine), len(theirs))

        def by_order(records: list[Any]) -> dict[tuple[bytes, int], tuple[int, dict[str, Any]]]:
            return {(r.key, r.timestamp): (r.partition, json.loads(r.value)) for r in records}
        a, b = by_order(mine), by_order(theirs)
        assert a.keys() == b.keys() and len(a) == count  # every order once on each side
        tally = found[faust] = Counter()
        for identity, (partition, columns) in a.items():
            other_partition, other = b[identity]
            assert partition == other_partition
            assert [columns[c] for c in order_columns] == [other[c] for c in order_columns], (identity, columns, other)
            user_columns = {"NAME": columns["NAME"], "AGE": columns["AGE"]}
            other_user = {"NAME": other["NAME"], "AGE": other["AGE"]}
            for side in (user_columns, other_user):  # a user found is that user's row; else both columns NULL
                assert side in (rows[identity[0]], {"NAME": None, "AGE": None}), (identity, side)
            tally[("both" if user_columns == other_user == rows[identity[0]] else "neither" if user_columns == other_user
                   else "worker only" if user_columns == rows[identity[0]] else "Kafka Streams only")] += 1
    print(f"concurrent: {count} orders per output; the user found by: {found}")
