"""Any statements, however wrong, are planned or refused in one PlanError line: never another exception.

The statements are ksqlDB's own QTT cases (tests/qtt), each changed in a few places the way a person gets them
wrong: a key constraint dropped, a join kind, a source kind, a format, a type, an operator, a window, a SELECT, a clause
or a property swapped for another; a line or a word dropped or doubled.  A refactor of the planner ran 10,309
such variations and found a traceback (a stream-stream join on expressions of a stream without a key column).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamapp.sql.planner import PlanError, plan_text

CASES = sorted((Path(__file__).parent / "qtt").glob("*/statements.sql"))
#: Words a person swaps for another of the same group.
SWAPS = (
    ("INNER JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN", "JOIN"), ("STREAM", "TABLE"),
    ("'JSON'", "'KAFKA'", "'AVRO'", "'DELIMITED'", "'NONE'", "'PROTOBUF'"), ("PRIMARY KEY", "KEY", ""),
    ("INT", "BIGINT", "STRING", "DOUBLE", "MAP<STRING, INT>", "DECIMAL(4,2)", "BOOLEAN", "ARRAY<INT>"),
    (" = ", " != ", " < ", " AND "),
    ("WITHIN 10 SECONDS", "WITHIN 1 HOURS GRACE PERIOD 2 SECONDS", "", "WITHIN (1 SECOND, 2 MINUTES)",
     "WITHIN 1.5 SECONDS", "WITHIN 3 FORTNIGHTS", "WITHIN 9223372036854775807 DAYS"),
    ("SELECT *", "SELECT ROWTIME", "SELECT ROWPARTITION,", "SELECT WINDOWSTART,", "SELECT 1 AS X,", "SELECT ABS(1),",
     "SELECT CAST(1 AS STRING) AS Z,", "SELECT ROWKEY,", "SELECT"),
    ("WHERE", "GROUP BY", "HAVING", "PARTITION BY"), ("EMIT CHANGES", "EMIT FINAL"),
    ("KAFKA_TOPIC", "KAFKA_TOPICS"), ("WRAP_SINGLE_VALUE=false", "PARTITIONS=0", "TIMESTAMP='ROWTIME'"),
    ("CREATE STREAM", "INSERT INTO", "CREATE TABLE", "CREATE OR REPLACE STREAM", "DROP STREAM"),
)


def _case(path: Path) -> tuple[str, dict]:
    return path.read_text(encoding="utf-8"), json.loads(path.with_name("case.json").read_text()).get("properties") or {}


def _swap(text: str, group: tuple[str, ...], which: int, to: int) -> str:
    present = [m.start() for g in group if g for m in re.finditer(re.escape(g), text)]
    if not present:
        return text
    at = sorted(present)[which % len(present)]
    found = next(g for g in group if g and text.startswith(g, at))
    return text[:at] + group[to % len(group)] + text[at + len(found):]


def _words(text: str, which: int, double: bool) -> str:
    words = text.split(" ")
    i = which % len(words)
    return " ".join(words[:i] + ([words[i]] * 2 if double else []) + words[i + 1:])


def _key(text: str, which: int) -> str:
    """One column's KEY or PRIMARY KEY dropped: a source with no key, or a table a stream."""
    found = list(re.finditer(r" (PRIMARY )?KEY\b", text))
    if not found:
        return text
    m = found[which % len(found)]
    return text[:m.start()] + text[m.end():]


def _line(text: str, which: int) -> str:
    lines = text.splitlines()
    return "\n".join(lines[:which % len(lines)] + lines[which % len(lines) + 1:]) if lines else text


CHANGES = st.one_of(
    st.tuples(st.just("swap"), st.integers(0, len(SWAPS) - 1), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("word"), st.integers(0, 500), st.booleans()),
    st.tuples(st.just("line"), st.integers(0, 50)),
    st.tuples(st.just("key"), st.integers(0, 10)),
)


def changed(text: str, changes: list[tuple]) -> str:
    for change in changes:
        if change[0] == "swap":
            text = _swap(text, SWAPS[change[1]], change[2], change[3])
        elif change[0] == "word":
            text = _words(text, change[1], change[2])
        elif change[0] == "key":
            text = _key(text, change[1])
        else:
            text = _line(text, change[1])
    return text


@settings(max_examples=2000)
@given(case=st.sampled_from(CASES), changes=st.lists(CHANGES, min_size=1, max_size=3))
# a fresh clone's run: a word dropped left a quote open, and the syntax error quoted a string over two lines
@example(case=CASES[0].parent.parent / "elements-061-join_should_reject_windowstart_in_projection" / "statements.sql",
         changes=[("word", 12, False)])
def test_changed_statements_are_planned_or_refused_in_one_line(case: Path, changes: list[tuple]) -> None:
    text, properties = _case(case)
    statements = changed(text, changes)
    try:
        plan_text(statements, "<changed>", properties)
    except PlanError:  # one line by construction (test_a_plan_error_is_one_line); anything else fails the test
        pass


def test_a_plan_error_is_one_line_whatever_it_quotes() -> None:
    """A name or string quoted over two lines is still one line; a syntax error shortens a long quote."""
    assert str(PlanError("x: `a\nb` does not exist.\r\n")) == "x: `a b` does not exist."
    try:
        plan_text("CREATE STREAM S (K STRING KEY) WITH (kafka_topic='" + "t\n" * 30 + ")")
    except PlanError as exc:
        assert "\n" not in str(exc) and "..." in str(exc), str(exc)
    else:
        raise AssertionError("an unclosed string is a syntax error")


def test_the_changes_change_the_statements() -> None:
    """The mutations are not no-ops: each kind alters a case's text."""
    text, _ = _case(CASES[0])
    assert changed(text, [("swap", 1, 0, 1)]) != text  # STREAM -> TABLE
    assert changed(text, [("word", 3, True)]) != text and changed(text, [("word", 3, False)]) != text
    assert changed(text, [("line", 0)]) != text
    assert changed(text, [("key", 0)]) == text.replace("ID INT KEY", "ID INT", 1)
