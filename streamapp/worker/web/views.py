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
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web as aioweb
import faust
from faust import web

from ...kafka.admin import describe
from ...sql.formats import Codec
from ...sql.topology import Table
from ..metrics import MetricsView
from . import lookup, params, picture, rechecks, routing
from .placement import diagnose, expected_partition, place
from .stats import merge
from .windows import WindowKeyView, WindowsView

if TYPE_CHECKING:
    from ..app import StreamappApp

STATIC_DIR = Path(__file__).parent / "static"
TOPIC_CACHE_SECONDS = 30.0



def tables(app: StreamappApp) -> dict[str, faust.Table]:
    """The tables the views show, by the name ``/tables/{table}`` takes (the declared source's, lower-cased)."""
    return app.join_tables.by_name


def topics(app: StreamappApp) -> dict[str, str]:
    """The topic each shown table is loaded from."""
    return {table.name: table.topic for table in app.topology.tables}


def declared(app: StreamappApp, name: str) -> Table:
    """The table ``name`` as the plan declares it (the caller has checked the name)."""
    return app.topology.table(name)


def joined_by(app: StreamappApp, name: str) -> list[str]:
    """The outputs of the joins that read table ``name``: stream-table joins' lookups, then table-table joins."""
    return ([j.output for j in app.topology.joins if j.table.name == name]
            + [j.output for j in app.topology.table_joins if name in (j.left.name, j.right.name)])


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



def _local_rows(app: StreamappApp, key: bytes, names: list[str]) -> dict[str, list[dict[str, Any]]]:
    shown = tables(app)
    return {
        name: [{"partition": r.partition, "active": r.active, "row": r.value}
               for r in lookup.find(app, shown[name], key)]
        for name in names
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


def same_keys(app: StreamappApp, name: str) -> list[str]:
    """The tables whose keys are the same bytes as ``name``'s (same key column type and format), ``name`` first.

    A key looked up in one is shown in each: for the seed, the users as their producer placed them
    and as the join's partitioner placed them.
    """
    source = declared(app, name).source
    kind = (tuple(c.type for c in source.key_columns), source.key_format)
    return [name] + [t.name for t in app.topology.tables if t.name != name
                     and (tuple(c.type for c in t.source.key_columns), t.source.key_format) == kind]


async def describe_key(app: StreamappApp, request: aioweb.Request, name: str, text: str, key: bytes) -> dict[str, Any]:
    """The full answer for one key: its rows in every table keyed alike, partitions, owners, each client's
    placement, and a verdict per table."""
    settings, shown = app.settings, tables(app)
    names = same_keys(app, name)
    me = routing.self_url(app)
    copies = {n: [{**c, "worker": me} for c in rows] for n, rows in _local_rows(app, key, names).items()}
    others = routing.other_workers(app)
    unreachable = []
    if others and not all(copies.values()):
        answers = await routing.gather(app, request, others, routing.raw_path(request), {"scope": "local"})
        for url, answer in answers.items():
            if "error" in answer:
                unreachable.append({"worker": url, "error": answer["error"]})
                continue
            for n in names:
                copies[n] += [{**c, "worker": url} for c in answer["tables"].get(n, [])]
    n_partitions = await app.topic_counts.get(topics(app)[name])
    placement = place(key, n_partitions)
    located = {n: _located(app, n, copies[n], lookup.owners(app, shown[n])) for n in names}
    join_partition = expected_partition(settings.partitioner, key, n_partitions)
    joined = joined_by(app, name)
    return {
        "table": name,
        "key": text,
        "key_hex": key.hex(),
        "answered_by": me,
        "routed_from": routing.routed_from(request),
        "join": {
            "partitioner": settings.partitioner,
            "partition": join_partition,
            "owner": lookup.owners(app, shown[name]).get(join_partition),
            "outputs": joined,
        },
        "tables": located,
        "placement": placement.to_dict(),
        "verdict": diagnose(text, settings.partitioner, join_partition,
                            [(n, located[n]["partition"]) for n in names], placement),
        "unreachable": unreachable,
    }


class TablesView(web.View):
    """``GET /tables``: the declared tables, their topics and key columns (what the page offers to look up)."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        return self.json({"tables": [
            {"table": t.name, "source": t.source.name, "topic": t.topic,
             "key": [{"name": c.name, "type": c.type} for c in t.source.key_columns],
             "key_format": t.source.key_format, "joined_by": joined_by(app, t.name)}
            for t in app.topology.tables]})


class TableKeyView(web.View):
    """``GET /tables/{table}/{key}``: answered by the owner of the key's partition of that table."""

    async def get(self, request: web.Request, table: str, key: str) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        key = params.path_key(request.raw_path)  # any key: `{`, `}`, `/`, `%` too; escapes that are not UTF-8: 400
        name = params.table(table, list(tables(app)))
        data = params.table_key(key, request.query.get("encoding"), declared(app, name).source)
        if request.query.get("scope") == "local":
            return self.json({"worker": routing.self_url(app), "tables": _local_rows(app, data, same_keys(app, name))})

        def owner() -> str | None:
            try:
                return str(app.router.key_store(tables(app)[name].name, data))
            except (KeyError, TypeError):
                # KeyError: no assignment yet; TypeError: aiokafka has no metadata for the changelog yet.
                return None

        async def here() -> web.Response:
            return self.json(await describe_key(app, request, name, key, data))

        what = f"key {key!r} of {name}"
        return await routing.answer(app, request, owner, here, what)


class TableView(web.View):
    """``GET /tables/{table}?partition=P&limit=L&after=K``: one page of one partition, from its owner."""

    async def get(self, request: web.Request, table: str) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        name = params.table(table, list(tables(app)))
        source = declared(app, name).source
        faust_table = tables(app)[name]
        n = await app.topic_counts.get(topics(app)[name])
        partition = params.partition(params.required(request.query, "partition"), n)
        limit = params.limit(request.query.get("limit"))
        after = params.after(params.query_text(request.rel_url.raw_query_string, "after"), source,
                             request.query.get("encoding"))
        me = routing.self_url(app)
        codec = Codec(source)

        def owner() -> str | None:
            return lookup.owners(app, faust_table).get(partition)

        async def here() -> web.Response:
            rows, more = lookup.page(app, faust_table, partition, after, limit)
            return self.json({
                "table": name,
                "topic": topics(app)[name],
                "partition": partition,
                "partitions": n,
                "owner": me,
                "answered_by": me,
                "limit": limit,
                "rows": [{"key": params.key_text(k, codec), "key_hex": k.hex(), "row": v} for k, v in rows],
                "next_after": params.key_text(rows[-1][0], codec) if more else None,
                "next_after_hex": rows[-1][0].hex() if more else None,
            })

        what = f"partition {partition} of {name}"
        return await routing.answer(app, request, owner, here, what)


class UserView(web.View):
    """``GET /users/{user_id}``: the seed's old address; redirects to the first declared table's key."""

    async def get(self, request: web.Request, user_id: str) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        first = app.topology.tables[0].name
        user_id = params.path_key(request.raw_path, "user_id")
        raise aioweb.HTTPTemporaryRedirect(_moved(request, f"/tables/{first}/{quote(user_id, safe='')}"))


class UsersView(web.View):
    """``GET /users?table=...``: the seed's old address; redirects to ``/tables/{table}``."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        name = request.query.get("table") or app.topology.tables[0].name
        raise aioweb.HTTPTemporaryRedirect(_moved(request, f"/tables/{quote(name, safe='')}", drop="table"))


def _moved(request: aioweb.Request, path: str, drop: str | None = None) -> str:
    """``path`` with the request's query as it was sent (its escapes kept: ``after=%ff`` stays a 400 there),
    less the parameter ``drop``."""
    parts = [part for name, part in params.query_parts(request.rel_url.raw_query_string) if name != drop]
    return path + ("?" + "&".join(parts) if parts else "")


class PartitionView(web.View):
    """``GET /partition/{key}?partitions=N[&encoding=hex]``: every client's partition for a key."""

    async def get(self, request: web.Request, key: str) -> web.Response:
        data = params.key(params.path_key(request.raw_path), request.query.get("encoding"))
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
    doctor = latest.doctor if latest else None
    if report is None:
        body = {"available": False, "verdict": "The co-partitioning guard has not reported yet."}
    else:  # one verdict: the guard's checks and the doctor's joined pairs of the same run, never two answers
        body = {"available": True, **report, "verdict": copartition_verdict(report, doctor),
                "ok": report["ok"] and not broken_pairs(doctor)}
    body["doctor"] = None if doctor is None else {**doctor, "verdict": doctor_verdict(doctor, report)}
    body["runs"] = {
        "count": checks.runs,
        "running": checks.running is not None,
        "reason": latest.reason if latest else "the worker started (the guard alone)",
        "finished": latest.finished if latest else None,
        "error": latest.doctor_error if latest else None,
    }
    return body


def broken_pairs(doctor: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The doctor's joined pairs it found broken."""
    return [p for p in (doctor or {}).get("pairs", []) if p["joined_by"] and p["status"] == "broken"]


def _pair_text(pair: dict[str, Any]) -> str:
    """A broken pair, with what makes it broken: the worker's own reading, else the doctor's predicted miss rate."""
    live = any(c["ok"] is False and c["name"] == "placement seen by the worker" for c in pair["checks"])
    rate = pair["miss_rate"]
    why = ("the worker found misplaced keys" if live else
           f"predicted miss rate {rate:.0%}" if rate is not None else "")
    return f"{pair['left']} × {pair['right']}" + (f" ({why})" if why else "")


def doctor_verdict(doctor: dict[str, Any], guard: dict[str, Any] | None = None) -> str:
    """One sentence over the doctor's joined pairs, for the page; never "sound" while the guard's checks fail."""
    joined = [p for p in doctor["pairs"] if p["joined_by"]]
    broken = broken_pairs(doctor)
    unknown = [p for p in joined if p["status"] == "unknown"]
    if broken:
        return f"Doctor: {len(broken)} of {len(joined)} joined pairs broken: {', '.join(map(_pair_text, broken))}."
    if guard is not None and guard.get("problems"):
        return (f"Doctor: no joined pair broken in its sample of {len(joined)}, but the guard's checks above fail: "
                f"not co-partitioned.")
    if unknown:
        return f"Doctor: {len(joined) - len(unknown)} of {len(joined)} joined pairs sound, {len(unknown)} not decided yet."
    return f"Doctor: all {len(joined)} joined pairs sound."


def copartition_verdict(report: dict[str, Any], doctor: dict[str, Any] | None = None) -> str:
    """One sentence over the guard's checks and the doctor's joined pairs of the same run, for the page."""
    checks = report.get("checks", [])
    skipped = sum(1 for check in checks if check.get("ok") is None)
    note = f" ({skipped} could not run yet)" if skipped else ""
    broken = broken_pairs(doctor)
    if report.get("problems"):
        return "Not co-partitioned: " + " ".join(p if p.endswith(".") else p + "." for p in report["problems"])
    if broken:
        return ("Not co-partitioned: the doctor finds " + ", ".join(map(_pair_text, broken))
                + f" broken, though the guard's {len(checks) - skipped} of {len(checks)} checks passed{note}.")
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
        if not app.topology.joins:
            raise aioweb.HTTPNotFound(reason="no stream-table join to draw: the plan declares none (the picture draws one)")
        first = app.topology.joins[0]  # the picture shows the first declared join's stream and table
        partitions = app.partition_counts.get(first.stream) or app.settings.partitions
        outputs = [join.output for join in app.topology.joins if join.stream == first.stream]
        drawn = picture.layout(merge(workers.values()), first.stream, first.table_topic, outputs, partitions,
                               latest.matrix if latest else None)
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
    ("/tables", "streamapp_tables", TablesView),
    ("/tables/{table}", "streamapp_table", TableView),
    ("/tables/{table}/{key}", "streamapp_table_key", TableKeyView),
    ("/windows", "streamapp_windows", WindowsView),
    ("/windows/{store}/{key}", "streamapp_window_key", WindowKeyView),
    ("/users/{user_id}", "streamapp_user", UserView),
    ("/users", "streamapp_users", UsersView),
    ("/partition/{key}", "streamapp_partition", PartitionView),
    ("/copartition", "streamapp_copartition", CopartitionView),
    ("/copartition/recheck", "streamapp_copartition_recheck", RecheckView),
    ("/stats", "streamapp_stats", StatsView),
    ("/stats/picture", "streamapp_stats_picture", StatsPictureView),
    ("/health", "streamapp_health", HealthView),
    ("/metrics", "streamapp_metrics", MetricsView),
    ("/", "streamapp_index", IndexView),
)


def any_segment(path: str) -> str:
    """The route's pattern: each ``{name}`` matches any one segment (aiohttp's default refuses ``{`` and ``}``)."""
    return re.sub(r"\{(\w+)\}", r"{\1:[^/]+}", path)


def install(app: StreamappApp) -> None:
    """Register every route on ``app`` (its web server replaces Faust's ``/`` placeholder with the page)."""
    app.topic_counts = TopicCounts(app.settings.kafka)
    app.rechecks = rechecks.install(app)
    for path, name, view in ROUTES:
        if view is MetricsView and not app.settings.metrics:
            continue  # metrics off: no route, no instruments (streamapp.worker.metrics)
        app.page(any_segment(path), name=name)(view)
