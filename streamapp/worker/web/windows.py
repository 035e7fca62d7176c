"""The windowed stream-stream joins' stores in the web views: which there are, and a key's records of a time range.

A join's records sit in the partition of the topic they were read from, so a key's records of one store are read in
the partition the join's partitioner picks for the key (or the one asked for), by the worker active for it: a
question sent to another worker is forwarded there, as a table's key is (:mod:`.routing`).  The rows are the
join's own, read with the layout it writes (:mod:`streamapp.worker.window_stores`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from faust import web

from ...model.records import RecordError
from ...sql import plan as p
from ...sql.formats import Codec, json_text
from ...sql.stream_join import JoinWindowSpec, join_window
from ...sql.stream_join import side_of as join_side
from ...sql.topology import JOIN_KEY, ROWTIME, Rekey, StreamStreamJoin
from .. import window_stores
from . import lookup, params, routing

if TYPE_CHECKING:
    from ..app import StreamappApp

#: A store's kinds, in the order of :attr:`StreamStreamJoin.stores`.
KINDS = ("left", "right", "outer")


@dataclass(frozen=True)
class Store:
    """One store of a windowed join: a side's window store, or the outer store of the unmatched records waiting for
    their window to close; ``source`` is the stream whose key the path takes (the left's for the outer store): for a
    side the join re-keys, its repartition topic's, keyed by the join key (``rekey`` says which stream it re-keys)."""

    name: str
    join: StreamStreamJoin
    kind: str
    source: p.Source
    topic: str
    rekey: Rekey | None = None

    @property
    def window(self) -> JoinWindowSpec:
        return join_window(self.join.query)

    def side_of(self, this_side: bool | None) -> str:
        """The side of a record of this store (an outer store's: from whether it is the join's "this" side)."""
        return self.kind if this_side is None else join_side(self.join.query, this_side)


def stores(app: StreamappApp) -> dict[str, Store]:
    """The stores of every windowed join the worker runs, by the name ``/windows/{store}`` takes (its table's)."""
    plan = app.topology.plan
    rekeys = {rekey.source.name: rekey for rekey in app.topology.rekeys}
    found: dict[str, Store] = {}
    for join in app.topology.stream_joins:
        assert join.query.right is not None
        left, right = plan.source(join.query.left), plan.source(join.query.right)
        for name, kind, source, topic in zip(join.stores, KINDS, (left, right, left),
                                             (join.source_topic, join.right_topic, join.source_topic)):
            found[name] = Store(name, join, kind, source, topic, rekeys.get(source.name))
    return found


def listed(store: Store) -> dict[str, Any]:
    """What ``/windows`` says of a store."""
    window, query = store.window, store.join.query
    return {"store": store.name, "join": store.join.pair, "kind": store.kind, "source": store.source.name,
            "topic": store.topic, "key": [{"name": c.name, "type": c.type} for c in store.source.key_columns],
            "key_format": store.source.key_format, "output": store.join.output, "type": query.join_type,
            "rekeyed_from": None if store.rekey is None else {"stream": store.rekey.declared.name,
                                                              "topic": store.rekey.stream},
            "window": {"before_ms": window.before, "after_ms": window.after, "grace_ms": window.grace_ms,
                       "retention_ms": window.retention}}


#: The columns a re-keyed record carries through its repartition topic that are not its stream's: the join key (the
#: path's key) and its event time (the record's ``time``).
CARRIED = (JOIN_KEY, ROWTIME)


def plain_row(columns: dict[str, Any]) -> Any:
    """A stored row's columns as JSON-ready data, as a table's row is stored and shown (ksqlDB's JSON of each): a
    re-keyed record's as its stream declares them (:data:`CARRIED` left out)."""
    columns = {name: value for name, value in columns.items() if name not in CARRIED}
    try:
        return json.loads(json_text(columns))
    except TypeError:  # a value ksqlDB's JSON has no form for: its text
        return json.loads(json.dumps(columns, default=str))


def iso(timestamp: int) -> str | None:
    """``timestamp`` (epoch ms) as ISO-8601 UTC; None out of the calendar's range."""
    try:
        return datetime.fromtimestamp(timestamp / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return None


def join_key(store: Store, data: bytes, text: str) -> Any:
    """The join key a store holds the records of key bytes ``data`` under (the side's key column's value)."""
    try:
        return Codec(store.source).decode_key(data)
    except RecordError as exc:
        raise params.WebInputError("key", f"key={text[:80]!r}: not a key of {store.source.name} ({exc})") from None


def read(app: StreamappApp, store: Store, partition: int, key: Any, start: int | None,
         end: int | None) -> tuple[list[dict[str, Any]], int | None]:
    """The key's records of ``[start, end]`` in this worker's copy of one partition of ``store`` (none when it holds
    no copy), each marked expired when the retention let it go (the join no longer sees it); and the side's stream
    time there (None: no record yet)."""
    table = app.join_tables.windows[store.name]
    if partition not in lookup.local_partitions(app, table):
        return [], None
    start = window_stores.MIN_TIME if start is None else start
    end = window_stores.MAX_TIME if end is None else end
    db = lookup.store_db(table, partition)
    if store.kind == "outer":
        found, observed = window_stores.outer_records(db, key, start, end), None
    else:
        found = window_stores.window_records(db, key, start, end)
        first = app.join_tables.windows[store.join.stores[0]]  # the partition's stream times are in the left's
        observed = (window_stores.stream_times(lookup.store_db(first, partition)).get(store.kind, [None])[0]
                    if partition in lookup.local_partitions(app, first) else None)
    return shown(store, found, observed), observed


def shown(store: Store, found: list[window_stores.StoredRecord], observed: int | None) -> list[dict[str, Any]]:
    """The records as the view answers them: ``expired`` when older than the side's stream time (``observed``)
    less the retention (the join no longer sees them, and deletes them at its next sweep)."""
    oldest = None if observed is None else observed - store.window.retention + 1
    return [{"time": r.time, "time_iso": iso(r.time), "offset": r.offset, "side": store.side_of(r.this_side),
             "expired": oldest is not None and r.time < oldest, "row": plain_row(r.columns)} for r in found]


class WindowsView(web.View):
    """``GET /windows``: the windowed joins' stores, their streams, key columns and windows."""

    async def get(self, request: web.Request) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        return self.json({"windows": [listed(store) for store in stores(app).values()]})


class WindowKeyView(web.View):
    """``GET /windows/{store}/{key}?from=T&to=T[&partition=P][&encoding=hex]``: a key's records of a time range,
    answered by the owner of the partition that holds them."""

    async def get(self, request: web.Request, store: str, key: str) -> web.Response:
        app: StreamappApp = self.app  # type: ignore[assignment]
        known = stores(app)
        held = known[params.store(store, list(known))]
        text = params.path_key(request.raw_path)
        data = params.table_key(text, request.query.get("encoding"), held.source)
        value = join_key(held, data, text)
        start, end = params.time_range(request.query)
        n = await app.topic_counts.get(held.topic)
        asked = request.query.get("partition", "")
        partition = params.partition(asked, n) if asked.strip() else app.join_tables.partitioner(data, n)
        table = app.join_tables.windows[held.name]
        me = routing.self_url(app)

        def owner() -> str | None:
            return lookup.owners(app, table).get(partition)

        async def here() -> web.Response:
            records, observed = read(app, held, partition, value, start, end)
            return self.json({
                "store": held.name, "join": held.join.pair, "kind": held.kind, "topic": held.topic,
                "key": text, "key_hex": data.hex(), "from": start, "to": end,
                "partition": partition, "partitions": n, "partitioner": app.settings.partitioner,
                "owner": me, "answered_by": me, "routed_from": routing.routed_from(request),
                "retention_ms": held.window.retention, "stream_time": observed, "records": records,
            })

        what = f"partition {partition} of {held.name}"
        return await routing.answer(app, request, owner, here, what)
