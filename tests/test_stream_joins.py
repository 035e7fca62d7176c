"""Windowed stream-stream joins (issue 37, ring R1): what ksqlDB's QTT cases do not pin down.

The window's two bounds from each side, the grace period's holding and dropping, null keys and values, the
emission of closed windows when the wall clock moves, the store's memory, the planner's refusals, the plan's
JSON and the worker's refusal.  The QTT cases themselves run in ``tests/test_qtt.py``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamapp.sql import plan as p
from streamapp.sql.engine import Record
from streamapp.sql.stream_join import JoinWindowSpec, StreamJoin, join_bounds
from streamapp.sql.planner import PlanError, plan_text
from streamapp.sql.runner import TestRecord, run

SOURCES = ("CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (kafka_topic='l', value_format='JSON');\n"
           "CREATE STREAM R (ID BIGINT KEY, B STRING) WITH (kafka_topic='r', value_format='JSON');\n")


def plan_of(join: str, within: str = "WITHIN 10 SECONDS", select: str = "L.ID, A, B") -> p.Plan:
    return plan_text(SOURCES + f"CREATE STREAM O AS SELECT {select} FROM L {join} JOIN R {within} ON L.ID = R.ID;")


def joined(plan: p.Plan, *records: tuple[str, Any, Any, int]) -> list[tuple[Any, Any, int]]:
    """(key, value, timestamp) of what the join writes for records (topic, key, value, timestamp), in order."""
    inputs = [TestRecord(topic, key, value, timestamp, i) for i, (topic, key, value, timestamp) in enumerate(records)]
    result = run(plan, inputs)
    assert [line for line in result.skipped if "came later than the window" not in line] == []
    return [(r.key, r.value, r.timestamp) for r in result.actual.get("O", [])]


def l(key: Any, a: str | None, ts: int) -> tuple[str, Any, Any, int]:
    return ("l", key, None if a is None else {"A": a}, ts)


def r(key: Any, b: str | None, ts: int) -> tuple[str, Any, Any, int]:
    return ("r", key, None if b is None else {"B": b}, ts)


# ---- the window -------------------------------------------------------------------------------------------------------

def test_the_bounds_of_an_asymmetric_window_mirror_for_the_other_side() -> None:
    """WITHIN (before, after): a left record at t joins right ones in [t - before, t + after], a right record at t
    left ones in [t - after, t + before]; Kafka Streams floors both at 0."""
    window = JoinWindowSpec(before=2000, after=5000, grace=None)
    assert join_bounds(window, 10_000, this_is_left=True) == (8000, 15_000)
    assert join_bounds(window, 10_000, this_is_left=False) == (5000, 12_000)
    assert join_bounds(window, 1000, this_is_left=True) == (0, 6000)


@pytest.mark.parametrize("right_time, joins", [(7999, False), (8000, True), (15_000, True), (15_001, False)])
def test_a_record_joins_exactly_within_its_bounds(right_time: int, joins: bool) -> None:
    plan = plan_of("INNER", "WITHIN (2 SECONDS, 5 SECONDS)")
    out = joined(plan, r(1, "b", right_time), l(1, "a", 10_000))
    assert out == ([(1, {"A": "a", "B": "b"}, max(10_000, right_time))] if joins else [])


def test_a_right_join_mirrors_the_window_as_ksqldb_builds_it_right_left_join_left() -> None:
    """RIGHT is ``right.leftJoin(left)``: the right record is Kafka Streams' "this" side, so it looks ``before`` back
    and ``after`` ahead, and the window the left record sees is the mirror image."""
    plan = plan_of("RIGHT", "WITHIN (2 SECONDS, 5 SECONDS)")
    # a left record 4 s after the right one: within the right's 5 s "after" only as a RIGHT join sees it
    assert joined(plan, r(1, "b", 10_000), l(1, "a", 13_000))[-1] == (1, {"A": "a", "B": "b"}, 13_000)
    assert joined(plan, r(1, "b", 10_000), l(1, "a", 16_000)) == [(1, {"A": None, "B": "b"}, 10_000)]


def test_every_match_is_written_with_the_later_time() -> None:
    plan = plan_of("INNER")
    out = joined(plan, l(1, "a1", 1000), l(1, "a2", 3000), r(1, "b", 2000))
    assert out == [(1, {"A": "a1", "B": "b"}, 2000), (1, {"A": "a2", "B": "b"}, 3000)]


# ---- without and with a grace period ---------------------------------------------------------------------------------

def test_without_grace_an_unmatched_left_record_is_written_at_once_and_again_when_it_matches() -> None:
    """Kafka Streams' legacy ``JoinWindows.of``: the spurious left result comes first, the joined row after it."""
    plan = plan_of("LEFT")
    assert joined(plan, l(1, "a", 1000), r(1, "b", 2000)) == [
        (1, {"A": "a", "B": None}, 1000), (1, {"A": "a", "B": "b"}, 2000)]


def test_with_grace_an_unmatched_record_waits_for_its_window_to_close() -> None:
    plan = plan_of("LEFT", "WITHIN 10 SECONDS GRACE PERIOD 5 SECONDS")
    held = joined(plan, l(1, "a", 1000), l(2, "x", 16_000))
    assert held == []  # 1000 + 10 s + 5 s is not yet before stream time 16000
    closed = joined(plan, l(1, "a", 1000), l(2, "x", 16_001))
    assert closed == [(1, {"A": "a", "B": None}, 1000)]


def test_with_grace_a_match_before_the_window_closes_cancels_the_unmatched_result() -> None:
    plan = plan_of("LEFT", "WITHIN 10 SECONDS GRACE PERIOD 5 SECONDS")
    assert joined(plan, l(1, "a", 1000), r(1, "b", 9000), l(2, "x", 30_000)) == [(1, {"A": "a", "B": "b"}, 9000)]


def test_a_full_join_with_grace_writes_the_unmatched_records_of_both_sides_in_time_order() -> None:
    plan = plan_of("FULL OUTER", "WITHIN 1 SECOND GRACE PERIOD 0 SECONDS",
                   "ROWKEY AS K, L.ID AS LID, R.ID AS RID, A, B")
    out = joined(plan, r(2, "b", 500), l(1, "a", 1000), l(3, "x", 9000))
    assert out == [(2, {"LID": None, "RID": 2, "A": None, "B": "b"}, 500),
                   (1, {"LID": 1, "RID": None, "A": "a", "B": None}, 1000)]


def test_a_record_later_than_the_grace_is_not_kept_for_later_joins_and_is_counted() -> None:
    plan = plan_of("INNER", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND")
    join = StreamJoin(plan, plan.queries[0])
    encode = _encoder(plan)
    for record in (encode(l(9, "x", 10_000)), encode(l(1, "late", 5000)), encode(r(1, "b", 5000))):
        assert join.process(record) == []
    assert join.late == 1


def test_the_test_runner_says_how_many_records_came_too_late() -> None:
    plan = plan_of("INNER", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND")
    inputs = [TestRecord(*x, i) for i, x in enumerate((l(9, "x", 10_000), l(1, "late", 5000), l(2, "late", 10)))]
    assert run(plan, inputs).skipped == ["O: 2 records came later than the window and its grace: kept for no later "
                                         "join (Kafka Streams counts them as dropped)"]


def test_a_late_record_whose_window_has_closed_is_written_at_once_unmatched() -> None:
    """Its window closed before it came: Kafka Streams writes it with NULLs at once rather than hold it."""
    plan = plan_of("LEFT", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND")
    assert joined(plan, l(9, "x", 10_000), l(1, "late", 5000)) == [(1, {"A": "late", "B": None}, 5000)]


def test_closed_windows_are_looked_for_once_per_emit_interval_of_wall_clock_time() -> None:
    """The test driver's clock never moves, so ksqlDB's tests see one look; a moving clock looks again."""
    plan = plan_of("LEFT", "WITHIN 1 SECOND GRACE PERIOD 0 SECONDS")
    records = [l(1, "a", 1000), l(2, "b", 3000), l(3, "c", 6000), l(4, "d", 9000)]
    now = [0]
    moving = StreamJoin(plan, plan.queries[0], clock=lambda: now[0])
    still = StreamJoin(plan, plan.queries[0])
    encode = _encoder(plan)
    written: dict[str, list[Any]] = {"moving": [], "still": []}
    for record in map(encode, records):
        now[0] += 1000
        written["moving"] += [o.record.timestamp for o in moving.process(record)]
        written["still"] += [o.record.timestamp for o in still.process(record)]
    assert written == {"moving": [1000, 3000, 6000], "still": [1000]}


# ---- null keys and values --------------------------------------------------------------------------------------------

def test_a_null_value_joins_nothing_and_is_not_kept() -> None:
    plan = plan_of("LEFT")
    assert joined(plan, l(1, None, 1000), r(1, "b", 1000)) == []


def test_a_null_join_key_is_dropped_by_an_inner_join_and_written_unmatched_by_an_outer_side() -> None:
    """Kafka Streams drops a null-key record, but writes an outer side's at once with NULLs (KIP-962)."""
    on_value = ("CREATE STREAM L2 (K BIGINT KEY, ID BIGINT, A STRING) WITH (kafka_topic='l2', value_format='JSON');\n"
                "CREATE STREAM R2 (K BIGINT KEY, ID BIGINT, B STRING) WITH (kafka_topic='r2', value_format='JSON');\n"
                "CREATE STREAM O AS SELECT L2.ID, A, B FROM L2 {} JOIN R2 WITHIN {} ON L2.ID = R2.ID;")
    for join, within, expected in (("INNER", "1 SECOND", []),
                                   ("LEFT", "1 SECOND GRACE PERIOD 1 SECOND", [(None, {"A": "a", "B": None}, 5)])):
        plan = plan_text(on_value.format(join, within))
        assert plan.queries[0].repartition and plan.queries[0].repartition_right
        inputs = [("r2", 1, {"ID": None, "B": "b"}, 5), ("l2", 1, {"ID": None, "A": "a"}, 5)]
        assert joined(plan, *inputs) == expected


def test_the_window_store_forgets_what_its_retention_let_go() -> None:
    """State is bounded by the window's retention (before + after + grace), not by the stream's length."""
    plan = plan_of("INNER", "WITHIN 1 SECOND GRACE PERIOD 0 SECONDS")
    join = StreamJoin(plan, plan.queries[0])
    encode = _encoder(plan)
    for i in range(1000):
        join.process(encode(l(i, "a", i * 1000)))
    assert len(join.state.stores[p.LEFT_SIDE]) <= 5


# ---- the planner and the plan ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("statement, message", [
    ("SELECT L.ID, A, B FROM L JOIN R ON L.ID = R.ID",
     "Stream-Stream joins must have a WITHIN clause specified. None was provided."),
    ("SELECT L.ID, A, B FROM L JOIN R WITHIN 10 FORTNIGHTS ON L.ID = R.ID", "Invalid time unit: FORTNIGHTS"),
    ("SELECT L.ID, A, B FROM L JOIN R WITHIN 1.5 SECONDS ON L.ID = R.ID", "Invalid window size: 1.5 SECONDS"),
    ("SELECT L.ID AS ROWTIME, A, B FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID",
     "Reserved column name in select: `ROWTIME`."),
    ("SELECT A, B FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID",
     "must include the join expressions L.ID or R.ID in its projection"),
    ("SELECT L.ID, A, B FROM L FULL JOIN R WITHIN 1 SECOND ON L.ID = R.ID",
     "must include the join expression ROWKEY in its projection"),
    ("SELECT L.ID, A FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.B",
     "Invalid join condition: types don't match. Got L.ID{BIGINT} = R.B{STRING}."),
])
def test_the_planner_refuses_what_ksqldb_refuses_in_one_line(statement: str, message: str) -> None:
    with pytest.raises(PlanError) as refused:
        plan_text(SOURCES + f"CREATE STREAM O AS {statement};", "joins.sql")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value) and str(refused.value).startswith("joins.sql: line 3 ")


@pytest.mark.parametrize("statements, message", [
    ("CREATE STREAM W (ID BIGINT KEY, A STRING) WITH (kafka_topic='w', value_format='JSON', WINDOW_TYPE='TUMBLING', "
     "WINDOW_SIZE='1 SECOND');\nCREATE STREAM O AS SELECT L.ID, A FROM L JOIN R WITHIN 1 SECOND ON L.ID = R.ID;",
     "line 3 (CREATE STREAM W (ID BIGINT KEY, A STRING) WITH (kafka_topic=...): not supported by streamapp yet: "
     "the windowed source W (WINDOW_TYPE)"),
    ("CREATE STREAM W (ID BIGINT KEY, A STRING) WITH (kafka_topic='w', value_format='JSON', WINDOW_TYPE='SESSION');\n"
     "CREATE STREAM V (ID BIGINT KEY, B STRING) WITH (kafka_topic='v', value_format='JSON', WINDOW_TYPE='SESSION');\n"
     "CREATE STREAM O AS SELECT W.ID, A, B FROM W JOIN V WITHIN 1 SECOND ON W.ID = V.ID;",
     "not supported by streamapp yet: a join of the windowed sources W and V (WINDOW_TYPE)"),
    ("CREATE STREAM W (ID BIGINT KEY, A STRING) WITH (kafka_topic='w', value_format='JSON', WINDOW_TYPE='SLIDING');\n",
     "Unknown window type: 'SLIDING'"),
])
def test_a_windowed_source_is_refused_after_ksqldbs_own_checks(statements: str, message: str) -> None:
    """ksqlDB's refusals of joins of windowed sources come first; what it accepts, streamapp does not run yet."""
    with pytest.raises(PlanError) as refused:
        plan_text(SOURCES + statements, "joins.sql")
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_within_and_grace_are_planned_in_milliseconds() -> None:
    query = plan_of("LEFT", "WITHIN (1 SECOND, 2 MINUTES) GRACE PERIOD 3 HOURS").queries[0]
    assert (query.kind, query.within_before, query.within_after, query.grace) == (
        p.STREAM_STREAM_JOIN, 1000, 120_000, 3 * 3_600_000)
    assert plan_of("INNER", "WITHIN 1 DAY").queries[0].grace is None
    longest = (2**63 - 1) // 86_400_000  # days in a Java long of milliseconds
    assert plan_of("INNER", f"WITHIN {longest} DAYS").queries[0].within_before == longest * 86_400_000
    for within in (f"WITHIN {longest + 1} DAYS", "WITHIN 1 SECOND GRACE PERIOD 99999999999999999999 DAYS"):
        with pytest.raises(PlanError, match="more milliseconds than a Java long holds: Kafka Streams could not run"):
            plan_of("INNER", within)


def test_only_stream_stream_plans_carry_the_new_fields_in_their_json() -> None:
    """A reader of the other kinds (Plan.java) reads their plans as before."""
    streams = json.loads(plan_of("LEFT", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND").to_json())["queries"][0]
    assert {"right_key", "within_before", "within_after", "grace"} <= set(streams)
    table = plan_text("CREATE STREAM S (ID BIGINT KEY, A STRING) WITH (kafka_topic='s', value_format='JSON');\n"
                      "CREATE TABLE T (ID BIGINT PRIMARY KEY, B STRING) WITH (kafka_topic='t', value_format='JSON');\n"
                      "CREATE STREAM O AS SELECT S.ID, A, B FROM S JOIN T ON S.ID = T.ID;")
    raw = json.loads(table.to_json())["queries"][0]
    assert not {"right_key", "within_before", "within_after", "grace", "where"} & set(raw)
    computed = plan_text(SOURCES + "CREATE STREAM O AS SELECT ROWKEY AS K, A, B FROM L JOIN R WITHIN 1 SECOND "
                                   "ON ABS(L.ID) = ABS(R.ID) + 1;")
    assert p.Plan.from_json(computed.to_json()) == computed


def test_the_worker_reads_a_side_joined_on_a_non_key_column_from_ksqldbs_repartition_topic(tmp_path: Path) -> None:
    """Each side a join re-keys is re-keyed by the stream agent into ``<app_id>-<QUERY>-Join-left-repartition`` /
    ``-Join-right-repartition`` (ksqlDB's names), and the window join reads those topics."""
    from streamapp.copartition.guard import joined_pairs, written_topics
    from streamapp.settings import Settings
    from streamapp.worker.app import create_app

    statements = tmp_path / "joins.sql"
    statements.write_text(SOURCES + "CREATE STREAM O AS SELECT L.ID, A, B FROM L JOIN R WITHIN 1 SECOND "
                                    "ON L.A = R.B;\n", encoding="utf-8")
    joins = create_app(Settings(statements=str(statements), app_id="app", data_dir=str(tmp_path / "data"))).topology
    [join] = joins.stream_joins
    assert (join.source_topic, join.right_topic) == ("app-O-Join-left-repartition", "app-O-Join-right-repartition")
    assert [(r.side, r.stream, r.topic) for r in joins.rekeys] == [
        (p.LEFT_SIDE, "l", "app-O-Join-left-repartition"), (p.RIGHT_SIDE, "r", "app-O-Join-right-repartition")]
    assert joins.rekeyed_topics == ("l", "r")
    assert {"l", "r", "app-O-Join-left-repartition", "app-O-Join-right-repartition"} <= set(joins.owned_topics())
    assert {"app-O-Join-left-repartition", "app-O-Join-right-repartition"} <= set(joins.outputs)  # not fingerprinted
    # the guard pairs what the join reads: the worker placed both sides, so no producer's partitioner matters
    assert joined_pairs(joins) == [("app-O-Join-left-repartition", "app-O-Join-right-repartition")]
    assert written_topics(joins) == []


@pytest.mark.parametrize("other", [
    "CREATE STREAM P AS SELECT L.A, B FROM L JOIN R WITHIN 1 SECOND ON L.A = R.B;",  # re-keys L
    "CREATE TABLE T (ID BIGINT PRIMARY KEY, C STRING) WITH (kafka_topic='t', value_format='JSON');\n"
    "CREATE STREAM P AS SELECT L.ID, A, C FROM L JOIN T ON L.ID = T.ID;"])  # looks L's records up in a table
def test_a_stream_in_two_joins_is_read_by_one_agent_its_stream_stream_side_re_keyed_by_its_own_key(
        other: str, tmp_path: Path) -> None:
    """The stream agent reads L for the other join: the stream-stream join on L's key then takes L's records from
    the agent too, re-keyed by that key into its repartition topic; a topic is never read by two agents."""
    from streamapp.settings import Settings
    from streamapp.worker.app import create_app

    statements = tmp_path / "joins.sql"
    statements.write_text(SOURCES + "CREATE STREAM O AS SELECT L.ID, A, B FROM L JOIN R WITHIN 1 SECOND "
                                    f"ON L.ID = R.ID;\n{other}\n", encoding="utf-8")
    joins = create_app(Settings(statements=str(statements), app_id="app", data_dir=str(tmp_path / "data"))).topology
    assert not joins.declared.queries[0].repartition  # ksqlDB would not re-key it: the worker's own hop
    assert joins.stream_joins[0].source_topic == "app-O-Join-left-repartition"
    assert joins.stream_joins[0].right_topic == ("app-O-Join-right-repartition" if "P AS SELECT L.A" in other else "r")
    assert not set(joins.stream_join_topics) & {*joins.rekeyed_topics, *joins.stream_topics}


def _rekeys(statements: str, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """The worker's topology of ``statements`` and its re-keys by side."""
    from streamapp.settings import Settings
    from streamapp.sql.topology import topology

    path = tmp_path / "joins.sql"
    path.write_text(statements, encoding="utf-8")
    joins = topology(Settings(statements=str(path), app_id="app"))
    return joins, {r.side: r for r in joins.rekeys}


@pytest.mark.parametrize("key_format, on, rekeyed", [
    ("DELIMITED", "L.ID = R.ID", p.RIGHT_SIDE),  # key to key, the right's key in another format
    ("KAFKA", "L.ID = R.N", p.RIGHT_SIDE),  # the right joined on a value column
    ("KAFKA", "L.N = R.ID", p.LEFT_SIDE)])
def test_a_rekeyed_side_is_keyed_as_the_other_sides_keys_so_the_partitioner_places_it_with_them(
        key_format: str, on: str, rekeyed: str, tmp_path: Path) -> None:
    """The re-keyed record's key is the join key in the key format of the side it meets: its bytes, and so the
    partition the join's partitioner (murmur2, Kafka Streams') picks, are that side's for the same key."""
    from streamapp.sql.formats import Codec
    from streamapp.sql.topology import Rekeyer

    joins, rekeys = _rekeys(
        f"CREATE STREAM L (ID INT KEY, N INT, A STRING) WITH (kafka_topic='l', key_format='{key_format}', "
        "value_format='JSON');\nCREATE STREAM R (ID INT KEY, N INT, B STRING) WITH (kafka_topic='r', "
        "key_format='KAFKA', value_format='JSON');\n"
        f"CREATE STREAM O AS SELECT * FROM L JOIN R WITHIN 1 SECOND ON {on};",
        tmp_path)
    assert list(rekeys) == [rekeyed]
    rekey = rekeys[rekeyed]
    assert rekey.topic == f"app-O-Join-{rekeyed}-repartition"
    kept, own = (joins.plan.source(name) for name in (("R", "L") if rekeyed == p.LEFT_SIDE else ("L", "R")))
    for join_key in (7, 1234, -5):
        row = ({"ID": join_key, "N": join_key, "A": "a", "B": "b"}, 1000)
        key, _ = Rekeyer(rekey).rekey(row, 0, 0)
        assert key == Codec(kept).encode_key(join_key)
        assert key != Codec(own).encode_key(join_key) or key_format == "KAFKA"  # a DELIMITED key: b"7", not 4 bytes


def test_a_rekeyed_record_carries_its_row_its_own_key_and_event_time_and_reads_back_as_that_row(
        tmp_path: Path) -> None:
    """Its value holds every column, its own key and ``ROWTIME`` (the join reads its time there, whatever the
    repartition record's timestamp); a null join key stays null (an outer side writes it at once, as the engine)."""
    from streamapp.sql.engine import Reader
    from streamapp.sql.topology import ROWTIME, Rekeyer

    joins, rekeys = _rekeys(SOURCES + "CREATE STREAM O AS SELECT L.ID, A, B FROM L LEFT JOIN R WITHIN 1 SECOND "
                                      "ON L.A = R.B;", tmp_path)
    assert set(rekeys) == {p.LEFT_SIDE, p.RIGHT_SIDE}
    [join] = joins.stream_joins
    left = rekeys[p.LEFT_SIDE]
    assert joins.plan.source(join.query.left) == left.source and left.source.timestamp == ROWTIME
    key, value = Rekeyer(left).rekey(({"ID": 3, "A": "x"}, 4242), 1, 9)
    assert json.loads(value) == {"A": "x", "ID": 3, ROWTIME: 4242}
    _, row = Reader(left.source).read(key, value, 1)
    assert row is not None and row[1] == 4242 and row[0]["ID"] == 3 and row[0]["A"] == "x"
    assert Rekeyer(left).rekey(({"ID": 3, "A": None}, 5), 0, 0)[0] is None


def test_a_rekeyed_record_carries_where_it_was_read_when_its_join_reads_it(tmp_path: Path) -> None:
    """``ON a.ROWPARTITION = b.ROWPARTITION``: the join key and the output are the source topic's partition and
    offset, not the repartition topic's, as ksqlDB's pseudo columns are."""
    from streamapp.sql.topology import Rekeyer

    _, rekeys = _rekeys(SOURCES + "CREATE STREAM O AS SELECT L.ROWPARTITION AS P, A, B, L.ROWOFFSET AS LO FROM L "
                                  "JOIN R WITHIN 1 SECOND ON L.ROWPARTITION = R.ROWPARTITION;", tmp_path)
    key, value = Rekeyer(rekeys[p.LEFT_SIDE]).rekey(({"ID": 3, "A": "x"}, 10), 4, 17)
    assert json.loads(value)["ROWPARTITION"] == 4 and json.loads(value)["ROWOFFSET"] == 17
    assert key == (4).to_bytes(4, "big")  # the join key, KAFKA INT
    unread = _rekeys(SOURCES + "CREATE STREAM O AS SELECT L.ID, A, B FROM L JOIN R WITHIN 1 SECOND ON L.A = R.B;",
                     tmp_path)[1]
    assert "ROWPARTITION" not in json.loads(Rekeyer(unread[p.LEFT_SIDE]).rekey(({"ID": 3, "A": "x"}, 10), 4, 17)[1])


def _encoder(plan: p.Plan) -> Any:
    """A test record (topic, key, value, timestamp) as the bytes the engine reads."""
    from streamapp.sql.runner import encode_inputs

    def encode(record: tuple[str, Any, Any, int]) -> Record:
        [encoded] = encode_inputs(plan, [TestRecord(*record, 0)], "test")
        return encoded
    return encode
