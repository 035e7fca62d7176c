"""The guard's and the doctor's findings for this worker's joins, run again when they can say more or the data changed.

The guard runs once at start (:func:`streamapp.worker.app.StreamappApp.on_first_start`).
:class:`Rechecks` runs the guard and the doctor (its findings for the worker's own pairs,
:func:`~streamapp.copartition.doctor_pairs.diagnose_worker`) again: once keyed records of a
topic whose checks could not decide were read (:func:`recheck_reason`, pure); once records
arrive whose keys the join's partitioner puts elsewhere, or a joined topic's partition count
changes in the consumer's metadata (:func:`~streamapp.copartition.drift.drift_reason`, pure);
and on demand (``POST /copartition/recheck``).  Each automatic run that finds a new problem
logs it as a WARNING and applies ``guard_policy`` (``fail``: the worker stops, status 2).
The sampling reads Kafka: it runs in a thread, never on the event loop, one run at a time.
See docs/explanation/worker-internals.md#the-verdict-follows-the-data.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...copartition import guard
from ...copartition.doctor import DoctorReport, TopicReport
from ...copartition.drift import LivePlacement, count_changes, drift_reason
from ...copartition.doctor_pairs import diagnose_worker
from ...errors import StreamappError
from ...settings import Settings
from .. import faust_internals
from ..health import REFUSED_EXIT_CODE

if TYPE_CHECKING:
    from ..app import StreamappApp

logger = logging.getLogger(__name__)

#: How often the worker asks itself whether a check can now say more (cheap: counters only).
TICK_SECONDS = 1.0
#: The wait after an automatic run that left a check undecided, doubled each time up to :data:`MAX_WAIT_SECONDS`.
FIRST_WAIT_SECONDS = 2.0
MAX_WAIT_SECONDS = 120.0
#: How long a worker stopped by ``guard_policy=fail`` may take to commit and close before it exits anyway.
STOP_SECONDS = 30.0


def keyed_read(counters: Mapping[str, Any]) -> dict[str, int]:
    """Keyed records the worker has read, by input topic (from a counters snapshot's totals).

    The agents count a record only once it has a key (a keyless one is a dead letter; a stream's
    null-key records are counted too, which only makes a recheck come sooner).
    """
    totals = counters["totals"]
    read: dict[str, int] = {}
    for group in ("rows", "deleted", "records"):
        for topic, count in totals[group].items():
            read[topic] = read.get(topic, 0) + count
    return read


def undecided_checks(guard_report: Mapping[str, Any] | None, doctor_report: Mapping[str, Any] | None,
                     topics: list[str]) -> list[frozenset[str]]:
    """The ``topics`` each undecided check reads: a guard check that could not run, a joined doctor pair whose verdict is unknown."""
    wanted = set(topics)
    checks: list[frozenset[str]] = []
    for check in (guard_report or {}).get("checks", []):
        if check["ok"] is None:
            checks.append(frozenset(set(check["name"].split()) & wanted))  # topic names have no spaces
    for pair in (doctor_report or {}).get("pairs", []):
        if pair["joined_by"] and pair["status"] == "unknown":
            checks.append(frozenset({pair["left"], pair["right"]} & wanted))
    return [names for names in checks if names]


def undecided_topics(guard_report: Mapping[str, Any] | None, doctor_report: Mapping[str, Any] | None,
                     topics: list[str]) -> list[str]:
    """The ``topics`` that a guard check which could not run, or a doctor pair whose verdict is unknown, names."""
    return sorted(set().union(*undecided_checks(guard_report, doctor_report, topics)))


def recheck_reason(guard_report: Mapping[str, Any] | None, doctor_report: Mapping[str, Any] | None,
                   keyed_now: Mapping[str, int], keyed_then: Mapping[str, int] | None) -> str | None:
    """Why the checks should run again now, or None; pure.

    ``keyed_then`` is what had been read at the last run (None: the doctor has not run yet).
    Nothing runs before the guard's own start-up check.  A check runs again once
    one of its topics has more keyed records and none of them has none: a pair left
    undecided because one side is still empty learns nothing from the other side
    growing, and each run samples both topics (seconds of the worker's CPU, again and
    again, while it loads its users).
    """
    if guard_report is None:
        return None
    if keyed_then is None:
        return "the worker started"
    grown = {t for t, count in keyed_now.items() if count > keyed_then.get(t, 0)}
    ready = [names for names in undecided_checks(guard_report, doctor_report, list(keyed_now))
             if names & grown and all(keyed_now.get(t, 0) for t in names)]
    if ready:
        return "keyed records of " + ", ".join(sorted(set().union(*ready) & grown)) + " were read"
    return None


def placement_matrix(stream: TopicReport | None, table: TopicReport | None) -> list[list[int]] | None:
    """Sampled keys in both topics, counted by (stream partition, table partition); pure.

    A key read from several partitions of a topic counts once per pair of partitions.
    None when either topic was not sampled.
    """
    if stream is None or table is None or stream.error or table.error:
        return None
    matrix = [[0] * table.partitions for _ in range(stream.partitions)]
    for key in stream.keys & table.keys:
        for p in stream.placements[key]:
            for q in table.placements[key]:
                matrix[p][q] += 1
    return matrix


@dataclass
class Run:
    """What one run found, as the page shows it."""

    number: int
    reason: str
    started: float
    finished: float
    guard: dict[str, Any] | None
    doctor: dict[str, Any] | None
    doctor_error: str | None
    matrix: list[list[int]] | None


def failing(report: Mapping[str, Any] | None) -> set[str]:
    """The names of the checks that fail in a guard report (``to_dict``)."""
    return {check["name"] for check in (report or {}).get("checks", []) if check["ok"] is False}


def new_problems(report: Mapping[str, Any] | None, said: set[str]) -> list[str]:
    """The problems of ``report`` whose check was not failing when last said (``said``: check names); pure."""
    return [check["message"] for check in (report or {}).get("checks", [])
            if check["ok"] is False and check["name"] not in said]


def _check(settings: Settings, key_serializers: Mapping[str, str], live: Mapping[str, LivePlacement]
           ) -> tuple[dict[str, Any] | None, DoctorReport | None, str | None]:
    """Both checks, blocking (in a thread): each one's failure is its one-line message, not the other's.

    A broker that stopped answering must not stop the timer that calls this, so any error is kept as a line.
    """
    report, doctor, errors = None, None, []
    try:
        report = guard.check_copartitioning(settings, key_serializers, live=live).to_dict()
    except Exception as exc:  # noqa: BLE001 (shown on the page, the worker goes on)
        errors.append(f"guard: {_line(exc)}")
    try:
        doctor = diagnose_worker(settings, live=live)
    except Exception as exc:  # noqa: BLE001
        errors.append(f"doctor: {_line(exc)}")
    return report, doctor, "; ".join(errors) or None


def _line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if isinstance(exc, StreamappError) and text else f"{type(exc).__name__}: {text[0] if text else ''}"


@dataclass
class Rechecks:
    """The latest run of the guard and the doctor for one worker, and when to run them again."""

    app: StreamappApp
    latest: Run | None = None
    running: asyncio.Task[Run] | None = None
    keyed_then: dict[str, int] | None = None
    wait: float = FIRST_WAIT_SECONDS
    next_allowed: float = 0.0
    #: Runs for a change in the data wait only for this (not for the undecided checks' longer waits).
    drift_allowed: float = 0.0
    runs: int = 0
    #: Misplaced records per written topic at the last run, and joined topics' partition counts then.
    misplaced_then: dict[str, int] = field(default_factory=dict)
    counts_then: dict[str, int] | None = None
    #: The checks whose failure has been said (logged, the policy applied), so a run says only what is new.
    said: set[str] | None = None
    stopping: asyncio.Future[None] | None = None
    #: The automatic run under way and what follows it (the timer does not wait for it: a tick stays short).
    automatic: asyncio.Future[None] | None = None

    def guard_report(self) -> dict[str, Any] | None:
        if self.latest is not None and self.latest.guard is not None:
            return self.latest.guard
        report = self.app.guard_report
        return None if report is None else report.to_dict()

    def live(self) -> dict[str, LivePlacement]:
        """What the worker has read of each topic producers write (metrics off: nothing, the check does not run)."""
        instruments = getattr(self.app, "streamapp_instruments", None)
        if instruments is None:
            return {}
        written = set(guard.written_topics(self.app.topology))
        return {topic: fact for topic, fact in instruments.placement.live(self.app.partition_counts).items()
                if topic in written}

    def joined_counts(self) -> dict[str, int | None]:
        """Each joined topic's partition count in the consumer's metadata (None: not known to it)."""
        return {topic: faust_internals.metadata_partitions(self.app.consumer, topic)
                for pair in guard.joined_pairs(self.app.topology) for topic in pair}

    async def tick(self) -> None:
        """Run again if the data changed under the verdict, or keyed records arrived for a check that could not decide."""
        if self.running is not None or self.stopping is not None or (self.automatic and not self.automatic.done()):
            return
        now = time.monotonic()
        if self.said is None and self.guard_report() is not None:
            self.said = failing(self.guard_report())  # the start-up check logged these itself
        counts = self.joined_counts()
        if self.counts_then is None:
            self.counts_then = {t: self.app.partition_counts.get(t) or c for t, c in counts.items()
                                if self.app.partition_counts.get(t) or c}
        live = self.live()
        changed = count_changes(self.counts_then, counts)
        drift = drift_reason(self.guard_report(), live, self.misplaced_then, changed)
        if drift is not None and now >= self.drift_allowed:
            for topic, (before, after) in sorted(changed.items()):
                logger.warning("Partitions of %s changed from %d to %d while the worker runs: its joins no longer "
                               "find keys where they were; the co-partitioning checks run again", topic, before, after)
            self.counts_then.update({topic: after for topic, (_, after) in changed.items()})
            self.automatic = asyncio.ensure_future(self._automatic(drift, lambda run: None))
            self.drift_allowed = now + FIRST_WAIT_SECONDS
            return
        if now < self.next_allowed:
            return
        keyed = keyed_read(self.app.counters.snapshot())
        doctor = self.latest.doctor if self.latest else None
        reason = recheck_reason(self.guard_report(), doctor, keyed, self.keyed_then)
        if reason is not None:
            def then(run: Run) -> None:
                undecided = undecided_topics(run.guard, run.doctor, list(keyed))
                self.wait = min(self.wait * 2, MAX_WAIT_SECONDS) if undecided else FIRST_WAIT_SECONDS
                self.next_allowed = time.monotonic() + self.wait

            self.automatic = asyncio.ensure_future(self._automatic(reason, then))

    async def _automatic(self, reason: str, then: Callable[[Run], None]) -> None:
        """An automatic run, then ``then`` and :meth:`judge` (a task of its own: see :attr:`automatic`)."""
        try:
            run = await self.run(reason)
        except Exception:  # noqa: BLE001 - a broken run must not end the rechecks; the next tick tries again
            logger.exception("Co-partitioning checks could not run (%s)", reason)
            self.next_allowed = time.monotonic() + FIRST_WAIT_SECONDS
            return
        then(run)
        self.judge(run)

    def judge(self, run: Run) -> None:
        """Say what an automatic run found that is new, and apply ``guard_policy`` to it (``fail``: stop, status 2)."""
        if run.guard is None:
            return  # the guard could not run (the page shows why): nothing new is known
        said = self.said or set()
        fresh = new_problems(run.guard, said)
        if run.guard["ok"] and said:
            logger.info("Co-partitioning checks pass again (%s)", run.reason)
        self.said = failing(run.guard)
        if not fresh:
            return
        for problem in fresh:
            logger.warning("Co-partitioning problem found while the worker runs (%s): %s", run.reason, problem)
        if self.app.settings.guard_policy == "fail":
            logger.error("Worker stopped: guard_policy=fail: %d co-partitioning problem(s) found while it runs; "
                         "exiting with status 2 once its offsets are committed", len(fresh))
            self.stopping = asyncio.ensure_future(stop_and_exit(self.app))
        else:
            logger.warning("Guard: %d problem(s); guard_policy=warn, so the worker goes on", len(run.guard["problems"]))

    async def run(self, reason: str) -> Run:
        """One run now, or the one under way; the sampling in a thread, so the event loop goes on."""
        if self.running is None:
            self.running = asyncio.ensure_future(self._run(reason))
        task = self.running
        return await asyncio.shield(task)

    async def _run(self, reason: str) -> Run:
        app = self.app
        try:
            keyed = keyed_read(app.counters.snapshot())
            live = self.live()
            started = time.time()
            loop = asyncio.get_running_loop()
            report, doctor, error = await loop.run_in_executor(
                None, _check, app.settings, app.join_tables.key_serializers(), live)
            matrix = None
            if doctor is not None and app.topology.joins:  # table-table joins only: no stream-table picture
                by_name = {t.name: t for t in doctor.topics}
                first = app.topology.joins[0]  # the page's picture: the first declared join's stream and table
                matrix = placement_matrix(by_name.get(first.stream), by_name.get(first.table_topic))
            self.runs += 1
            run = Run(self.runs, reason, started, time.time(), report, doctor.to_dict() if doctor else None,
                      error, matrix)
            self.latest, self.keyed_then = run, keyed
            self.misplaced_then = {topic: fact.misplaced for topic, fact in live.items()}
            logger.info("Co-partitioning checks run again (%s): %s", reason,
                        "; ".join(c["name"] + ": " + {True: "ok", False: "PROBLEM", None: "skipped"}[c["ok"]]
                                  for c in (report or {}).get("checks", [])) or error)
            return run
        finally:
            self.running = None


async def stop_and_exit(app: StreamappApp) -> None:
    """Stop the app (Faust commits its offsets and flushes its producer), then leave with the guard's status 2.

    A task of its own, not of the app, so the app's stop does not cancel it; bounded by :data:`STOP_SECONDS`.
    """
    try:
        await asyncio.wait_for(app.stop(), STOP_SECONDS)
    except Exception as exc:  # noqa: BLE001 - leaving anyway: the offsets not committed are read again
        logger.error("The stop did not finish (%r); exiting with status %d", exc, REFUSED_EXIT_CODE)
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(REFUSED_EXIT_CODE)


def install(app: StreamappApp) -> Rechecks:
    """Attach a :class:`Rechecks` to ``app`` and its timer (every worker runs its own, not just the leader)."""
    rechecks = Rechecks(app)

    @app.timer(interval=TICK_SECONDS, name="streamapp.worker.web.rechecks.tick")
    async def recheck_when_keyed() -> None:
        await rechecks.tick()

    return rechecks
