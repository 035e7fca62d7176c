"""The reconciliation job end to end: real embedded broker, real local SparkSession, known answers.

ksqlDB itself cannot run here, so the 'ksqlDB output' topics (and the 'Faust
output' ones) are written by tests/reconcile_scenario.py in ksqlDB's exact
output format; the users topic is written by real librdkafka with its default
``consistent_random`` partitioner, the orders by ``murmur2``, so the
co-partitioning violations the job reports are real placements on the broker.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import reconcile_scenario as sc
from spark_batch.reconcile import main


@pytest.fixture
def topics(new_topic) -> dict[str, str]:
    return {role: new_topic(role[:12], 6) for role in sc.ROLES}


def _args(bootstrap: str, topics: dict[str, str], output: Path, *extra: str) -> list[str]:
    return [
        "--date", sc.DAY, "--bootstrap-server", bootstrap, "--broker-profile", "embedded",
        "--users-topic", topics["users"], "--orders-topic", topics["orders"],
        "--faust-topic", topics["faust_direct"], "--ksqldb-topic", topics["ksqldb_direct"],
        "--faust-repartition-topic", topics["faust_repartition"],
        "--ksqldb-repartition-topic", topics["ksqldb_repartition"],
        "--output", str(output), *extra,
    ]


def _summary(output: Path) -> dict:
    return json.loads((output / f"dt={sc.DAY}" / "summary.json").read_text())


def _detail(spark, output: Path) -> dict[tuple[str, str, int, int], tuple[str, str]]:
    rows = spark.read.parquet(str(output / f"dt={sc.DAY}" / "detail")).collect()
    return {(r["pair"], r["user_id"], r["ts"], r["product_id"]): (r["status"], r["cause"]) for r in rows}


def test_reconcile_kafka_known_answers_and_rerun(spark, bootstrap, topics, tmp_path):
    scenario = sc.build()
    sc.produce(bootstrap, topics, scenario)
    output = tmp_path / "out"

    assert main(_args(bootstrap, topics, output, "--max-mismatch-rate", "1")) == 0
    summary = _summary(output)
    for pair in ("direct", "repartition"):
        expected = scenario.statuses(pair)
        assert {s: n for s, n in summary["statuses"][pair].items() if n} == dict(expected), pair
        assert {c: n for c, n in summary["causes"][pair].items() if n} == dict(scenario.causes(pair)), pair
    mismatches = {k: v for k, v in scenario.expected.items() if v[0] != "match"}
    assert _detail(spark, output) == mismatches
    # the direct ksqlDB join misses exactly the orders whose user crc32 and murmur2 partitions differ
    predicted = {k for k, (status, _) in scenario.expected.items() if status == "enriched_only_in_faust"}
    assert predicted and all(sc.crc32_partition(k[1].encode(), 6) != sc.murmur2_partition(k[1].encode(), 6) for k in predicted)
    assert scenario.statuses("repartition")["enriched_only_in_faust"] == 0
    plan = json.loads((output / f"dt={sc.DAY}" / "offsets.json").read_text())
    assert plan["topics"]["users"]["records_in_ranges"] == len(scenario.records["users"])
    assert summary["offsets"] == plan
    html = (output / f"dt={sc.DAY}" / "report.html").read_text()
    assert "<svg" in html and "copartition_violation" in html

    # records arriving after the run do not change a rerun for the date: it reads the recorded offsets
    extra = sc.build(regular_users=3, seed=99)
    extra.records["users"] = []
    sc.produce(bootstrap, topics, extra)
    assert main(_args(bootstrap, topics, output, "--max-mismatch-rate", "1")) == 0
    assert _summary(output) == summary
    assert _detail(spark, output) == mismatches
    assert not [p for p in output.iterdir() if p.name.startswith(".")]

    # --re-resolve reads them, and a zero threshold is breached: exit 1
    assert main(_args(bootstrap, topics, output, "--re-resolve", "--max-mismatch-rate", "0")) == 1
    again = _summary(output)
    added = Counter(status for (pair, *_), (status, _) in extra.expected.items() if pair == "direct")
    assert again["totals"]["direct"]["orders"] == summary["totals"]["direct"]["orders"] + sum(added.values())
    assert again["threshold"]["breached"] is True


def test_reconcile_unknown_topic_is_a_one_line_error(bootstrap, topics, tmp_path, capsys):
    wrong = {**topics, "ksqldb_direct": "no_such_topic_reconcile"}
    assert main(_args(bootstrap, wrong, tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no_such_topic_reconcile (--ksqldb-topic)" in err


def test_python_datasource_reads_exactly_the_planned_ranges_one_task_each(spark, bootstrap, new_topic):
    from confluent_kafka import Producer

    from spark_batch.errors import ReconcileError
    from spark_batch.kafka_source import choose_reader, read_ranges
    from spark_batch.offsets import scan
    from spark_batch.window import TopicRange

    topic = new_topic("ranges", 3)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})  # batches of several records
    for i in range(30):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3, timestamp=1000 + i)
    producer.flush(30)
    ends = scan(bootstrap, {(topic, p): None for p in range(3)})
    assert ends == {(topic, p): (0, 10) for p in range(3)}  # the fetch high watermark, not ListOffsets'
    planned = TopicRange("orders", topic, {0: (2, 5), 1: (0, 10), 2: (10, 10)}, True)
    assert choose_reader(spark, "auto") == "python"
    with pytest.raises(ReconcileError, match="--kafka-reader=spark"):
        choose_reader(spark, "spark")
    frame = read_ranges(spark, bootstrap, [planned], "python")
    assert frame.rdd.getNumPartitions() == 2
    got = sorted((r["partition"], r["offset"], r["value"]) for r in frame.collect())
    expected = sorted([(0, o, b"v%d" % (o * 3)) for o in range(2, 5)] + [(1, o, b"v%d" % (o * 3 + 1)) for o in range(10)])
    assert got == expected
