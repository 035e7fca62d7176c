"""The web views of the windowed joins' stores: ``GET /windows`` lists them, ``GET /windows/{store}/{key}`` reads a
key's records of a time range, answered by the worker that owns the key's partition.

Without a broker: what the RocksDB layout reader finds is what the pure engine's in-memory stores hold after the same
records, and the time range's parameters.  On the session broker, a worker runs orders x shipments, ``LEFT JOIN WITHIN
1 MINUTE GRACE PERIOD 30 SECONDS``; each key's records of a range come back exactly, asked directly and as another
worker forwards a question (the routing between two workers is the tables' own: tests/test_web_routing.py).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Iterator

import aiohttp
import pytest

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from streamapp.worker.web import params
from streamapp.worker.web.routing import ROUTED_FROM
from streamapp.worker.window_stores import outer_records, window_records

from test_web_browser import Page
from test_web_browser import page  # noqa: F401  (the browser fixture)
from workerkit import declare, murmur2_partition, produce, read_all, stats, wait_until

STREAMS = """
CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (KAFKA_TOPIC='l_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM R (ID BIGINT KEY, B STRING) WITH (KAFKA_TOPIC='r_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM O WITH (KAFKA_TOPIC='o_{tag}') AS SELECT L.ID, A, B FROM L LEFT JOIN R
  WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS ON L.ID = R.ID EMIT CHANGES;
"""
# (side, key, value, time): several records of a key, out of order, a null value, a null key, unmatched ones.
RECORDS = [("l", 1, {"A": "a1"}, 1000), ("r", 1, {"B": "b1"}, 1500), ("r", 2, {"B": "b2"}, 2000),
           ("l", 2, {"A": "a2"}, 9000), ("l", 1, {"A": "a3"}, 1200), ("l", 3, {"A": "a4"}, 3000),
           ("l", 3, None, 3100), ("r", 3, {"B": "b3"}, 4500), ("l", None, {"A": "nk"}, 5000),
           ("l", 4, {"A": "a5"}, 20_000), ("l", 1, {"A": "a6"}, 500), ("l", 4, {"A": "a7"}, 21_000),
           ("l", 5, {"A": "a8"}, 30_000), ("r", 5, {"B": "b4"}, 31_000), ("l", 1, {"A": "a9"}, 40_000)]
RANGES = [(None, None), (0, 1200), (1001, 40_000), (1200, 1200), (9000, 9000), (41_000, None), (None, 999)]


def fed(tmp_path: Path, tag: str = "t") -> tuple[Any, Any, Any]:
    """A worker app of :data:`STREAMS` whose join (the agent's, against RocksDB) was fed :data:`RECORDS` in
    partition 0, and the pure engine fed the same records with its stores in memory."""
    from agents.stream_joins import StreamJoinRun
    from aiokafka.structs import ConsumerRecord

    from streamapp.sql.engine import Record
    from streamapp.sql.formats import Codec
    from streamapp.sql.stream_join import StreamJoin
    from streamapp.worker.app import create_app

    path = tmp_path / "joins.sql"
    path.write_text(STREAMS.format(tag=tag), encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    [joined] = app.topology.stream_joins
    run = StreamJoinRun(app, joined, clock=lambda: 0)
    engine = StreamJoin(app.topology.plan, app.topology.plan.queries[0])
    for offset, (side, key, value, timestamp) in enumerate(RECORDS):
        topic = f"{side}_{tag}"
        codec = Codec(app.topology.source_at(topic))
        raw_key, raw_value = codec.encode_key(key), None if value is None else codec.encode_value(value)
        run.process(topic, 0, ConsumerRecord(topic, 0, offset, timestamp, 0, raw_key, raw_value, None, 0, 0, []))
        engine.process(Record(topic, raw_key, raw_value, timestamp, 0, offset))
        run.stored()
    return app, run, engine


def within(start: int | None, end: int | None, timestamp: int) -> bool:
    return (start is None or start <= timestamp) and (end is None or timestamp <= end)


def bounds(start: int | None, end: int | None) -> tuple[int, int]:
    return -(2**63) if start is None else start, 2**63 - 2 if end is None else end


def test_a_keys_records_of_a_time_range_are_what_the_engines_window_store_holds(tmp_path: Path) -> None:
    """Each side's window store, read by key and time range, holds the records the in-memory store holds: the
    key's non-null records of that side, by time then arrival, with their columns (a null value or key: none)."""
    from streamapp.worker.faust_internals import partition_db

    app, run, engine = fed(tmp_path)
    for side, table in zip(("left", "right"), run.tables):
        db = partition_db(table, 0)
        for key in (1, 2, 3, 4, 5, 6):
            held = engine.state.stores[side].rows.get(key, [])
            for start, end in RANGES:
                got = window_records(db, key, *bounds(start, end))
                assert [(r.time, r.columns) for r in got] == [(t, row[0]) for t, row in held
                                                              if within(start, end, t)], (side, key, start, end)
                offsets = [i for i, (s, k, v, t) in enumerate(RECORDS)
                           if s == side[0] and k == key and v is not None and within(start, end, t)]
                assert sorted(r.offset for r in got) == offsets
    assert [r.columns for r in window_records(partition_db(run.tables[0], 0), 1, 0, 1200)] == [
        {"A": "a6", "ID": 1}, {"A": "a1", "ID": 1}, {"A": "a3", "ID": 1}]


def test_a_keys_unmatched_records_are_what_the_engines_outer_store_holds(tmp_path: Path) -> None:
    """The outer store is by time first: a key's waiting records of a range are picked out of the range's."""
    from streamapp.worker.faust_internals import partition_db

    app, run, engine = fed(tmp_path)
    db = partition_db(run.tables[2], 0)
    waiting = engine.state.outer._rows  # the in-memory store's entries: (time, this side?, key) -> [(key, row)]
    assert waiting  # unmatched left records wait for their window to close
    for key in (1, 2, 3, 4, 5):
        for start, end in RANGES:
            got = [(r.time, r.this_side, r.columns) for r in outer_records(db, key, *bounds(start, end))]
            assert got == sorted((t, this, row[0]) for (t, this, k), rows in waiting.items() for _, row in rows
                                 if k == key and within(start, end, t)), (key, start, end)
    assert [r.columns for r in outer_records(db, 4, 0, 30_000)] == [{"A": "a5", "ID": 4}, {"A": "a7", "ID": 4}]


def test_the_listed_stores_name_their_join_side_stream_key_and_window(tmp_path: Path) -> None:
    from streamapp.worker.web.windows import listed, stores

    app, _, _ = fed(tmp_path)
    shown = [listed(s) for s in stores(app).values()]
    assert [(s["store"], s["kind"], s["source"], s["topic"]) for s in shown] == [
        ("o-left-window", "left", "L", "l_t"), ("o-right-window", "right", "R", "r_t"),
        ("o-outer", "outer", "L", "l_t")]
    assert all(s["key"] == [{"name": "ID", "type": "BIGINT"}] and s["type"] == "LEFT" for s in shown)
    assert shown[0]["window"] == {"before_ms": 60_000, "after_ms": 60_000, "grace_ms": 30_000, "retention_ms": 150_000}


def test_a_record_older_than_the_sides_stream_time_less_the_retention_is_shown_expired(tmp_path: Path) -> None:
    """The join no longer sees it (its fetch starts there), though its sweep has not deleted it yet; columns as
    ksqlDB's JSON writes them; an outer store's record is of the side it came from."""
    from decimal import Decimal

    from streamapp.worker.web.windows import shown, stores
    from streamapp.worker.window_stores import StoredRecord

    app, _, _ = fed(tmp_path)
    left, _, outer = stores(app).values()  # retention 150 s
    found = [StoredRecord(1000, 7, {"A": "x", "ID": 1}), StoredRecord(1001, 8, {"A": Decimal("1.50"), "ID": 1})]
    assert [(r["expired"], r["row"], r["side"]) for r in shown(left, found, 151_000)] == [
        (True, {"A": "x", "ID": 1}, "left"), (False, {"A": 1.5, "ID": 1}, "left")]
    assert [r["expired"] for r in shown(left, found, None)] == [False, False]  # no stream time yet
    waiting = [StoredRecord(5, 1, {"B": "y"}, this_side=False), StoredRecord(5, 2, {"A": "z"}, this_side=True)]
    assert [(r["side"], r["time_iso"]) for r in shown(outer, waiting, None)] == [
        ("right", "1970-01-01T00:00:00.005+00:00"), ("left", "1970-01-01T00:00:00.005+00:00")]


REKEYED = """
CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');
CREATE STREAM R (ID BIGINT KEY, LID BIGINT, B STRING) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON');
CREATE STREAM O AS SELECT L.ID, A, B FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.LID;
"""


def test_a_side_the_join_rekeys_is_listed_with_its_stream_and_shows_that_streams_columns(tmp_path: Path) -> None:
    """A re-keyed side's store follows its repartition topic, keyed by the join key: the listing names the stream it
    re-keys, and a record shows that stream's columns, not the join key and event time its repartition record
    carries."""
    from streamapp.worker.app import create_app
    from streamapp.worker.web.windows import listed, shown, stores
    from streamapp.worker.window_stores import StoredRecord

    path = tmp_path / "joins.sql"
    path.write_text(REKEYED, encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    left, right, _ = stores(app).values()
    assert (listed(left)["rekeyed_from"], listed(right)["rekeyed_from"]) == (None, {"stream": "R", "topic": "r"})
    assert listed(right)["topic"] == "streamapp-O-Join-right-repartition"
    carried = {"__streamapp_join_key": 7, "ID": 3, "LID": 7, "B": "b", "ROWTIME": 1000}
    assert [r["row"] for r in shown(right, [StoredRecord(1000, 0, carried)], None)] == [{"ID": 3, "LID": 7, "B": "b"}]


@pytest.mark.parametrize(("query", "expected"), [
    ({}, (None, None)),
    ({"from": "1700000000000", "to": " 1700000001000 "}, (1_700_000_000_000, 1_700_000_001_000)),
    ({"from": "2023-11-14T22:13:20Z"}, (1_700_000_000_000, None)),
    ({"to": "2023-11-14T23:13:20.5+01:00"}, (None, 1_700_000_000_500)),
    ({"from": "2023-11-14T22:13:20"}, (1_700_000_000_000, None)),  # no offset: UTC
    ({"from": "-5", "to": "-5"}, (-5, -5)),
])
def test_a_time_range_takes_milliseconds_or_iso_8601(query: dict[str, str], expected: tuple[Any, Any]) -> None:
    assert params.time_range(query) == expected


@pytest.mark.parametrize(("query", "field", "line"), [
    ({"from": "yesterday"}, "from", "from='yesterday': expected milliseconds since the epoch or an ISO-8601 time"),
    ({"to": "2023-13-01"}, "to", "to='2023-13-01': expected milliseconds since the epoch or an ISO-8601 time"),
    ({"from": "20", "to": "10"}, "from", "from='20' is after to='10': an empty range"),
    ({"to": str(2**63)}, "to", f"to={2**63}: must be between"),
])
def test_a_bad_time_range_is_one_line_naming_the_parameter_and_value(query: dict[str, str], field: str,
                                                                     line: str) -> None:
    with pytest.raises(params.WebInputError) as refused:
        params.time_range(query)
    assert refused.value.field == field and str(refused.value).startswith(line) and "\n" not in str(refused.value)


def test_a_store_not_held_is_one_line_listing_those_held_or_saying_there_are_none() -> None:
    for names, listed in ((["o-left-window", "o-outer"], "o-left-window, o-outer"), ([], "(none: no windowed join)")):
        with pytest.raises(params.WebInputError) as refused:
            params.store("nope", names)
        assert (refused.value.field, str(refused.value)) == ("store", f"store='nope': expected one of {listed}")
    assert params.store("o-outer", ["o-outer"]) == "o-outer"


# -- on the broker ------------------------------------------------------------------------------------------------

T0 = 1_700_000_000_000
#: (side, id, value, time) produced: key 3 has orders across a range, orders 5 to 8 find no shipment.
PRODUCED = ([("l", i, {"A": f"order {i}"}, T0 + 1000 * i) for i in range(1, 9)]
            + [("l", 3, {"A": "order 3 again"}, T0 + 7000), ("l", 3, {"A": "order 3 late"}, T0 + 20_000)]
            + [("r", i, {"B": f"shipment {i}"}, T0 + 1000 * i + 500) for i in range(1, 5)])


#: A table-table join beside it on the broker, for the metrics: customers then their accounts, ids 1 to 3 and 1 to 2.
TABLES = """
CREATE TABLE C (ID BIGINT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='c_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE A (ID BIGINT PRIMARY KEY, BALANCE BIGINT) WITH (KAFKA_TOPIC='a_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE CA WITH (KAFKA_TOPIC='ca_{tag}') AS SELECT C.ID, NAME, BALANCE FROM C LEFT JOIN A ON C.ID = A.ID;
"""
ROWS = {"c": [(i, {"NAME": f"customer {i}"}) for i in (1, 2, 3)], "a": [(i, {"BALANCE": 10 * i}) for i in (1, 2)]}


def key(i: int) -> bytes:
    return struct.pack(">q", i)


class Running:
    """A worker of one windowed join, and the tag of its topics."""

    def __init__(self, worker: WorkerProcess, tag: str, partitions: int) -> None:
        self.worker, self.tag, self.partitions = worker, tag, partitions
        self.url = worker.url


@pytest.fixture(scope="module")
def running(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("windows")
    base = broker.settings(Settings()).replace(data_dir=str(tmp / "data"))
    declared = declare(base, tmp, STREAMS + TABLES, "win")
    n, bootstrap = declared.settings.partitions, declared.settings.bootstrap_servers
    ensure_topics(bootstrap, {declared.topic(name): n for name in ("l", "r", "c", "a")})
    worker = WorkerProcess(declared.settings, tmp / "worker.log").start(timeout=120)
    try:
        for side in ("l", "r"):
            produce(bootstrap, declared.topic(side), [(key(i), json.dumps(v).encode(), t)
                                                      for s, i, v, t in PRODUCED if s == side])
        for table, rows in ROWS.items():  # the customers read before their accounts
            produce(bootstrap, declared.topic(table), [(key(i), json.dumps(v).encode()) for i, v in rows])
            wait_until(lambda: stats(worker)["rows"].get(declared.topic(table), 0) == len(rows), 60,
                       f"the worker to read {table}", [worker])
        counts = {declared.topic(s): sum(1 for x in PRODUCED if x[0] == s) for s in ("l", "r")}
        wait_until(lambda: all(stats(worker)["records"].get(topic, 0) == count for topic, count in counts.items()),
                   60, "the worker to read every record", [worker])
        yield Running(worker, declared.tag, n)
    finally:
        assert worker.stop() == 0, worker.tail()


async def get(url: str, routed_from: str | None = None) -> tuple[int, Any]:
    """``GET url``; ``routed_from``: as a worker forwarding the question to its owner asks it."""
    headers = {ROUTED_FROM: routed_from} if routed_from else {}
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=20)) as response:
            return response.status, await response.json()


def expected(side: str, i: int, start: int | None, end: int | None) -> list[tuple[int, dict[str, Any]]]:
    column = "A" if side == "l" else "B"
    return sorted((t, {column: v[column], "ID": i}) for s, k, v, t in PRODUCED
                  if s == side and k == i and within(start, end, t))


async def test_the_stores_are_listed(running: Running) -> None:
    status, body = await get(f"{running.url}/windows")
    assert status == 200, body
    assert [(s["store"], s["kind"], s["topic"], s["output"]) for s in body["windows"]] == [
        ("o-left-window", "left", f"l_{running.tag}", f"streamapp_o_{running.tag}"),
        ("o-right-window", "right", f"r_{running.tag}", f"streamapp_o_{running.tag}"),
        ("o-outer", "outer", f"l_{running.tag}", f"streamapp_o_{running.tag}")]


async def test_a_keys_records_of_a_range_are_exactly_those_produced(running: Running) -> None:
    """Asked directly and as forwarded by another worker (answered only by the owner of the key's partition)."""
    ranges = [(None, None), (T0 + 3000, T0 + 7000), (T0 + 3001, None), (None, T0 + 2999)]
    for side, kind, ids in (("l", "left", range(1, 9)), ("r", "right", range(1, 5))):
        for i in ids:
            for start, end in ranges:
                query = "&".join(f"{name}={value}" for name, value in (("from", start), ("to", end))
                                 if value is not None)
                for routed_from in (None, "http://127.0.0.1:1"):
                    status, body = await get(f"{running.url}/windows/o-{kind}-window/{i}?{query}", routed_from)
                    assert status == 200, body
                    assert [(r["time"], r["row"]) for r in body["records"]] == expected(side, i, start, end), (i, query)
                    assert (body["partition"], body["answered_by"], body["routed_from"]) == (
                        murmur2_partition(key(i), running.partitions), running.url, routed_from)
                    assert not any(r["expired"] for r in body["records"]) and (body["from"], body["to"]) == (start, end)


async def test_iso_times_and_the_outer_stores_waiting_records(running: Running) -> None:
    """Orders 5 to 8 found no shipment: they wait in the outer store for their window to close."""
    status, body = await get(f"{running.url}/windows/o-left-window/3?from=2023-11-14T22:13:23Z"
                             f"&to=2023-11-14T22:13:27.000Z")
    assert status == 200, body
    assert [(r["time_iso"], r["row"]["A"]) for r in body["records"]] == [
        ("2023-11-14T22:13:23.000+00:00", "order 3"), ("2023-11-14T22:13:27.000+00:00", "order 3 again")]
    for i in range(1, 9):
        status, body = await get(f"{running.url}/windows/o-outer/{i}")
        assert status == 200, body
        assert [(r["time"], r["side"], r["row"]) for r in body["records"]] == (
            [(T0 + 1000 * i, "left", {"A": f"order {i}", "ID": i})] if i >= 5 else []), i


async def test_the_metrics_count_the_joins_records_written_and_its_stores_bytes(running: Running) -> None:
    """Orders 1 to 4 and both later orders of 3 meet their shipment: 6 records written (orders 5 to 8 wait); each
    customer and each account is one record of the table-table join.  The stores' bytes as RocksDB counts them:
    tests/test_metrics_windows.py."""
    from prometheus_client.parser import text_string_to_metric_families

    settings = running.worker.settings
    written = {join: len(read_all(settings.bootstrap_servers, f"{settings.output_prefix}{join}_{running.tag}",
                                  running.partitions, count)) for join, count in (("o", 6), ("ca", 5))}
    assert written == {"o": 6, "ca": 5}
    metrics = {f.name: f for f in text_string_to_metric_families(running.worker.get("/metrics").text)}
    assert {s.labels["join"]: s.value for s in metrics["streamapp_records_written"].samples
            if s.name.endswith("_total")} == written
    held = {(s.labels["store"], int(s.labels["partition"]), s.labels["part"]): s.value
            for s in metrics["streamapp_window_store_bytes"].samples}
    stores = ("o-left-window", "o-right-window", "o-outer")
    assert set(held) == {(store, partition, part) for store in stores for partition in range(running.partitions)
                         for part in ("memtables", "sst_files")}  # every partition is active on the one worker
    # a few records: each partition's in its memtables (at least their first block), none flushed yet
    assert all(count > 0 if part == "memtables" else count == 0 for (_, _, part), count in held.items()), held


@pytest.mark.parametrize(("path", "fragment"), [
    ("/windows/o-left-window/3?from=soon", "from='soon': expected milliseconds since the epoch or an ISO-8601 time"),
    ("/windows/o-left-window/3?from=9&to=8", "from='9' is after to='8'"),
    ("/windows/o-left-window/three", "key='three': not a BIGINT"),
    ("/windows/o-left-window/3?partition=99", "partition=99: must be between 0 and"),
    ("/windows/nope/3", "store='nope': expected one of o-left-window, o-right-window, o-outer"),
])
async def test_a_bad_request_is_a_400_naming_the_parameter_and_value(running: Running, path: str,
                                                                     fragment: str) -> None:
    status, body = await get(running.url + path)
    assert status == 400, body
    assert body["error"].startswith(fragment) and "\n" not in body["error"] and "Traceback" not in json.dumps(body)


async def test_the_page_lists_the_stores_and_shows_a_keys_records_of_a_range(running: Running,
                                                                           page: Page) -> None:  # noqa: F811
    """A real browser on ``/``: the window stores listed as ``/windows`` lists them, then a key's records of a range
    and the outer store's waiting records read through the page's form, and a bad range's one-line error."""
    status, listed = await get(f"{running.url}/windows")
    assert status == 200, listed
    await page.send("Page.navigate", url=f"{running.url}/")
    await page.wait("document.readyState === 'complete' && "
                    "document.querySelectorAll('#windows tbody tr').length === 3")
    rows = await page.eval("[...document.querySelectorAll('#windows tbody tr')].map(r => [r.id, "
                           "...[...r.cells].map(c => c.textContent)])")
    assert [(r[0], r[1], r[2], r[3], r[7]) for r in rows] == [
        (f"window-{s['store']}", s["store"], s["join"], s["kind"], f"{s['window']['retention_ms']:,} ms")
        for s in listed["windows"]]
    assert rows[0][4] == f"L (l_{running.tag})" and rows[0][5] == f"ID BIGINT ({listed['windows'][0]['key_format']})"
    assert rows[0][6] == "LEFT JOIN WITHIN 60,000 ms before, 60,000 ms after, grace 30,000 ms", rows[0]

    async def shown(store: str, key: str, start: str = "", end: str = "") -> Any:
        await page.eval("window.before = document.getElementById('window-result-line').textContent + "
                        "document.getElementById('window-error').textContent; true")
        await page.eval(f"document.getElementById('window-store').value = {json.dumps(store)}; "
                        f"document.getElementById('window-key').value = {json.dumps(key)}; "
                        f"document.getElementById('window-from').value = {json.dumps(start)}; "
                        f"document.getElementById('window-to').value = {json.dumps(end)}; "
                        "document.getElementById('window-button').click(); true")
        await page.wait("document.getElementById('window-result-line').textContent + "
                        "document.getElementById('window-error').textContent !== window.before")
        return await page.eval(
            "({error: document.getElementById('window-error').textContent,"
            " hidden: document.getElementById('window-result').hidden,"
            " line: document.getElementById('window-result-line').textContent,"
            " rows: [...document.querySelectorAll('#window-records tbody tr')].map(r => [...r.cells].map("
            "c => c.textContent))})")

    got = await shown("o-left-window", "3", str(T0 + 3000), "2023-11-14T22:13:27Z")
    assert got["error"] == "" and not got["hidden"], got
    assert [(int(r[0].split("(")[1].rstrip(")")), r[2], r[3], json.loads(r[4])) for r in got["rows"]] == [
        (t, "left", "no", row) for t, row in expected("l", 3, T0 + 3000, T0 + 7000)]
    assert got["line"].startswith(f"2 record(s) in partition {murmur2_partition(key(3), running.partitions)} of "
                                  f"{running.partitions} (murmur2), answered by {running.url}"), got["line"]
    got = await shown("o-outer", "6")
    assert [(r[2], json.loads(r[4])) for r in got["rows"]] == [("left", {"A": "order 6", "ID": 6})], got
    got = await shown("o-left-window", "3", "soon")
    assert got["hidden"] and got["error"].startswith(
        "from='soon': expected milliseconds since the epoch or an ISO-8601 time"), got
