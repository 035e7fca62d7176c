"""Table-table joins on the primary key (issue 37, ring R2): what ksqlDB's QTT cases do not pin down.

The QTT cases (``tests/test_qtt.py``) check INNER joins' tombstones and a few LEFT, RIGHT and FULL
updates; these tests check the rest against ksqlDB's documented semantics table for primary-key
table-table joins (``docs/developer-guide/joins/join-streams-and-tables.md`` in the ksql repository,
"Semantics of Primary-Key Table-Table Joins"), the WHERE's filtering of a table, the planner's
refusals and the plan's JSON.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from streamapp.model.records import RecordError
from streamapp.sql import plan as p
from streamapp.sql.engine import Record
from streamapp.sql.table_join import TableJoin, forwards, has_result
from streamapp.sql.planner import PlanError, plan_text
from streamapp.sql.runner import TestRecord, run

TABLES = """
CREATE TABLE L (ID BIGINT PRIMARY KEY, V STRING) WITH (kafka_topic='l', value_format='JSON');
CREATE TABLE R (ID BIGINT PRIMARY KEY, V STRING) WITH (kafka_topic='r', value_format='JSON');
"""


def joined(join_type: str, where: str = "") -> p.Plan:
    key = "ROWKEY AS K" if join_type == "FULL" else "L.ID AS K"
    return plan_text(TABLES + f"CREATE TABLE O AS SELECT {key}, L.V AS LV, R.V AS RV FROM L {join_type} JOIN R "
                              f"ON L.ID = R.ID{where};", "joins.sql")


def shown(plan: p.Plan, inputs: list[tuple[str, Any, Any, int]]) -> list[tuple[Any, Any, int]]:
    """(key, value, timestamp) of each record the join writes for ``inputs`` (topic, key, value, timestamp)."""
    result = run(plan, [TestRecord(t, k, v, ts, i) for i, (t, k, v, ts) in enumerate(inputs)])
    return [(r.key, r.value, r.timestamp) for r in result.actual.get("O", [])]


# The documented table: (timestamp, left value, right value) of each update of key 1 ("-": no update of that
# side; None: a tombstone), then what INNER, LEFT, RIGHT and FULL write ("": nothing, None: a tombstone,
# else (left, right) of the joined row).
DOCUMENTED = [
    (1, None, "-", "", "", "", ""),
    (2, "-", None, "", "", "", ""),
    (3, "A", "-", "", ("A", None), "", ("A", None)),
    (4, "-", "a", ("A", "a"), ("A", "a"), ("A", "a"), ("A", "a")),
    (5, "B", "-", ("B", "a"), ("B", "a"), ("B", "a"), ("B", "a")),
    (6, "-", "b", ("B", "b"), ("B", "b"), ("B", "b"), ("B", "b")),
    (7, None, "-", None, None, (None, "b"), (None, "b")),
    (8, "-", None, "", "", None, None),
    (9, "C", "-", "", ("C", None), "", ("C", None)),
    (10, "-", "c", ("C", "c"), ("C", "c"), ("C", "c"), ("C", "c")),
    (11, "-", None, None, ("C", None), None, ("C", None)),
    (12, None, "-", "", None, "", None),
    (13, "-", None, "", "", "", ""),
    (14, "-", "d", "", "", (None, "d"), (None, "d")),
    (15, "D", "-", ("D", "d"), ("D", "d"), ("D", "d"), ("D", "d")),
    (17, "-", "d", ("D", "d"), ("D", "d"), ("D", "d"), ("D", "d")),
]


@pytest.mark.parametrize("column, join_type", list(enumerate(("INNER", "LEFT", "RIGHT", "FULL"))))
def test_every_join_type_writes_ksqldbs_documented_results_and_tombstones(column: int, join_type: str) -> None:
    inputs = []
    for timestamp, left, right, *_ in DOCUMENTED:
        topic, value = ("l", left) if left != "-" else ("r", right)
        inputs.append((topic, 1, None if value is None else {"V": value}, timestamp))
    expected = []
    for timestamp, *_, results in ((row[0], row[1:3], row[3 + column]) for row in DOCUMENTED):
        if results == "":
            continue
        value = None if results is None else {"LV": results[0], "RV": results[1]}
        expected.append((1, value, timestamp))
    assert shown(joined(join_type), inputs) == expected


def test_the_output_timestamp_is_the_later_rows_even_when_the_update_is_older() -> None:
    plan = joined("INNER")
    assert shown(plan, [("r", 1, {"V": "a"}, 50), ("l", 1, {"V": "A"}, 20), ("l", 1, None, 30)]) == [
        (1, {"LV": "A", "RV": "a"}, 50), (1, None, 50)]


def test_a_tombstone_for_a_key_its_side_never_had_is_forwarded_when_the_other_side_has_a_row() -> None:
    """Kafka Streams' KTableKTableInnerJoin forwards (null, null) whenever the other side has a row."""
    plan = joined("INNER")
    assert shown(plan, [("r", 1, {"V": "a"}, 1), ("l", 1, None, 2)]) == [(1, None, 2)]
    assert shown(joined("LEFT"), [("l", 2, None, 1)]) == []  # neither side ever had the key: nothing


@pytest.mark.parametrize("join_type, side, new, old, other, expected", [
    ("INNER", p.LEFT_SIDE, None, None, None, False),
    ("INNER", p.LEFT_SIDE, None, None, ({}, 0), True),
    ("LEFT", p.RIGHT_SIDE, ({}, 0), None, None, False),
    ("LEFT", p.LEFT_SIDE, None, ({}, 0), None, True),
    ("RIGHT", p.LEFT_SIDE, ({}, 0), None, None, False),
    ("FULL", p.RIGHT_SIDE, None, ({}, 0), None, True),
])
def test_which_updates_reach_the_output(join_type: str, side: str, new: Any, old: Any, other: Any,
                                        expected: bool) -> None:
    assert forwards(join_type, side, new, old, other) is expected


def test_a_key_has_a_result_by_the_join_type() -> None:
    row = ({}, 0)
    assert [has_result(t, row, None) for t in ("INNER", "LEFT", "RIGHT", "FULL")] == [False, True, False, True]
    assert [has_result(t, None, row) for t in ("INNER", "LEFT", "RIGHT", "FULL")] == [False, False, True, True]
    assert not any(has_result(t, None, None) for t in ("INNER", "LEFT", "RIGHT", "FULL"))


def test_where_writes_a_tombstone_when_a_result_stops_passing_and_nothing_when_it_never_passed() -> None:
    plan = joined("LEFT", " WHERE L.V = 'keep' OR NOT R.V != 'x'")
    inputs = [("l", 1, {"V": "drop"}, 1),    # fails: nothing was written before, so nothing now
              ("l", 1, {"V": "keep"}, 2),    # passes
              ("r", 1, {"V": "y"}, 3),       # still passes (L.V = 'keep')
              ("l", 1, {"V": "other"}, 4),   # R.V != 'x': fails now, passed before: a tombstone
              ("r", 1, {"V": "x"}, 5),       # NOT (R.V != 'x'): passes again
              ("r", 1, None, 6)]             # R.V is NULL: unknown, not passing: a tombstone
    assert shown(plan, inputs) == [(1, {"LV": "keep", "RV": None}, 2), (1, {"LV": "keep", "RV": "y"}, 3),
                                   (1, None, 4), (1, {"LV": "other", "RV": "x"}, 5), (1, None, 6)]


def test_the_join_key_fills_the_key_whichever_side_holds_the_row() -> None:
    plan = joined("RIGHT")
    assert plan.queries[0].key[0].expression == p.JoinKey()
    assert shown(plan, [("r", 7, {"V": "b"}, 3)]) == [(7, {"LV": None, "RV": "b"}, 3)]


def test_select_star_of_a_full_join_names_the_synthetic_key_and_every_column_of_both_sides() -> None:
    """As ksqlDB's "full join - with both join column in projection" (a stream-stream case with the same rule)."""
    plan = plan_text(TABLES + "CREATE TABLE O AS SELECT * FROM L FULL OUTER JOIN R ON L.ID = R.ID;")
    sink = plan.source("O")
    assert [(c.name, c.type) for c in sink.key_columns] == [("ROWKEY", "BIGINT")]
    assert [c.name for c in sink.value_columns] == ["L_ID", "L_V", "R_ID", "R_V"]
    assert shown(plan, [("r", 3, {"V": "b"}, 9)]) == [(3, {"L_ID": None, "L_V": None, "R_ID": 3, "R_V": "b"}, 9)]


def test_a_null_key_is_skipped_as_ksqldb_skips_it() -> None:
    plan = joined("FULL")
    engine = TableJoin(plan, plan.queries[0])
    with pytest.raises(RecordError):
        engine.process(Record("l", None, b'{"V":"a"}', 1))
    assert engine.process(Record("l", b"\0" * 7 + b"\1", b'{"V":"a"}', 1))[0].record.value == b'{"LV":"a","RV":null}'


# ---- the planner -------------------------------------------------------------------------------------------------

def refused(statement: str) -> str:
    with pytest.raises(PlanError) as raised:
        plan_text(TABLES + statement, "joins.sql")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("joins.sql: line 4 (")
    return message


def test_a_join_on_a_left_value_column_is_a_foreign_key_join_streamapp_does_not_run_yet() -> None:
    text = TABLES.replace("V STRING) WITH (kafka_topic='l'", "V BIGINT) WITH (kafka_topic='l'")
    with pytest.raises(PlanError) as raised:
        plan_text(text + "CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.V = R.ID;", "joins.sql")
    assert str(raised.value).endswith("not supported by streamapp yet: foreign-key joins (L.V = R.ID)")


@pytest.mark.parametrize("statement, message", [
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L RIGHT JOIN R ON L.V = R.ID;",
     "RIGHT OUTER JOIN on a foreign key is not supported"),
    ("CREATE TABLE O AS SELECT ROWKEY, R.V FROM L FULL JOIN R ON L.V = R.ID;",
     "Invalid join type: full-outer join not supported for foreign-key table-table join. Got L [FULL] OUTER JOIN R."),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.V = R.ID;",
     "Invalid join condition: types don't match. Got L.V{STRING} = R.ID{BIGINT}."),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.V;",
     "table-table joins require to join on the primary key of the right input table. Got L.ID = R.V."),
    ("CREATE STREAM O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID;",
     "Invalid result type. Your SELECT query produces a TABLE. Please use CREATE TABLE AS SELECT statement instead."),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R WITHIN 1 HOUR ON L.ID = R.ID;",
     "A window definition was provided for a Table-Table join."),
    ("CREATE TABLE O AS SELECT L.V, R.V AS RV FROM L FULL JOIN R ON L.ID = R.ID;",
     "must include the join expression ROWKEY in its projection (eg, SELECT ROWKEY...). ROWKEY was added as a "
     "synthetic key column"),
    ("CREATE TABLE O AS SELECT L.V, R.V AS RV FROM L JOIN R ON L.ID = R.ID;",
     "must include the join expression L.ID or R.ID in its projection (eg, SELECT L.ID...)."),
    ("CREATE TABLE O AS SELECT ROWKEY AS A, ROWKEY AS B, L.V FROM L FULL JOIN R ON L.ID = R.ID;",
     "The projection contains a key column (ROWKEY) more than once, aliased as: A and B."),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID WHERE UCASE(L.V) = 'A';",
     "not supported by streamapp yet: a function call in a WHERE (UCASE(L.V))"),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID WHERE L.V > 1;",
     "Error in WHERE expression: Cannot compare L_V (STRING) to 1 (INTEGER) with GREATER_THAN."),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID WHERE R.ID = 'x' AND L.V = 'y';",
     "Error in WHERE expression: Cannot compare R_ID (BIGINT) to 'x' (STRING) with EQUAL."),
    ("CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID WHERE L.V;",
     "Type error in WHERE expression: Should evaluate to boolean but is L_V (STRING) instead."),
])
def test_the_planner_refuses_what_ksqldb_refuses_and_what_streamapp_does_not_run(statement: str, message: str) -> None:
    assert message in refused(statement)


def test_where_stays_refused_for_a_stream_table_join() -> None:
    text = TABLES.replace("CREATE TABLE L (ID BIGINT PRIMARY KEY", "CREATE STREAM L (ID BIGINT KEY")
    with pytest.raises(PlanError) as raised:
        plan_text(text + "CREATE STREAM O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID WHERE L.V = 'a';")
    assert "not supported by streamapp yet: WHERE in a persistent query" in str(raised.value)


def test_only_table_table_plans_carry_the_new_fields_and_they_round_trip() -> None:
    stream_table = plan_text(TABLES.replace("CREATE TABLE L (ID BIGINT PRIMARY KEY", "CREATE STREAM L (ID BIGINT KEY")
                             + "CREATE STREAM O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID;")
    assert "where" not in json.loads(stream_table.to_json())["queries"][0]
    plan = joined("FULL", " WHERE (L.V = 'a' AND R.V <> 'b') OR NOT L.ID > 2.5")
    raw = json.loads(plan.to_json())
    assert raw["version"] == p.VERSION == 1 and raw["queries"][0]["kind"] == "table_table_join"
    assert raw["queries"][0]["where"]["kind"] == "logical"
    assert p.Plan.from_json(plan.to_json()) == plan


def test_the_worker_runs_a_table_table_join_from_the_agents_of_its_two_table_topics(tmp_path: Any) -> None:
    """The worker's side of it is checked on the broker (``tests/test_worker_table_join_broker.py``)."""
    from streamapp.settings import Settings
    from streamapp.worker.app import create_app

    statements = tmp_path / "joins.sql"
    statements.write_text(TABLES + "CREATE TABLE O AS SELECT L.ID, R.V FROM L JOIN R ON L.ID = R.ID;\n")
    app = create_app(Settings(statements=str(statements), data_dir=str(tmp_path)))
    assert sorted(app.batch_handlers) == ["l", "r"] and sorted(app.join_tables.by_name) == ["l", "r"]
    assert [j.output for j in app.topology.table_joins] == ["streamapp_O"]
