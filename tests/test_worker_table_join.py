"""Table-table joins in the worker (issue 37, ring R2): what it refuses where, and what it runs.

Only the worker's start refuses a plan it does not run (a stream-stream join): the guard, the doctor and the
Kafka Streams program take every plan the planner makes.  The worker's table-table join is checked on the
broker in ``tests/test_worker_table_join_broker.py``.
"""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from streamapp.cli import main
from streamapp.demo.ksql_equivalent import cluster_plan
from streamapp.errors import StreamappError
from streamapp.settings import Settings
from streamapp.sql import plan as p
from streamapp.sql.topology import topology, worker_refusal

TABLES = """
CREATE TABLE L (ID BIGINT PRIMARY KEY, V STRING) WITH (KAFKA_TOPIC='l_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE R (ID BIGINT PRIMARY KEY, W STRING) WITH (KAFKA_TOPIC='r_{tag}', VALUE_FORMAT='JSON'{key_format});
CREATE TABLE O WITH (KAFKA_TOPIC='o_{tag}') AS SELECT L.ID, V, W FROM L {join} JOIN R ON L.ID = R.ID;
"""
STREAMS = """
CREATE STREAM L (ID BIGINT KEY, V STRING) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');
CREATE STREAM R (ID BIGINT KEY, W STRING) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON');
CREATE STREAM O AS SELECT L.ID, V, W FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;
"""


def statements(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "joins.sql"
    path.write_text(text, encoding="utf-8")
    return Settings(statements=str(path))


def tables_plan(tmp_path: Path, join: str = "LEFT", key_format: str = "", tag: str = "t") -> Settings:
    return statements(tmp_path, TABLES.format(tag=tag, join=join, key_format=key_format))


def test_only_the_workers_start_refuses_a_stream_stream_plan(tmp_path: Path) -> None:
    from streamapp.worker.app import create_app

    settings = statements(tmp_path, STREAMS)
    joins = topology(settings)  # what the guard, the doctor and the reconciliation build: no refusal there
    assert [q.kind for q in joins.declared.queries] == [p.STREAM_STREAM_JOIN]
    assert cluster_plan(settings).queries == joins.declared.queries
    refusal = worker_refusal(joins.declared)
    assert refusal is not None and "not supported by the worker yet: stream-stream joins" in refusal
    with pytest.raises(StreamappError) as raised:
        create_app(settings)
    assert str(raised.value) == refusal


def test_the_kafka_streams_plan_of_a_table_table_join_is_the_declared_one_with_the_seeds_renames_only(
        tmp_path: Path) -> None:
    settings = tables_plan(tmp_path)
    plan = cluster_plan(settings)
    assert [s.topic for s in plan.sources] == ["l_t", "r_t", "o_t"]
    assert plan.queries[0].kind == p.TABLE_TABLE_JOIN
    seed = cluster_plan(Settings(users_topic="people"))  # without statements the seed's topic settings rename
    assert "people" in {s.topic for s in seed.sources} and "demo_user" not in {s.topic for s in seed.sources}


def test_a_table_table_join_of_two_key_formats_joins_a_copy_of_the_right_table_rekeyed_into_the_lefts(
        tmp_path: Path) -> None:
    """ksqlDB's ``RightSourceKeyed-SelectKey-repartition``: the copy is the worker's internal topic, which ksqlDB
    does not write under that name (its ``ksqldb_output`` is None), and both tables keep their rows' times."""
    joins = topology(tables_plan(tmp_path, key_format=", KEY_FORMAT='JSON'").replace(app_id="app"))
    [copy] = joins.copies
    assert copy.output == "app-O-RightSourceKeyed-SelectKey-repartition" and copy.ksqldb_output is None
    [join] = joins.table_joins
    assert (join.left.topic, join.right.topic, join.output, join.ksqldb_output) == (
        "l_t", copy.output, "streamapp_o_t", "o_t")
    assert join.right.source.key_format == "KAFKA" and all(t.timestamped for t in joins.tables)
    assert joins.table_topics == ("l_t", copy.output, "r_t")
    assert set(joins.outputs) == {copy.output, "streamapp_o_t"}


def test_the_guard_and_kafka_streams_take_a_table_table_plan_past_planning(
        broker_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``streamapp guard --statements`` checks it; ``streamapp ksql-equivalent --statements`` gets as far as the
    cluster, where its input topics do not exist yet (one line naming them, exit 2)."""
    tag = uuid.uuid4().hex[:8]
    settings = tables_plan(tmp_path, join="INNER", tag=tag)
    cluster = ["--statements", str(settings.statements), "--bootstrap-servers", broker_settings.bootstrap_servers]
    assert main(["guard", *cluster]) == 0
    assert "Co-partitioned for partitioner murmur2." in capsys.readouterr().out
    assert main(["ksql-equivalent", *cluster]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"input topic missing: L=l_{tag}, R=r_{tag}" in err, err
