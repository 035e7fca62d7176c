"""Known-answer data for the reconciliation tests: inputs, both joins' outputs, and the expected verdicts.

ksqlDB cannot run here (no Docker, no JVM service), so both 'Faust output' and
'ksqlDB output' topics are written by these helpers in ksqlDB's exact output
format: key = USER_ID as UTF-8, value = JSON with UPPERCASE columns and explicit
nulls on a miss, record timestamp = TS, partition = murmur2(key) % n.

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
            if role == "ksqldb_repartition" and (uid, order) == missing:
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
                status, why = "missing_in_ksqldb", "other"
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
