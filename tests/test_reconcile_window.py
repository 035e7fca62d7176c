"""When a reconciliation window is over, and the options that bound it: pure tests with a given clock.

A window is over once its end plus the grace is past; before that the job refuses it (exit 2, one line)
or, with ``--allow-partial``, reads it as partial and keeps no offsets. A window that has not started is
refused either way. Bad ``--grace-minutes`` and ``--date`` values are one line naming the option and the
value: the last two cases run the real command, as a scheduler does (no broker, no Spark needed).
"""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import reconcile_scenario as sc
from spark_batch.errors import ReconcileError
from spark_batch.options import parse
from spark_batch.report import render_html
from spark_batch.summary import PairTotals, Summary, Threshold
from spark_batch.window import Partial, grace_for, iso, over_or_partial, window_for, written_after_close

ROOT = Path(__file__).resolve().parent.parent
HOUR = 3_600_000
DAY = window_for(sc.DAY, None, None)
GRACE = HOUR  # the default --grace-minutes, 60
CLOSES = DAY.end_ms + GRACE
GIVEN = f"--date={sc.DAY!r}"


def at(now_ms: int, allow_partial: bool = False) -> Partial | None:
    return over_or_partial(DAY, GRACE, now_ms, allow_partial, GIVEN)


@pytest.mark.parametrize("now", [CLOSES, CLOSES + 1, CLOSES + 400 * 24 * HOUR])
def test_a_window_whose_end_plus_grace_is_past_is_over(now: int) -> None:
    assert at(now) is None and at(now, allow_partial=True) is None


@pytest.mark.parametrize("now", [DAY.start_ms, DAY.start_ms + 12 * HOUR, DAY.end_ms, CLOSES - 1])
def test_an_open_window_is_refused_in_one_line_or_read_as_partial(now: int) -> None:
    with pytest.raises(ReconcileError) as refused:
        at(now)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{GIVEN}: the window is not over: it closes at 2026-11-21T01:00:00Z")
    assert "--grace-minutes=60" in line and f"now is {iso(now)}" in line and "--allow-partial" in line
    assert at(now, allow_partial=True) == Partial(as_of_ms=now, closes_ms=CLOSES)


@pytest.mark.parametrize("allow_partial", [False, True])
def test_a_window_that_has_not_started_is_refused_partial_or_not(allow_partial: bool) -> None:
    with pytest.raises(ReconcileError) as refused:
        at(DAY.start_ms - 1, allow_partial)
    assert str(refused.value) == (f"{GIVEN}: the window has not started (it starts at 2026-11-20T00:00:00Z, "
                                  "now is 2026-11-19T23:59:59.999Z): nothing to reconcile yet")


def test_the_options_carry_the_given_clock() -> None:
    noon = DAY.start_ms + 12 * HOUR
    options = parse(["--date", sc.DAY, "--allow-partial", "--grace-minutes", "30"], clock=lambda: noon)
    assert options.partial() == Partial(noon, DAY.end_ms + 30 * 60_000)
    late = parse(["--from", f"{sc.DAY}T06:00", "--to", f"{sc.DAY}T08:00"], clock=lambda: noon)
    assert late.partial() is None and late.given_window == f"--from='{sc.DAY}T06:00' --to='{sc.DAY}T08:00'"
    with pytest.raises(ReconcileError, match=r"^--from='2026-11-20T06:00' --to='2026-11-20T08:00': the window is not over"):
        parse(["--from", f"{sc.DAY}T06:00", "--to", f"{sc.DAY}T08:00"], clock=lambda: DAY.start_ms + 8 * HOUR).partial()


def test_a_plan_is_read_again_only_if_written_once_the_window_was_over() -> None:
    assert written_after_close(CLOSES, DAY, GRACE) and written_after_close(CLOSES + HOUR, DAY, GRACE)
    assert not written_after_close(CLOSES - 1, DAY, GRACE)  # pinned by a job that read the day while it was open
    assert not written_after_close(DAY.end_ms + HOUR, DAY, 2 * GRACE)  # a rerun with a longer grace reads further


@pytest.mark.parametrize(("minutes", "words"), [
    (float("nan"), "--grace-minutes=nan: expected a finite number of minutes, 0 or more"),
    (float("inf"), "--grace-minutes=inf: expected a finite number of minutes, 0 or more"),
    (float("-inf"), "--grace-minutes=-inf: expected a finite number of minutes, 0 or more"),
    (-1.0, "--grace-minutes=-1: expected a finite number of minutes, 0 or more"),
    (1e300, "--grace-minutes=1e+300: the window's end (2026-11-21T00:00:00Z) plus the grace is after 9999-12-31T23:59:59.999Z"),
])
def test_bad_grace_is_one_line_naming_it(minutes: float, words: str) -> None:
    with pytest.raises(ReconcileError) as refused:
        grace_for(minutes, DAY)
    assert str(refused.value).startswith(words) and "\n" not in str(refused.value)


def test_grace_is_whole_milliseconds_of_the_minutes_given() -> None:
    assert grace_for(0.0, DAY) == 0 and grace_for(60.0, DAY) == HOUR and grace_for(0.05, DAY) == 3_000


@pytest.mark.parametrize(("day", "start", "end", "words"), [
    ("9999-12-31", None, None, "--date='9999-12-31': out of range: the last day a window can cover is 9999-12-30"),
    ("1969-12-31", None, None, "--date='1969-12-31': out of range: a window lies between 1970-01-01"),
    ("0001-01-01", None, None, "--date='0001-01-01': out of range"),
    (None, "1969-12-31T23:59:59.999", "2026-11-20", "--from='1969-12-31T23:59:59.999': out of range"),
    (None, "2026-11-20", "9999-12-31T23:00-05:00", "--to='9999-12-31T23:00-05:00': out of range"),
])
def test_dates_beyond_what_kafka_and_datetime_say_are_one_line(day: str | None, start: str | None, end: str | None,
                                                               words: str) -> None:
    with pytest.raises(ReconcileError) as refused:
        window_for(day, start, end)
    assert str(refused.value).startswith(words) and "\n" not in str(refused.value)


def test_the_last_window_there_is_still_parses() -> None:
    window = window_for("9999-12-30", None, None)
    assert (iso(window.start_ms), iso(window.end_ms)) == ("9999-12-30T00:00:00Z", "9999-12-31T00:00:00Z")
    assert window_for(None, "1970-01-01", "1970-01-01T00:00:00.001").to_dict()["end"] == "1970-01-01T00:00:00.001Z"


def _summary(partial: Partial | None) -> Summary:
    return Summary(
        window=DAY, source="kafka", topics={"demo_user": "users"}, pairs={}, stream_partitions={"demo_user_orders": 6},
        offsets=None, output_records={}, input_records={}, statuses={"direct": {"match": 84}},
        totals={"direct": PairTotals.of({"match": 84})}, causes={"direct": {"other": 0}}, by_partition_pair=(),
        threshold=Threshold(0.01, ()), detail="mismatches", versions={}, partial=partial)


def test_a_partial_summary_and_report_say_so_and_up_to_when() -> None:
    noon = DAY.start_ms + 12 * HOUR
    partial = _summary(Partial(noon, CLOSES))
    assert partial.to_dict()["partial"] == {"as_of_ms": noon, "as_of": "2026-11-20T12:00:00Z",
                                            "closes_ms": CLOSES, "closes": "2026-11-21T01:00:00Z"}
    html = render_html(partial, [])
    assert "<title>Reconciliation 2026-11-20 (partial)</title>" in html
    assert "PARTIAL: this window was not over." in html and "up to 2026-11-20T12:00:00Z" in html
    assert "closes at 2026-11-21T01:00:00Z" in html
    whole = _summary(None)
    assert whole.to_dict()["partial"] is None and "PARTIAL" not in render_html(whole, [])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spark_batch.reconcile", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize(("args", "words"), [
    (["--date", sc.DAY, "--grace-minutes", "nan"], "--grace-minutes=nan: expected a finite number of minutes"),
    (["--date", sc.DAY, "--grace-minutes", "inf"], "--grace-minutes=inf: expected a finite number of minutes"),
    (["--date", sc.DAY, "--grace-minutes", "-5"], "--grace-minutes=-5: expected a finite number of minutes"),
    (["--date", "9999-12-31"], "--date='9999-12-31': out of range"),
])
def test_bad_values_on_the_command_line_are_one_line_naming_the_option(args: list[str], words: str,
                                                                      tmp_path: Path) -> None:
    done = cli(*args, "--output", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and done.stderr.startswith(f"reconcile: error: {words}")
    assert not (tmp_path / "out").exists()


def test_today_and_next_year_on_the_command_line_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    """With the real clock, as the issue ran them: today's window is open until tomorrow 01:00 UTC, next
    year's has not started; nothing is checked on a broker (none is named) and nothing is written."""
    today = datetime.now(timezone.utc).date()
    ahead = today + timedelta(days=366)
    for day, words in ((today, "the window is not over"), (ahead, "the window has not started")):
        done = cli("--date", day.isoformat(), "--bootstrap-server", "127.0.0.1:9", "--output", str(tmp_path / "out"))
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert lines == [lines[0]] and lines[0].startswith(f"reconcile: error: --date='{day}': {words}"), lines
    assert not (tmp_path / "out").exists()
