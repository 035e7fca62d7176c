"""ksqlDB's QTT join cases through Kafka Streams: the plan's topologies under its own TopologyTestDriver.

Only the cases whose plans hold the query kinds the Java program builds (``streams_runner.KINDS``): the docs'
table says "not yet" for any other (the pure engine runs it, ``tests/test_qtt.py``).  A case where Kafka Streams itself writes other records than ksqlDB expects is a finding:
the table's cell says why ("differs: ..."), and the test holds that the records do differ.

The same converted cases as ``tests/test_qtt.py`` (which runs them through the pure engine),
fed the same way, compared the same way (:func:`streamapp.sql.runner.compare`).  The
rejections are the planner's, in Python, so they are not repeated here.  One JVM serves
the whole module.  Besides the records, each case's topology must have the stores and
repartition topics of ksqlDB's recorded topology for it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer

from streamapp.kafka.jvm import classpath, java
from streamapp.kafka.streams_runner import (KINDS, StreamsResult, StreamsRunnerError, TopologyTestRunner, Wiring,
                                            run_files)
from streamapp.sql import plan as p
from streamapp.sql.engine import Record
from streamapp.sql.formats import Codec
from streamapp.sql.planner import plan_file, plan_text
from streamapp.sql import runner
from streamapp.sql.runner import compare, read_records
from workerkit import end_offsets, group_progress

CASES = Path(__file__).parent / "qtt"
ALL_POSITIVE = sorted(d for d in CASES.iterdir()
                      if (d / "case.json").exists()
                      and json.loads((d / "case.json").read_text(encoding="utf-8"))["expected_exception"] is None)
#: A case whose plan has a kind the Java program does not build is not run here (and not counted):
#: docs/reference/ksqldb-tests.md says "not yet" for it.
POSITIVE = [d for d in ALL_POSITIVE
            if all(q.kind in KINDS for q in plan_file(d / "statements.sql").queries)]
TABLE = CASES.parent.parent / "docs" / "reference" / "ksqldb-tests.md"

TABLE_STORE, JOIN_REPARTITION = "KafkaTopic_Right-Reduce", "Join-repartition"
#: A table-table join's stores: both tables and the projection (ksqlDB materializes its result).
TABLES = Wiring(("KafkaTopic_Left-Reduce", TABLE_STORE, "Project-Last"), ())
#: The stores and repartition topics of ksqlDB's recorded topology for each case, read from
#: ``ksqldb-functional-tests/src/test/resources/historical_plans/<case>/<newest version>/topology``
#: in confluentinc/ksql at 354e3d1c ("Processor: ... (stores: [...])" and "Sink: ... (topic: ...-repartition)").
KSQLDB_WIRING = {
    "as_value-005-join": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "join-with-custom-timestamp-002-stream_table_join_with_ts_extractor_both_sides-json": Wiring((TABLE_STORE,), ()),
    "joins-060-stream_table_left_join-json": Wiring((TABLE_STORE,), ()),
    "joins-062-stream_table_inner_join-json": Wiring((TABLE_STORE,), ()),
    "joins-068-stream_to_table_wrapped_single_field_value_schema_on_inputs": Wiring((TABLE_STORE,), ()),
    "joins-069-stream_to_table_unwrapped_single_field_value_schema_on_inputs": Wiring((TABLE_STORE,), ()),
    "joins-070-stream_to_table_unwrapped_single_field_value_schema_on_inputs_and_output": Wiring((TABLE_STORE,), ()),
    "joins-097-on_non_string_value_column": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "joins-116-streams_with_no_key_columns_stream_table": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "joins-117-non_kafka_key_format": Wiring((TABLE_STORE,), ()),
    "joins-125-stream_table_key_to_key_key_format_mismatch":
        Wiring(("RightSourceKeyed-Materialize",), ("RightSourceKeyed-SelectKey-repartition",)),
    "joins-126-stream_table_value_to_key_key_format_mismatch": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "joins-127-stream_table_val_to_key_keyless": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "none-009-inherited_in_csas_join_with_repartition": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "quoted-identifiers-006-joins_using_fields_that_require_quotes": Wiring((TABLE_STORE,), (JOIN_REPARTITION,)),
    "join-with-custom-timestamp-003-table_table_inner_join_with_ts-json": TABLES,
    "join-with-custom-timestamp-004-table_table_inner_join_with_ts_extractor_both_sides-json": TABLES,
    "joins-006-unaliased_synthetic_join_key": TABLES,
    "joins-052-table_table_left_join-json": TABLES,
    "joins-054-table_table_right_join-json": TABLES,
    "joins-056-table_table_right_join_all_fields": TABLES,
    "joins-057-table_table_inner_join-json": TABLES,
    "joins-058-table_table_outer_join-json": TABLES,
    "joins-064-table_table_join_with_where_clause": TABLES,
    "joins-071-table_to_table_wrapped_single_field_value_schema_on_inputs": TABLES,
    "joins-072-table_to_table_unwrapped_single_field_value_schema_on_inputs": TABLES,
    "joins-073-table_to_table_unwrapped_single_field_value_schema_on_inputs_and_output": TABLES,
    "joins-082-with_generated_column_name_clashes": TABLES,
    "joins-128-table_table_key_to_key_key_format_mismatch":
        Wiring(("KafkaTopic_Left-Reduce", "Project-Last", "RightSourceKeyed-Materialize"),
               ("RightSourceKeyed-SelectKey-repartition",)),
}


def _store(kind: str, number: int) -> str:
    """A store name Kafka Streams generates: ``KSTREAM-JOINTHIS-0000000008-store``."""
    return f"KSTREAM-{kind}-{number:010d}-store"


LEFT_REPARTITION, RIGHT_REPARTITION = "Join-left-repartition", "Join-right-repartition"
#: A windowed join's stores are named by Kafka Streams (ksqlDB names only the join, "Join"), numbered after the
#: nodes before them: each wiring of ksqlDB's recorded topologies, and the stream-stream cases that have it.
WINDOWED: dict[Wiring, tuple[str, ...]] = {
    Wiring((_store("JOINOTHER", 9), _store("JOINTHIS", 8)), ()): (
        "elements-067-join_qualified_select_star_left",
        "elements-068-join_qualified_select_star_right",
        "elements-069-join_unqualified_select_star",
        "identifiers-002-aliased_join_source",
        "identifiers-003-aliased_join_source_with_as",
        "identifiers-004-aliased_left_unaliased_right",
        "identifiers-005-unaliased_left_aliased_right",
        "join-with-custom-timestamp-000-stream_stream_inner_join_with_ts-json",
        "join-with-custom-timestamp-001-stream_stream_inner_join_with_ts_extractor_both_sides-json",
        "joins-000-matching_columns_in_both_sides_select",
        "joins-001-matching_columns_in_both_sides_select_left_and_right",
        "joins-002-matching_columns_in_both_sides_select_left_and_right_with_where",
        "joins-003-aliased_join_condition",
        "joins-004-aliased_join_key",
        "joins-007-inner_join_with_both_join_column_in_projection",
        "joins-010-inner_join_with_only_right_join_column_in_projection",
        "joins-039-stream_stream_inner_join-json",
        "joins-040-stream_stream_inner_join_all_left_fields_some_right-json",
        "joins-041-stream_stream_inner_join_all_right_fields_some_left-json",
        "joins-042-stream_stream_inner_join_with_stars_and_duplicates",
        "joins-043-stream_stream_inner_join_all_fields-json",
        "joins-044-stream_stream_inner_join_with_different_before_and_after_windows-json",
        "joins-045-stream_stream_inner_join_with_out_of_order_messages-json",
        "joins-046-stream_stream_inner_join_with_out_of_order_and_custom_grace_period-json",
        "joins-065-stream_to_stream_wrapped_single_field_value_schema_on_inputs",
        "joins-066-stream_to_stream_unwrapped_single_field_value_schema_on_inputs",
        "joins-067-stream_to_stream_unwrapped_single_field_value_schema_on_inputs_and_output",
        "joins-114-with_where",
        "select-struct-all-005-joins_and_struct_all_on_projection",
    ),
    Wiring((_store("JOINOTHER", 17), _store("JOINTHIS", 16)), (LEFT_REPARTITION, RIGHT_REPARTITION)): (
        "joins-005-aliased_synthetic_join_key",
        "joins-078-stream_stream_join_contains_function",
        "joins-098-on_int_column_kafka-json",
        "joins-099-on_bigint_column_kafka-json",
        "joins-100-on_double_column_kafka-json",
        "joins-101-on_string_column_kafka-json",
        "joins-102-on_array_column-json",
        "joins-103-on_struct_column-json",
        "joins-113-on_struct_field",
        "joins-115-streams_with_no_key_columns_stream_stream",
        "multi-col-keys-013-join_with_repartition_on_single_key",
        "multi-col-keys-014-join_with_repartition_on_single_value",
        "row-offset-and-partition-008-join_on_rowpartition",
        "row-offset-and-partition-009-join_on_rowoffset",
    ),
    Wiring((_store("JOINOTHER", 13), _store("JOINTHIS", 12)), (RIGHT_REPARTITION,)): (
        "joins-008-inner_join_with_left_join_column_in_projection",
        "joins-079-stream_stream_join_contains_cast",
        "joins-080-stream_stream_join_contains_cast_double_to_int",
        "joins-081-stream_stream_join_on_expression_where_schema_contains_rowkey_xx_column_names",
        "joins-083-stream_stream_join_contains_subscript",
        "joins-084-stream_stream_join_contains_arithmetic_binary_expression",
        "joins-085-stream_stream_join_contains_arithmetic_unary_expression",
        "joins-086-stream_stream_join_contains_case_expression",
        "joins-087-stream_stream_join_contains_arithmetic_unary_expression_flipped_sides",
        "joins-118-stream_stream_key_to_key_key_format_mismatch",
        "joins-119-stream_stream_key_to_key_key_format_and_default_feature_mismatch",
    ),
    Wiring((_store("JOINOTHER", 13), _store("JOINTHIS", 12)), (LEFT_REPARTITION,)): (
        "joins-009-inner_join_with_right_join_column_in_projection",
    ),
    Wiring((_store("JOINTHIS", 8), _store("OUTEROTHER", 9)), ()): (
        "joins-013-left_join_with_both_join_column_in_projection",
        "joins-024-stream_stream_left_join-json",
        "joins-031-stream_stream_right_join-json",
        "joins-032-stream_stream_right_join_all_fields",
        "joins-096-unqualified_join_criteria",
    ),
    Wiring((_store("JOINTHIS", 12), _store("OUTEROTHER", 13)), (RIGHT_REPARTITION,)): (
        "joins-014-left_join_with_left_join_column_in_projection",
        "joins-123-stream_stream_key_to_value_key_format_mismatch",
    ),
    Wiring((_store("JOINTHIS", 12), _store("OUTEROTHER", 13)), (LEFT_REPARTITION,)): (
        "joins-015-left_join_with_right_join_column_in_projection",
        "joins-122-stream_stream_value_to_key_key_format_mismatch",
    ),
    Wiring((_store("JOINTHIS", 16), _store("OUTEROTHER", 17)), (LEFT_REPARTITION, RIGHT_REPARTITION)): (
        "joins-016-left_join_with_synthetic_join_column_in_projection",
        "joins-027-stream_stream_left_join_with_key_in_projection_rekey-json",
        "joins-029-stream_stream_left_join_rekey-json",
        "joins-035-stream_stream_right_join_with_key_in_projection_rekey-json",
        "joins-037-stream_stream_right_join_rekey-json",
        "joins-124-stream_stream_value_to_value_keyless",
    ),
    Wiring((_store("OUTEROTHER", 9), _store("OUTERTHIS", 8)), ()): (
        "joins-020-full_join_with_both_join_column_in_projection",
        "joins-050-stream_stream_outer_join-json",
    ),
    Wiring((_store("JOINTHIS", 8), _store("OUTEROTHER", 9), _store("OUTERSHARED", 8)), ()): (
        "joins-047-stream_stream_left_join_with_out_of_order_and_custom_grace_period-json",
        "joins-048-stream_stream_right_join_with_out_of_order_and_custom_grace_period-json",
    ),
    Wiring((_store("OUTEROTHER", 9), _store("OUTERSHARED", 8), _store("OUTERTHIS", 8)), ()): (
        "joins-049-stream_stream_full_outer_join_with_out_of_order_and_custom_grace_period-json",
    ),
}
KSQLDB_WIRING.update({case: wiring for wiring, cases in WINDOWED.items() for case in cases})


def _cell(case: Path) -> str:
    """The case's ``--engine kafka-streams`` cell in docs/reference/ksqldb-tests.md."""
    c = json.loads((case / "case.json").read_text(encoding="utf-8"))
    cell = f"`{c['file']}` #{c['index']}" + (f" [{c['format']}]" if c["format"] else "")
    row = next(line for line in TABLE.read_text(encoding="utf-8").splitlines()
               if line.startswith(f"| {c['ring']} | {cell} |"))
    return row.split(" | ")[4]


@pytest.fixture(scope="module")
def streams() -> Iterator[TopologyTestRunner]:
    """One JVM for the module: starting one is most of a case's cost."""
    with TopologyTestRunner() as runner:
        yield runner


def test_every_positive_case_has_ksqldbs_wiring_written_down() -> None:
    assert sorted(KSQLDB_WIRING) == sorted(d.name for d in POSITIVE) and len(POSITIVE) == 104


def test_the_cases_left_out_are_the_ones_the_table_says_kafka_streams_does_not_run_yet() -> None:
    """Every positive case is run here or listed as "not yet" in the Kafka Streams column, never both; a case run
    here "passes" or "differs: <why>"."""
    for case in ALL_POSITIVE:
        cell = _cell(case)
        assert (cell == "not yet") == (case not in POSITIVE), (case.name, cell)
        assert case not in POSITIVE or cell == "passes" or cell.startswith("differs: "), (case.name, cell)


@pytest.mark.parametrize("case", POSITIVE, ids=lambda d: d.name)
def test_positive_case_through_kafka_streams(case: Path, streams: TopologyTestRunner) -> None:
    properties = json.loads((case / "case.json").read_text(encoding="utf-8"))["properties"]
    plan, result = run_files(case / "statements.sql", case / "input.json", None, streams, properties)
    expected = read_records(case / "output.json", "outputs")
    assert result.topologies == {plan.queries[-1].name: KSQLDB_WIRING[case.name]}
    same = compare(expected, result) == [] and sum(len(records) for records in result.actual.values()) == len(expected)
    # a finding (the table's "differs: ..."): Kafka Streams' records are not ksqlDB's, and the table says why
    assert same == (_cell(case) == "passes"), _cell(case)


def _shown(result: StreamsResult) -> list[str]:
    return [f"{topic}: {record.shown()}" for topic, records in result.actual.items() for record in records]


SEED_INPUTS = [
    ("demo_user", "u1", {"NAME": "ann", "AGE": 30}, 1),
    ("demo_user", "u2", {"name": "bob", "age": "41"}, 2),
    ("demo_user_orders", "u1", {"TS": 100, "PRODUCT_ID": 7, "QTY": 2, "UNIT_PRICE": 1.5, "CHANNEL": "web"}, 5),
    ("demo_user_orders", "u3", {"TS": 110, "PRODUCT_ID": 8, "QTY": 1, "UNIT_PRICE": 2, "CHANNEL": "app"}, 6),
    ("demo_user", "u1", None, 7),
    ("demo_user_orders", "u1", {"TS": 120, "PRODUCT_ID": 9, "UNIT_PRICE": "2.25", "CHANNEL": None}, 8),
    ("demo_user_orders", "u2", {"TS": None, "PRODUCT_ID": 9}, 9),
    ("demo_user_orders", "u2", {"TS": 130, "PRODUCT_ID": True}, 10),
    ("demo_user_orders", "u2", {"ts": 140, "qty": 1000}, 11),
]


def test_the_seed_writes_the_same_records_through_both_engines(streams: TopologyTestRunner) -> None:
    """The seed's three queries: a CTAS copy whose output a join then reads, and two LEFT joins with TIMESTAMP."""
    plan = plan_file(Path(p.__file__).parent / "seed.sql")
    inputs = [runner.TestRecord(topic, key, value, ts, i) for i, (topic, key, value, ts) in enumerate(SEED_INPUTS)]
    python, kafka_streams = runner.run(plan, inputs), streams.run(plan, inputs)
    assert _shown(kafka_streams) == _shown(python)
    counts = {topic: len(records) for topic, records in kafka_streams.actual.items()}
    assert counts == {"demo_user_repartition": 3, "DEMO_USER_ORDERS_MERGED": 4,
                      "DEMO_USER_ORDERS_MERGED_REPARTITION": 4}
    # the order without a TS and the one whose PRODUCT_ID is a boolean, skipped by each join
    assert [line.split(":")[0] for line in kafka_streams.skipped] == [line.split(":")[0] for line in python.skipped]
    assert len(kafka_streams.skipped) == 4
    assert sum("field 'PRODUCT_ID' is true" in line for line in kafka_streams.skipped) == 2
    assert kafka_streams.topologies["DEMO_USER_REPARTITION"] == Wiring((), ())


def test_a_table_tombstone_does_not_reach_a_table_with_a_timestamp_column(streams: TopologyTestRunner) -> None:
    """ksqlDB reads TIMESTAMP='RTS' from the value, and a tombstone has none: its extractor returns -1
    (LoggingTimestampExtractor) and Kafka Streams drops the record, so the row stays and still joins."""
    plan = plan_text(
        "CREATE TABLE T (ID BIGINT PRIMARY KEY, V STRING, RTS BIGINT) "
        "WITH (kafka_topic='t', value_format='JSON', timestamp='RTS');\n"
        "CREATE STREAM S (ID BIGINT KEY, N STRING) WITH (kafka_topic='s', value_format='JSON');\n"
        "CREATE STREAM O AS SELECT S.ID, N, V FROM S LEFT JOIN T ON S.ID = T.ID;\n")
    inputs = [runner.TestRecord("t", 1, {"V": "one", "RTS": 5}, 1, 0), runner.TestRecord("t", 1, None, 20, 1),
              runner.TestRecord("s", 1, {"N": "after"}, 30, 2)]
    result = streams.run(plan, inputs)
    assert _shown(result) == ['O: key 1, value {"N":"after","V":"one"}, timestamp 30']
    assert result.skipped == ["O: a t record was skipped: a null value has no RTS for its event time "
                              "(Kafka Streams drops it)"]


def test_a_plan_the_jvm_cannot_run_is_one_line_and_the_jvm_goes_on(streams: TopologyTestRunner) -> None:
    case = CASES / "joins-060-stream_table_left_join-json"
    plan = plan_file(case / "statements.sql")
    other = p.Plan(plan.sources, plan.queries, plan.origin, version=2)
    with pytest.raises(StreamsRunnerError) as raised:
        streams.run(other, read_records(case / "input.json", "inputs"), "bad.json")
    assert str(raised.value) == "bad.json: Kafka Streams: plan version 2: this program reads version 1"
    assert streams.run(plan, read_records(case / "input.json", "inputs")).actual["LEFT_JOIN"]


def test_the_cli_runs_kafka_streams_with_the_same_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    from streamapp.cli import main

    left = CASES / "joins-126-stream_table_value_to_key_key_format_mismatch"
    files = ["test-runner", "--engine", "kafka-streams", "-s", str(left / "statements.sql"),
             "-i", str(left / "input.json")]
    assert main([*files, "-o", str(left / "output.json")]) == 0
    assert "Test passed: every expected record written: OUTPUT (1)" in capsys.readouterr().out
    other = CASES / "joins-127-stream_table_val_to_key_keyless" / "output.json"
    assert main([*files, "-o", str(other)]) == 1
    out = capsys.readouterr().out
    assert "OUTPUT record 1: expected key 10" in out and "got key \"10\"" in out and "Test failed" in out
    rejected = CASES / "stream-table-join-000-should_fail_on_outer_join" / "statements.sql"
    assert main(["test-runner", "--engine", "kafka-streams", "-s", str(rejected), "-i", str(left / "input.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "full-outer join not supported for stream-table join" in err


def test_a_query_kind_outside_kinds_is_refused_by_the_jvm_in_one_line(streams: TopologyTestRunner) -> None:
    """``KINDS`` is what the JVM builds: a kind of a converted case outside it is refused there, in one line."""
    others = {q.kind: d for d in ALL_POSITIVE for q in plan_file(d / "statements.sql").queries if q.kind not in KINDS}
    for kind, case in sorted(others.items()) or [("no_such_kind", CASES / "joins-060-stream_table_left_join-json")]:
        plan = plan_file(case / "statements.sql")
        plan = p.Plan(plan.sources, tuple(dataclasses.replace(q, kind=kind) for q in plan.queries), plan.origin)
        with pytest.raises(StreamsRunnerError) as raised:
            streams.run(plan, read_records(case / "input.json", "inputs"), "case.json")
        assert str(raised.value) == (f"case.json: Kafka Streams: plan: query {plan.queries[0].name} is a {kind}, "
                                     "which this program does not build")


TABLES_SQL = ("CREATE TABLE A (ID BIGINT PRIMARY KEY, V BIGINT) WITH (kafka_topic='a', value_format='JSON');\n"
              "CREATE TABLE B (ID BIGINT PRIMARY KEY, W BIGINT) WITH (kafka_topic='b', value_format='JSON');\n")
#: Updates and tombstones of both sides, for a key joined on either side first, and a tombstone of a key never seen.
TABLE_UPDATES = [("a", 1, {"V": 5}, 1), ("b", 1, {"W": 7}, 2), ("a", 1, {"V": 11}, 3), ("a", 1, {"V": 4}, 4),
                 ("b", 1, None, 5), ("b", 2, {"W": 1}, 6), ("a", 2, {"V": 20}, 7), ("a", 2, None, 8),
                 ("b", 2, None, 9), ("a", 3, None, 10), ("a", 1, None, 11)]


@pytest.mark.parametrize("join", ["INNER", "LEFT", "RIGHT", "FULL"])
def test_a_table_table_join_forwards_updates_and_tombstones_as_the_pure_engine_does(
        join: str, streams: TopologyTestRunner) -> None:
    """Kafka Streams' KTable-KTable joins (RIGHT as ksqlDB builds it: the right table's leftJoin) against the pure
    engine's model of them, on what the QTT cases do not all pin down: tombstones of either side and of a key
    with no result."""
    plan = plan_text(TABLES_SQL + f"CREATE TABLE O AS SELECT ROWKEY AS K, V, W FROM A {join} JOIN B ON A.ID = B.ID;\n"
                     if join == "FULL" else
                     TABLES_SQL + f"CREATE TABLE O AS SELECT A.ID, V, W FROM A {join} JOIN B ON A.ID = B.ID;\n")
    inputs = [runner.TestRecord(topic, key, value, ts, i) for i, (topic, key, value, ts) in enumerate(TABLE_UPDATES)]
    kafka_streams = _shown(streams.run(plan, inputs))
    assert kafka_streams == _shown(runner.run(plan, inputs))
    # the key-1 result that every join has once both sides hold a row, then its tombstone when the right goes
    assert 'O: key 1, value {"V":11,"W":7}, timestamp 3' in kafka_streams
    assert ("O: key 1, value null, timestamp 5" in kafka_streams) == (join in ("INNER", "RIGHT"))


def test_a_table_table_where_writes_a_tombstone_only_for_a_result_that_passed(streams: TopologyTestRunner) -> None:
    plan = plan_text(TABLES_SQL + "CREATE TABLE O AS SELECT A.ID, V, W FROM A JOIN B ON A.ID = B.ID WHERE V > 10;\n")
    inputs = [runner.TestRecord(topic, key, value, ts, i) for i, (topic, key, value, ts) in enumerate(TABLE_UPDATES)]
    assert _shown(streams.run(plan, inputs)) == ['O: key 1, value {"V":11,"W":7}, timestamp 3',
                                                 "O: key 1, value null, timestamp 4",
                                                 'O: key 2, value {"V":20,"W":1}, timestamp 7',
                                                 "O: key 2, value null, timestamp 8"]


STREAMS_SQL = ("CREATE STREAM A (ID BIGINT KEY, V STRING) WITH (kafka_topic='a', value_format='JSON');\n"
               "CREATE STREAM B (ID BIGINT KEY, W STRING) WITH (kafka_topic='b', value_format='JSON');\n")
#: Matches, misses, an out-of-order record later than every grace, a null value, a null key, and stream time moving on.
STREAM_RECORDS = [("a", 1, {"V": "a1"}, 1000), ("b", 1, {"W": "b1"}, 1500), ("a", 2, {"V": "a2"}, 2000),
                  ("b", 3, {"W": "b3"}, 9000), ("a", 1, {"V": "late"}, 100), ("b", 1, {"W": "b1x"}, 20000),
                  ("a", 4, None, 21000), ("a", None, {"V": "nokey"}, 21000), ("b", 2, {"W": "b2"}, 30000),
                  ("a", 5, {"V": "a5"}, 60000)]
WINDOWS = ("WITHIN 2 SECONDS", "WITHIN 2 SECONDS GRACE PERIOD 3 SECONDS",
           "WITHIN (1 SECOND, 3 SECONDS) GRACE PERIOD 0 SECONDS")


def _stream_join(join: str, within: str) -> p.Plan:
    key = "ROWKEY AS K" if join == "FULL" else "A.ID"
    return plan_text(STREAMS_SQL + f"CREATE STREAM O AS SELECT {key}, V, W FROM A {join} JOIN B {within} "
                                   "ON A.ID = B.ID;\n")


def _stream_inputs() -> list[runner.TestRecord]:
    return [runner.TestRecord(topic, key, value, ts, i) for i, (topic, key, value, ts) in enumerate(STREAM_RECORDS)]


@pytest.mark.parametrize("join, within", [(join, within) for join in ("INNER", "LEFT", "RIGHT", "FULL")
                                          for within in WINDOWS
                                          if join in ("INNER", "LEFT") or "GRACE" not in within])
def test_a_stream_stream_join_writes_what_the_pure_engine_writes(
        join: str, within: str, streams: TopologyTestRunner) -> None:
    """Kafka Streams' KStreamKStreamJoin against the pure engine's model of it, beyond what the QTT cases pin."""
    plan = _stream_join(join, within)
    kafka_streams = _shown(streams.run(plan, _stream_inputs()))
    assert kafka_streams == _shown(runner.run(plan, _stream_inputs()))
    assert 'O: key 1, value {"V":"a1","W":"b1"}, timestamp 1500' in kafka_streams


def test_a_json_key_of_several_columns_is_read_by_both_engines_alike(streams: TopologyTestRunner) -> None:
    """ksqlDB's STRUCT key (an object of the key columns), re-keyed by a FULL join on one of them: a field in
    another case, a missing field, a null key and a number in a string are read the same by both engines."""
    plan = plan_text("CREATE STREAM S1 (K INT KEY, K2 STRING KEY, V INT) WITH (kafka_topic='s1', format='JSON');\n"
                     "CREATE STREAM S2 (K INT KEY, K2 STRING KEY, V INT) WITH (kafka_topic='s2', format='JSON');\n"
                     "CREATE STREAM O AS SELECT ROWKEY AS KK, S1.K, S2.K2, S1.V AS V1, S2.V AS V2 FROM S1 FULL JOIN S2 "
                     "WITHIN 1 SECOND ON S1.K2 = S2.K2;")
    inputs = [runner.TestRecord(topic, key, {"V": v}, ts, i) for i, (topic, key, v, ts) in enumerate([
        ("s1", {"K": 1, "k2": "a"}, 0, 0), ("s2", {"K": 2, "K2": "a"}, 5, 10), ("s2", {"K": 3}, 6, 20),
        ("s1", None, 7, 30), ("s1", {"K": "4", "K2": "b"}, 8, 5000)])]
    kafka_streams = _shown(streams.run(plan, inputs))
    assert kafka_streams == _shown(runner.run(plan, inputs))
    assert kafka_streams[1] == 'O: key "a", value {"S1_K":1,"S2_K2":"a","V1":0,"V2":5}, timestamp 10'
    assert kafka_streams[4] == 'O: key "b", value {"S1_K":4,"S2_K2":null,"V1":8,"V2":null}, timestamp 5000'


@pytest.mark.parametrize("join", ["RIGHT", "FULL"])
def test_finding_kafka_streams_emits_the_closed_outer_rows_of_b_the_pure_engine_holds(
        join: str, streams: TopologyTestRunner) -> None:
    """A finding (no QTT case tells them apart): with a GRACE PERIOD, Kafka Streams 4.3.1 writes B's unmatched
    rows (b1x and b2, and b3 in a FULL join) once A's a5 moves stream time past their windows, though the
    driver's wall clock never moves; the pure engine looks for closed windows once per emit interval for both
    sides together, and keeps them. Everything else is the same, in the same order."""
    plan = _stream_join(join, WINDOWS[1])
    kafka_streams = _shown(streams.run(plan, _stream_inputs()))
    python = _shown(runner.run(plan, _stream_inputs()))
    extra = [x for x in kafka_streams if x not in python]
    assert [x for x in kafka_streams if x in python] == python
    assert extra[-2:] == ['O: key 1, value {"V":null,"W":"b1x"}, timestamp 20000',
                          'O: key 2, value {"V":null,"W":"b2"}, timestamp 30000']
    assert all('"V":null' in x for x in extra) and len(extra) == (3 if join == "FULL" else 2)


def _plan_streams(plan: p.Plan, tmp_path: Path, bootstrap: str = "localhost:1",
                  app_id: str | None = None) -> subprocess.Popen[str]:
    """The broker program (PlanStreams) on ``plan``: the same PlanTopology as under the test driver.  Each query's
    group is ``app_id``-QUERY; it commits every 200 ms."""
    (tmp_path / "plan.json").write_text(plan.to_json(), encoding="utf-8")
    (tmp_path / "streams.properties").write_text(
        f"application.id={app_id or f'qtt-{uuid.uuid4().hex[:8]}'}\nbootstrap.servers={bootstrap}\n"
        f"commit.interval.ms=200\nstate.dir={tmp_path / 'state'}\nstreamapp.plan={tmp_path / 'plan.json'}\n",
        encoding="utf-8")
    return subprocess.Popen([java(), "-Xmx256m", "-cp", classpath("ksql-equivalent"), "io.streamapp.ksql.PlanStreams",
                             str(tmp_path / "streams.properties")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_the_broker_program_refuses_a_kind_it_does_not_build_in_one_line(tmp_path: Path) -> None:
    plan = plan_file(CASES / "joins-058-table_table_outer_join-json" / "statements.sql")
    plan = p.Plan(plan.sources, tuple(dataclasses.replace(q, kind="no_such_kind") for q in plan.queries))
    out, _ = _plan_streams(plan, tmp_path).communicate(timeout=60)
    lines = [line for line in out.splitlines() if "FAILED" in line]
    assert len(lines) == 1 and lines[0].endswith("ksql-equivalent FAILED: IllegalArgumentException: plan: query "
                                                 "OUTER_JOIN is a no_such_kind, which this program does not build")


def test_the_broker_program_runs_table_table_and_stream_stream_joins(
        bootstrap: str, new_topic: Callable[..., str], tmp_path: Path) -> None:
    """PlanStreams on the session broker: a FULL table-table join and a LEFT windowed stream-stream join write,
    byte for byte, what the pure engine writes for the same records (all written before it starts, in time
    order, so Kafka Streams reads them in that order)."""
    ta, tb, sa, sb, ot, os_ = (new_topic(name, 1) for name in ("ta", "tb", "sa", "sb", "ot", "os"))
    plan = plan_text(
        f"CREATE TABLE A (ID BIGINT PRIMARY KEY, V STRING) WITH (kafka_topic='{ta}', value_format='JSON');\n"
        f"CREATE TABLE B (ID BIGINT PRIMARY KEY, W STRING) WITH (kafka_topic='{tb}', value_format='JSON');\n"
        f"CREATE STREAM SA (ID BIGINT KEY, V STRING) WITH (kafka_topic='{sa}', value_format='JSON');\n"
        f"CREATE STREAM SB (ID BIGINT KEY, W STRING) WITH (kafka_topic='{sb}', value_format='JSON');\n"
        f"CREATE TABLE OT WITH (kafka_topic='{ot}') AS SELECT ROWKEY AS K, V, W FROM A FULL JOIN B ON A.ID = B.ID;\n"
        f"CREATE STREAM OS WITH (kafka_topic='{os_}') AS SELECT SA.ID, V, W FROM SA LEFT JOIN SB WITHIN 1 SECOND "
        "ON SA.ID = SB.ID;\n")
    rows = [(ta, 1, {"V": "a1"}), (tb, 1, {"W": "b1"}), (tb, 2, {"W": "b2"}), (ta, 1, None), (tb, 2, None),
            (sa, 1, {"V": "s1"}), (sb, 1, {"W": "t1"}), (sa, 2, {"V": "s2"}), (sb, 1, {"W": "t1x"})]
    inputs = [runner.TestRecord(topic, key, value, 1000 * (i + 1), i) for i, (topic, key, value) in enumerate(rows)]
    producer = Producer({"bootstrap.servers": bootstrap})
    for record in runner.encode_inputs(plan, inputs, "inputs"):
        producer.produce(record.topic, value=record.value, key=record.key, timestamp=record.timestamp, partition=0)
    assert producer.flush(30) == 0
    expected = runner.run(plan, inputs).actual
    assert {t: len(v) for t, v in expected.items()} == {ot: 5, os_: 3}
    app_id = f"qtt-{uuid.uuid4().hex[:8]}"
    program = _plan_streams(plan, tmp_path, bootstrap, app_id)
    try:
        # every input read and committed (after its outputs were written): the outputs' ends are all they write
        groups = {f"{app_id}-OT": (ta, tb), f"{app_id}-OS": (sa, sb)}
        deadline = time.monotonic() + 120
        while not all(group_progress(bootstrap, group, topic, 1)[0] for group, topics in groups.items()
                      for topic in topics):
            assert time.monotonic() < deadline and program.poll() is None, "Kafka Streams did not read its inputs"
            time.sleep(0.2)
        ends = {topic: end for (topic, _), end in end_offsets(bootstrap, (ot, os_), 1).items()}
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"qtt-{uuid.uuid4().hex[:8]}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([ot, os_])
        codecs = {plan.source(q.sink).topic: Codec(plan.source(q.sink)) for q in plan.queries}
        got: dict[str, list[runner.TestRecord]] = {ot: [], os_: []}
        while any(len(got[topic]) < end for topic, end in ends.items()):
            assert time.monotonic() < deadline, f"read {got} of {ends}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read = got[message.topic()]
                record = Record(message.topic(), message.key(), message.value(), message.timestamp()[1])
                read.append(runner.read_back(codecs[message.topic()], record, len(read)))
        consumer.close()
        assert {t: [r.shown() for r in v] for t, v in got.items()} == \
            {t: [r.shown() for r in v] for t, v in expected.items()}
    finally:
        os.killpg(program.pid, signal.SIGTERM)
        program.wait(30)


def test_an_expression_the_jvm_does_not_compute_is_refused_in_one_line(streams: TopologyTestRunner) -> None:
    plan = _stream_join("INNER", WINDOWS[0])
    query = plan.queries[0]
    odd = p.Projection("X", "INT", p.Apply("LN", (p.ColumnOf(p.LEFT_SIDE, "ID"),)))
    plan = p.Plan(plan.sources, (dataclasses.replace(query, projection=(*query.projection, odd)),))
    with pytest.raises(StreamsRunnerError) as raised:
        streams.run(plan, _stream_inputs(), "case.json")
    assert str(raised.value) == ("case.json: Kafka Streams: plan: LN (an ON or SELECT expression) is not supported "
                                 "by the Kafka Streams program yet")
