"""The reconciliation job on files exported from Kafka (no broker), and its one-line errors.

ksqlDB cannot run here: the 'ksqlDB output' exports hold records in ksqlDB's
exact output format, written by tests/reconcile_scenario.py, whose partitions
are predicted from the hashes (crc32 for the users, murmur2 for the rest).
"""
from __future__ import annotations

import dataclasses
import json

import pytest

import reconcile_scenario as sc
from spark_batch.reconcile import SHUFFLE_PARTITIONS, main

TOPICS = {role: f"export_{role}" for role in sc.ROLES}


def _args(input_dir, output, *extra: str) -> list[str]:
    flags = sc.FLAGS
    topics = [x for role, flag in flags.items() for x in (flag, TOPICS[role])]
    return ["--date", sc.DAY, "--source", "files", "--input", str(input_dir), "--output", str(output),
            "--partitions", "6", *topics, *extra]


def test_reconcile_files_known_answers_mixed_formats(spark, tmp_path):
    scenario = sc.build(regular_users=12, seed=11)
    sc.export(tmp_path / "in", TOPICS, scenario, decoded=("ksqldb_direct", "users"))
    assert main(_args(tmp_path / "in", tmp_path / "out", "--max-mismatch-rate", "0.05")) == 1
    summary = json.loads((tmp_path / "out" / f"dt={sc.DAY}" / "summary.json").read_text())
    for pair in ("direct", "repartition"):
        assert {s: n for s, n in summary["statuses"][pair].items() if n} == dict(scenario.statuses(pair))
        assert {c: n for c, n in summary["causes"][pair].items() if n} == dict(scenario.causes(pair))
    assert summary["offsets"] is None and summary["source"] == "files"
    assert summary["threshold"]["breached_pairs"] == ["direct", "repartition"]
    rows = spark.read.parquet(str(tmp_path / "out" / f"dt={sc.DAY}" / "detail")).collect()
    got = {(r["pair"], r["user_id"], r["ts"], r["product_id"]): (r["status"], r["cause"]) for r in rows}
    assert got == {k: v for k, v in scenario.expected.items() if v[0] != "match"}
    value_mismatch = [r for r in rows if r["status"] == "value_mismatch"]
    assert [r["mismatched_columns"] for r in value_mismatch] == [["AGE"]]
    assert value_mismatch[0]["faust_age"] == value_mismatch[0]["ksqldb_age"] + 1


def test_the_inputs_are_counted_the_same_whether_or_not_anything_mismatches(spark, tmp_path, capsys):
    """The explain step's scans count the input records by kind; with nothing to explain Spark skips
    those scans, and the job counts the inputs in a query of its own: both give the same counts.
    The mismatching run keeps the matches too (``--detail all``): its detail holds every order.

    Spark skips them by AQE's empty-relation propagation, on by default in a nightly spark-submit but off in
    the tests' shared session (tests/conftest.py): this test turns it on for its two runs.

    The shuffle partitions: the first run keeps the session's 4; the second, as a nightly run with none set,
    gets the job's own (8 per core: 16 on local[2]) and leaves the session as it found it."""
    scenario = sc.build(regular_users=4, seed=5)
    # both engines write the same records, every order enriched: nothing mismatches
    enriched = {role: [dataclasses.replace(r, value={**r.value, "NAME": "someone", "AGE": 30})
                       for r in scenario.records[f"ksqldb_{pair}"]]
                for pair in ("direct", "repartition") for role in (f"faust_{pair}", f"ksqldb_{pair}")}
    agreeing = dataclasses.replace(scenario, records={**scenario.records, **enriched})
    summaries = {}
    for name, exported in (("mismatching", scenario), ("agreeing", agreeing)):
        sc.export(tmp_path / name, TOPICS, exported)
        capsys.readouterr()
        before = spark.conf.get("spark.sql.adaptive.enabled"), spark.conf.get(SHUFFLE_PARTITIONS)
        spark.conf.set("spark.sql.adaptive.enabled", "true")
        if name == "agreeing":
            spark.conf.unset(SHUFFLE_PARTITIONS)
        try:
            detail_all = ("--detail", "all") if name == "mismatching" else ()
            assert main(_args(tmp_path / name, tmp_path / f"out-{name}", "--max-mismatch-rate", "1", *detail_all)) == 0
            left = spark.conf.get(SHUFFLE_PARTITIONS, None)
        finally:
            spark.conf.set("spark.sql.adaptive.enabled", before[0])
            spark.conf.set(SHUFFLE_PARTITIONS, before[1])
        out = capsys.readouterr().out
        recounted = "Counted the input records by kind (nothing to explain)" in out
        if name == "mismatching":
            assert "Shuffle partitions: 4 (spark.sql.shuffle.partitions)" in out and left == "4"
        else:
            assert "Shuffle partitions: 16 (8 for each of Spark's 2 cores" in out and left is None
        summaries[name] = json.loads((tmp_path / f"out-{name}" / f"dt={sc.DAY}" / "summary.json").read_text())
        mismatches = sum(n for by in summaries[name]["statuses"].values() for status, n in by.items() if status != "match")
        assert (mismatches > 0, recounted) == ((True, False) if name == "mismatching" else (False, True))
    detail = spark.read.parquet(str(tmp_path / "out-mismatching" / f"dt={sc.DAY}" / "detail"))
    assert detail.count() == len(scenario.expected)
    assert detail.where("status = 'match'").count() == sum(1 for s, _ in scenario.expected.values() if s == "match")
    counted = summaries["mismatching"]["input_records"]
    assert counted == summaries["agreeing"]["input_records"]
    in_window = [r for r in scenario.records["orders"] if sc.DAY_START_MS <= r.timestamp < sc.DAY_START_MS + 86_400_000]
    assert counted[sc.JOB_ROLES["orders"]]["rows"] == len(in_window) > 0
    assert counted[sc.JOB_ROLES["users"]]["rows"] == len(scenario.records["users"]) > 0


def test_reconcile_missing_export_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    assert main(_args(tmp_path / "in", tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "export_users" in err


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--max-mismatch-rate", "1.5"], "--max-mismatch-rate"),
        (["--from", "2026-11-20"], "--to"),
        (["--date", "20-11-2026"], "--date"),
        (["--users-topic", "export_orders"], "export_orders"),
    ],
)
def test_reconcile_bad_options_exit_2_naming_them(tmp_path, capsys, extra, named):
    (tmp_path / "in").mkdir()
    argv = _args(tmp_path / "in", tmp_path / "out")
    if extra[0] in ("--from", "--date"):
        argv = argv[2:]  # replace --date
    code = main(argv + extra) if extra[0] != "--users-topic" else main(argv[:argv.index("--users-topic")] + extra + argv[argv.index("--users-topic") + 2:])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and named in err


def test_reconcile_unknown_flag_is_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--date", sc.DAY, "--no-such-flag"])
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and "\n" not in err and "--no-such-flag" in err


def test_a_one_file_parquet_exports_schema_from_its_footer_is_what_spark_infers(spark, tmp_path):
    """The footer's schema (which spares Spark's inference job) must read the file exactly as inference would,
    DECIMALs too (as bytes, or as INT32/INT64 as DuckDB writes them); a column of another kind (nested, a
    timestamp, unsigned) leaves the file to that inference."""
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_batch.files_source import parquet_schema

    flat = pa.table({
        "user_id": pa.array(["u1", None], pa.string()), "big": pa.array([1, None], pa.int64()),
        "small": pa.array([1, 2], pa.int32()), "tiny": pa.array([1, -2], pa.int8()), "short": pa.array([3, None], pa.int16()),
        "price": pa.array([1.5, -0.0], pa.float64()), "ratio": pa.array([0.25, None], pa.float32()),
        "flag": pa.array([True, None], pa.bool_()), "raw": pa.array([b"\xff", None], pa.binary()),
        "day": pa.array([datetime.date(2026, 11, 20), None], pa.date32()), "with space": pa.array(["a", "b"]),
    })
    path = tmp_path / "flat.parquet"
    pq.write_table(flat, path)
    required = pa.schema([pa.field("user_id", pa.string(), False), pa.field("big", pa.int64(), False)])
    pq.write_table(pa.table({"user_id": ["u1"], "big": [1]}, required), tmp_path / "required.parquet")
    money = pa.table({"small": pa.array([decimal.Decimal("1.10"), None], pa.decimal128(5, 2)),
                      "amount": pa.array([decimal.Decimal("-12345678.99"), None], pa.decimal128(10, 2)),
                      "wide": pa.array([decimal.Decimal("1" * 30), None], pa.decimal128(30, 0))})
    pq.write_table(money, tmp_path / "money.parquet")  # as fixed-length bytes
    pq.write_table(money.drop_columns(["wide"]), tmp_path / "money_int.parquet", store_decimal_as_integer=True)
    assert pq.read_metadata(tmp_path / "money_int.parquet").schema.column(1).physical_type == "INT64"
    for file in (path, tmp_path / "required.parquet", tmp_path / "money.parquet", tmp_path / "money_int.parquet"):
        schema = parquet_schema(file)
        assert schema is not None
        inferred, given = spark.read.parquet(str(file)), spark.read.schema(schema).parquet(str(file))
        assert given.schema == inferred.schema
        assert sorted(map(tuple, given.collect()), key=repr) == sorted(map(tuple, inferred.collect()), key=repr)
    spark.conf.set("spark.sql.parquet.binaryAsString", "true")
    try:
        assert spark.read.schema(parquet_schema(path, True)).parquet(str(path)).schema == spark.read.parquet(str(path)).schema
    finally:
        spark.conf.unset("spark.sql.parquet.binaryAsString")
    others = {"nested": pa.array([{"a": 1}]), "listed": pa.array([[1]]), "moment": pa.array([datetime.datetime(2026, 1, 1)]),
              "unsigned": pa.array([1], pa.uint32())}
    for name, column in others.items():
        pq.write_table(pa.table({"user_id": ["u1"], name: column}), tmp_path / f"{name}.parquet")
        assert parquet_schema(tmp_path / f"{name}.parquet") is None, name
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    assert parquet_schema(tmp_path / "broken.parquet") is None
