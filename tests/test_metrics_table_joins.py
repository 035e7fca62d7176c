"""``GET /metrics`` of table-table joins, and ``streamapp_kafka_reachable`` while an output fails (pure).

A table-table join's updates are counted where the worker's /stats counts them (the joined and missed counters
of its output, :mod:`agents.tables`): the metrics read those counters, as for a stream-table join's lookups.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from streamapp.settings import Settings
from streamapp.worker.counters import Counters
from streamapp.worker.health import PROBE, OutputWatch, Reachability, health_status
from streamapp.worker.metrics import TableJoinFacts, read, watched_topics

from test_metrics import DIRECT, full_scrape, parsed, samples

TABLES = """
CREATE TABLE L (ID STRING PRIMARY KEY, V STRING) WITH (KAFKA_TOPIC='l_t', VALUE_FORMAT='JSON');
CREATE TABLE R (ID STRING PRIMARY KEY, W STRING) WITH (KAFKA_TOPIC='r_t', VALUE_FORMAT='JSON');
CREATE TABLE O WITH (KAFKA_TOPIC='o_t') AS SELECT L.ID, V, W FROM L LEFT JOIN R ON L.ID = R.ID;
"""
CUSTOMER_ACCOUNTS = TableJoinFacts("customer_accounts", "out_accounts")


def counters() -> dict[str, Any]:
    """Updates of both sides of the table-table join as agents/tables.py counts them, beside a stream-table join's."""
    c = Counters()
    for _ in range(4):
        c.record_join("out_accounts", 0, True)  # an update that found the other side's row
    c.record_miss("out_accounts", 0, "no_row")
    c.record_miss("out_accounts", 1, "copartition_violation")
    c.record_join("out_merged", 0, True)
    return c.snapshot()


def test_a_table_table_joins_updates_are_its_lookups_hit_or_miss_with_their_causes() -> None:
    metrics = parsed(full_scrape(joins=[DIRECT], table_joins=[CUSTOMER_ACCOUNTS], counters=counters()))
    lookups = samples(metrics["streamapp_join_lookups"], "_total")
    accounts = {(dict(k)["partition"], dict(k)["result"]): v for k, v in lookups.items()
                if ("join", "customer_accounts") in k}
    assert accounts == {("0", "hit"): 4, ("0", "miss"): 1, ("1", "hit"): 0, ("1", "miss"): 1}
    assert all(("output", "out_accounts") in k for k in lookups if ("join", "customer_accounts") in k)
    assert lookups[(("join", "orders_merged"), ("output", "out_merged"), ("partition", "0"), ("result", "hit"))] == 1
    causes = samples(metrics["streamapp_join_misses"], "_total")
    assert causes == {(("cause", "copartition_violation"), ("join", "customer_accounts"), ("output", "out_accounts")): 1,
                      (("cause", "no_row"), ("join", "customer_accounts"), ("output", "out_accounts")): 1}


def test_without_table_table_joins_their_counters_are_not_exposed() -> None:
    lookups = samples(parsed(full_scrape(joins=[DIRECT], counters=counters()))["streamapp_join_lookups"], "_total")
    assert {dict(k)["join"] for k in lookups} == {"orders_merged"}


def test_kafka_reachable_is_kafka_alone_not_the_health_of_the_outputs() -> None:
    """/health turns 503 for an output the worker cannot write while Kafka answers: the gauge still says 1."""
    reach, outputs = Reachability(timeout=60.0, exit_after=0.0, last_answer=59.0), OutputWatch(0)
    outputs.unwritable("out_accounts", "UNKNOWN_TOPIC_OR_PARTITION", now=0.0, source=PROBE)
    health = health_status(reach, outputs, now=60.0)
    assert health["healthy"] is False and health["kafka"]["reachable"] is True
    metrics = parsed(full_scrape(health=health))
    assert samples(metrics["streamapp_kafka_reachable"]) == {(): 1}
    assert samples(metrics["streamapp_kafka_reachable"]) != {(): int(health["healthy"])}


def test_a_worker_of_a_table_table_plan_labels_its_join_by_the_querys_name_and_output(tmp_path: Path) -> None:
    from streamapp.worker.app import create_app

    path = tmp_path / "joins.sql"
    path.write_text(TABLES, encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    scrape = read(app)
    assert list(scrape.table_joins) == [TableJoinFacts("o", "streamapp_o_t")] and list(scrape.joins) == []


def test_both_tables_of_a_table_table_join_are_watched_for_misplaced_keys(tmp_path: Path) -> None:
    """Their keys are checked against the join's partitioner as they are read, as a stream-table join's topics are:
    a producer switching partitioner turns the guard's verdict (streamapp.copartition.drift)."""
    from streamapp.worker.app import create_app

    path = tmp_path / "joins.sql"
    path.write_text(TABLES, encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    assert watched_topics(app) == {"l_t", "r_t"}
    assert app.streamapp_instruments.watched == {"l_t", "r_t"}  # type: ignore[attr-defined]
