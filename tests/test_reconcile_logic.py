"""Pure parts of the reconciliation job: the window, the offset plan, options, the report; and the
status rules on tiny DataFrames in the session's real local SparkSession."""
from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from spark_batch.compare import STATUSES, classify as classify_group, status_counts, status_metrics
from spark_batch.errors import ReconcileError
from spark_batch.options import parse
from spark_batch.reconcile import SHUFFLE_PARTITIONS, shuffle_settings
from spark_batch.report import cause_chart, partition_chart, render_html
from spark_batch.roles import SIDES, Roles
from streamapp.settings import Settings
from spark_batch.summary import PairTotals, PartitionCell, Sample, Summary, Threshold, mismatch_rate
from spark_batch.window import OffsetPlan, TimeWindow, TopicRange, window_for


#: The seed's joins (direct, repartition), as the job reads the packaged seed's statements.
SEED = Roles.of(Settings())
GROUP = SEED.groups[0]
PAIRS = GROUP.names
TABLE = SEED.inputs["demo_user"]


def classify(faust: DataFrame, ksqldb: DataFrame, matches: bool = True) -> DataFrame:
    """The seed's group classified (both pairs share the stream and its identity)."""
    return classify_group(GROUP, faust, ksqldb, matches)


def by_side(outputs: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(Faust's, ksqlDB's) records of a small frame of both, tagged ``side``, as ``classify`` takes them
    (the job reads each side's own topics instead)."""
    faust, ksqldb = (outputs.where(F.col("side") == side) for side in SIDES)
    return faust, ksqldb


def _ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=timezone.utc).timestamp() * 1000)


def test_date_is_the_whole_utc_day():
    window = window_for("2026-02-28", None, None)
    assert (window.start_ms, window.end_ms) == (_ms(2026, 2, 28), _ms(2026, 3, 1))
    assert window.label == "2026-02-28"


def test_from_to_is_utc_unless_zoned():
    window = window_for(None, "2026-11-20T06:00", "2026-11-20T08:00+01:00")
    assert (window.start_ms, window.end_ms) == (_ms(2026, 11, 20, 6), _ms(2026, 11, 20, 7))


@pytest.mark.parametrize(
    "day, start, end, named",
    [
        ("2026-11-20", "2026-11-20", None, "--date"),
        (None, "2026-11-20", None, "--to"),
        (None, "2026-11-21", "2026-11-20", "--to"),
        (None, "yesterday", "2026-11-20", "--from"),
        ("2026-11-31", None, None, "--date"),
    ],
)
def test_bad_windows_name_the_option(day, start, end, named):
    with pytest.raises(ReconcileError, match=named):
        window_for(day, start, end)


def test_offset_plan_round_trips_and_matches_only_its_window_and_topics(tmp_path):
    window = TimeWindow(1000, 2000)
    plan = OffsetPlan(window, {"orders": TopicRange("orders", "o", {0: (3, 9), 1: (0, 0)}, True)}, "index")
    plan.write(tmp_path / "offsets.json")
    again = OffsetPlan.read(tmp_path / "offsets.json")
    assert again == plan and again.topics["orders"].offsets == 6
    assert again.matches(window, {"orders": "o"})
    assert not again.matches(TimeWindow(1000, 2001), {"orders": "o"})
    assert not again.matches(window, {"orders": "other"})
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ReconcileError, match="broken.json"):
        OffsetPlan.read(tmp_path / "broken.json")


def test_options_defaults_come_from_settings_and_the_lookup_is_the_index(monkeypatch):
    monkeypatch.setenv("STREAMAPP_USERS_TOPIC", "people")
    options = parse(["--date", "2026-11-20"])
    assert options.topics["demo_user"] == "people" and options.topics["ksqldb_direct"] == "DEMO_USER_ORDERS_MERGED"
    assert [pair.name for pair in options.roles.pairs] == ["direct", "repartition"] and PAIRS == ("direct", "repartition")
    assert (options.offset_lookup, options.kafka_reader) == ("index", "auto")
    with pytest.raises(ReconcileError, match="--source files"):
        parse(["--date", "2026-11-20", "--source", "files"])
    with pytest.raises(ReconcileError, match=r"^--partitioner='nope': unknown partitioner 'nope'; known: "):
        parse(["--date", "2026-11-20", "--partitioner", "nope"])  # before Spark: it failed only explaining a miss


def test_connector_jars_must_match_pyspark(monkeypatch, tmp_path):
    """A connector built for another Spark fails deep inside Spark: the job says so in one line first."""
    import pyspark

    from spark_batch.kafka_source import connector_jars
    from streamapp.kafka.jvm import JvmError

    monkeypatch.setenv("STREAMAPP_JVM_LIB", str(tmp_path))
    assert connector_jars(required=False) == []
    with pytest.raises(JvmError, match="make install"):
        connector_jars(required=True)
    (tmp_path / "spark-kafka").mkdir()
    (tmp_path / "spark-kafka" / "spark-sql-kafka-0-10_2.13-3.5.1.jar").write_bytes(b"")
    with pytest.raises(ReconcileError, match=f"spark-sql-kafka 3.5.1, but PySpark is {pyspark.__version__}"):
        connector_jars(required=False)
    (tmp_path / "spark-kafka" / "spark-sql-kafka-0-10_2.13-3.5.1.jar").rename(
        tmp_path / "spark-kafka" / f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar")
    assert [j.name for j in connector_jars(required=True)] == [f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"]


def test_a_run_without_shuffle_partitions_gets_8_per_core_at_most_200_and_a_set_value_is_kept():
    assert shuffle_settings(None, 2) == ({SHUFFLE_PARTITIONS: "16"}, "Shuffle partitions: 16 (8 for each of Spark's 2 "
                                         "cores, at most 200; --conf spark.sql.shuffle.partitions=N sets them)")
    assert shuffle_settings(None, 64)[0] == {SHUFFLE_PARTITIONS: "200"}  # Spark's own on a large cluster
    assert shuffle_settings("4", 2) == ({}, "Shuffle partitions: 4 (spark.sql.shuffle.partitions)")


def test_report_charts_and_rate():
    assert mismatch_rate({"match": 3, "duplicate": 1}) == 0.25
    assert mismatch_rate({"match": 0}) == 0.0
    chart = cause_chart({"direct": {"copartition_violation": 5, "other": 0}})
    assert chart.count("<rect") == 1 and "copartition_violation" in chart
    heat = partition_chart([PartitionCell("direct", 2, 0, 4)], "direct")
    assert "stream partition 2, table partition 0: 4" in heat
    summary = Summary(
        window=window_for("2026-11-20", None, None), source="files", topics={"users": "<u>"}, pairs={},
        stream_partitions={"orders": 6},
        offsets=None, output_records={}, input_records={}, statuses={"direct": {"match": 1, "duplicate": 1}},
        totals={"direct": PairTotals.of({"match": 1, "duplicate": 1})}, causes={"direct": {"other": 1}},
        by_partition_pair=(), threshold=Threshold(0.01, ("direct",)), detail="mismatches", versions={},
    )
    html = render_html(summary, [Sample("direct", "duplicate", "other", "<x>", 1, "d")])
    assert "BREACHED" in html and "&lt;x&gt;" in html and "<x>" not in html and "50.00%" in html
    assert "&lt;u&gt;" in html and "<u>" not in html
    assert summary.to_dict()["totals"] == {"direct": {"orders": 2, "mismatches": 1, "mismatch_rate": 0.5}}


OUT = "pair string, side string, user_id string, ts bigint, product_id bigint, qty bigint, unit_price double, " \
      "channel string, name string, age bigint, partition int, offset bigint"


def _order(side: str, user: str, product: int, name: str | None, age: int | None, partition: int = 1, offset: int = 0):
    return ("direct", side, user, 1000 + product, product, 1, 2.5, "web", name, age, partition, offset)


def test_status_rules_one_order_each(spark):
    rows = [
        _order("faust", "u", 1, "A", 30), _order("ksqldb", "u", 1, "A", 30),                    # match
        _order("ksqldb", "u", 2, "A", 30),                                                        # missing_in_faust
        _order("faust", "u", 3, "A", 30),                                                         # missing_in_ksqldb
        _order("faust", "u", 4, "A", 30), _order("faust", "u", 4, "A", 30, offset=9), _order("ksqldb", "u", 4, "A", 30),
        _order("faust", "u", 5, "A", 30, partition=2), _order("ksqldb", "u", 5, "A", 30),        # partition_mismatch
        _order("faust", "u", 6, "A", 30), _order("ksqldb", "u", 6, None, None),                  # enriched_only_in_faust
        _order("faust", "u", 7, None, None), _order("ksqldb", "u", 7, "A", 30),                  # enriched_only_in_ksqldb
        _order("faust", "u", 8, None, None), _order("ksqldb", "u", 8, None, None),               # both_unenriched
        _order("faust", "u", 9, "B", 30), _order("ksqldb", "u", 9, "A", 31),                     # value_mismatch
    ]
    counted = Observation("statuses")
    classified = classify(*by_side(spark.createDataFrame(rows, OUT))).observe(counted, *status_metrics(PAIRS))
    got = {r["product_id"]: r for r in classified.collect()}
    statuses = {p: got[p]["status"] for p in got}
    # the match count comes from Faust's records (9, one order written twice) and the non-matches
    # counted on their way out (the duplicate's extra copy among them), without a counter per order
    assert sum(r[1] == "faust" for r in rows) == 9
    assert (counted.get["direct:duplicate"], counted.get["direct:extra_copies"], counted.get["repartition:extra_copies"]) == (1, 1, 0)
    assert status_counts(PAIRS, {"direct": 9}, counted.get) == {
        "direct": dict.fromkeys(STATUSES, 1), "repartition": dict.fromkeys(STATUSES, 0)}
    assert status_counts(PAIRS, {}, {}) == {pair: dict.fromkeys(STATUSES, 0) for pair in ("direct", "repartition")}
    assert statuses == {1: "match", 2: "missing_in_faust", 3: "missing_in_ksqldb", 4: "duplicate",
                        5: "partition_mismatch", 6: "enriched_only_in_faust", 7: "enriched_only_in_ksqldb",
                        8: "both_unenriched", 9: "value_mismatch"}
    assert (got[4]["faust_count"], got[4]["ksqldb_count"]) == (2, 1)
    assert got[9]["mismatched_columns"] == ["NAME", "AGE"]
    assert got[5]["mismatched_columns"] == ["partition"] and got[1]["mismatched_columns"] == []


def test_a_duplicates_values_are_its_largest_copys_whatever_the_reading_order(spark):
    """The copies of a duplicated order differ (partition, NAME, AGE): the row shows the copy that sorts last by
    (partition, NAME's hash, AGE), so every order of reading (here: reversed, and spread over partitions) gives it."""
    copies = [_order("faust", "u", 4, "A", 30, partition=2), _order("faust", "u", 4, None, None, partition=3),
              _order("faust", "u", 4, "B", 31, partition=3), _order("faust", "u", 4, "A", 32, partition=1)]
    rows = [*copies, _order("ksqldb", "u", 4, "A", 30, partition=2)]
    runs = [classify(*by_side(frame)).collect() for frame in (
        spark.createDataFrame(rows, OUT), spark.createDataFrame(rows[::-1], OUT).repartition(3))]
    assert runs[0] == runs[1] and len(runs[0]) == 1
    row = runs[0][0]
    assert (row["status"], row["faust_count"], row["ksqldb_count"], row["faust_partition"]) == ("duplicate", 4, 1, 3)
    assert (row["faust_enriched"], row["faust_age"]) == (True, 31)  # partition 3, and a NAME beats none


def test_the_order_identity_matches_nulls_with_nulls_only_and_minus_zero_with_zero(spark):
    """A null identity column meets a null, never the empty string or 0 that stands for it in the join key;
    a unit price of -0.0 meets 0.0 (and comes out as 0.0)."""
    def order(side, product, qty, price, channel, user="u"):
        return ("direct", side, user, 1000, product, qty, price, channel, "A", 30, 1, 0)

    rows = [order("faust", None, None, None, None), order("ksqldb", None, None, None, None),   # all null: match
            order("faust", 1, 1, 2.5, None), order("ksqldb", 1, 1, 2.5, ""),                  # null vs "": two orders
            order("faust", None, 1, 2.5, "web"), order("ksqldb", 0, 1, 2.5, "web"),            # null vs 0: two orders
            order("faust", 2, 1, -0.0, "web"), order("ksqldb", 2, 1, 0.0, "web"),              # -0.0 = 0.0: match
            order("faust", 3, 1, 1.0, "web", None), order("ksqldb", 3, 1, 1.0, "web", "")]     # null key vs "": two
    found = classify(*by_side(spark.createDataFrame(rows, OUT))).collect()
    got = sorted(((r["user_id"], r["product_id"], r["unit_price"], r["channel"], r["status"]) for r in found), key=repr)
    assert got == sorted([
        ("u", None, None, None, "match"),
        ("u", 1, 2.5, None, "missing_in_ksqldb"), ("u", 1, 2.5, "", "missing_in_faust"),
        ("u", None, 2.5, "web", "missing_in_ksqldb"), ("u", 0, 2.5, "web", "missing_in_faust"),
        ("u", 2, 0.0, "web", "match"),
        (None, 3, 1.0, "web", "missing_in_ksqldb"), ("", 3, 1.0, "web", "missing_in_faust"),
    ], key=repr)
    price = next(r["unit_price"] for r in found if r["product_id"] == 2)
    assert math.copysign(1, price) == 1


def test_the_classification_shuffles_and_sorts_each_side_once(spark):
    """Each side is shuffled and sorted by the order identity before its window; the full outer join reuses
    both (no third exchange or sort), as the bare join of the two outputs would."""
    plan = classify(*by_side(spark.createDataFrame([_order("faust", "u", 1, "A", 30)], OUT)))._jdf.queryExecution()
    lines = plan.executedPlan().toString().splitlines()
    assert [op for op in ("Exchange", "Sort ", "Window", "SortMergeJoin") for line in lines if line.lstrip(" :+-").startswith(op)] == [
        "Exchange", "Exchange", "Sort ", "Sort ", "Window", "Window", "SortMergeJoin"], lines


def test_raw_json_schema_matches_what_inference_finds_and_leaves_other_shapes_to_it(spark, tmp_path):
    """The explicit schema (which spares Spark's inference job) must read Kafka-shaped lines exactly as inference would."""
    from spark_batch.files_source import raw_json_schema

    lines = ['{"key": "u1", "value": "{\\"name\\": \\"A\\"}", "partition": 3, "offset": 7, "timestamp_ms": 1700000000000}',
             '{"key": null, "value": null, "partition": 0, "offset": 8, "timestamp_ms": 1700000000001}']
    path = tmp_path / "raw.jsonl"
    path.write_text("\n".join(lines) + "\n")
    schema = raw_json_schema(lines[0])
    assert schema is not None
    inferred = spark.read.json(str(path))
    given = spark.read.schema(schema).json(str(path))
    assert dict(given.dtypes) == dict(inferred.dtypes)
    assert sorted(map(tuple, given.select(*inferred.columns).collect()), key=repr) == sorted(
        map(tuple, inferred.collect()), key=repr)
    for other in ('{"user_id": "u1", "ts": 1}', '{"key": "u1", "value": {"name": "A"}}', '{"key": 1, "value": "x"}',
                  '{"key": "u1", "value": "x", "partition": true}', '{"key": "u1", "value": "x", "partition": 1.5}',
                  "not json", "[1, 2]", ""):
        assert raw_json_schema(other) is None, other


def test_tally_gives_both_cause_and_partition_pair_counts_from_one_aggregation(spark):
    """causes.tally over Spark's one (pair, cause, partitions) aggregation = counting the detail rows one by one."""
    import random
    from collections import Counter

    from spark_batch.causes import CAUSES, tally

    rng = random.Random(7)
    detail = [(rng.choice(["direct", "repartition"]), rng.choice(CAUSES), rng.choice([None, 0, 1, 5]),
               rng.choice([None, 0, 2, 11])) for _ in range(300)]
    frame = spark.createDataFrame(detail, "pair string, cause string, order_partition int, user_partition int")
    by_cause, cells = tally(PAIRS, frame.groupBy("pair", "cause", "order_partition", "user_partition").count().collect())
    per_cause = Counter((p, c) for p, c, _, _ in detail)
    assert by_cause == {p: {c: per_cause[(p, c)] for c in CAUSES} for p in ("direct", "repartition")}
    per_cell = Counter((p, o, u) for p, _, o, u in detail if o is not None and u is not None)
    assert cells == tuple(PartitionCell(p, o, u, n) for (p, o, u), n in sorted(per_cell.items()))
    assert sum(c.count for c in cells) < len(detail)


def test_explain_finds_causes_from_the_mismatches_users_only(spark):
    """causes.explain on direct-pair mismatches: each cause, -0.0 vs 0.0 prices still find the order,
    and skipping murmur2 (no repartition-pair mismatch) changes nothing."""
    from spark_batch import causes
    from spark_batch.decode import stream_fields, table_columns

    ORDER_COLUMNS, USER_COLUMNS = stream_fields(GROUP), table_columns(TABLE)

    def order(side, user, product, name, price=2.5, partition=1):
        return ("direct", side, user, 1000 + product, product, 1, price, "web", name, None if name is None else 30, partition, 0)

    outputs = [
        order("faust", "u1", 1, "A"), order("ksqldb", "u1", 1, None),        # enriched_only_in_faust: user in partition 0
        order("faust", "q", 2, None), order("ksqldb", "q", 2, None),          # users topic has '"q"': key_format
        order("faust", "nobody", 3, None), order("ksqldb", "nobody", 3, None),  # unknown_user
        order("faust", "late", 4, None), order("ksqldb", "late", 4, None),    # user's first record after the order
        order("faust", "u1", 5, None, 0.0, 0), order("ksqldb", "u1", 5, None, 0.0, 0),  # co-located, on time: other
        order("faust", "u2", 6, "B"), order("ksqldb", "u2", 6, "B"),          # match: not explained
    ]
    mismatches = classify(*by_side(spark.createDataFrame(outputs, OUT))).where("status != 'match'")
    orders = spark.createDataFrame(
        [("u1", 1001, 1, 1, 2.5, "web", 1, 0), ("q", 1002, 2, 1, 2.5, "web", 3, 1), ("nobody", 1003, 3, 1, 2.5, "web", 2, 2),
         ("late", 1004, 4, 1, 2.5, "web", 1, 3), ("u1", 1005, 5, 1, -0.0, "web", 0, 4), ("u2", 1006, 6, 1, 2.5, "web", 5, 5)],
        "user_id string, ts bigint, product_id bigint, qty bigint, unit_price double, channel string, partition int, offset bigint",
    ).withColumn("kind", F.lit(None).cast("string")).select(*ORDER_COLUMNS)
    users = spark.createDataFrame(
        [("u1", "A", 30, 0, 0, 0), ('"q"', "Q", 40, 3, 1, 0), ("late", "L", 50, 1, 2, 5000), ("u2", "B", 30, 5, 3, 0)],
        "table_key string, name string, age bigint, partition int, offset bigint, timestamp_ms bigint",
    ).select(*USER_COLUMNS)
    rows = {}
    for repartitioned in (False, True):
        explained = causes.explain(GROUP, mismatches, orders, users, 6, "murmur2", few=repartitioned,
                                   repartitioned=repartitioned)
        rows[repartitioned] = sorted((r.asDict() for r in explained.collect()), key=lambda r: r["product_id"])
    assert rows[False] == rows[True]
    got = {r["product_id"]: r for r in rows[False]}
    assert {p: r["cause"] for p, r in got.items()} == {
        1: "copartition_violation", 2: "key_format", 3: "unknown_user", 4: "late_user", 5: "other"}
    assert got[1]["cause_detail"] == "DEMO_USER_ORDERS record in partition 1, DEMO_USER row in partition(s) 0"
    assert got[2]["cause_detail"] == "DEMO_USER has key(s) \"q\", the DEMO_USER_ORDERS record has 'q'"
    assert (got[5]["order_partition"], got[5]["user_partition"]) == (0, 0)
    assert got[5]["cause_detail"] == ("DEMO_USER row and DEMO_USER_ORDERS record both in partition 0, the row 1005 ms older "
                                      "than the record")


def test_the_orders_probe_finds_an_order_without_ts_and_not_one_that_only_shares_a_ts(spark):
    """order_info probes the orders by ts alone and hashes only the hits: an order whose ts is null is still
    found (its partition), and another order with a mismatch's ts does not lend it its partition."""
    from spark_batch import causes
    from spark_batch.decode import stream_fields

    ORDER_COLUMNS = stream_fields(GROUP)
    columns = "user_id string, ts bigint, product_id bigint, qty bigint, unit_price double, channel string"
    orders = spark.createDataFrame(
        [("u1", None, 1, 1, 2.5, "web", 4, 0), ("u2", 1002, 2, 1, 2.5, "web", 1, 1),
         ("u3", 1002, 3, 1, 2.5, "web", 5, 2), ("u4", 1004, 4, 1, 2.5, "web", 2, 3)],
        f"{columns}, partition int, offset bigint",
    ).withColumn("kind", F.lit(None).cast("string")).select(*ORDER_COLUMNS)
    mismatches = spark.createDataFrame([("u1", None, 1, 1, 2.5, "web"), ("u2", 1002, 2, 1, 2.5, "web")], columns)
    for few in (True, False):
        info = causes.order_info(GROUP, orders, mismatches, few)
        found = mismatches.join(info, [causes.identity_hash(GROUP) == F.col("_o_hash"),
                                       F.col("product_id") == F.col("_o_product_id")], "left")
        # u3 shares u2's ts and sits in partition 5: u2 keeps its own partition
        assert sorted((r["user_id"], r["order_partition"]) for r in found.collect()) == [("u1", 4), ("u2", 1)]


def test_the_repartitioned_users_partition_is_the_partitioner_setting(spark, monkeypatch):
    """The worker repartitions users with its ``partitioner`` setting: the causes place them with it, not murmur2.

    The order sits where Sarama's FNV-1a (the setting here) put its user, which murmur2 would not have:
    the user is late, not a co-partitioning violation.
    """
    from spark_batch import causes
    from streamapp.partitioners import partition

    key = next(k for k in (f"user{i}" for i in range(100))
               if partition("fnv1a_random", k.encode(), 6) != partition("murmur2", k.encode(), 6))
    placed = partition("fnv1a_random", key.encode(), 6)
    outputs = [("repartition", side, key, 1001, 1, 1, 2.5, "web", None, None, placed, 0) for side in ("faust", "ksqldb")]
    mismatches = classify(*by_side(spark.createDataFrame(outputs, OUT))).where("status != 'match'")
    orders = spark.createDataFrame([(key, 1001, 1, 1, 2.5, "web", placed, 0, None)],
                                   "user_id string, ts bigint, product_id bigint, qty bigint, unit_price double, "
                                   "channel string, partition int, offset bigint, kind string")
    users = spark.createDataFrame([(key, "A", 30, 0, 0, 5000)], "table_key string, name string, age bigint, partition int, "
                                  "offset bigint, timestamp_ms bigint")
    cause = {name: causes.explain(GROUP, mismatches, orders, users, 6, name).collect()[0]["cause"]
             for name in ("fnv1a_random", "murmur2")}
    assert cause == {"fnv1a_random": "late_user", "murmur2": "copartition_violation"}
    monkeypatch.setenv("STREAMAPP_PARTITIONER", "fnv1a_random")
    assert parse(["--date", "2026-11-20"]).partitioner == "fnv1a_random"  # the job reads the worker's setting



RAW = "key binary, value binary, partition int, offset bigint, timestamp_ms bigint"


def test_an_output_record_is_undecodable_only_when_no_engine_could_have_written_it(spark):
    """Null columns (a null PRODUCT_ID, NaN written as a string) and a null key are what the engines write;
    a value that is not an object, a column of another type or no TS is not."""
    from spark_batch.decode import output_columns, valid_outputs

    written = {
        "nulls": (b"u", b'{"NAME":null,"AGE":null,"PRODUCT_ID":null,"QTY":null,"UNIT_PRICE":null,"CHANNEL":null,"TS":5}'),
        "nan": (b"u", b'{"NAME":"A","AGE":3,"PRODUCT_ID":1,"QTY":2,"UNIT_PRICE":"NaN","CHANNEL":"web","TS":6}'),
        "infinity": (b"u", b'{"NAME":"A","AGE":3,"PRODUCT_ID":1,"QTY":2,"UNIT_PRICE":"-Infinity","CHANNEL":"web","TS":7}'),
        "null key": (None, b'{"NAME":null,"AGE":null,"PRODUCT_ID":1,"QTY":2,"UNIT_PRICE":2.5,"CHANNEL":"web","TS":8}'),
        "U+FFFD key": ("\ufffdj".encode(), b'{"NAME":"B","AGE":1,"PRODUCT_ID":1,"QTY":2,"UNIT_PRICE":2.5,"CHANNEL":"x","TS":9}'),
    }
    unusable = {
        "null value": (b"u", None), "JSON null": (b"u", b"null"), "array": (b"u", b"[]"), "not JSON": (b"u", b"{"),
        "text for a BIGINT": (b"u", b'{"PRODUCT_ID":"abc","TS":5}'), "fraction for a BIGINT": (b"u", b'{"QTY":1.5,"TS":5}'),
        "no TS": (b"u", b'{"NAME":"x","PRODUCT_ID":1}'), "boolean for a DOUBLE": (b"u", b'{"UNIT_PRICE":true,"TS":5}'),
    }
    rows = [("direct", "ksqldb", k, v, 0, i, 0) for i, (k, v) in enumerate([*written.values(), *unusable.values()])]
    frame = spark.createDataFrame(rows, "pair string, side string, " + RAW)
    observation = Observation("outputs")
    kept = sorted(valid_outputs(output_columns(frame, GROUP, SEED.topology.declared, SEED.pair("direct")),
                                [("direct", "ksqldb")], observation, alone=True).collect(), key=lambda r: r["offset"])
    assert [r["offset"] for r in kept] == list(range(len(written)))
    assert observation.get == {"rows:direct:ksqldb": len(rows), "undecodable:direct:ksqldb": len(unusable)}
    nulls, nan, infinity, null_key, replaced = kept
    assert (nulls["product_id"], nulls["ts"], nulls["name"]) == (None, 5, None)
    assert math.isnan(nan["unit_price"]) and infinity["unit_price"] == -math.inf
    assert null_key["user_id"] is None and replaced["user_id"] == "\ufffdj"


def test_input_records_are_counted_by_kind(spark):
    """No input record is left out without a word: undecodable, null-key, non-UTF-8-key records and tombstones are counted."""
    from spark_batch.decode import all_orders, all_users, decodable, kind_counts, users

    good = b'{"ts": 5, "product_id": null, "qty": 1, "unit_price": 2.5, "channel": "web"}'
    order_rows = [(b"u", good), (None, good), (b"\xffu", good), (b"u", b"not json"), (b"u", b'{"product_id": 1}'),
                  (b"u", None), (b"u", b'{"TS": "41", "Product_Id": "7"}')]
    frame = spark.createDataFrame([(k, v, 0, i, 5) for i, (k, v) in enumerate(order_rows)], RAW)
    counts = all_orders(frame, GROUP).agg(*kind_counts()).collect()[0].asDict()
    assert counts == {"rows": 7, "tombstone": 0, "null_key": 1, "non_utf8_key": 1, "undecodable": 3}
    kept = {(r["user_id"], r["ts"], r["product_id"], r["kind"]) for r in all_orders(frame, GROUP).where(decodable()).collect()}
    assert kept == {("u", 5, None, None), (None, 5, None, "null_key"), ("\ufffdu", 5, None, "non_utf8_key"),
                    ("u", 41, 7, None)}
    user_rows = [(b"a", b'{"AGE": "41"}'), (b"b", None), (b"c", b"null"), (None, b'{"name": "x"}'), (b"d", b"[1]"),
                 (b"\xffe", b'{"name": "y", "age": 1}')]
    frame = spark.createDataFrame([(k, v, 0, i, 5) for i, (k, v) in enumerate(user_rows)], RAW)
    counts = all_users(frame, TABLE).agg(*kind_counts()).collect()[0].asDict()
    assert counts == {"rows": 6, "tombstone": 2, "null_key": 1, "non_utf8_key": 1, "undecodable": 1}
    assert sorted((r["table_key"], r["name"], r["age"]) for r in users(frame, TABLE).collect()) == [
        ("a", None, 41), ("b", None, None), ("c", None, None), ("\ufffde", "y", 1)]


def test_a_null_key_order_both_engines_joined_matches_whatever_its_partitions(spark):
    """Both engines write a null-key order with NULL user columns, each in a partition its producer picks at
    random: that is agreement, not ``partition_mismatch`` or ``both_unenriched``; a keyed order is still judged."""
    outputs = [("direct", side, user, 1001, 1, 1, 2.5, "web", None, None, partition, 0)
               for side, partition in (("faust", 4), ("ksqldb", 0)) for user in (None, "u1")]
    got = {r["user_id"]: (r["status"], r["mismatched_columns"]) for r in classify(*by_side(spark.createDataFrame(outputs, OUT))).collect()}
    assert got == {None: ("match", []), "u1": ("partition_mismatch", ["partition"])}


def test_null_and_non_utf8_keys_are_named_as_the_engines_legitimate_differences(spark):
    """Kafka Streams reads a non-UTF-8 key with U+FFFD, the worker dead-letters it; both engines join a null-key
    order (README, Decoding), so one missing from an output (a worker older than that) is named too:
    the job names each cause instead of 'other', whatever the users topic holds."""
    from spark_batch import causes
    from spark_batch.decode import all_orders, users

    value = b'{"ts": 1001, "product_id": 1, "qty": 1, "unit_price": 2.5, "channel": "web"}'
    raw_orders = spark.createDataFrame([(None, value, 2, 0, 1001), (b"\xff\xfej-bad", value, 3, 1, 1001),
                                        (b"u1", value.replace(b"1001", b"1002"), 1, 2, 1002)], RAW)
    raw_users = spark.createDataFrame([(b"\xff\xfej-bad", b'{"name": "Bad", "age": 1}', 3, 0, 0)], RAW)
    bad = "\ufffd\ufffdj-bad"
    outputs = [("direct", "ksqldb", None, 1001, 1, 1, 2.5, "web", None, None, 2, 0),
               ("direct", "ksqldb", bad, 1001, 1, 1, 2.5, "web", "Bad", 1, 3, 1),
               ("direct", "ksqldb", "u1", 1002, 1, 1, 2.5, "web", None, None, 1, 2)]
    mismatches = classify(*by_side(spark.createDataFrame(outputs, OUT))).where("status != 'match'")
    got = {r["user_id"]: r for r in causes.explain(GROUP, mismatches, all_orders(raw_orders, GROUP), users(raw_users, TABLE), 6,
                                                   "murmur2").collect()}
    assert {u: (r["status"], r["cause"]) for u, r in got.items()} == {
        None: ("missing_in_faust", "null_key"), bad: ("missing_in_faust", "non_utf8_key"), "u1": ("missing_in_faust", "other")}
    assert got[None]["cause_detail"] == ("the DEMO_USER_ORDERS record's key is null: ksqlDB on Kafka Streams 3.7+ (KIP-962) and "
                                         "the worker join it with NULL DEMO_USER columns in a random partition; no record in "
                                         "the Faust output")
    assert got[bad]["cause_detail"].startswith(f"the DEMO_USER_ORDERS record's key is not UTF-8: Kafka Streams reads it as '{bad}'")
    assert got[None]["order_partition"] == 2 and got[bad]["order_partition"] == 3


def test_a_decoded_export_is_checked_only_where_a_column_is_not_of_its_type(spark, tmp_path):
    """An export column of another type (text for a BIGINT) is cast, and a value that does not fit is undecodable;
    a column already of its type is taken as is: its nulls are what the engines write, and the classification
    of a typed (Parquet) export reads none of the columns it does not use (``offset``)."""

    from spark_batch.decode import output_columns, valid_outputs

    columns = "user_id string, ts bigint, product_id string, qty bigint, unit_price double, channel string, name string, age bigint, partition int, offset bigint"
    rows = [("u", 5, "7", 1, 2.5, "web", "A", 3, 0, 0), ("u", 6, None, 1, 2.5, "web", None, None, 0, 1),
            (None, 7, "8", 1, 2.5, "web", None, None, 0, 2), ("u", 8, "abc", 1, 2.5, "web", "A", 3, 0, 3),
            ("u", None, "9", 1, 2.5, "web", "A", 3, 0, 4)]
    text = spark.createDataFrame(rows, columns).select(F.lit("direct").alias("pair"), F.lit("ksqldb").alias("side"), "*")
    observation = Observation("text")
    kept = sorted(valid_outputs(output_columns(text, GROUP, SEED.topology.declared, SEED.pair("direct")), [("direct", "ksqldb")],
                                observation, alone=True).collect(), key=lambda r: r["offset"])
    assert [(r["offset"], r["user_id"], r["product_id"]) for r in kept] == [(0, "u", 7), (1, "u", None), (2, None, 8)]
    assert observation.get == {"rows:direct:ksqldb": 5, "undecodable:direct:ksqldb": 2}

    typed = spark.createDataFrame(rows[:3] + rows[4:], columns).withColumn("product_id", F.col("product_id").cast("bigint"))
    typed.write.parquet(str(tmp_path / "typed"))
    export = spark.read.parquet(str(tmp_path / "typed")).select(F.lit("direct").alias("pair"), F.lit("ksqldb").alias("side"), "*")
    observation = Observation("typed")
    decoded = valid_outputs(output_columns(export, GROUP, SEED.topology.declared, SEED.pair("direct")), [("direct", "ksqldb")],
                            observation, alone=True)
    assert sorted(r["offset"] for r in decoded.collect()) == [0, 1, 2]
    assert observation.get == {"rows:direct:ksqldb": 4, "undecodable:direct:ksqldb": 1}
    scans = [line for line in classify(*by_side(decoded))._jdf.queryExecution().executedPlan().toString().splitlines() if "FileScan" in line]
    assert scans and all("offset" not in line for line in scans), scans
