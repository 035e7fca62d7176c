"""The worker's web views, registered on an app by :func:`install` (``create_app`` calls it).

Each view reads what it shows through ``self.app``: its settings, tables and
counters.  Every route is read-only
(GET), every bad input is a 400 naming the field, the optional bearer token
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
from . import lookup, params, routing
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
        if routing.routed_from(request) is None:
            try:
                owner = app.router.key_store(app.join_tables.users_repartition.name, key)
            except (KeyError, TypeError):
                # KeyError: no assignment yet; TypeError: aiokafka has no metadata for the changelog yet.
                raise NotReady("this worker has no partition assignment yet") from None
            if not routing.same_url(owner, routing.self_url(app)):
                return await routing.forward(app, request, str(owner))
        return self.json(await describe_user(app, request, user_id, key))


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
        owners = lookup.owners(app, table)
        owner = owners.get(partition)
        me = routing.self_url(app)
        if owner is None:
            raise NotReady(f"partition {partition} of {table.name} has no owner yet")
        if not routing.same_url(owner, me):
            if routing.routed_from(request) is None:
                return await routing.forward(app, request, owner)
            raise NotReady(f"partition {partition} moved between workers while the request was routed")
        rows, more = lookup.page(app, table, partition, after, limit)
        return self.json({
            "table": name,
            "topic": topics(app)[name],
            "partition": partition,
            "partitions": n,
            "owner": owner,
            "answered_by": me,
            "limit": limit,
            "rows": [{"user_id": k.decode("utf-8", "replace"), "key_hex": k.hex(), "row": v} for k, v in rows],
            "next_after": rows[-1][0].decode("utf-8", "replace") if more else None,
        })


class PartitionView(web.View):
    """``GET /partition/{key}?partitions=N[&encoding=hex]``: every client's partition for a key."""

    async def get(self, request: web.Request, key: str) -> web.Response:
        data = params.key(key, request.query.get("encoding"))
        n = params.partitions(request.query.get("partitions"))
        return self.json(place(data, n).to_dict())


class CopartitionView(web.View):
    """``GET /copartition``: the guard's latest report, as the worker saw it at start-up."""

    async def get(self, request: web.Request) -> web.Response:
        report = guard.latest_report()
        if report is None:
            return self.json({"available": False, "verdict": "The co-partitioning guard has not reported yet."})
        data = report.to_dict()
        return self.json({"available": True, **data, "verdict": copartition_verdict(data)})


def copartition_verdict(report: dict[str, Any]) -> str:
    """One sentence over the guard's checks, for the page."""
    checks = report.get("checks", [])
    skipped = sum(1 for check in checks if check.get("ok") is None)
    note = f" ({skipped} could not run yet)" if skipped else ""
    if report.get("problems"):
        return "Not co-partitioned: " + " ".join(p if p.endswith(".") else p + "." for p in report["problems"])
    return f"Co-partitioned: {len(checks) - skipped} of {len(checks)} checks passed{note}."


class StatsView(web.View):
    """``GET /stats``: joined / missed / dead-lettered per partition, for this worker and the group."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        me = routing.self_url(app)
        local = app.counters.snapshot()
        if request.query.get("scope") == "local":
            return self.json({"worker": me, "counters": local, "health": app.kafka_monitor.status()})
        workers: dict[str, Any] = {me: local}
        unreachable = []
        answers = await routing.gather(app, request, routing.other_workers(app), request.path, {"scope": "local"})
        for url, answer in answers.items():
            if "error" in answer:
                unreachable.append({"worker": url, "error": answer["error"]})
            else:
                workers[url] = answer["counters"]
        return self.json({
            "answered_by": me,
            "workers": workers,
            "group": merge(workers.values()),
            "unreachable": unreachable,
            "health": app.kafka_monitor.status(),
        })


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
    ("/stats", "streamapp_stats", StatsView),
    ("/health", "streamapp_health", HealthView),
    ("/", "streamapp_index", IndexView),
)


def install(app: StreamappApp) -> None:
    """Register every route on ``app`` (its web server replaces Faust's ``/`` placeholder with the page)."""
    app.topic_counts = TopicCounts(app.settings.kafka)
    for path, name, view in ROUTES:
        app.page(path, name=name)(view)
