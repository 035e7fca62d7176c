"""``GET /metrics`` of the joins that write none, one or more records per record read, and the windowed joins' stores
(pure: the exposition parsed back; the stores are real RocksDB fed by the agent's join).

``streamapp_records_written_total`` counts table-table and stream-stream joins' outputs where the agents queue them
(the counters' ``written``), and ``streamapp_window_store_bytes`` is each store's bytes per partition in memory and on
disk, RocksDB's own accounting.  The same on a worker on the broker: tests/test_web_windows.py.
"""
from __future__ import annotations

from pathlib import Path

from streamapp.settings import Settings
from streamapp.worker.counters import Counters
from streamapp.worker.faust_internals import partition_db
from streamapp.worker.metrics import StreamJoinFacts, TableJoinFacts, read, store_bytes

from test_metrics import DIRECT, full_scrape, parsed, samples
from test_web_windows import STREAMS, fed

ACCOUNTS = TableJoinFacts("customer_accounts", "out_accounts")
SHIPPED = StreamJoinFacts("order_shipments", "out_shipped",
                          ("order_shipments-left-window", "order_shipments-right-window", "order_shipments-outer"))


def test_the_records_written_count_table_table_and_stream_stream_joins_outputs() -> None:
    """Their counts are the agents' (not derived from hits and misses, as a stream-table join's are); a join that
    wrote nothing yet is a zero, so a rate over it exists."""
    c = Counters()
    c.record_join("out_merged", 0, True)
    c.record_join("out_accounts", 0, True)  # an update that looked up the other side: not itself a record written
    c.record_written("out_accounts", 0)
    c.record_written("out_accounts", 3, 2)
    for partition in (1, 1, 2):
        c.record_written("out_shipped", partition)
    metrics = parsed(full_scrape(joins=[DIRECT], table_joins=[ACCOUNTS], stream_joins=[SHIPPED],
                                 counters=c.snapshot()))
    assert samples(metrics["streamapp_records_written"], "_total") == {
        (("join", "orders_merged"), ("output", "out_merged")): 1,
        (("join", "customer_accounts"), ("output", "out_accounts")): 3,
        (("join", "order_shipments"), ("output", "out_shipped")): 3}
    idle = parsed(full_scrape(joins=[], stream_joins=[SHIPPED], counters=Counters().snapshot()))
    assert samples(idle["streamapp_records_written"], "_total") == {
        (("join", "order_shipments"), ("output", "out_shipped")): 0}


def test_a_stream_stream_joins_re_keys_are_counted_into_their_repartition_topics(tmp_path: Path) -> None:
    """A side the join re-keys is written by the stream agent into the join's repartition topic: those records are
    the join's too, as a stream-table join's re-key is."""
    from streamapp.worker.app import create_app

    from test_web_windows import REKEYED

    path = tmp_path / "joins.sql"
    path.write_text(REKEYED, encoding="utf-8")
    [facts] = read(create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))).stream_joins
    assert facts.repartitions == ("streamapp-O-Join-right-repartition",)
    c = Counters()
    for partition in (0, 2, 2):
        c.record_written("streamapp-O-Join-right-repartition", partition)
    metrics = parsed(full_scrape(joins=[], stream_joins=[facts], counters=c.snapshot()))
    assert samples(metrics["streamapp_records_written"], "_total") == {
        (("join", "o"), ("output", facts.output)): 0,
        (("join", "o"), ("output", "streamapp-O-Join-right-repartition")): 3}


def test_the_window_store_gauge_labels_each_store_by_its_join_partition_and_part() -> None:
    metrics = parsed(full_scrape(stream_joins=[SHIPPED], window_bytes={
        ("order_shipments-left-window", 0, "memtables"): 4096, ("order_shipments-left-window", 0, "sst_files"): 0,
        ("order_shipments-outer", 1, "sst_files"): 900}))
    assert samples(metrics["streamapp_window_store_bytes"]) == {
        (("join", "order_shipments"), ("part", "memtables"), ("partition", "0"),
         ("store", "order_shipments-left-window")): 4096,
        (("join", "order_shipments"), ("part", "sst_files"), ("partition", "0"),
         ("store", "order_shipments-left-window")): 0,
        (("join", "order_shipments"), ("part", "sst_files"), ("partition", "1"),
         ("store", "order_shipments-outer")): 900}
    assert samples(parsed(full_scrape())["streamapp_window_store_bytes"]) == {}


def test_a_stores_bytes_are_its_memtables_until_a_flush_then_its_sst_files(tmp_path: Path) -> None:
    """RocksDB's own accounting of each store the join wrote: its records' bytes are in memory (at least their keys'
    and values' lengths), none on disk; a flush moves them to an SST file."""
    _, run, _ = fed(tmp_path)
    for table in run.tables:
        db = partition_db(table, 0)
        written = sum(len(k) + len(v) for k, v in db.items())
        before = store_bytes(db)
        assert before["memtables"] >= written > 0 and before["sst_files"] == 0, (table.name, before, written)
        db.flush()
        after = store_bytes(db)
        assert after["memtables"] <= before["memtables"] and after["sst_files"] > 0, (table.name, after)


def test_a_worker_of_a_stream_stream_plan_labels_its_join_and_stores(tmp_path: Path) -> None:
    from streamapp.worker.app import create_app

    path = tmp_path / "joins.sql"
    path.write_text(STREAMS.format(tag="m"), encoding="utf-8")
    scrape = read(create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data"))))
    assert list(scrape.stream_joins) == [StreamJoinFacts("o", "streamapp_o_m", ("o-left-window", "o-right-window",
                                                                                 "o-outer"))]
    assert list(scrape.joins) == [] and list(scrape.table_joins) == [] and scrape.window_bytes == {}
