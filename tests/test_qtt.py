"""ksqlDB's own query-validation tests (QTT) for stream-table, table-table and stream-stream joins, run through the
test runner without a broker.

Each directory under ``tests/qtt/`` is one QTT case converted by ``tests/qtt/convert.py``
(statements, inputs, outputs, and ``case.json``: where it comes from, its expected
exception and ksqlDB's post-conditions).  A positive case must produce exactly its
outputs; a rejection must be refused with ksqlDB's message; the output schema, key
format and repartitioning must be what ksqlDB recorded for the case.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from streamapp.sql import plan as p
from streamapp.sql.planner import PlanError, plan_file
from streamapp.sql.runner import run_files

CASES = Path(__file__).parent / "qtt"
ALL = sorted(d for d in CASES.iterdir() if (d / "case.json").exists())


def load_convert() -> ModuleType:
    """``tests/qtt/convert.py`` as a module (it is a script, not in a package): its lists of cases."""
    spec = importlib.util.spec_from_file_location("qtt_convert", CASES / "convert.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the module runs
    spec.loader.exec_module(module)
    return module


def case_of(directory: Path) -> dict:
    return json.loads((directory / "case.json").read_text(encoding="utf-8"))


POSITIVE = [d for d in ALL if case_of(d)["expected_exception"] is None]
NEGATIVE = [d for d in ALL if case_of(d)["expected_exception"] is not None]


def test_the_converted_cases_are_the_ones_the_issue_names() -> None:
    """R0 and R0+ of ../shared/reference/ksql-joins.md: 15 positive stream-table cases; R1: the positive
    stream-stream joins streamapp passes (75 less those ``STREAM_STREAM_NOT_YET`` names); R2: 14 positive
    table-table joins on the primary key; the rejections: 7 stream-table ones, 14 table-table ones and the
    stream-stream ones (less those ``STREAM_STREAM_NEGATIVE_NOT_YET`` names)."""
    convert = load_convert()
    rings = sorted(case_of(d)["ring"] for d in ALL)
    streams = len(convert.STREAM_STREAM) - len(convert.STREAM_STREAM_NOT_YET)
    stream_rejections = len(convert.STREAM_STREAM_NEGATIVE) - len(convert.STREAM_STREAM_NEGATIVE_NOT_YET)
    assert len(convert.STREAM_STREAM) == 75 and rings.count("R1") == streams
    assert rings.count("R0") == 5 and rings.count("R0+") == 10 and rings.count("R2") == 14
    assert rings.count("RN") == 21 + stream_rejections
    table_table = [d for d in NEGATIVE if case_of(d)["file"] == "table-table-join.json"]
    assert len(table_table) == 10


@pytest.mark.parametrize("case", POSITIVE, ids=lambda d: d.name)
def test_positive_case_produces_ksqldbs_outputs(case: Path) -> None:
    plan, result = run_files(case / "statements.sql", case / "input.json", case / "output.json",
                             case_of(case)["properties"])
    assert result.differences == []
    expected_outputs = json.loads((case / "output.json").read_text())["outputs"]
    assert sum(len(records) for records in result.actual.values()) == len(expected_outputs)


@pytest.mark.parametrize("case", POSITIVE, ids=lambda d: d.name)
def test_positive_case_plans_ksqldbs_schema_and_repartitions(case: Path) -> None:
    post = case_of(case)["post"] or {}
    plan = plan_file(case / "statements.sql", case_of(case)["properties"])
    for expected in post.get("sources", []):
        sink = plan.source(expected["name"])
        if "schema" in expected:
            schema = ", ".join(f"{c.name} {c.type}{' KEY' if c in sink.key_columns else ''}" for c in sink.columns)
            # names, quoted or not; ksqlDB reads INTEGER as INT
            assert schema.replace("`", "") == re.sub(r"\bINTEGER\b", "INT", expected["schema"].replace("`", ""))
        if "keyFormat" in expected:
            assert sink.key_format == expected["keyFormat"]["format"]
    query = plan.queries[-1]
    topics = [t["name"] for t in post.get("topics", {}).get("topics", [])]
    blacklist = post.get("topics", {}).get("blacklist")
    if blacklist and re.fullmatch(blacklist, "x-repartition"):
        assert not query.repartition and not query.repartition_right
    if topics and query.kind == p.STREAM_STREAM_JOIN:  # ksqlDB names a stream-stream join's two sides' topics
        assert query.repartition == any(t.endswith("-Join-left-repartition") for t in topics)
        assert query.repartition_right == any(t.endswith("-Join-right-repartition") for t in topics)
    elif topics:
        assert query.repartition == any(t.endswith("-Join-repartition") for t in topics)
        assert query.repartition_right == any("RightSourceKeyed" in t and t.endswith("-repartition") for t in topics)


@pytest.mark.parametrize("case", NEGATIVE, ids=lambda d: d.name)
def test_rejection_has_ksqldbs_message(case: Path) -> None:
    # ksqlDB breaks a few of its messages over lines; streamapp's is one line, the breaks spaces
    expected = case_of(case)["expected_exception"]["message"].replace("\n", " ")
    with pytest.raises(PlanError) as raised:
        plan_file(case / "statements.sql")
    message = str(raised.value)
    assert expected in message
    assert "\n" not in message and message.startswith(str(case / "statements.sql") + ": line ")


def test_a_plan_round_trips_through_json() -> None:
    """The plan the JVM and Spark read is exactly the plan Python made."""
    for case in POSITIVE:
        plan = plan_file(case / "statements.sql")
        assert p.Plan.from_json(plan.to_json()) == plan


def test_the_cli_exits_0_on_a_match_1_on_a_difference_2_on_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    from streamapp.cli import main

    left = CASES / "joins-060-stream_table_left_join-json"
    inner = CASES / "joins-062-stream_table_inner_join-json"
    files = ["-s", str(left / "statements.sql"), "-i", str(left / "input.json")]
    assert main(["test-runner", *files, "-o", str(left / "output.json")]) == 0
    assert "Test passed" in capsys.readouterr().out
    assert main(["test-runner", *files, "-o", str(inner / "output.json")]) == 1
    out = capsys.readouterr().out
    assert "INNER_JOIN record 1: expected key 0" in out and "Test failed: 4 differences" in out
    rejected = CASES / "stream-table-join-000-should_fail_on_outer_join" / "statements.sql"
    assert main(["test-runner", "-s", str(rejected), "-i", str(left / "input.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "full-outer join not supported for stream-table join" in err


def test_the_readme_lists_every_converted_case() -> None:
    readme = (CASES.parent.parent / "docs" / "reference" / "ksqldb-tests.md").read_text(encoding="utf-8")
    for case in ALL:
        c = case_of(case)
        row = f"| {c['ring']} | `{c['file']}` #{c['index']}" + (f" [{c['format']}]" if c["format"] else "") + " |"
        assert row in readme, f"README.md lacks the row of {case.name}"


def test_the_readme_says_which_cases_the_worker_accepts() -> None:
    """The worker's column of the README's table is what the worker decides at start for each case's plan."""
    from streamapp.settings import Settings
    from streamapp.sql.topology import topology, worker_refusal

    readme = (CASES.parent.parent / "docs" / "reference" / "ksqldb-tests.md").read_text(encoding="utf-8")
    for case in POSITIVE:
        c = case_of(case)
        joins = topology(Settings(statements=str(case / "statements.sql")))
        refused = worker_refusal(joins.declared)
        if refused is not None:
            assert "\n" not in refused
            reason = refused.split("not supported by the worker yet: ", 1)[1].split(";")[0]
            shown = f"refuses it at start: not supported yet ({reason})"
        else:
            sides = [r.side for r in joins.rekeys if r.query.kind == p.STREAM_STREAM_JOIN]
            shown = (f"accepts it (re-keys {'both streams' if len(sides) == 2 else f'the {sides[0]} stream'})" if sides
                     else "accepts it (re-keys the stream)" if joins.rekeyed_topics else
                     "accepts it (re-keys the table)" if joins.plan != joins.declared else "accepts it")
        row = next(line for line in readme.splitlines()
                   if line.startswith(f"| {c['ring']} | `{c['file']}` #{c['index']}"))
        assert row.endswith(f"| {shown} |"), row


def test_the_stream_stream_cases_not_passing_yet_are_listed_and_not_converted() -> None:
    """The docs' table of R1 cases and stream-stream rejections not passing yet is ``convert.py``'s lists, reason for
    reason, and none of them is in the suite (so none counts as passing)."""
    convert = load_convert()
    text = (CASES.parent.parent / "docs" / "reference" / "ksqldb-tests.md").read_text(encoding="utf-8")
    section = text.split("## Stream–stream cases not passing yet", 1)[1]
    listed = [line for line in section.splitlines() if line.startswith(("| R1 |", "| RN |"))]
    expected = []
    for selected, why in ((convert.STREAM_STREAM, convert.STREAM_STREAM_NOT_YET),
                          (convert.STREAM_STREAM_NEGATIVE, convert.STREAM_STREAM_NEGATIVE_NOT_YET)):
        assert set(why) <= {(s.file, s.index) for s in selected}
        for s in selected:
            if (s.file, s.index) in why:
                cell = f"`{s.file}` #{s.index}" + (f" [{s.format}]" if s.format else "")
                expected.append(f"| {s.ring} | {cell} | {s.name} | {why[(s.file, s.index)]} |")
    assert listed == expected
    converted = {(case_of(d)["file"], case_of(d)["index"]) for d in ALL}
    assert not converted & (set(convert.STREAM_STREAM_NOT_YET) | set(convert.STREAM_STREAM_NEGATIVE_NOT_YET))
