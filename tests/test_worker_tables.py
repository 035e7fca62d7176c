"""The batch path's table writes (:class:`streamapp.worker.tables.RowWrites`) store what Faust's ``table[key] = row`` would.

Real RocksDB databases of a real app's tables; no broker needed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from faust.serializers import codecs
from faust.types import TP

from streamapp.settings import Settings
from streamapp.worker.app import create_app
from streamapp.sql import plan as p
from streamapp.worker import faust_internals
from streamapp.worker.tables import (WINDOW_BLOCK_CACHE_SIZE, WRITE_BUFFER_SIZE, RowLookup, RowWrites, dumps_compact,
                                    dumps_spaced)

ROWS = [{"name": "Ann", "age": 30}, {"name": None, "age": None}, {"name": "é \u2028 \"q\" \\ \x00", "age": -2**63},
        {"name": "😀", "age": 2**63 - 1}, {"age": 1, "name": ""}]


@pytest.mark.parametrize("row", ROWS)
def test_a_row_is_stored_as_fausts_json_codec_writes_it(row: dict[str, object], tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["demo_user"]
    assert RowWrites(table).value(row) == codecs.dumps(table.value_serializer, row)


@pytest.mark.parametrize("value", [*ROWS, {"x": float("nan"), "y": [1.5, float("-inf"), True, {"k": None}]}])
def test_the_encoders_built_once_write_what_json_dumps_writes(value: dict[str, object]) -> None:
    assert dumps_spaced(value) == json.dumps(value).encode()
    assert dumps_compact(value) == json.dumps(value, separators=(",", ":")).encode()


def test_both_tables_databases_flush_small_memtables(tmp_path: Path) -> None:
    """Each table's RocksDB database takes the worker's memtable size, not Faust's 64 MiB (RSS with 1 M users)."""
    from faust.stores.rocksdb import DEFAULT_WRITE_BUFFER_SIZE

    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    for table in (app.join_tables.by_name["demo_user"], app.join_tables.by_name["demo_user_repartition"]):
        assert table.data.rocksdb_options.write_buffer_size == WRITE_BUFFER_SIZE < DEFAULT_WRITE_BUFFER_SIZE
        assert table.data.rocksdb_options.as_options() is not None  # Faust builds the database's options from it


#: A windowed stream-stream join (its window and outer stores are Faust tables too).
WINDOWED_JOIN = """
CREATE STREAM orders (id BIGINT KEY, item STRING) WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='JSON');
CREATE STREAM shipments (id BIGINT KEY, carrier STRING) WITH (KAFKA_TOPIC='shipments', VALUE_FORMAT='JSON');
CREATE STREAM order_shipments AS SELECT o.id, item, carrier FROM orders o
  LEFT JOIN shipments s WITHIN 1 HOUR GRACE PERIOD 30 MINUTES ON o.id = s.id EMIT CHANGES;
"""


def test_window_stores_databases_open_with_a_bounded_block_cache(tmp_path: Path) -> None:
    """Faust's 2 GiB cache per database kept the blocks of compacted-away SST files: a window store's memory grew with
    the stream, not the retention (issue 37).  Each window and outer store's database opens with the cap, and the
    memtable size of a table's."""
    from faust.stores.rocksdb import DEFAULT_BLOCK_CACHE_SIZE

    statements = tmp_path / "joins.sql"
    statements.write_text(WINDOWED_JOIN, encoding="utf-8")
    app = create_app(Settings(data_dir=str(tmp_path / "data"), statements=str(statements)))
    assert len(app.join_tables.windows) == 3, "both sides' window stores and the LEFT join's outer store"
    for table in app.join_tables.windows.values():
        db = faust_internals.partition_db(table, 0)
        capacity = db.property_int_value("rocksdb.block-cache-capacity")
        assert capacity == WINDOW_BLOCK_CACHE_SIZE < DEFAULT_BLOCK_CACHE_SIZE
        assert table.data.rocksdb_options.write_buffer_size == WRITE_BUFFER_SIZE


def test_rows_go_to_their_partitions_database_in_one_write_and_deletes_remove_them(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["demo_user"]
    rows = RowLookup(table, app.topology.table("demo_user").source, with_key=False)
    writes = RowWrites(table)
    writes.put(1, b"u1", writes.value({"NAME": "A", "AGE": 1}))
    writes.put(1, b"u2", writes.value({"NAME": "B", "AGE": 2}))
    writes.put(1, b"u1", writes.value({"NAME": "A2", "AGE": 3}))  # later in the fetch: wins
    writes.put(2, b"u3", writes.value({"NAME": "C", "AGE": 4}))
    assert rows.get(1, b"u1") is None  # nothing before write()
    writes.write()
    assert rows.get(1, b"u1") == ({"NAME": "A2", "AGE": 3}, 0)
    assert rows.get(2, b"u3") == ({"NAME": "C", "AGE": 4}, 0)
    assert rows.get(2, b"u1") is None  # never another partition's row
    writes.put(1, b"u2", None)
    writes.write()
    assert rows.get(1, b"u2") is None
    assert rows.get(1, b"u1") == ({"NAME": "A2", "AGE": 3}, 0)


def test_a_row_an_older_streamapp_stored_reads_by_ksqldbs_case_insensitive_rule(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["demo_user"]
    writes = RowWrites(table)
    writes.put(0, b"u1", b'{"name": "Old", "age": 7}')
    writes.write()
    assert RowLookup(table, app.topology.table("demo_user").source, False).get(0, b"u1") == ({"NAME": "Old", "AGE": 7}, 0)


def test_decimal_rows_stay_exact_and_the_key_column_is_read_when_a_join_selects_it(tmp_path: Path) -> None:
    from decimal import Decimal

    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["demo_user"]
    source = p.Source("C", p.TABLE, "c", (p.Column("ID", "BIGINT"),), (p.Column("AMOUNT", "DECIMAL(20, 2)"),),
                      "KAFKA", "JSON")
    writes = RowWrites(table)
    key = (12).to_bytes(8, "big")
    writes.put(0, key, writes.value({"AMOUNT": Decimal("123456789012345678.91")}))
    writes.write()
    assert RowLookup(table, source, with_key=True).get(0, key) == (
        {"AMOUNT": Decimal("123456789012345678.91"), "ID": 12}, 0)


def test_a_hot_rows_decoding_is_reused_but_never_across_keys_that_the_row_carries(tmp_path: Path) -> None:
    """Rows decoded lately are reused by their stored bytes; two keys with the same stored value each get their own
    key column, and an updated row is read anew."""
    from streamapp.worker import tables

    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["demo_user"]
    source = p.Source("C", p.TABLE, "c", (p.Column("ID", "BIGINT"),), (p.Column("TIER", "STRING"),), "KAFKA", "JSON")
    writes = RowWrites(table)
    one, two = (1).to_bytes(8, "big"), (2).to_bytes(8, "big")
    for key in (one, two):
        writes.put(0, key, writes.value({"TIER": "gold"}))
    writes.write()
    with_key, plain = RowLookup(table, source, with_key=True), RowLookup(table, source, with_key=False)
    assert [with_key.get(0, k) for k in (one, two, one)] == [({"TIER": "gold", "ID": 1}, 0),
                                                            ({"TIER": "gold", "ID": 2}, 0),
                                                            ({"TIER": "gold", "ID": 1}, 0)]
    assert plain.get(0, one) is plain.get(0, two)  # the same bytes: decoded once
    writes.put(0, one, writes.value({"TIER": "blue"}))
    writes.write()
    assert with_key.get(0, one) == ({"TIER": "blue", "ID": 1}, 0) and plain.get(0, two) == ({"TIER": "gold"}, 0)
    for n in range(tables.DECODED_ROWS + 1):  # a full cache starts over: its size stays bounded
        writes.put(1, n.to_bytes(8, "big"), writes.value({"TIER": str(n)}))
    writes.write()
    assert all(plain.get(1, n.to_bytes(8, "big")) == ({"TIER": str(n)}, 0) for n in range(tables.DECODED_ROWS + 1))
    assert len(plain._decoded) <= tables.DECODED_ROWS


def test_a_stored_changelog_batch_moves_the_persisted_offset_recovery_starts_from(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["demo_user_repartition"]
    writes = RowWrites(table)
    writes.sent(4, 41)
    assert table.data.persisted_offset(TP(writes.changelog, 4)) == 41
    assert table.data.persisted_offset(TP(writes.changelog, 3)) is None
