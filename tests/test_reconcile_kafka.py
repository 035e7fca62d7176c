"""The reconciliation job end to end: real Apache Kafka broker, real local SparkSession, known answers.

The users topic is written by real librdkafka with its default ``consistent_random``
partitioner, the orders by ``murmur2``, so the co-partitioning violations the job
reports are real placements on the broker.  In the known-answer test the 'ksqlDB
output' topics are written by the real Kafka Streams program (ksqlDB's joins executed
by Kafka Streams; ksqlDB itself cannot run here) and the 'Faust output' ones by
tests/reconcile_scenario.py, with the perturbations the job must find.  The reader
tests need what no running engine writes on demand (aborted transactions, empty
windows), so there the scenario writes both sides in ksqlDB's output format.
"""
from __future__ import annotations

import difflib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import reconcile_scenario as sc
from spark_batch.reconcile import main
from spark_batch.window import window_for

pytestmark = pytest.mark.long


@pytest.fixture
def topics(new_topic) -> dict[str, str]:
    return {role: new_topic(role[:12], 6) for role in sc.ROLES}


def _args(bootstrap: str, topics: dict[str, str], output: Path, *extra: str) -> list[str]:
    return [
        "--date", sc.DAY, "--bootstrap-server", bootstrap,
        "--users-topic", topics["users"], "--orders-topic", topics["orders"],
        "--faust-topic", topics["faust_direct"], "--ksqldb-topic", topics["ksqldb_direct"],
        "--faust-repartition-topic", topics["faust_repartition"],
        "--ksqldb-repartition-topic", topics["ksqldb_repartition"],
        "--output", str(output), *extra,
    ]


def _summary(output: Path) -> dict:
    return json.loads((output / f"dt={sc.DAY}" / "summary.json").read_text())


#: Keys that may carry the time of the run rather than its result (none today); dropped before comparing.
RUN_TIME_KEYS = ("started_at", "finished_at", "generated_at", "run_at", "elapsed_seconds", "duration_seconds")


def _without_run_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_run_times(v) for k, v in value.items() if k not in RUN_TIME_KEYS}
    if isinstance(value, list):
        return [_without_run_times(v) for v in value]
    return value


def comparable(summary_path: Path) -> bytes:
    """A summary's bytes, or (once it holds run times) its JSON without them."""
    raw = summary_path.read_bytes()
    cleaned = _without_run_times(json.loads(raw))
    return raw if cleaned == json.loads(raw) else json.dumps(cleaned, sort_keys=True).encode()


def _detail(spark, output: Path) -> dict[tuple[str, str, int, int], tuple[str, str]]:
    rows = spark.read.parquet(str(output / f"dt={sc.DAY}" / "detail")).collect()
    return {(r["pair"], r["user_id"], r["ts"], r["product_id"]): (r["status"], r["cause"]) for r in rows}


def test_reconcile_kafka_known_answers_and_rerun(spark, bootstrap, topics, tmp_path):
    scenario = sc.build()
    sc.produce_with_ksql_equivalent(bootstrap, topics, scenario, tmp_path / "streams")
    output = tmp_path / "out"

    assert main(_args(bootstrap, topics, output, "--max-mismatch-rate", "1")) == 0
    summary = _summary(output)
    # a second run for the date, into another directory (no recorded plan: it plans the offsets again): the same
    # summary, byte for byte
    twin = tmp_path / "twin"
    assert main(_args(bootstrap, topics, twin, "--max-mismatch-rate", "1")) == 0
    assert comparable(twin / f"dt={sc.DAY}" / "summary.json") == comparable(output / f"dt={sc.DAY}" / "summary.json")
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
    assert plan["topics"][sc.JOB_ROLES["users"]]["offsets_in_ranges"] == len(scenario.records["users"])
    assert summary["offsets"] == plan
    html = (output / f"dt={sc.DAY}" / "report.html").read_text()
    assert "<svg" in html and "copartition_violation" in html

    # records arriving after the run do not change a rerun for the date: it reads the recorded offsets (the
    # scenario writes these in ksqlDB's format: who wrote the outputs is not what a rerun is about)
    extra = sc.build(regular_users=3, seed=99)
    extra.records["users"] = []  # orders of users never written
    sc.produce(bootstrap, topics, extra)
    assert main(_args(bootstrap, topics, output, "--max-mismatch-rate", "1")) == 0
    assert _summary(output) == summary
    assert _detail(spark, output) == mismatches
    assert not [p for p in output.iterdir() if p.name.startswith(".")]

    # --re-resolve reads them, and a zero threshold is breached: exit 1. They were written after a record
    # stamped two hours past the day (the scenario's 'outside' order): the grace must reach past it
    assert main(_args(bootstrap, topics, output, "--re-resolve", "--grace-minutes", "180", "--max-mismatch-rate", "0")) == 1
    again = _summary(output)
    added = Counter(status for (pair, *_), (status, _) in extra.expected.items() if pair == "direct")
    assert again["totals"]["direct"]["orders"] == summary["totals"]["direct"]["orders"] + sum(added.values())
    assert again["threshold"]["breached"] is True


def test_reconcile_unknown_topic_is_a_one_line_error(bootstrap, topics, tmp_path, capsys):
    wrong = {**topics, "ksqldb_direct": "no_such_topic_reconcile"}
    assert main(_args(bootstrap, wrong, tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no_such_topic_reconcile (--ksqldb-topic)" in err


@pytest.mark.parametrize("reader", ["spark", "python"])
def test_readers_read_exactly_the_planned_ranges(spark, bootstrap, new_topic, reader):
    from confluent_kafka import Consumer, Producer, TopicPartition

    from spark_batch.kafka_source import choose_reader, read_ranges
    from spark_batch.window import TopicRange

    topic = new_topic("ranges", 3)
    # stamped now: records stamped in 1970 roll a segment per batch and the broker's retention check
    # (every 5 minutes, 7 days) deletes them mid-session; the reader then rightly fails, naming the range
    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})  # batches of several records
    for i in range(30):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3, timestamp=base + i)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ranges"})
    assert [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15) for p in range(3)] == [(0, 10)] * 3
    consumer.close()
    planned = TopicRange("orders", topic, {0: (2, 5), 1: (0, 10), 2: (10, 10)}, True)
    assert choose_reader(spark, "auto") == "spark"  # the session has the connector (make install)
    assert choose_reader(spark, reader) == reader
    frame = read_ranges(spark, bootstrap, [planned], reader)
    if reader == "python":
        assert frame.rdd.getNumPartitions() == 2  # one task per non-empty range
    got = sorted((r["partition"], r["offset"], r["value"], r["timestamp_ms"]) for r in frame.collect())
    expected = sorted([(0, o, b"v%d" % (o * 3), base + o * 3) for o in range(2, 5)]
                      + [(1, o, b"v%d" % (o * 3 + 1), base + 1 + o * 3) for o in range(10)])
    assert got == expected


def _ten_records_per_partition(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(10 * partitions):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def test_python_reader_fails_in_one_line_on_a_range_it_cannot_read_whole(bootstrap, new_topic):
    """A planned range past the log end, or below the log start (records deleted, here with the admin
    client's DeleteRecords), is an error naming topic, partition and offsets: never a reset to END
    (librdkafka's default, which returned nothing at all) nor a shorter range."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from spark_batch.kafka_source import RangeReadError, read_range

    topic = new_topic("short", 2)
    _ten_records_per_partition(bootstrap, topic, 2)
    read = lambda partition, start, end: [m.offset() for batch in read_range(bootstrap, topic, partition, start, end)
                                          for m in batch]
    assert read(0, 2, 10) == list(range(2, 10))  # the whole log's end: fine

    with pytest.raises(RangeReadError) as beyond:
        read(0, 5, 15)
    assert str(beyond.value).count("\n") == 0
    assert str(beyond.value).startswith(f"topic {topic} partition 0: planned offsets [5, 15) cannot be read whole")
    assert "the log holds offsets [0, 10)" in str(beyond.value)

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures complete while it lives
    assert admin.delete_records([TopicPartition(topic, 1, 6)])[TopicPartition(topic, 1, 6)].result(30).low_watermark == 6
    assert read(1, 6, 10) == [6, 7, 8, 9]
    with pytest.raises(RangeReadError) as below:
        read(1, 2, 10)
    assert str(below.value).count("\n") == 0
    assert str(below.value).startswith(f"topic {topic} partition 1: planned offsets [2, 10) cannot be read whole")
    assert "stopped at offset 2" in str(below.value) and "the log holds offsets [6, 10)" in str(below.value)


def test_index_lookup_reads_exactly_the_windows_records(spark, bootstrap, new_topic):
    """ListOffsets by timestamp finds the window's first and last records; the grace catches the records
    written late, after newer ones, up to the first record stamped that far past the window."""
    from confluent_kafka import Producer

    from spark_batch import decode
    from spark_batch.kafka_source import read_ranges
    from spark_batch.offsets import resolve_plan

    window = window_for(sc.DAY, None, None)
    start, end, mid, hour = window.start_ms, window.end_ms, window.start_ms + 12 * sc.HOUR_MS, sc.HOUR_MS
    stamps = {
        0: [start - 2 * hour, start - 1, start, start + 1, end - 1, end, end + 1, end + 2 * hour],
        1: [start - 1, mid, end, mid + 1, end + 2 * hour, mid + 2],  # mid + 1 and mid + 2 written late
    }
    inside = {(p, o) for p, times in stamps.items() for o, t in enumerate(times) if start <= t < end}
    orders, users = new_topic("orders", 2), new_topic("users", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p, times in stamps.items():
        for t in times:
            producer.produce(orders, key=b"u", value=b"{}", partition=p, timestamp=t)
    for t in (start - 48 * hour, mid, end + hour):
        producer.produce(users, key=b"u", value=b"{}", partition=0, timestamp=t)
    assert producer.flush(30) == 0
    topics = {"orders": orders, "users": users}

    exact = resolve_plan(bootstrap, topics, window, grace_ms=0, timed=("orders",))
    assert exact.lookup == "index"
    assert exact.topics["orders"].ranges == {0: (2, 5), 1: (1, 2)}  # without grace the late records are left out
    assert exact.topics["users"].ranges == {0: (0, 3)}  # users are read whole

    hour_past = resolve_plan(bootstrap, topics, window, grace_ms=hour, timed=("orders",))  # mid + 2 follows a record 2 h past the end
    assert hour_past.topics["orders"].ranges == {0: (2, 7), 1: (1, 4)}
    plan = resolve_plan(bootstrap, topics, window, grace_ms=3 * hour, timed=("orders",))
    assert plan.topics["orders"].ranges == {0: (2, 8), 1: (1, 6)}
    for reader in ("spark", "python"):
        for resolved, expected in ((plan, inside), (hour_past, inside - {(1, 5)})):
            read = decode.in_window(read_ranges(spark, bootstrap, [resolved.topics["orders"]], reader), window)
            assert {(r["partition"], r["offset"]) for r in read.collect()} == expected, reader


def test_spark_and_python_readers_give_byte_identical_summaries_then_a_deleted_planned_range_fails_in_one_line(
        spark, bootstrap, topics, tmp_path, capsys):
    """Same topics, same window: Spark's kafka source and the Python DataSource agree to the byte.

    ksqlDB with exactly_once_v2 writes its outputs in transactions and leaves aborted ones in the
    log: both readers must skip those (the Java client reads them unless told read_committed) and
    step over the transaction markers.

    Then, through Spark and the CLI: the recorded plan of a rerun names offsets since deleted; the Python
    reader's task fails and the job exits 2 with the one line, instead of reporting a shorter day.
    """
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    scenario = sc.build()
    outputs = ("faust_direct", "ksqldb_direct", "faust_repartition", "ksqldb_repartition")
    sc.produce(bootstrap, topics, sc.Scenario(6, {role: scenario.records[role] for role in ("users", "orders")}))
    for role in outputs:  # each output topic: an aborted transaction, then the outputs in a committed one
        sc.produce_in_transactions(bootstrap, topics[role], scenario.records[role][:5], commit=False)
        sc.produce_in_transactions(bootstrap, topics[role], scenario.records[role], commit=True)
    # a transaction marker is stamped when it is written (now, days after the scenario's records; in
    # production, within seconds of them): the grace reaches to now, past every marker, so none ends a planned
    # range; no further, since a window whose end plus the grace is still to come is not over (refused)
    grace = (int(time.time() * 1000) - window_for(sc.DAY, None, None).end_ms) / 60_000
    runs, argvs = {}, {}
    for reader in ("spark", "python"):
        output = tmp_path / reader
        argvs[reader] = _args(bootstrap, topics, output, "--kafka-reader", reader, "--grace-minutes", str(grace),
                              "--max-mismatch-rate", "1")
        assert main(argvs[reader]) == 0
        runs[reader] = (output / f"dt={sc.DAY}" / "summary.json").read_bytes()
    assert runs["spark"] == runs["python"], "".join(difflib.unified_diff(
        runs["spark"].decode().splitlines(True), runs["python"].decode().splitlines(True), "spark", "python"))
    summary = json.loads(runs["spark"])
    for pair in ("direct", "repartition"):  # the aborted copies would be duplicates
        expected = scenario.statuses(pair)
        assert {s: n for s, n in summary["statuses"][pair].items() if n} == dict(expected), pair

    # a rerun of the Python reader's run, whose recorded plan names users' offsets deleted since
    output = tmp_path / "python"
    plan = json.loads((output / f"dt={sc.DAY}" / "offsets.json").read_text())
    partition, start, end = next((int(p), r["start"], r["end"]) for p, r in sorted(plan["topics"][sc.JOB_ROLES["users"]]["partitions"].items())
                                 if r["end"] > r["start"])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures complete while it lives
    deleted = TopicPartition(topics["users"], partition, end)
    assert admin.delete_records([deleted])[deleted].result(30).low_watermark == end
    capsys.readouterr()
    assert main(argvs["python"]) == 2  # the rerun reads the recorded plan
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"topic {topics['users']} partition {partition}: planned offsets [{start}, {end}) cannot be read whole" in err


def test_a_window_without_records_reports_no_orders(spark, bootstrap, topics, tmp_path):
    """A day with nothing to read (every planned range empty), and an hour whose planned ranges hold only
    records outside it (read, then filtered away): zero orders, exit 0, for both readers."""
    sc.produce(bootstrap, topics, sc.build(regular_users=3))
    windows = {"empty": ["--date", "2026-01-01"], "filtered": ["--from", f"{sc.DAY}T00:00", "--to", f"{sc.DAY}T00:30"]}
    for name, window in windows.items():
        for reader in ("spark", "python"):
            output = tmp_path / f"{name}-{reader}"
            argv = _args(bootstrap, topics, output, "--kafka-reader", reader)
            argv[argv.index("--date"):argv.index("--date") + 2] = window
            assert main(argv) == 0, (name, reader)
            summary = json.loads(next(output.glob("dt=*/summary.json")).read_text())
            ranges = summary["offsets"]["topics"]["faust_direct"]["offsets_in_ranges"]
            assert (ranges == 0) == (name == "empty"), (name, ranges)
            assert {pair: t["orders"] for pair, t in summary["totals"].items()} == {"direct": 0, "repartition": 0}
            assert {r["rows"] for r in summary["output_records"].values()} == {0}
