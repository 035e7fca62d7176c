"""Issue 32, case 1, on the real broker: the nightly job never pins or reports a window that is not over.

The job's clock is a parameter of ``main``: a run "at noon" of the scenario's day sees the day open; a run
with the real clock sees it over (the day is in the past). Before the fix, the noon run resolved the day to
the topics' high watermarks, kept them in offsets.json, and every later run of the date read those again:
the orders joined in the afternoon were left out without a word. The inputs and both engines' outputs are
written by tests/reconcile_scenario.py (ksqlDB's output format; the known-answer tests run the engines).
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

import reconcile_scenario as sc
from spark_batch.offsets import resolve_plan
from spark_batch.options import parse
from spark_batch.reconcile import PLAN_FILE, main
from spark_batch.window import window_for
from test_reconcile_kafka import _args

pytestmark = pytest.mark.long

DAY = window_for(sc.DAY, None, None)
NOON = DAY.start_ms + 12 * sc.HOUR_MS


@pytest.fixture
def topics(new_topic) -> dict[str, str]:
    return {role: new_topic(role[:12], 6) for role in sc.ROLES}


def within_day(scenario: sc.Scenario) -> sc.Scenario:
    """The scenario without its records stamped after the day: the afternoon's orders of a day are written
    before any record stamped past its end plus the grace (the scenario's one such order would end the range)."""
    return sc.Scenario(scenario.partitions, {role: [r for r in records if r.timestamp < DAY.end_ms]
                                             for role, records in scenario.records.items()}, scenario.expected)


def said(out: str) -> str:
    """The job's console output with rich's line wrapping undone."""
    return " ".join(out.split())


def orders(summary: dict) -> dict[str, int]:
    return {pair: totals["orders"] for pair, totals in summary["totals"].items()}


def test_an_open_day_is_refused_or_partial_and_pins_nothing_then_the_closed_day_reads_every_order(
        spark, bootstrap, topics, tmp_path, capsys):
    morning, afternoon = within_day(sc.build(regular_users=20)), within_day(sc.build(regular_users=10, seed=99))
    per_pair = lambda s: len(s.expected) // 2  # noqa: E731 (both pairs reconcile every order)
    sc.produce(bootstrap, topics, morning)
    output = tmp_path / "out"
    day_dir = output / f"dt={sc.DAY}"
    argv = _args(bootstrap, topics, output, "--max-mismatch-rate", "1")

    # at noon the day is open: refused in one line before anything is read or written
    assert main(argv, clock=lambda: NOON) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"reconcile: error: --date='{sc.DAY}': the window is not over: it closes at 2026-11-21T01:00:00Z "
                   "(its end plus --grace-minutes=60), now is 2026-11-20T12:00:00Z; run it then, or give "
                   "--allow-partial for a partial report (whose offsets are not kept)")
    assert not output.exists()

    # --allow-partial: what is there so far, said to be partial; no offsets.json for a later run to reuse
    assert main([*argv, "--allow-partial"], clock=lambda: NOON) == 0
    partial = json.loads((day_dir / "summary.json").read_text())
    assert partial["partial"] == {"as_of_ms": NOON, "as_of": "2026-11-20T12:00:00Z",
                                  "closes_ms": DAY.end_ms + sc.HOUR_MS, "closes": "2026-11-21T01:00:00Z"}
    assert orders(partial) == {"direct": per_pair(morning), "repartition": per_pair(morning)}
    assert "PARTIAL: this window was not over." in (day_dir / "report.html").read_text()
    assert not (day_dir / PLAN_FILE).exists()
    assert "PARTIAL: records up to 2026-11-20T12:00:00Z only" in said(capsys.readouterr().out)

    # what a job before the fix left behind: the day pinned at noon to that moment's high watermarks
    options = parse(argv)
    pinned = resolve_plan(options.bootstrap, options.topics, options.window, options.grace_ms, options.roles.timed)
    pinned.write(day_dir / PLAN_FILE)
    os.utime(day_dir / PLAN_FILE, (NOON / 1000, NOON / 1000))

    sc.produce(bootstrap, topics, afternoon)  # the afternoon's orders, joined by both engines
    assert main(argv) == 0  # the real clock: the day is over
    out = said(capsys.readouterr().out)
    assert "before the window closed at 2026-11-21T01:00:00Z: it misses the records written since, resolving again" in out
    closed = json.loads((day_dir / "summary.json").read_text())
    every = per_pair(morning) + per_pair(afternoon)
    assert closed["partial"] is None and orders(closed) == {"direct": every, "repartition": every}
    for pair in ("direct", "repartition"):
        expected = morning.statuses(pair) + afternoon.statuses(pair)
        assert {s: n for s, n in closed["statuses"][pair].items() if n} == dict(expected), pair
    plan = json.loads((day_dir / PLAN_FILE).read_text())
    assert plan == closed["offsets"] and plan != pinned.to_dict()  # kept now: the day is over (a rerun reuses it,
    # tests/test_reconcile_kafka.py::test_reconcile_kafka_known_answers_and_rerun)


def test_a_day_not_started_or_not_over_is_refused_and_writes_no_offsets(bootstrap, topics, tmp_path, capsys):
    """`--date` a year ahead (refused even with --allow-partial: nothing of it exists) and today (not over), as
    the issue ran them, with the real clock; the topics hold records, nothing is pinned."""
    sc.produce(bootstrap, topics, sc.build(regular_users=3))
    today = datetime.now(timezone.utc).date()
    for day, extra, words in ((today + timedelta(days=366), ["--allow-partial"], "the window has not started"),
                              (today, [], "the window is not over")):
        argv = _args(bootstrap, topics, tmp_path / "out", *extra)
        argv[argv.index("--date") + 1] = day.isoformat()
        assert main(argv) == 2, day
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(f"reconcile: error: --date='{day}': {words}"), err
    assert not (tmp_path / "out").exists()
