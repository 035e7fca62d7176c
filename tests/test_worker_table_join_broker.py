"""A table-table join declared only in SQL, run by the worker on the real broker (issue 37's proof, ring R2).

customers × accounts on their primary key, a LEFT and a FULL join: the customers written by the Java client's
partitioner (murmur2), the accounts by librdkafka's default (crc32), so some keys sit in different partitions
of the two topics and do not meet, in either engine (each joins a partition with the same partition of the
other topic).  The records come in four rounds, one topic each, each round's outputs awaited before the next:

- a worker under at_least_once and one under exactly_once, side by side (each its own app and output prefix),
  write, key by key, what the test runner predicts for each partition's records in order, and exactly what
  Kafka Streams (PlanStreams, ksqlDB's topology) writes, tombstones included, each record once;
- after two rounds, the at_least_once worker is stopped and the exactly_once one killed (kill -9), and new ones start
  on the same data directories: the first keeps its tables, the second finds no clean stop's mark, deletes them
  (one log line) and restores them from their changelogs; both join the last two rounds' updates (deletes
  included) against the rows of the first two;
- the reconciliation of the worker's outputs against Kafka Streams' compares each key's final row: all alike, the
  rows with a side missing named ``copartition_violation`` where that side's row sits in another partition, else
  ``unknown_user``.
"""
from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import free_port
from streamapp.kafka.reader import Record
from streamapp.settings import Settings
from streamapp.sql import engine
from streamapp.sql.formats import Codec
from streamapp.sql.planner import plan_file
from streamapp.sql.plan import Plan
from streamapp.sql.runner import TestRecord, read_back, run
from streamapp.worker.process import WorkerProcess

from test_declared_join_broker import crc32_partition
from workerkit import group_progress, murmur2_partition, produce, read_all, start_together, stats, wait_until

pytestmark = pytest.mark.long

STATEMENTS = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, name STRING) WITH (KAFKA_TOPIC='customers_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT) WITH (KAFKA_TOPIC='accounts_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE customer_accounts WITH (KAFKA_TOPIC='customer_accounts_{tag}') AS
  SELECT c.id, name, balance FROM customers c LEFT JOIN accounts a ON c.id = a.id EMIT CHANGES;
CREATE TABLE everyone WITH (KAFKA_TOPIC='everyone_{tag}') AS
  SELECT ROWKEY AS id, name, balance FROM customers c FULL OUTER JOIN accounts a ON c.id = a.id EMIT CHANGES;
"""
IDS = [1000 + 37 * i for i in range(24)]
T0 = 1_700_000_000_000
#: (topic, partitioner, [(id index, value: dict, None for a tombstone)]) per round, each key once per round.
ROUNDS: list[tuple[str, str, list[tuple[int, Any]]]] = [
    ("customers", "murmur2_random", [(i, {"name": f"c{i}"}) for i in range(16)]),
    ("accounts", "consistent_random", [(i, {"balance": 10 * i}) for i in range(8, 24)]),
    ("customers", "murmur2_random", [*((i, {"name": f"c{i}-2"}) for i in range(8, 12)), (12, None), (13, None),
                                     (20, None), (16, {"name": "c16"}), (17, {"name": "c17"})]),
    ("accounts", "consistent_random", [(8, None), (9, None), (16, None), (12, {"balance": 1}), (13, {"balance": 2}),
                                       (0, {"balance": 3}), (1, {"balance": 4})]),
]
OUTPUTS = ("customer_accounts", "everyone")


def key(i: int) -> bytes:
    return struct.pack(">q", IDS[i])


def partition_of(partitioner: str, raw: bytes, n: int) -> int:
    return murmur2_partition(raw, n) if partitioner == "murmur2_random" else crc32_partition(raw, n)


def round_records(k: int) -> list[tuple[bytes, bytes | None, int]]:
    """Round ``k``'s records as produced: key, value, timestamp (later rounds later)."""
    _, _, updates = ROUNDS[k]
    return [(key(i), None if value is None else json.dumps(value).encode(), T0 + 1000 * k + j)
            for j, (i, value) in enumerate(updates)]


def predicted(plan: Plan, tag: str, rounds: int, n: int) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    """The test runner on each partition's records of the first ``rounds`` rounds, in order (what a partition-local
    join writes): each (output, partition)'s records as (key, value as JSON text, timestamp)."""
    by_partition: dict[int, list[TestRecord]] = {}
    for k in range(rounds):
        topic, partitioner, _ = ROUNDS[k]
        for raw, value, timestamp in round_records(k):
            record = TestRecord(f"{topic}_{tag}", struct.unpack(">q", raw)[0],
                                None if value is None else json.loads(value), timestamp, 0)
            by_partition.setdefault(partition_of(partitioner, raw, n), []).append(record)
    return {(name, partition): [(r.key, json.dumps(r.value, sort_keys=True), r.timestamp)
                                for r in run(plan, records).actual.get(f"{name}_{tag}", [])]
            for partition, records in by_partition.items() for name in OUTPUTS}


def expected_rounds(plan: Plan, tag: str, n: int) -> list[dict[str, list[tuple[Any, ...]]]]:
    """Per round, each output's new records as the test runner predicts them: a partition's records for the
    first k rounds begin with those for the first k - 1 (the join reads each partition in order)."""
    before: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    rounds = []
    for k in range(1, len(ROUNDS) + 1):
        now = predicted(plan, tag, k, n)
        new: dict[str, list[tuple[Any, ...]]] = {name: [] for name in OUTPUTS}
        for (name, partition), records in now.items():
            assert records[:len(before.get((name, partition), []))] == before.get((name, partition), [])
            new[name] += records[len(before.get((name, partition), [])):]
        rounds.append(new)
        before = now
    return rounds


def by_key(records: list[Any]) -> dict[Any, list[Any]]:
    """Each key's records in the order written (a key's records all go to one partition)."""
    keyed: dict[Any, list[Any]] = {}
    for record in records:
        keyed.setdefault(record[0], []).append(record)
    return keyed


def shown(codec: Codec, record: Record) -> tuple[Any, ...]:
    decoded = read_back(codec, engine.Record("out", record.key, record.value, record.timestamp), 0)
    return decoded.key, json.dumps(decoded.value, sort_keys=True), record.timestamp


def written(bootstrap: str, topic: str, n: int, count: int, timeout: float = 60.0) -> list[Record]:
    """``topic``'s records, sorted, once ``count`` arrived (waiting ``timeout`` seconds at most), to its end."""
    records = read_all(bootstrap, topic, n, count, timeout)
    return sorted(records, key=lambda r: (r.partition, r.offset))


#: The two workers run side by side on the same topics, each writing its outputs under its own prefix.
GUARANTEES = {"at_least_once": "streamapp_", "exactly_once": "eos_"}


#: The reconciliation's window: the hour of T0 (2023-11-14 22:13:20 UTC) and the next.
WINDOW = ("2023-11-14T22:00:00", "2023-11-15T00:00:00")


def final_partitions(topic: str, n: int) -> dict[int, int]:
    """Each id's partition in ``topic`` at the end of the rounds (a deleted row: none)."""
    rows: dict[int, int] = {}
    for name, partitioner, updates in ROUNDS:
        if name == topic:
            for i, value in updates:
                if value is None:
                    rows.pop(IDS[i], None)
                else:
                    rows[IDS[i]] = partition_of(partitioner, key(i), n)
    return rows


def verdicts(final: dict[Any, list[tuple[Any, ...]]], n: int) -> dict[int, tuple[str, str]]:
    """Each key's (status, cause) the reconciliation gives a join whose engines agree: a final row with a side's
    columns NULL is ``both_unenriched``, caused by where the other side's row is at the end."""
    customers, accounts = final_partitions("customers", n), final_partitions("accounts", n)
    found = {}
    for k, records in final.items():
        row = json.loads(records[-1][1])
        if row is None or (row["NAME"] is not None and row["BALANCE"] is not None):
            found[k] = ("match", "other")
            continue
        own, other = (customers, accounts) if row["NAME"] is not None else (accounts, customers)
        cause = ("unknown_user" if k not in other else "other" if other[k] == own[k] else "copartition_violation")
        found[k] = ("both_unenriched", cause)
    return found


def test_a_table_table_join_runs_as_the_test_runner_predicts_and_as_kafka_streams_does_across_a_restart(
        broker_settings: Settings, spark: Any, tmp_path: Path) -> None:
    from streamapp.kafka.ksql_equivalent import KsqlEquivalent, cluster_plan

    tag = uuid.uuid4().hex[:8]
    statements = tmp_path / "tables.sql"
    statements.write_text(STATEMENTS.format(tag=tag), encoding="utf-8")
    plan = plan_file(statements)
    base = broker_settings.replace(statements=str(statements), dead_letter_topic=f"dead_{tag}")
    settings = {guarantee: base.replace(app_id=f"tt-{guarantee}-{tag}", web_port=free_port(), output_prefix=prefix,
                                        processing_guarantee=guarantee, data_dir=str(tmp_path / f"{guarantee}-1"))
                for guarantee, prefix in GUARANTEES.items()}
    bootstrap, n = base.bootstrap_servers, base.partitions
    rounds = expected_rounds(plan, tag, n)
    expected = {name: by_key([r for new in rounds for r in new[name]]) for name in OUTPUTS}
    counts = [{name: sum(len(new[name]) for new in rounds[:k + 1]) for name in OUTPUTS} for k in range(len(ROUNDS))]
    # keys the two partitioners place apart: their customer and account never meet, in either engine
    apart = [i for i in range(8, 16) if murmur2_partition(key(i), n) != crc32_partition(key(i), n)]
    assert apart and len(apart) < 8
    ensure_topics(bootstrap, {f"customers_{tag}": n, f"accounts_{tag}": n})
    streams = KsqlEquivalent(base, state_dir=tmp_path / "ks", plan=cluster_plan(base)).start()
    workers = [WorkerProcess(s, tmp_path / f"{g}-1.log") for g, s in settings.items()]
    start_together(*workers)
    try:
        for worker in workers:
            tables = {t["table"]: t["joined_by"] for t in worker.get("/tables").json()["tables"]}
            prefix = worker.settings.output_prefix
            assert tables == {"customers": [f"{prefix}{o}_{tag}" for o in OUTPUTS],
                              "accounts": [f"{prefix}{o}_{tag}" for o in OUTPUTS]}
            picture = worker.get("/stats/picture")  # it draws a stream-table join: none here, a 404 that says so
            assert picture.status_code == 404 and "no stream-table join to draw" in picture.text, picture.text
        for k, (topic, partitioner, _) in enumerate(ROUNDS):
            if k == 2:  # new workers on the same data directories, at_least_once's stopped, exactly_once's killed
                for worker in workers:
                    if worker.settings.processing_guarantee == "exactly_once":
                        worker.kill()  # no clean stop: its tables are deleted and restored from their changelogs
                    else:
                        assert worker.stop() == 0, worker.tail()
                workers = [WorkerProcess(w.settings, tmp_path / f"{g}-2.log") for g, w in zip(GUARANTEES, workers)]
                start_together(*workers)
                for worker in workers:
                    assert stats(worker)["rows"] == {}  # no source record read again
                wiped = "store partitions were not stopped clean"
                wait_until(lambda: wiped in workers[1].log(), 30, "the exactly_once worker's line on its tables",
                           workers)
                line = next(x for x in workers[1].log().splitlines() if wiped in x)
                assert "customers[" in line and "accounts[" in line, line
                assert wiped not in workers[0].log()
            produce(bootstrap, f"{topic}_{tag}", round_records(k), partitioner)
            for name in OUTPUTS:
                for prefix in (*GUARANTEES.values(), ""):
                    got = written(bootstrap, f"{prefix}{name}_{tag}", n, counts[k][name])
                    assert len(got) == counts[k][name], (k, prefix, name, len(got), counts[k][name])
        for name in OUTPUTS:
            codec = Codec(plan.source(name.upper()))
            theirs = written(bootstrap, f"{name}_{tag}", n, counts[-1][name])
            for prefix in GUARANTEES.values():
                ours = written(bootstrap, f"{prefix}{name}_{tag}", n, counts[-1][name])
                assert by_key([shown(codec, r) for r in ours]) == expected[name], (prefix, name)
                assert by_key([(r.key, r.value, r.timestamp, r.partition) for r in ours]) == \
                    by_key([(r.key, r.value, r.timestamp, r.partition) for r in theirs]), (prefix, name)
                assert all(r.partition == murmur2_partition(r.key, n) for r in ours)
        for worker in workers:
            for topic in (f"customers_{tag}", f"accounts_{tag}"):  # offsets committed, in transactions or not
                wait_until(lambda: group_progress(bootstrap, worker.settings.app_id, topic, n)[0], 30,
                           f"{worker.settings.app_id} to commit {topic}", [worker])
    finally:
        streams.stop()
        assert [worker.stop() for worker in workers] == [0, 0], [worker.tail() for worker in workers]
    # a customer and an account placed apart never meet; placed together they do
    balances = {i: [json.loads(text)["BALANCE"] for _, text, _ in expected["customer_accounts"][IDS[i]]
                    if text != "null"] for i in range(8, 12)}
    assert all((set(b) == {None}) == (i in apart) for i, b in balances.items()), balances

    # the reconciliation of the worker's outputs (at_least_once's) against Kafka Streams': each key's final row
    from spark_batch.reconcile import main

    out = tmp_path / "reconciled"
    assert main(["--statements", str(statements), "--from", WINDOW[0], "--to", WINDOW[1], "--bootstrap-server",
                 bootstrap, "--kafka-reader", "python", "--output", str(out), "--max-mismatch-rate", "1"]) == 0
    day = next(out.glob("dt=*"))
    summary = json.loads((day / "summary.json").read_text())
    detail = spark.read.parquet(str(day / "detail")).collect()
    for name, column in (("customer_accounts", "c_id"), ("everyone", "id")):
        known = verdicts(expected[name], n)
        counted: dict[str, dict[str, int]] = {"statuses": {}, "causes": {}}
        for status, cause in known.values():
            counted["statuses"][status] = counted["statuses"].get(status, 0) + 1
            if status != "match":
                counted["causes"][cause] = counted["causes"].get(cause, 0) + 1
        assert {s: c for s, c in summary["statuses"][name].items() if c} == counted["statuses"], name
        assert {c: k for c, k in summary["causes"][name].items() if k} == counted["causes"], name
        assert {r[column]: (r["status"], r["cause"]) for r in detail if r["pair"] == name} == {
            k: v for k, v in known.items() if v[0] != "match"}, name
    assert summary["causes"]["customer_accounts"]["copartition_violation"] > 0
