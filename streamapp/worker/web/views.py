"""The worker's web views, registered on an app by :func:`install` (``create_app`` calls it).

Each view reads what it shows through ``self.app``: its settings, tables and
counters.  Every route is read-only (GET) but one, ``POST /copartition/recheck``
(the co-partitioning checks run again: see :mod:`.security` for what it takes),
every bad input is a 400 naming the field, the optional bearer token
guards every route but the page itself, and a lookup sent to any worker is
answered by the worker that owns the key (Faust's table routing).
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web as aioweb
import faust
from faust import web

from ...copartition import guard
from ...kafka.admin import describe
from ...model.topology import joins
from . import lookup, params, picture, rechecks, routing
from .placement import diagnose, expected_partition, place
from .stats import merge

if TYPE_CHECKING:
    from ..app import StreamappApp

STATIC_DIR = Path(__file__).parent / "static"
TOPIC_CACHE_SECONDS = 30.0



def tables(app: StreamappApp) -> dict[str, faust.Table]:
    """The tables the views show, by the name ``?table=`` takes."""
    return app.join_tables.by_name


def topics(app: StreamappApp) -> dict[str, str]:
    """The topic each shown table is loaded from."""
    return {join.table: join.table_topic for join, _ in app.join_tables.joins}


class NotReady(aioweb.HTTPServiceUnavailable):
    """The worker has no assignment (or no topic metadata) yet; the client should retry."""

    def __init__(self, what: str) -> None:
        super().__init__(reason=f"{what}; retry in a few seconds")


class TopicCounts:
    """Partition counts of the input topics, read from the broker and kept for a while."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._cache: dict[str, tuple[float, int]] = {}

    async def get(self, topic: str) -> int:
        hit = self._cache.get(topic)
        if hit and time.monotonic() - hit[0] < TOPIC_CACHE_SECONDS:
            return hit[1]
        infos = await asyncio.get_running_loop().run_in_executor(None, describe, self.bootstrap, [topic])
        if topic not in infos:
            raise NotReady(f"topic {topic} does not exist yet")
        self._cache[topic] = (time.monotonic(), infos[topic].partitions)
        return infos[topic].partitions



def _local_rows(app: StreamappApp, key: bytes) -> dict[str, list[dict[str, Any]]]:
    return {
        name: [{"partition": r.partition, "active": r.active, "row": r.value} for r in lookup.find(app, table, key)]
        for name, table in tables(app).items()
    }


def _located(app: StreamappApp, name: str, copies: list[dict[str, Any]], owners: dict[int, str]) -> dict[str, Any]:
    """One table's answer: the active copy if any worker has one, else a standby copy."""
    best = sorted(copies, key=lambda c: (not c["active"], c["partition"]))
    found = best[0] if best else None
    partition = found["partition"] if found else None
    return {
        "table": tables(app)[name].name,
        "topic": topics(app)[name],
        "found": found is not None,
        "partition": partition,
        "row": found["row"] if found else None,
        "owner": owners.get(partition) if partition is not None else None,
        "copies": copies,
    }


async def describe_user(app: StreamappApp, request: aioweb.Request, user_id: str, key: bytes) -> dict[str, Any]:
    """The full answer for one user: rows, partitions, owners, each client's placement, a verdict."""
    settings, shown = app.settings, tables(app)
    me = routing.self_url(app)
    copies = {name: [{**c, "worker": me} for c in rows] for name, rows in _local_rows(app, key).items()}
    others = routing.other_workers(app)
    unreachable = []
    if others and not (copies["users"] and copies["users_repartition"]):
        answers = await routing.gather(app, request, others, request.path, {"scope": "local"})
        for url, answer in answers.items():
            if "error" in answer:
                unreachable.append({"worker": url, "error": answer["error"]})
                continue
            for name in shown:
                copies[name] += [{**c, "worker": url} for c in answer["tables"].get(name, [])]
    n = await app.topic_counts.get(settings.users_topic)
    placement = place(key, n)
    located = {name: _located(app, name, copies[name], lookup.owners(app, table)) for name, table in shown.items()}
    join_partition = expected_partition(settings.partitioner, key, n)
    return {
        "user_id": user_id,
        "key_hex": key.hex(),
        "answered_by": me,
        "routed_from": routing.routed_from(request),
        "join": {
            "partitioner": settings.partitioner,
            "partition": join_partition,
            "owner": lookup.owners(app, app.join_tables.users_repartition).get(join_partition),
        },
        "tables": located,
        "placement": placement.to_dict(),
        "verdict": diagnose(
            user_id, settings.partitioner, join_partition,
            located["users"]["partition"], located["users_repartition"]["partition"], placement,
        ),
        "unreachable": unreachable,
    }


class UserView(web.View):
    """``GET /users/{user_id}``: answered by the owner of the key in the repartitioned (join) table."""

    async def get(self, request: web.Request, user_id: str) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        key = params.key(user_id, request.query.get("encoding"), field="user_id")
        if request.query.get("scope") == "local":
            return self.json({"worker": routing.self_url(app), "tables": _local_rows(app, key)})

        def owner() -> str | None:
            try:
                return str(app.router.key_store(app.join_tables.users_repartition.name, key))
            except (KeyError, TypeError):
                # KeyError: no assignment yet; TypeError: aiokafka has no metadata for the changelog yet.
                return None

        async def here() -> web.Response:
            return self.json(await describe_user(app, request, user_id, key))

        what = f"user {user_id!r}"
        if routing.routed_from(request) is None:
            return await routing.route(app, request, owner, here, what)
        return await routing.answer_forwarded(app, owner, here, what)


class UsersView(web.View):
    """``GET /users?partition=P&limit=L&after=K&table=users``: one page of one partition, from its owner."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        name = params.table(request.query.get("table"))
        table = tables(app)[name]
        n = await app.topic_counts.get(topics(app)[name])
        partition = params.partition(params.required(request.query, "partition"), n)
        limit = params.limit(request.query.get("limit"))
        after = params.after(request.query.get("after"))
        me = routing.self_url(app)

        def owner() -> str | None:
            return lookup.owners(app, table).get(partition)

        async def here() -> web.Response:
            rows, more = lookup.page(app, table, partition, after, limit)
            return self.json({
                "table": name,
                "topic": topics(app)[name],
                "partition": partition,
                "partitions": n,
                "owner": me,
                "answered_by": me,
                "limit": limit,
                "rows": [{"user_id": k.decode("utf-8", "replace"), "key_hex": k.hex(), "row": v} for k, v in rows],
                "next_after": rows[-1][0].decode("utf-8", "replace") if more else None,
            })

        what = f"partition {partition} of {table.name}"
        if routing.routed_from(request) is None:
            return await routing.route(app, request, owner, here, what)
        return await routing.answer_forwarded(app, owner, here, what)


class PartitionView(web.View):
    """``GET /partition/{key}?partitions=N[&encoding=hex]``: every client's partition for a key."""

    async def get(self, request: web.Request, key: str) -> web.Response:
        data = params.key(key, request.query.get("encoding"))
        n = params.partitions(request.query.get("partitions"))
        return self.json(place(data, n).to_dict())


class CopartitionView(web.View):
    """``GET /copartition``: the guard's latest report, the doctor's findings for this worker's joins, and when they ran."""

    async def get(self, request: web.Request) -> web.Response:
        return self.json(copartition_body(self.app))  # type: ignore[arg-type]


class RecheckView(web.View):
    """``POST /copartition/recheck``: run the guard and the doctor again now (off the event loop), then answer as GET."""

    async def post(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        await app.rechecks.run("asked for on the page")
        return self.json(copartition_body(app))


def copartition_body(app: StreamappApp) -> dict[str, Any]:
    """What ``/copartition`` answers: the guard (latest run), the doctor (latest run, None before), the runs."""
    checks: rechecks.Rechecks = app.rechecks
    latest, report = checks.latest, checks.guard_report()
    body: dict[str, Any]
    if report is None:
        body = {"available": False, "verdict": "The co-partitioning guard has not reported yet."}
    else:
        body = {"available": True, **report, "verdict": copartition_verdict(report)}
    doctor = latest.doctor if latest else None
    body["doctor"] = None if doctor is None else {**doctor, "verdict": doctor_verdict(doctor)}
    body["runs"] = {
        "count": checks.runs,
        "running": checks.running is not None,
        "reason": latest.reason if latest else "the worker started (the guard alone)",
        "finished": latest.finished if latest else None,
        "error": latest.doctor_error if latest else None,
    }
    return body


def doctor_verdict(doctor: dict[str, Any]) -> str:
    """One sentence over the doctor's joined pairs, for the page."""
    joined = [p for p in doctor["pairs"] if p["joined_by"]]
    broken = [p for p in joined if p["status"] == "broken"]
    unknown = [p for p in joined if p["status"] == "unknown"]
    if broken:
        worst = ", ".join(f"{p['left']} × {p['right']}"
                          + (f" (predicted miss rate {p['miss_rate']:.0%})" if p["miss_rate"] is not None else "")
                          for p in broken)
        return f"Doctor: {len(broken)} of {len(joined)} joined pairs broken: {worst}."
    if unknown:
        return f"Doctor: {len(joined) - len(unknown)} of {len(joined)} joined pairs sound, {len(unknown)} not decided yet."
    return f"Doctor: all {len(joined)} joined pairs sound."


def copartition_verdict(report: dict[str, Any]) -> str:
    """One sentence over the guard's checks, for the page."""
    checks = report.get("checks", [])
    skipped = sum(1 for check in checks if check.get("ok") is None)
    note = f" ({skipped} could not run yet)" if skipped else ""
    if report.get("problems"):
        return "Not co-partitioned: " + " ".join(p if p.endswith(".") else p + "." for p in report["problems"])
    return f"Co-partitioned: {len(checks) - skipped} of {len(checks)} checks passed{note}."


async def group_counters(app: StreamappApp, request: aioweb.Request) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Every worker's counters (this one's and the others' ``/stats?scope=local``), and the workers that did not answer."""
    workers: dict[str, Any] = {routing.self_url(app): app.counters.snapshot()}
    unreachable = []
    answers = await routing.gather(app, request, routing.other_workers(app), "/stats", {"scope": "local"})
    for url, answer in answers.items():
        if "error" in answer:
            unreachable.append({"worker": url, "error": answer["error"]})
        else:
            workers[url] = answer["counters"]
    return workers, unreachable


class StatsView(web.View):
    """``GET /stats``: joined / missed / dead-lettered per partition, for this worker and the group."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        me = routing.self_url(app)
        if request.query.get("scope") == "local":
            return self.json({"worker": me, "counters": app.counters.snapshot(), "health": app.kafka_monitor.status()})
        workers, unreachable = await group_counters(app, request)
        return self.json({
            "answered_by": me,
            "workers": workers,
            "group": merge(workers.values()),
            "unreachable": unreachable,
            "health": app.kafka_monitor.status(),
        })


class StatsPictureView(web.View):
    """``GET /stats/picture``: the group's counters per order partition and the doctor's placement grid, as SVG."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        workers, _ = await group_counters(app, request)
        latest = app.rechecks.latest
        partitions = app.partition_counts.get(app.settings.orders_topic) or app.settings.partitions
        outputs = [join.output for join in joins(app.settings)]
        drawn = picture.layout(merge(workers.values()), outputs, partitions, latest.matrix if latest else None)
        return self.bytes(drawn.render().encode("utf-8"), content_type="image/svg+xml")


class HealthView(web.View):
    """``GET /health``: 200 while Kafka answers, 503 once it has not for ``kafka_unreachable_timeout``.

    ``ready`` says whether the worker holds its partitions with its tables recovered (Faust's "Worker ready").
    """

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        status = {**app.kafka_monitor.status(), "ready": app.ready}
        return self.json(status, status=200 if status["healthy"] else 503)


class IndexView(web.View):
    """``GET /``: the one-page inspector over the JSON API (plain HTML and JavaScript)."""

    async def get(self, request: web.Request) -> web.Response:
        return self.html((STATIC_DIR / "index.html").read_text(encoding="utf-8"))


#: (path, name, view) of every route: the pages and the JSON API.
ROUTES = (
    ("/users/{user_id}", "streamapp_user", UserView),
    ("/users", "streamapp_users", UsersView),
    ("/partition/{key}", "streamapp_partition", PartitionView),
    ("/copartition", "streamapp_copartition", CopartitionView),
    ("/copartition/recheck", "streamapp_copartition_recheck", RecheckView),
    ("/stats", "streamapp_stats", StatsView),
    ("/stats/picture", "streamapp_stats_picture", StatsPictureView),
    ("/health", "streamapp_health", HealthView),
    ("/", "streamapp_index", IndexView),
)


def install(app: StreamappApp) -> None:
    """Register every route on ``app`` (its web server replaces Faust's ``/`` placeholder with the page)."""
    app.topic_counts = TopicCounts(app.settings.kafka)
    app.rechecks = rechecks.install(app)
    for path, name, view in ROUTES:
        app.page(path, name=name)(view)
