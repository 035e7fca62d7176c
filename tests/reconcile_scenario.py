"""Known-answer data for the reconciliation tests: inputs, both joins' outputs, and the expected verdicts.

The 'Faust output' records are written by these helpers, with the perturbations the
job must find (a duplicate, a wrong AGE, a missing order, a record in another
partition), in ksqlDB's output format: key = USER_ID as UTF-8, value = JSON with
UPPERCASE columns and explicit nulls on a miss, record timestamp = TS, partition =
murmur2(key) % n.  On Kafka, the 'ksqlDB output' topics are written by the real
Kafka Streams program (ksqlDB's joins executed by Kafka Streams; ksqlDB itself
cannot run here) over the scenario's input topics: :func:`produce_with_ksql_equivalent`,
which checks that the program wrote exactly the ksqlDB records predicted here.
Exports (``--source files``, no broker) hold the predicted records.

The expected status and cause of every order are predicted here from the hash
functions (crc32 for the users topic written by librdkafka's default
``consistent_random``, murmur2 for everything ksqlDB writes), while the job
under test reads where the records actually landed on the broker.
"""
from __future__ import annotations

import json
import random
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streamapp.partitioners import partition

DAY = "2026-11-20"
DAY_START_MS = int(datetime(2026, 11, 20, tzinfo=timezone.utc).timestamp() * 1000)
HOUR_MS = 3_600_000
CHANNELS = ("store", "web", "partner", "catalog")
ROLES = ("users", "orders", "faust_direct", "ksqldb_direct", "faust_repartition", "ksqldb_repartition")
#: The job's seed topic flags, by the scenario's roles.
FLAGS = {"users": "--users-topic", "orders": "--orders-topic", "faust_direct": "--faust-topic",
         "ksqldb_direct": "--ksqldb-topic", "faust_repartition": "--faust-repartition-topic",
         "ksqldb_repartition": "--ksqldb-repartition-topic"}
#: The job's role of the scenario's inputs: the seed's sources, lower-cased (its outputs keep their names).
JOB_ROLES = {"users": "demo_user", "orders": "demo_user_orders"}


@dataclass
class Record:
    key: bytes
    value: dict[str, Any] | None
    timestamp: int
    partition: int | None = None  # None: let the producer's partitioner choose


@dataclass
class Scenario:
    partitions: int
    records: dict[str, list[Record]] = field(default_factory=lambda: {role: [] for role in ROLES})
    #: (pair, user_id, ts, product_id) -> (status, cause)
    expected: dict[tuple[str, str, int, int], tuple[str, str]] = field(default_factory=dict)
    #: Keys of users whose record comes after their order: a real engine must see the order first.
    late: set[bytes] = field(default_factory=set)

    def statuses(self, pair: str) -> Counter[str]:
        return Counter(status for (p, *_), (status, _) in self.expected.items() if p == pair)

    def causes(self, pair: str) -> Counter[str]:
        return Counter(cause for (p, *_), (status, cause) in self.expected.items() if p == pair and status != "match")


def crc32_partition(key: bytes, n: int) -> int:
    return zlib.crc32(key) % n


def murmur2_partition(key: bytes, n: int) -> int:
    return partition("murmur2", key, n)


def _user_ids(rng: random.Random, count: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(count)]


def output_value(order: dict[str, Any], user: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "NAME": user["name"] if user else None, "AGE": user["age"] if user else None,
        "PRODUCT_ID": order["product_id"], "QTY": order["qty"], "UNIT_PRICE": order["unit_price"],
        "CHANNEL": order["channel"], "TS": order["ts"],
    }


def build(partitions: int = 6, regular_users: int = 30, seed: int = 7) -> Scenario:
    """Regular users (written by consistent_random), one late, one JSON-quoted, one unknown; plus perturbations."""
    rng = random.Random(seed)
    s = Scenario(partitions)
    n = partitions
    colocated = lambda uid: crc32_partition(uid.encode(), n) == murmur2_partition(uid.encode(), n)  # noqa: E731
    ids = _user_ids(rng, regular_users * 4)
    late_id = next(u for u in ids if colocated(u))
    ids.remove(late_id)
    quoted_id, unknown_id = ids.pop(), ids.pop()
    regular = ids[:regular_users]
    users = {uid: {"name": f"User {i}", "age": 20 + i} for i, uid in enumerate([*regular, late_id, quoted_id])}
    orders: list[tuple[str, dict[str, Any]]] = []
    for i, uid in enumerate(regular * 2 + [late_id, quoted_id, unknown_id]):
        ts = DAY_START_MS + HOUR_MS + i * 60_000
        orders.append((uid, {"ts": ts, "product_id": 1000 + i, "qty": 1 + i % 5,
                             "unit_price": round(1 + i * 1.37, 2), "channel": CHANNELS[i % 4]}))
    late_order_ts = next(o["ts"] for u, o in orders if u == late_id)
    for uid, value in users.items():
        key = f'"{uid}"'.encode() if uid == quoted_id else uid.encode()
        ts = late_order_ts + 1000 if uid == late_id else DAY_START_MS - 24 * HOUR_MS
        s.records["users"].append(Record(key, value, ts))
    s.late = {late_id.encode()}
    # outside the window: the day before and two hours after (beyond the default grace); never reconciled
    outside = [(regular[0], {"ts": DAY_START_MS - 3 * HOUR_MS, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}),
               (regular[1], {"ts": DAY_START_MS + 26 * HOUR_MS, "product_id": 2, "qty": 1, "unit_price": 1.0, "channel": "web"})]
    for uid, order in orders + outside:
        s.records["orders"].append(Record(uid.encode(), order, order["ts"]))
    duplicate, value_mismatch, missing, moved = (orders[i] for i in (0, 1, 2, 3))
    for uid, order in orders + outside:
        key = uid.encode()
        known = uid in users and uid != quoted_id
        on_time = known and (uid != late_id)
        user = users.get(uid)
        direct_ksqldb = user if on_time and colocated(uid) else None
        everywhere = user if on_time else None  # Faust's direct join here uses a global table; repartition joins co-locate
        rows = {"faust_direct": everywhere, "ksqldb_direct": direct_ksqldb, "faust_repartition": everywhere,
                "ksqldb_repartition": everywhere}
        for role, joined in rows.items():
            value = output_value(order, joined)
            copies = 2 if (role == "faust_repartition" and (uid, order) == duplicate) else 1
            if role == "faust_repartition" and (uid, order) == value_mismatch:
                value["AGE"] += 1
            if role == "faust_repartition" and (uid, order) == missing:
                copies = 0
            where = (murmur2_partition(key, n) + 1) % n if (role == "faust_direct" and (uid, order) == moved) else None
            s.records[role].extend(Record(key, value, order["ts"], where) for _ in range(copies))
        if (uid, order) in outside:
            continue
        cause = ("unknown_user" if uid == unknown_id else "key_format" if uid == quoted_id
                 else "late_user" if uid == late_id else None)
        for pair in ("direct", "repartition"):
            status, why = "match", "other"
            if cause:
                status, why = "both_unenriched", cause
            elif pair == "direct" and not colocated(uid):
                status, why = "enriched_only_in_faust", "copartition_violation"
            if pair == "repartition" and (uid, order) == duplicate:
                status, why = "duplicate", "other"
            if pair == "repartition" and (uid, order) == value_mismatch:
                status, why = "value_mismatch", "other"
            if pair == "repartition" and (uid, order) == missing:
                status, why = "missing_in_faust", "other"
            if pair == "direct" and (uid, order) == moved:
                status, why = "partition_mismatch", "other"
            s.expected[(pair, uid, order["ts"], order["product_id"])] = (status, why)
    return s


def produce(bootstrap: str, topics: dict[str, str], scenario: Scenario) -> None:
    """Write the scenario with real librdkafka: users by consistent_random (its default), the rest murmur2 like ksqlDB."""
    from confluent_kafka import Producer

    for role, records in scenario.records.items():
        partitioner = "consistent_random" if role == "users" else "murmur2"
        producer = Producer({"bootstrap.servers": bootstrap, "partitioner": partitioner, "linger.ms": 5})
        for r in records:
            extra = {} if r.partition is None else {"partition": r.partition}
            value = None if r.value is None else json.dumps(r.value).encode()
            producer.produce(topics[role], key=r.key, value=value, timestamp=r.timestamp, **extra)
        if producer.flush(30) != 0:
            raise RuntimeError(f"could not deliver every record to {topics[role]}")


#: The output roles the real Kafka Streams program writes on Kafka.
KSQLDB_ROLES = ("ksqldb_direct", "ksqldb_repartition")
#: Not an expectation on speed: how long a broken run may hang before it fails.
PATIENCE = 180.0


def ksql_equivalent_settings(bootstrap: str, topics: dict[str, str], partitions: int, data_dir: Path) -> Any:
    """The Kafka Streams program's settings: the scenario's inputs in, its two ksqlDB roles out.

    The application id comes from the output topic, so a second call on the same topics
    resumes where the first stopped (its committed offsets, its tables), as a restart would.
    """
    from streamapp.settings import Settings

    return Settings().replace(
        bootstrap_servers=bootstrap, users_topic=topics["users"], orders_topic=topics["orders"],
        ksqldb_users_repartition_topic=f"{topics['ksqldb_repartition']}_users",
        ksqldb_merged_topic=topics["ksqldb_direct"], ksqldb_merged_repartition_topic=topics["ksqldb_repartition"],
        partitions=partitions, data_dir=str(data_dir), app_id=f"{topics['ksqldb_direct']}-app",
    )


def _follow(bootstrap: str, topic: str, done: Any) -> list[Any]:
    """Every record of ``topic`` once ``done(records)`` holds, read to its end (fails after PATIENCE)."""
    import time

    from streamapp.kafka.reader import TopicReader

    with TopicReader(bootstrap, topic) as reader:
        records = reader.read_to_end()
        deadline = time.monotonic() + PATIENCE
        while not done(records):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: still waiting after {PATIENCE:.0f}s, {len(records)} records read")
            records += reader.read(1.0)
        return records + reader.read_to_end()


def _identity(key: bytes | None, value: dict[str, Any]) -> tuple[bytes | None, int, int]:
    return key, value["TS"], value["PRODUCT_ID"]


def produce_with_ksql_equivalent(bootstrap: str, topics: dict[str, str], scenario: Scenario, data_dir: Path) -> None:
    """Write the scenario as :func:`produce` does, except the ksqlDB outputs: the real Kafka Streams program
    (``streamapp ksql-equivalent``) writes those from the users and orders topics.

    As the scenario says, every user is in the tables before the orders arrive, except the
    late ones, written once the program has joined every order.  The program's
    records must be the ksqlDB records the scenario predicts (key, JSON value, partition, timestamp).
    """
    from streamapp.kafka.ksql_equivalent import KsqlEquivalent

    n = scenario.partitions
    users = scenario.records["users"]
    late = [r for r in users if r.key in scenario.late]
    settings = ksql_equivalent_settings(bootstrap, topics, n, data_dir)
    repartition = settings.ksqldb_users_repartition_topic

    def holds_users(records: list[Record]) -> Any:
        return lambda read: {r.key for r in records} <= {r.key for r in read}

    on_time = [r for r in users if r.key not in scenario.late]
    produce(bootstrap, topics, Scenario(n, {"users": on_time}))
    with KsqlEquivalent(settings):
        _follow(bootstrap, repartition, holds_users(on_time))
        produce(bootstrap, topics, Scenario(n, {role: records for role, records in scenario.records.items()
                                                if role not in ("users", *KSQLDB_ROLES)}))
        written = {}
        for role in KSQLDB_ROLES:
            wanted = {_identity(r.key, r.value) for r in scenario.records[role] if r.value is not None}
            read = _follow(bootstrap, topics[role],
                           lambda rs, wanted=wanted: wanted <= {_identity(r.key, json.loads(r.value)) for r in rs})
            written[role] = [r for r in read if _identity(r.key, json.loads(r.value)) in wanted]
        produce(bootstrap, topics, Scenario(n, {"users": late}))
        _follow(bootstrap, repartition, holds_users(late))
    for role in KSQLDB_ROLES:
        got = sorted((r.partition, r.key, r.timestamp, json.dumps(json.loads(r.value), sort_keys=True))
                     for r in written[role])
        predicted = sorted((murmur2_partition(r.key, n) if r.partition is None else r.partition, r.key, r.timestamp,
                            json.dumps(r.value, sort_keys=True)) for r in scenario.records[role])
        assert got == predicted, (role, [g for g in got if g not in predicted][:3], [p for p in predicted if p not in got][:3])


def produce_in_transactions(bootstrap: str, topic: str, records: list[Record], commit: bool) -> None:
    """``records`` in one transaction, committed or aborted, as ksqlDB with ``exactly_once_v2`` writes (murmur2).

    An aborted transaction's records stay in the log (with a control record after them): a
    read_committed reader skips them, a read_uncommitted one returns them.
    """
    import uuid

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2", "linger.ms": 5,
                         "transactional.id": f"reconcile-test-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for r in records:
        extra = {} if r.partition is None else {"partition": r.partition}
        value = None if r.value is None else json.dumps(r.value).encode()
        producer.produce(topic, key=r.key, value=value, timestamp=r.timestamp, **extra)
    producer.flush(30)
    (producer.commit_transaction if commit else producer.abort_transaction)(30)


def export(directory: Path, topics: dict[str, str], scenario: Scenario, decoded: tuple[str, ...] = ()) -> None:
    """The same records as exports, partitions predicted from the hashes.

    Kafka-shaped JSON lines (key, value JSON, partition, offset, timestamp) by
    default; roles in ``decoded`` as Parquet with one column per field instead.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    for role, records in scenario.records.items():
        rows = []
        for offset, r in enumerate(records):
            chosen = r.partition
            if chosen is None:
                chosen = (crc32_partition if role == "users" else murmur2_partition)(r.key, scenario.partitions)
            rows.append({"key": r.key.decode(), "value": r.value, "partition": chosen, "offset": offset, "timestamp": r.timestamp})
        if role not in decoded:
            lines = [json.dumps({**row, "value": json.dumps(row["value"])}) for row in rows]
            (directory / f"{topics[role]}.jsonl").write_text("\n".join(lines) + "\n")
            continue
        columns = [{"user_id": row["key"], **{k.lower(): v for k, v in row["value"].items()}, "partition": row["partition"],
                    "offset": row["offset"], "timestamp_ms": row["timestamp"]} for row in rows]
        pq.write_table(pa.Table.from_pylist(columns), directory / f"{topics[role]}.parquet")
