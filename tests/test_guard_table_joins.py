"""The guard and the doctor check the pairs of table-table (and stream-stream) joins too: pure pair lists and checks,
then on Apache Kafka (the guard's command, the worker's start under guard_policy=fail, the doctor).

A table-table join joins each update of one side with the other side's row of the key in the update's own
partition, so both topics need the same partition count (Kafka Streams refuses a mismatch) and partitioner.
"""
from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from streamapp.copartition.doctor import JoinedPair
from streamapp.copartition.doctor_pairs import diagnose_worker, pairs_from_worker
from streamapp.copartition.fingerprint import score
from streamapp.copartition.guard import GuardError, TopicFacts, evaluate, joined_pairs, run_guard, written_topics
from streamapp.partitioners.hashes import murmur2
from streamapp.settings import Settings
from streamapp.sql.topology import topology
from streamapp.worker.app import REFUSED_EXIT_CODE
from streamapp.worker.process import WorkerError, WorkerProcess

from workerkit import isolated, produce

TABLES = """
CREATE TABLE L (ID STRING PRIMARY KEY, V STRING) WITH (KAFKA_TOPIC='{left}', VALUE_FORMAT='JSON');
CREATE TABLE R (ID STRING PRIMARY KEY, W STRING) WITH (KAFKA_TOPIC='{right}', VALUE_FORMAT='JSON'{key_format});
CREATE TABLE O WITH (KAFKA_TOPIC='o_t') AS SELECT ROWKEY AS ID, V, W FROM L FULL JOIN R ON L.ID = R.ID;
"""
STREAM_TABLE = """
CREATE STREAM S (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='s_t', VALUE_FORMAT='JSON');
CREATE STREAM J WITH (KAFKA_TOPIC='j_t') AS SELECT S.ID, N, V FROM S LEFT JOIN L ON S.ID = L.ID;
"""
N = 6
KEYS = [f"k-{i:04d}".encode() for i in range(400)]


def plan(tmp_path: Path, left: str = "l_t", right: str = "r_t", key_format: str = "", extra: str = "") -> Settings:
    path = tmp_path / "joins.sql"
    path.write_text(TABLES.format(left=left, right=right, key_format=key_format) + extra, encoding="utf-8")
    return Settings(statements=str(path))


def test_a_table_table_joins_pair_is_its_two_tables_topics_after_the_stream_table_joins(tmp_path: Path) -> None:
    settings = plan(tmp_path, extra=STREAM_TABLE)
    joins = topology(settings)
    assert joined_pairs(joins) == [("s_t", "l_t"), ("l_t", "r_t")]
    assert written_topics(joins) == ["s_t", "l_t", "r_t"]
    assert pairs_from_worker(settings) == [JoinedPair("s_t", "l_t", "worker:j"), JoinedPair("l_t", "r_t", "worker:o")]


def test_a_right_table_of_another_key_format_is_paired_by_its_rekeyed_copy_which_is_not_fingerprinted(
        tmp_path: Path) -> None:
    settings = plan(tmp_path, key_format=", KEY_FORMAT='JSON'").replace(app_id="app")
    joins = topology(settings)
    copy = "app-O-RightSourceKeyed-SelectKey-repartition"
    assert joined_pairs(joins) == [("l_t", copy)]
    assert written_topics(joins) == ["l_t"]  # the worker writes the copy itself, with the join's partitioner
    assert pairs_from_worker(settings) == [JoinedPair("l_t", copy, "worker:o")]


def murmur2_facts(n: int) -> TopicFacts:
    return TopicFacts(n, score([(k, (murmur2(k) & 0x7FFFFFFF) % n) for k in KEYS], n))


def test_a_partition_count_mismatch_of_the_two_tables_is_a_problem_and_refused_under_fail(tmp_path: Path) -> None:
    settings = plan(tmp_path)
    report = evaluate(settings, {"l_t": murmur2_facts(N), "r_t": murmur2_facts(4)}, {"l_t": "raw", "r_t": "raw"})
    assert report.problems == [
        "Can't join l_t with r_t since the number of partitions don't match: l_t has 6 partitions, r_t has 4. "
        "Repartition one of them so the counts match."]
    same = evaluate(settings, {"l_t": murmur2_facts(N), "r_t": murmur2_facts(N)}, {"l_t": "raw", "r_t": "raw"})
    assert same.ok and same.skipped == []
    assert [c.name for c in same.checks] == [
        "partitions l_t × r_t", "key serialization l_t", "partitioner of l_t", "key serialization r_t",
        "partitioner of r_t"]


def test_a_table_written_with_another_partitioner_says_what_its_table_table_join_misses(tmp_path: Path) -> None:
    settings = plan(tmp_path)
    crc32 = TopicFacts(N, score([(k, zlib.crc32(k) % N) for k in KEYS], N))
    report = evaluate(settings, {"l_t": murmur2_facts(N), "r_t": crc32})
    [problem] = report.problems
    assert problem.startswith("r_t was not written with murmur2: only ")
    assert "Its table-table joins (streamapp_o_t) will miss about 83% (1 − 1/6) of the other side's rows" in problem


def guard_cli(settings: Settings, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamapp", "guard", "--statements", str(settings.statements),
                           "--bootstrap-servers", settings.bootstrap_servers, *extra],
                          capture_output=True, text=True, timeout=120)


def test_the_guard_refuses_two_tables_of_different_partition_counts_on_the_broker(
        broker_settings: Settings, new_topic, tmp_path: Path) -> None:
    """``streamapp guard --statements`` exits 1 naming both counts; the worker's start-up check under
    ``guard_policy=fail`` raises (the worker then exits 2), as for a stream-table join."""
    left, right = new_topic("l", N), new_topic("r", 4)
    settings = isolated(broker_settings).replace(statements=plan(tmp_path, left, right).statements)
    produce(settings.bootstrap_servers, left, ((k, b'{"V":"a"}') for k in KEYS), "murmur2_random")
    produce(settings.bootstrap_servers, right, ((k, b'{"W":"b"}') for k in KEYS), "murmur2_random")
    result = guard_cli(settings, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks[f"partitions {left} × {right}"]["message"] == (
        f"Can't join {left} with {right} since the number of partitions don't match: {left} has 6 partitions, "
        f"{right} has 4. Repartition one of them so the counts match.")
    assert [name for name, check in checks.items() if check["ok"] is not True] == [f"partitions {left} × {right}"]
    with pytest.raises(GuardError, match=f"guard_policy=fail: 1 co-partitioning problem.*Can't join {left} with"):
        run_guard(settings.replace(guard_policy="fail"), {left: "raw", right: "raw"})


def test_the_worker_under_fail_does_not_start_on_two_tables_of_different_partition_counts(
        broker_settings: Settings, new_topic, tmp_path: Path) -> None:
    """As Kafka Streams refuses it: one line, exit status 2, before any update is joined."""
    left, right = new_topic("l", N), new_topic("r", 4)
    settings = isolated(broker_settings, guard_policy="fail").replace(
        statements=plan(tmp_path, left, right).statements)
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    with pytest.raises(WorkerError, match=f"exited with code {REFUSED_EXIT_CODE}"):
        worker.start(timeout=90)
    log = worker.log()
    assert (f"Worker not started: guard_policy=fail: 1 co-partitioning problem(s): Can't join {left} with {right} "
            f"since the number of partitions don't match: {left} has 6 partitions, {right} has 4.") in log, log[-3000:]
    assert "Traceback" not in log
    worker.stop()


def test_the_doctor_judges_a_table_table_joins_pair_on_the_broker(
        broker_settings: Settings, new_topic, tmp_path: Path) -> None:
    left, right = new_topic("l", N), new_topic("r", N)
    settings = isolated(broker_settings).replace(statements=plan(tmp_path, left, right).statements)
    produce(settings.bootstrap_servers, left, ((k, b'{"V":"a"}') for k in KEYS), "murmur2_random")
    produce(settings.bootstrap_servers, right, ((k, b'{"W":"b"}') for k in KEYS), "consistent_random")
    report = diagnose_worker(settings, sample=len(KEYS))
    [pair] = [p for p in report.pairs if p.joined]
    assert (pair.left, pair.right, pair.joined_by, pair.status) == (left, right, ("worker:o",), "broken")
    assert not report.ok


STREAMS = """
CREATE STREAM A (ID STRING KEY, V STRING) WITH (KAFKA_TOPIC='a_t', VALUE_FORMAT='JSON');
CREATE STREAM B (ID STRING KEY, W STRING) WITH (KAFKA_TOPIC='b_t', VALUE_FORMAT='JSON');
CREATE STREAM AB WITH (KAFKA_TOPIC='ab_t') AS SELECT A.ID, V, W FROM A JOIN B WITHIN 1 MINUTE ON A.ID = B.ID;
"""


def test_a_stream_stream_joins_two_streams_are_a_pair_checked_as_streams(tmp_path: Path) -> None:
    """The worker runs stream-stream joins of two co-partitioned streams: their counts and partitioners are checked,
    not a table's key serialization (a stream's keys are not stored as a table's)."""
    path = tmp_path / "streams.sql"
    path.write_text(STREAMS, encoding="utf-8")
    settings = Settings(statements=str(path))
    joins = topology(settings)
    assert joined_pairs(joins) == [("a_t", "b_t")]
    assert pairs_from_worker(settings) == [JoinedPair("a_t", "b_t", "worker:ab")]
    crc32 = TopicFacts(N, score([(k, zlib.crc32(k) % N) for k in KEYS], N))
    report = evaluate(settings, {"a_t": murmur2_facts(N), "b_t": crc32})
    assert [c.name for c in report.checks] == ["partitions a_t × b_t", "partitioner of a_t", "partitioner of b_t"]
    [problem] = report.problems
    assert problem.startswith("b_t was not written with murmur2") and problem.endswith(
        "Its stream-stream joins (streamapp_ab_t) will miss about 83% (1 − 1/6) of the other side's records: "
        "re-write it with the join's partitioner.")
    assert evaluate(settings, {"a_t": murmur2_facts(N), "b_t": murmur2_facts(3)}).problems == [
        "Can't join a_t with b_t since the number of partitions don't match: a_t has 6 partitions, b_t has 3. "
        "Repartition one of them so the counts match."]
