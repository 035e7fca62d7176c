"""The Kafka Streams program (PlanStreams running the seed's plan, one application per query, as ksqlDB runs the
demo's five statements) on the session broker: its records, byte for byte.

Every expected record is computed here from the inputs, independently of the program:
ksqlDB's JSON rules (KsqlJsonDeserializer / JsonSerdeUtils, written out below for the
values used), zlib.crc32 for librdkafka's ``consistent_random``, the murmur2 reference
hash for the Java producer's partitioner, and partition-local lookups for the joins.
"""
from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest
from confluent_kafka import Producer

from streamapp.kafka.ksql_equivalent import KsqlEquivalent, KsqlEquivalentError, cluster_plan
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.kafka.reader import TopicReader
from streamapp.partitioners.hashes import murmur2
from streamapp.settings import Settings

N = 4
#: The users' record timestamps; every order's ts is later, so no order is older than the table it joins.
T_USERS = 1_700_000_000_000
T_ORDERS = 1_700_000_100_000
#: Not an expectation on speed: only how long a broken run may hang before it fails.
PATIENCE = 180.0
SKIP = object()  # a value ksqlDB cannot read: logged and skipped
#: ksqlDB's processing log line, as the program writes it for a record it cannot read.
SKIPPED = re.compile(r"skipped unreadable record topic=(\S+) partition=(\d+) offset=(\d+)")


def murmur2_partition(key: bytes) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % N


def crc32_partition(key: bytes) -> int:
    return zlib.crc32(key) % N


# -- ksqlDB's JSON format, as the expected values are computed -------------------------------------


def bigint(node: Any) -> int:
    """JsonSerdeUtils.toLong: a number truncated (JsonNode.asLong), a string by Long.parseLong."""
    if isinstance(node, bool) or not isinstance(node, (int, Decimal, str)):
        raise ValueError(node)
    if isinstance(node, str):
        if not node.lstrip("+-").isdigit():
            raise ValueError(node)
        node = int(node)
    return int(node)


def double(node: Any) -> float:
    """JsonSerdeUtils.toDouble: any number, or a string Double.parseDouble reads (only plain decimals here)."""
    if isinstance(node, bool) or not isinstance(node, (int, Decimal, str)):
        raise ValueError(node)
    return float(node)


def varchar(node: Any) -> str:
    """KsqlJsonDeserializer.processString for the values used: text as is, numbers and booleans as their text."""
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, (int, str)):
        return str(node)
    raise AssertionError(f"no expectation written for {node!r}")


def ksql_row(value: bytes | None, columns: dict[str, Callable[[Any], Any]]) -> dict[str, Any] | None | object:
    """A JSON value as ksqlDB reads it: None for a tombstone, SKIP when unreadable, else the columns."""
    if value is None:
        return None
    try:
        doc = json.loads(value, parse_float=Decimal)
    except ValueError:
        return SKIP
    if doc is None:
        return None
    if not isinstance(doc, dict):
        return SKIP
    upper = {}
    for name, node in doc.items():
        upper[name.upper()] = node  # the last field of a given upper-cased name wins
    row = {}
    for column, coerce in columns.items():
        node = doc[column] if column in doc else upper.get(column)
        try:
            row[column] = None if node is None else coerce(node)
        except ValueError:
            return SKIP
    return row


USER_COLUMNS = {"NAME": varchar, "AGE": bigint}
ORDER_COLUMNS = {"TS": bigint, "PRODUCT_ID": bigint, "QTY": bigint, "UNIT_PRICE": double, "CHANNEL": varchar}


def java_double(value: float) -> str:
    """Double.toString, as Jackson writes a DOUBLE: equal to Python's repr in [1e-3, 1e7), which the inputs keep to."""
    assert value == 0 or 1e-3 <= abs(value) < 1e7, value
    text = repr(value)
    return text if "." in text else text + ".0"


def surrogate_escapes(match: re.Match[str]) -> str:
    """Jackson writes a character beyond the BMP as an escaped UTF-16 pair, upper-case hex
    (JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8 is off by default); the rest of UTF-8 as is."""
    code = ord(match.group()) - 0x10000
    return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"


def json_text(columns: list[tuple[str, Any]]) -> bytes:
    """A compact JSON object in column order with explicit nulls, as Connect's JsonConverter writes it."""
    def scalar(value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, float):
            return java_double(value)
        if isinstance(value, int):
            return str(value)
        return re.sub("[\U00010000-\U0010FFFF]", surrogate_escapes, json.dumps(value, ensure_ascii=False))
    return ("{" + ",".join(f'"{name}":{scalar(value)}' for name, value in columns) + "}").encode()


def merged_value(user: dict[str, Any] | None, order: dict[str, Any]) -> bytes:
    user = user or {"NAME": None, "AGE": None}
    return json_text([
        ("NAME", user["NAME"]), ("AGE", user["AGE"]), ("PRODUCT_ID", order["PRODUCT_ID"]), ("QTY", order["QTY"]),
        ("UNIT_PRICE", None if order["UNIT_PRICE"] is None else float(order["UNIT_PRICE"])),
        ("CHANNEL", order["CHANNEL"]), ("TS", order["TS"]),
    ])


# -- producing and reading -------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    partition: int
    timestamp: int


def produce(bootstrap: str, topic: str, partitioner: str, records: Iterable[tuple[bytes | None, bytes | None, int]]) -> list[Sent]:
    """Produce in order through librdkafka with ``partitioner``; where each record went, from its delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": partitioner, "enable.idempotence": True})
    sent: list[Sent] = []
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            sent.append(Sent(msg.key(), msg.value(), msg.partition(), msg.timestamp()[1]))

    for key, value, timestamp in records:
        producer.produce(topic, key=key, value=value, timestamp=timestamp, on_delivery=delivered)
        producer.flush()  # one at a time: the delivery order is the production order
    assert not failures, failures
    return sent


def read_until(bootstrap: str, topic: str, expected: int) -> list[Record]:
    """Every record of ``topic`` once it holds ``expected``, read to its end (more than that shows as a difference)."""
    with TopicReader(bootstrap, topic, range(N)) as reader:
        read = reader.read_to_end()
        deadline = time.monotonic() + PATIENCE
        while len(read) < expected:
            if time.monotonic() > deadline:
                pytest.fail(f"{topic}: {len(read)} of {expected} records after {PATIENCE:.0f}s: {read}")
            read += reader.read(1.0)
        read += reader.read_to_end()
    return [Record(r.partition, r.key, r.value, r.timestamp) for r in read]


def sorted_records(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.partition, r.timestamp, r.key or b"", r.value or b""))


# -- the scenario ----------------------------------------------------------------------------------


def user(name: Any, age: Any) -> bytes:
    return json.dumps({"name": name, "age": age}).encode()


#: Users written by the Java partitioner (librdkafka's murmur2_random places keyed records exactly as Java does).
JAVA_USERS: list[tuple[bytes | None, bytes | None]] = [
    (b"j-ann", user("Ann", 30)),
    (b"j-bob", b'{"NAME": "Bob", "Age": "41"}'),                 # upper-case fields, BIGINT from a string
    (b"j-cy", b'{"name": "Cy"}'),                                # missing age: NULL
    (b"j-dee", b'{"name": null, "age": 27.9}'),                  # null name; 27.9 truncated to 27
    (b"j-eve", user("Eve", 50)),
    (b"j-eve", b'{"name": "Eve2", "age": true}'),                # BIGINT from a boolean: unreadable, skipped
    (b"j-eve", b"not json"),                                     # skipped: Eve stays
    (b"j-fay", user("Fay", 22)),
    (b"j-fay", None),                                            # tombstone: Fay is deleted
    (b"j-gus", user("Gus", 60)),
    (b"j-gus", user("Gus", 61)),                                 # update
    (b"j-hal", b"null"),                                         # JSON null: a tombstone too
    (b"j-ivy", b'{"name": "Ivy", "Name": "IVY", "age": 5}'),     # no exact NAME: the last case-insensitive one
    (b"j-jo", b'{"NAME": "Jo", "name": "jo", "age": 1}'),        # the exact upper-case field wins
    (b"j-kim", '{"name": "Kimé \\"K\\" 😀", "age": 33}'.encode()),
    (b"j-lee", b'{"name": 42, "age": "9", "extra": [1]}'),       # VARCHAR from a number; unknown fields ignored
    (b"j-mo", b"[]"),                                            # not an object: skipped
    (b"j-nat", b""),                                             # empty: skipped
    (None, user("Nobody", 1)),                                   # no key: a table drops it
]
#: Users written by librdkafka's default partitioner (crc32): most sit where an order never looks.
CRC_USERS = [(f"c-{i:02d}".encode(), user(f"C{i}", i)) for i in range(16)]


def order(ts: int, **fields: Any) -> bytes:
    return json.dumps({"ts": ts, "product_id": 1000 + ts % 1000, "qty": 2, "unit_price": 9.5, "channel": "web",
                       **fields}).encode()


class Expected:
    """The two tables' contents and the records the program must write, from the inputs."""

    def __init__(self) -> None:
        self.users: dict[bytes, tuple[dict[str, Any], int]] = {}  # key -> (row, partition in the users topic)
        self.repartition: list[Record] = []
        self.merged: list[Record] = []
        self.merged_repartition: list[Record] = []

    def add_users(self, sent: list[Sent]) -> None:
        for rec in sent:
            row = ksql_row(rec.value, USER_COLUMNS)
            if rec.key is None or row is SKIP:
                continue
            value = None if row is None else json_text(list(row.items()))
            self.repartition.append(Record(murmur2_partition(rec.key), rec.key, value, rec.timestamp))
            if row is None:
                self.users.pop(rec.key, None)
            else:
                self.users[rec.key] = (row, rec.partition)

    def add_orders(self, sent: list[Sent]) -> None:
        for rec in sent:
            row = ksql_row(rec.value, ORDER_COLUMNS)
            if row is SKIP or row is None or row["TS"] is None or row["TS"] < 0:
                continue
            found = self.users.get(rec.key) if rec.key is not None else None
            direct = found[0] if found and found[1] == rec.partition else None
            repartitioned = found[0] if found and murmur2_partition(rec.key) == rec.partition else None
            out = murmur2_partition(rec.key)
            self.merged.append(Record(out, rec.key, merged_value(direct, row), row["TS"]))
            self.merged_repartition.append(Record(out, rec.key, merged_value(repartitioned, row), row["TS"]))


@pytest.fixture
def kq_settings(broker: EmbeddedBroker, tmp_path: Path, new_topic: Callable[..., str]) -> Settings:
    tag = uuid.uuid4().hex[:8]
    return broker.settings(Settings()).replace(
        users_topic=new_topic("kq_users", N), orders_topic=new_topic("kq_orders", N),
        ksqldb_users_repartition_topic=f"kq_users_rep_{tag}", ksqldb_merged_topic=f"kq_merged_{tag}", ksqldb_merged_repartition_topic=f"kq_merged_rep_{tag}",
        partitions=N, data_dir=str(tmp_path / "data"), app_id=f"kq-{tag}",
    )


def test_output_records_are_ksqldbs(kq_settings: Settings) -> None:
    s, bootstrap = kq_settings, kq_settings.bootstrap_servers
    expected = Expected()
    timestamps = iter(range(T_USERS, T_ORDERS))
    java = produce(bootstrap, s.users_topic, "murmur2_random", ((k, v, next(timestamps)) for k, v in JAVA_USERS))
    crc = produce(bootstrap, s.users_topic, "consistent_random", ((k, v, next(timestamps)) for k, v in CRC_USERS))
    assert [r.partition for r in java if r.key] == [murmur2_partition(r.key) for r in java if r.key]
    assert [r.partition for r in crc] == [crc32_partition(r.key) for r in crc]
    assert any(crc32_partition(k) != murmur2_partition(k) for k, _ in CRC_USERS)
    assert any(crc32_partition(k) == murmur2_partition(k) for k, _ in CRC_USERS)
    expected.add_users(java + crc)

    with KsqlEquivalent(s) as program:
        assert sorted(program.created_topics) == sorted(
            [s.ksqldb_users_repartition_topic, s.ksqldb_merged_topic, s.ksqldb_merged_repartition_topic])
        repartition_topic = s.ksqldb_users_repartition_topic
        # The table is loaded before the orders arrive, as ksqlDB's docs require for a deterministic join.
        got = read_until(bootstrap, repartition_topic, len(expected.repartition))
        assert sorted_records(got) == sorted_records(expected.repartition)

        ts = iter(range(T_ORDERS, T_ORDERS + 100_000))
        keys = [k for k, _ in JAVA_USERS + CRC_USERS if k is not None] + [b"nobody"]
        orders = [(k, order(next(ts)), 0) for k in dict.fromkeys(keys)]
        orders += [
            (b"j-ann", json.dumps({"TS": next(ts), "PRODUCT_ID": 7, "QTY": "3", "UNIT_PRICE": "12.5",
                                   "CHANNEL": "store"}).encode(), 0),              # upper case, strings coerced
            (b"j-gus", json.dumps({"ts": next(ts), "product_id": 8, "qty": None, "unit_price": 5,
                                   "user_id": "ignored"}).encode(), 0),            # null qty, missing channel
            (b"j-ann", b"not json", 0),                                             # skipped
            (b"j-ann", b'{"ts": "soon", "product_id": 1}', 0),                      # ts unreadable: skipped
            (b"j-ann", b'{"product_id": 1, "qty": 1}', 0),                          # no ts: no timestamp, skipped
            (b"j-ann", None, 0),                                                    # a null order: skipped
            (b"j-ann", order(next(ts), channel="partner"), 0),
        ]
        orders = [(k, v, next(ts)) for k, v, _ in orders]
        sent = produce(bootstrap, s.orders_topic, "murmur2_random", orders)
        # Orders by librdkafka's default partitioner: they sit where the crc32 users do, not where ksqlDB looks.
        sent += produce(bootstrap, s.orders_topic, "consistent_random",
                        [(k, order(next(ts)), next(ts)) for k, _ in CRC_USERS[:8]])
        expected.add_orders(sent)
        for topic, records in ((s.ksqldb_merged_topic, expected.merged),
                               (s.ksqldb_merged_repartition_topic, expected.merged_repartition)):
            assert sorted_records(read_until(bootstrap, topic, len(records))) == sorted_records(records)

        # The joins see the table as it is when each order arrives: an update, a delete, a new user.
        later = iter(range(T_ORDERS + 200_000, T_ORDERS + 300_000))
        updates = produce(bootstrap, s.users_topic, "murmur2_random",
                          [(b"j-ann", user("Ann B", 31), next(later)), (b"j-bob", None, next(later)),
                           (b"j-new", user("New", 1), next(later))])
        updates += produce(bootstrap, s.users_topic, "consistent_random", [(b"c-00", user("C0 B", 100), next(later))])
        expected.add_users(updates)
        got = read_until(bootstrap, repartition_topic, len(expected.repartition))
        assert sorted_records(got) == sorted_records(expected.repartition)
        expected.add_orders(produce(bootstrap, s.orders_topic, "murmur2_random",
                                    [(k, order(t), t) for k in (b"j-ann", b"j-bob", b"j-new", b"c-00")
                                     for t in [next(later)]]))
        for topic, records in ((s.ksqldb_merged_topic, expected.merged),
                               (s.ksqldb_merged_repartition_topic, expected.merged_repartition)):
            assert sorted_records(read_until(bootstrap, topic, len(records))) == sorted_records(records)

        # Spot checks against the hand-written form, so the model above cannot drift unnoticed.
        merged = {r.value for r in expected.merged_repartition}
        assert b'{"NAME":"Ann B","AGE":31,"PRODUCT_ID":' in b"".join(merged)
        assert any(v.startswith(b'{"NAME":"Ann","AGE":30,"PRODUCT_ID":7,"QTY":3,"UNIT_PRICE":12.5,"CHANNEL":"store"')
                   for v in merged)
        assert any(v.startswith(b'{"NAME":"Gus","AGE":61,"PRODUCT_ID":8,"QTY":null,"UNIT_PRICE":5.0,"CHANNEL":null,')
                   for v in merged)
        assert '{"NAME":"Kimé \\"K\\" \\uD83D\\uDE00","AGE":33}'.encode() in {r.value for r in expected.repartition}
        skipped = Counter(m.groups() for m in map(SKIPPED.search, program.log_lines) if m)
        # ksqlDB's processing log: 4 users (Eve's two, [], empty) and 2 orders (not JSON, ts "soon"); orders
        # without a ts are dropped by Kafka Streams for their negative timestamp instead.  Each is logged by every
        # query that reads its topic, as ksqlDB's processing log does (one application per query).
        assert Counter(topic for topic, _, _ in skipped) == {s.users_topic: 4, s.orders_topic: 2}, skipped
        plan = cluster_plan(s)
        readers = Counter(plan.source(name).topic for q in plan.queries for name in (q.left, q.right) if name)
        assert readers[s.users_topic] == readers[s.orders_topic] == 2
        assert all(n == readers[topic] for (topic, _, _), n in skipped.items()), skipped
        assert program.running


def test_unequal_partition_counts_are_one_line(kq_settings: Settings, new_topic: Callable[..., str]) -> None:
    """Kafka Streams' own check (its CopartitionedTopicsEnforcer), which it skips for this topology."""
    settings = kq_settings.replace(orders_topic=new_topic("kq_orders3", N - 1))
    with pytest.raises(KsqlEquivalentError) as failure:
        KsqlEquivalent(settings).start()
    message = str(failure.value)
    assert "\n" not in message
    assert "Topics not co-partitioned" in message
    assert f"{settings.orders_topic}={N - 1}" in message and f"{settings.users_topic}={N}" in message


def test_streams_properties_reach_kafka_streams(kq_settings: Settings) -> None:
    """A property given over the program's own is the one Kafka Streams is configured with: an invalid one is
    refused by Kafka Streams' own config check, named in a one-line error."""
    with pytest.raises(KsqlEquivalentError) as failure:
        KsqlEquivalent(kq_settings, streams_properties={"max.task.idle.ms": "soon"}).start()
    message = str(failure.value)
    assert "\n" not in message and "max.task.idle.ms" in message, message


def cli(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "streamapp", "ksql-equivalent", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, **kw)


def test_cli_copartitioning_error_is_one_line(kq_settings: Settings, new_topic: Callable[..., str]) -> None:
    orders = new_topic("kq_orders5", N + 1)
    proc = cli("--bootstrap-servers", kq_settings.bootstrap_servers, "--users-topic", kq_settings.users_topic,
               "--orders-topic", orders, "--data-dir", kq_settings.data_dir, "--app-id", kq_settings.app_id,
               "--ksqldb-users-repartition-topic", kq_settings.ksqldb_users_repartition_topic)
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 2 and "FAILED" not in out, (out, err)
    assert err.count("\n") == 1 and err.startswith("streamapp ksql-equivalent: Kafka Streams refused to start: "
                                                   "Topics not co-partitioned"), err


def test_missing_jars_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(KsqlEquivalentError, match=r"ksql-equivalent jars are not installed .*make install"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STREAMAPP_JVM_LIB", str(tmp_path))
            KsqlEquivalent(Settings()).start()
    proc = cli(env={"STREAMAPP_JVM_LIB": str(tmp_path)})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err.count("\n") == 1 and "make install" in err, (out, err)


def test_missing_input_topic_is_one_line(kq_settings: Settings) -> None:
    missing = f"kq_absent_{uuid.uuid4().hex[:6]}"
    with pytest.raises(KsqlEquivalentError) as failure:
        KsqlEquivalent(kq_settings.replace(orders_topic=missing)).start()
    assert str(failure.value).startswith(f"input topic missing: DEMO_USER_ORDERS={missing} on ")


def jvm_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while not jvm_gone(pid):
        assert time.monotonic() < deadline, f"the JVM {pid} outlived its parent"
        time.sleep(0.1)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_cli_stops_and_dies_with_its_parent(kq_settings: Settings, how: str) -> None:
    """SIGTERM: Kafka Streams closes, exit 0. SIGKILL of the CLI: the JVM dies with it (PR_SET_PDEATHSIG)."""
    proc = cli("--bootstrap-servers", kq_settings.bootstrap_servers, "--users-topic", kq_settings.users_topic,
               "--orders-topic", kq_settings.orders_topic, "--data-dir", kq_settings.data_dir,
               "--app-id", kq_settings.app_id, "--ksqldb-merged-topic", kq_settings.ksqldb_merged_topic,
               "--ksqldb-users-repartition-topic", kq_settings.ksqldb_users_repartition_topic,
               "--ksqldb-merged-repartition-topic", kq_settings.ksqldb_merged_repartition_topic,
               "--partitions", str(N))
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Kafka Streams running 3 declared queries of the seed (streamapp/sql/seed.sql) (not ksqlDB)"):
                break
        else:
            pytest.fail(f"no ready line: {lines} {proc.stderr.read() if proc.stderr else ''}")
        java_pid = int(line.split("(pid ", 1)[1].split(",", 1)[0])
        assert not jvm_gone(java_pid)
        proc.send_signal(getattr(signal, how))
        status = proc.wait(timeout=60)
        if how == "SIGTERM":
            assert status == 0 and "Stopping Kafka Streams." in proc.stdout.read()
        else:
            assert status == -signal.SIGKILL
        wait_gone(java_pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_java_double_model() -> None:
    """The expectation helper itself: Double.toString's forms for the prices used."""
    assert [java_double(x) for x in (9.5, 5.0, 12.5, 68.67, 0.1)] == ["9.5", "5.0", "12.5", "68.67", "0.1"]
    assert math.isclose(double("12.5"), 12.5) and bigint(Decimal("27.9")) == 27 and bigint("-3") == -3
