"""The reconciliation of a windowed stream-stream join and a table-table join, each declared only in SQL (issue 37).

Both engines' outputs are written here, row by row, with the known answer of every row:

- orders x shipments, a LEFT JOIN WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS: a row is the pair of records it joins
  (both sides' columns and the later time), an unshipped order's row (CARRIER NULL) its own.  A shipment placed
  in another partition than its order (``copartition_violation``), an order without one (``unknown_user``), a
  shipment later than the window and its grace behind its partition's stream time, joined by the engine that
  read its order first and dropped by the other (``late_record``, on both rows that disagree), a null-key order
  one engine lacks (``null_key``), a duplicate, a moved record, a wrong computed column, a missing row;
- orders x parcels joined on a parcel's ORDER_ID (a value column: the parcels re-keyed by it): a parcel is judged
  where the worker's partitioner puts its order id, not where its own key put it;
- customers x accounts, a LEFT JOIN on the primary key (ksqlDB's output exported as its columns): each key's last
  changelog record of the window is its final row (a tombstone, or every column NULL in an export: none): an
  account in another partition (``copartition_violation``), none at all (``unknown_user``), rows only one engine
  enriched, holds or deleted.

The three joins are one statements file, reconciled by one run of the job (``--detail all``); pure checks of the
roles (identity, compared columns, the retention) need no Spark.
"""
from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import reconcile_scenario as sc
from spark_batch.reconcile import main
from spark_batch.roles import Roles
from spark_batch.two_sided import retention
from streamapp.settings import Settings
from streamapp.sql.formats import Codec

N = 4
T = sc.DAY_START_MS + sc.HOUR_MS
STREAMS = """
CREATE STREAM orders (id BIGINT KEY, item STRING, qty BIGINT) WITH (KAFKA_TOPIC='orders_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM shipments (id BIGINT KEY, carrier STRING) WITH (KAFKA_TOPIC='shipments_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM order_shipments WITH (KAFKA_TOPIC='order_shipments_{tag}') AS
  SELECT o.id, item, carrier, qty * 2 AS twice FROM orders o LEFT JOIN shipments s
  WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS ON o.id = s.id EMIT CHANGES;
"""
TABLES = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, name STRING) WITH (KAFKA_TOPIC='customers_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT) WITH (KAFKA_TOPIC='accounts_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE customer_accounts WITH (KAFKA_TOPIC='customer_accounts_{tag}') AS
  SELECT c.id, name, balance FROM customers c LEFT JOIN accounts a ON c.id = a.id EMIT CHANGES;
"""
#: (key, value, timestamp, partition) as an export holds a record; a None value is a tombstone.
Row = tuple[bytes | None, Any, int, int]


def key(i: int) -> bytes:
    return struct.pack(">q", i)


def home(i: int) -> int:
    return sc.murmur2_partition(key(i), N)


def elsewhere(i: int) -> int:
    return (home(i) + 1) % N


def roles(tmp_path: Path, text: str, tag: str = "x") -> Roles:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.sql"
    path.write_text(text.format(tag=tag), encoding="utf-8")
    return Roles.of(Settings.from_env().replace(statements=str(path)))


def test_a_stream_stream_row_is_the_pair_of_records_and_a_table_table_row_its_key(tmp_path: Path) -> None:
    stream = roles(tmp_path, STREAMS)
    assert stream.pairs == () and [p.name for p in stream.two_sided] == ["order_shipments"]
    pair = stream.two_sided[0]
    assert [f.output for f in pair.identity] == ["ITEM", "CARRIER", "O_ID", "ROWTIME"]
    assert [f.output for f in pair.compared] == ["TWICE"] and [f.output for f in pair.row_keys] == ["O_ID"]
    assert retention(pair) == 60_000 + 60_000 + 30_000  # the window both ways and its grace
    assert stream.timed == ("orders", "shipments", "faust_order_shipments", "ksqldb_order_shipments")
    table = roles(tmp_path, TABLES)
    pair = table.two_sided[0]
    assert [f.output for f in pair.identity] == ["C_ID"] and [f.output for f in pair.compared] == ["NAME", "BALANCE"]
    assert "customers" not in table.timed and "faust_customer_accounts" in table.timed  # a table is read whole


def parquet(directory: Path, topic: str, rows: list[Row]) -> None:
    """A Kafka-shaped export: the rows in the order given are each partition's offsets in order."""
    pq.write_table(pa.table({
        "key": pa.array([k for k, *_ in rows], pa.binary()),
        "value": pa.array([None if v is None else json.dumps(v).encode() for _, v, _, _ in rows], pa.binary()),
        "partition": pa.array([r[3] for r in rows], pa.int32()),
        "offset": pa.array(range(len(rows)), pa.int64()),
        "timestamp": pa.array([r[2] for r in rows], pa.int64()),
    }), directory / f"{topic}.parquet")


def stream_case(sink: Codec) -> tuple[dict[str, list[Row]], dict[tuple[Any, ...], tuple[str, str]]]:
    """Inputs, both outputs and the expected (status, cause) by (order id, carrier, row time)."""
    late_key = 4
    mover = next(i for i in range(100, 10_000) if home(i) == home(late_key))  # moves the shipments' stream time
    orders = [(i, {"item": f"i{i}", "qty": i}, T + 1000 * i) for i in (1, 2, 3, late_key, 5, 6, 7, 8)]
    # the mover, then the late shipment, last: no other shipment comes after the mover in its partition
    shipments = [(1, "c1", T + 1000 + 500), (2, "c2", T + 2000 + 500), (5, "c5", T + 5500), (6, "c6", T + 6500),
                 (7, "c7", T + 7500), (8, "c8", T + 8500), (mover, "far", T + 600_000), (late_key, "late", T + 4100)]
    inputs: dict[str, list[Row]] = {
        "orders": [(key(i), v, t, home(i)) for i, v, t in orders] + [(None, {"item": "anonymous", "qty": 0}, T + 9000, 0)],
        "shipments": [(key(i), {"carrier": c}, t, elsewhere(i) if i == 2 else home(i)) for i, c, t in shipments],
    }
    by_order = {i: (v, t) for i, v, t in orders}
    by_shipment = {i: (c, t) for i, c, t in shipments}

    def out(i: int | None, carrier: str | None, twice: int | None = None) -> Row:
        value, at = by_order[i] if i is not None else ({"item": "anonymous", "qty": 0}, T + 9000)
        if carrier is not None and i is not None:
            at = max(at, by_shipment[i][1])
        row = {"ITEM": value["item"], "CARRIER": carrier, "TWICE": value["qty"] * 2 if twice is None else twice}
        return (None if i is None else sink.encode_key(i), json.loads(sink.encode_value(row)), at,
                0 if i is None else home(i))

    both = [out(1, "c1"), out(2, None), out(3, None), out(5, "c5"), out(6, "c6"), out(7, "c7")]
    moved = out(6, "c6")
    faust = [*both[:4], out(5, "c5"), (moved[0], moved[1], moved[2], elsewhere(6)), out(7, "c7", twice=0),
             out(late_key, "late")]
    ksqldb = [*both, out(late_key, None), out(8, "c8"), out(None, None)]
    expected = {
        (1, "c1"): ("match", "other"), (2, None): ("both_unenriched", "copartition_violation"),
        (3, None): ("both_unenriched", "unknown_user"), (5, "c5"): ("duplicate", "other"),
        (6, "c6"): ("partition_mismatch", "other"), (7, "c7"): ("value_mismatch", "other"),
        (late_key, "late"): ("missing_in_ksqldb", "late_record"), (late_key, None): ("missing_in_faust", "late_record"),
        (8, "c8"): ("missing_in_faust", "other"), (None, None): ("missing_in_faust", "null_key"),
    }
    return {**inputs, "faust": faust, "ksqldb": ksqldb}, expected


def table_case(sink: Codec) -> tuple[dict[str, list[Row]], dict[int, tuple[str, str]]]:
    """customers x accounts: inputs, both changelogs (earlier records first) and the expected (status, cause) by key."""
    customers = {i: f"c{i}" for i in range(1, 9)}
    accounts = {1: 10, 2: 20, 4: 40, 5: 50, 6: 60, 7: 70}
    inputs: dict[str, list[Row]] = {
        "customers": [(key(i), {"name": n}, T - sc.HOUR_MS, home(i)) for i, n in customers.items()],
        "accounts": [(key(i), {"balance": b}, T - sc.HOUR_MS, elsewhere(i) if i == 2 else home(i))
                     for i, b in accounts.items()],
    }

    def out(i: int, balance: int | None, at: int = T, name: str | None = None) -> Row:
        value = {"NAME": name or customers[i], "BALANCE": balance}
        return sink.encode_key(i), json.loads(sink.encode_value(value)), at, home(i)

    first = [out(i, None, T - 1) for i in customers]  # each customer alone first, then its account joined
    faust = [*first, out(1, 10), out(2, None), out(3, None), out(4, 40), out(5, None), out(6, 61), out(7, 70)]
    ksqldb = [*first, out(1, 10), out(2, None), out(3, None), out(4, None), out(5, 50), out(6, 60),
              (sink.encode_key(7), None, T, home(7)), out(8, None, name="renamed")]
    gone = sink.encode_key(8)
    faust.append((gone, None, T + 1, home(8)))  # the worker deleted customer 8: its final row is none
    expected = {1: ("match", "other"), 2: ("both_unenriched", "copartition_violation"),
                3: ("both_unenriched", "unknown_user"), 4: ("enriched_only_in_faust", "other"),
                5: ("enriched_only_in_ksqldb", "other"), 6: ("value_mismatch", "other"),
                7: ("missing_in_ksqldb", "other"), 8: ("missing_in_faust", "other")}
    return {**inputs, "faust": faust, "ksqldb": ksqldb}, expected


#: Parcels keyed by their own id, joined with the orders on ORDER_ID (the parcels re-keyed by it).
PARCELS = """
CREATE STREAM parcels (sid STRING KEY, order_id BIGINT, carrier STRING)
  WITH (KAFKA_TOPIC='parcels_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM order_parcels WITH (KAFKA_TOPIC='order_parcels_{tag}') AS
  SELECT o.id, item, carrier FROM orders o LEFT JOIN parcels s WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS
  ON o.id = s.order_id EMIT CHANGES;
"""


def rekeyed_case(sink: Codec) -> tuple[dict[str, list[Row]], dict[Any, tuple[str, str]]]:
    """Orders 1-3 (the windowed case's); parcels in partitions their STRING key put them (not their order's), of which
    3's both engines failed to join (contrived: its re-key puts it with its order) and 2's an hour later (outside the
    window)."""
    orders = {i: T + 1000 * i for i in (1, 2, 3)}
    parcels = [(1, T + 1500), (2, T + sc.HOUR_MS), (3, T + 3500)]
    inputs: dict[str, list[Row]] = {
        "parcels": [(f"p{i}".encode(), {"order_id": i, "carrier": f"c{i}"}, t, elsewhere(i)) for i, t in parcels],
    }

    def out(i: int, carrier: str | None, at: int) -> Row:
        row = {"ITEM": f"i{i}", "CARRIER": carrier}
        return sink.encode_key(i), json.loads(sink.encode_value(row)), at, home(i)

    rows = [out(1, "c1", T + 1500), out(2, None, orders[2]), out(3, None, orders[3])]
    expected = {(1, "c1"): ("match", "other"), (2, None): ("both_unenriched", "unknown_user"),
                (3, None): ("both_unenriched", "other")}
    return {**inputs, "faust": rows, "ksqldb": rows}, expected


def decoded(directory: Path, topic: str, rows: list[Row], key_column: str) -> None:
    """An export of an output's columns (lower-cased), its key the BIGINT it encodes; a tombstone's columns null."""
    pq.write_table(pa.Table.from_pylist([
        {key_column: struct.unpack(">q", k)[0] if k else None, **{c.lower(): x for c, x in (v or {}).items()},
         "partition": partition, "offset": offset, "timestamp": at}
        for offset, (k, v, at, partition) in enumerate(rows)]), directory / f"{topic}.parquet")


#: Each pair's sink and its case; the job reconciles the three at once (one run of the job for all).
CASES = {"order_shipments": ("ORDER_SHIPMENTS", stream_case), "order_parcels": ("ORDER_PARCELS", rekeyed_case),
         "customer_accounts": ("CUSTOMER_ACCOUNTS", table_case)}
#: ksqlDB's table-table output is exported as its columns, keyed by C_ID.
DECODED = {"ksqldb_customer_accounts": "c_id"}


@dataclass
class Reconciled:
    day: Path
    code: int
    summary: dict[str, Any]
    #: Pair -> its detail rows (``--detail all``: the matches too).
    detail: dict[str, list[Any]]
    #: Pair -> the known answer of every row.
    expected: dict[str, dict[Any, tuple[str, str]]]


@pytest.fixture(scope="module")
def reconciled(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Reconciled:
    """The three joins' exports, reconciled by one run of the job (``--detail all``, a zero threshold)."""
    tmp_path = tmp_path_factory.mktemp("windowed")
    tag = uuid.uuid4().hex[:8]
    path = tmp_path / f"joins_{tag}.sql"
    path.write_text((STREAMS + PARCELS + TABLES).format(tag=tag), encoding="utf-8")
    job = Roles.of(Settings.from_env().replace(statements=str(path)))
    topics = job.topics()
    directory = tmp_path / "in"
    directory.mkdir()
    expected = {}
    for pair, (sink, case) in CASES.items():
        records, expected[pair] = case(Codec(job.topology.declared.source(sink)))
        for role, rows in records.items():
            role = role if role in topics else f"{role}_{pair}"
            if role in DECODED:
                decoded(directory, topics[role], rows, DECODED[role])
            else:
                parquet(directory, topics[role], rows)
    output = tmp_path / "out"
    code = main(["--statements", str(path), "--date", sc.DAY, "--source", "files", "--input", str(directory),
                 "--output", str(output), "--partitions", str(N), "--partitioner", "murmur2", "--detail", "all",
                 "--max-mismatch-rate", "0"])
    day = output / f"dt={sc.DAY}"
    detail: dict[str, list[Any]] = {}
    for row in spark.read.parquet(str(day / "detail")).collect():
        detail.setdefault(row["pair"], []).append(row)
    return Reconciled(day, code, json.loads((day / "summary.json").read_text()), detail, expected)


def counted(expected: dict[Any, tuple[str, str]], which: int) -> dict[str, int]:
    found: dict[str, int] = {}
    for verdict in expected.values():
        if which == 0 or verdict[0] != "match":
            found[verdict[which]] = found.get(verdict[which], 0) + 1
    return found


def verdicts(rows: list[Any], *identity: str) -> dict[Any, tuple[str, str]]:
    """Each detail row's (status, cause) by its identity (a match has no cause: ``other``)."""
    return {tuple(r[c] for c in identity) if len(identity) > 1 else r[identity[0]]: (r["status"], r["cause"] or "other")
            for r in rows}


def test_a_windowed_join_is_reconciled_row_by_row_with_its_causes(reconciled: Reconciled) -> None:
    pair, expected, summary = "order_shipments", reconciled.expected["order_shipments"], reconciled.summary
    assert reconciled.code == 1  # mismatches above a zero threshold
    assert {s: n for s, n in summary["statuses"][pair].items() if n} == counted(expected, 0)
    assert {c: n for c, n in summary["causes"][pair].items() if n} == counted(expected, 1)
    rows = reconciled.detail[pair]
    assert verdicts(rows, "o_id", "carrier") == expected
    by_key = {(r["o_id"], r["carrier"]): r for r in rows}
    violation = by_key[(2, None)]
    assert (violation["order_partition"], violation["user_partition"]) == (home(2), elsewhere(2))
    assert "SHIPMENTS record(s) of key '2' in partition(s)" in violation["cause_detail"]
    assert by_key[(7, "c7")]["mismatched_columns"] == ["TWICE"]
    assert by_key[(4, "late")]["rowtime"] == T + 4100 and "150000 ms" in by_key[(4, "late")]["cause_detail"]
    assert summary["pairs"][pair]["identity"] == ["ITEM", "CARRIER", "O_ID", "ROWTIME"]
    assert summary["pairs"][pair]["kind"] == "stream_stream_join"
    assert summary["input_records"]["orders"]["rows"] == 9 and summary["input_records"]["orders"]["null_key"] == 1
    assert summary["output_records"][f"faust_{pair}"] == {"rows": 8, "undecodable": 0}
    assert (pair, home(2), elsewhere(2)) in {(c["pair"], c["order_partition"], c["user_partition"])
                                             for c in summary["by_partition_pair"]}
    html = (reconciled.day / "report.html").read_text()
    assert "late_record" in html and "ORDER_SHIPMENTS" in html


def test_a_table_table_join_compares_each_keys_final_row(reconciled: Reconciled) -> None:
    pair, expected, summary = "customer_accounts", reconciled.expected["customer_accounts"], reconciled.summary
    assert {s: n for s, n in summary["statuses"][pair].items() if n} == counted(expected, 0)
    assert {c: n for c, n in summary["causes"][pair].items() if n} == counted(expected, 1)
    rows = reconciled.detail[pair]
    assert verdicts(rows, "c_id") == expected
    violation = next(r for r in rows if r["c_id"] == 2)
    assert (violation["order_partition"], violation["user_partition"]) == (home(2), elsewhere(2))
    assert next(r for r in rows if r["c_id"] == 6)["mismatched_columns"] == ["BALANCE"]
    assert summary["input_records"]["customers"]["rows"] == 8 and pair in summary["threshold"]["breached_pairs"]


def test_a_rekeyed_side_is_judged_where_the_worker_places_its_join_key(reconciled: Reconciled) -> None:
    pair, expected, summary = "order_parcels", reconciled.expected["order_parcels"], reconciled.summary
    assert {c: n for c, n in summary["causes"][pair].items() if n} == counted(expected, 1)
    assert verdicts(reconciled.detail[pair], "id", "carrier") == expected
    together = next(r for r in reconciled.detail[pair] if r["id"] == 3)
    # its parcel sits in partition elsewhere(3); re-keyed by order id 3, it is at home(3)
    assert (together["order_partition"], together["user_partition"]) == (home(3), home(3))
    assert "both in partition" in together["cause_detail"]
