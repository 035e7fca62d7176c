"""The worker's small pure parts: counters, dead-letter records, the app's topics."""
from __future__ import annotations

import json

import pytest

from streamapp.model.dead_letters import SOURCE_OFFSET, DeadLetter, from_record
from streamapp.partitioners.hashes import murmur2
from streamapp.settings import Settings
from streamapp.sql.topology import topology
from streamapp.worker.app import faust_config
from streamapp.worker.counters import Counters, summary_line


def test_counters_snapshot_per_partition_and_totals() -> None:
    c = Counters()
    for partition, matched in ((0, True), (0, False), (3, False), (3, False)):
        c.record_join("direct", partition, matched)
    c.record_join("repartitioned", 1, True)
    for partition in (0, 0, 3, 3):
        c.record_read("payments", partition)
    for _ in range(7):
        c.record_row("customers", 5, True)
    c.record_dead_letter("payments", 2)
    snap = json.loads(json.dumps(c.snapshot()))
    assert snap["missed"]["direct"] == {"0": 1, "3": 2}
    assert snap["joined"] == {"direct": {"0": 1}, "repartitioned": {"1": 1}}
    assert snap["records"] == {"payments": {"0": 2, "3": 2}}
    assert snap["totals"] == {
        "rows": {"customers": 7}, "deleted": {}, "records": {"payments": 4},
        "joined": {"direct": 1, "repartitioned": 1}, "missed": {"direct": 3}, "dead_lettered": 1,
        "late": {},
    }
    line = summary_line(snap)
    assert "direct joined 1 missed 3 (75.00%)" in line
    assert "repartitioned joined 1 missed 0 (0.00%)" in line
    assert line.startswith("Counters: customers 7 rows · payments 4 read")
    assert "deleted" not in line
    c.record_row("customers", 1, False)
    assert summary_line(c.snapshot()).endswith("dead letters 1 · customers 1 rows deleted")


def test_dead_letter_keeps_bytes_and_reads_back_from_either_header_form() -> None:
    letter = DeadLetter("demo_user_orders", 4, 1234, b"\xffk", b"{oops", "value is not valid JSON", "value")
    headers = letter.headers()
    assert headers[SOURCE_OFFSET] == b"1234"
    assert from_record(b"\xffk", b"{oops", headers) == letter
    assert from_record(b"\xffk", b"{oops", list(headers.items())) == letter
    assert letter.to_dict()["key"] == "\\xffk"
    null = DeadLetter("t", 0, 1, None, None, "key is null", "key")
    assert from_record(None, None, null.headers()) == null


def test_app_owns_every_topic_with_the_configured_count_and_uses_the_partitioner() -> None:
    s = Settings(partitions=9)
    assert topology(s).owned_topics() == {name: 9 for name in (
        "demo_user", "streamapp_demo_user_repartition", "demo_user_orders", "streamapp_DEMO_USER_ORDERS_MERGED",
        "streamapp_DEMO_USER_ORDERS_MERGED_REPARTITION", "streamapp_dead_letters")}
    choose = faust_config(s)["producer_partitioner"]
    key = b"2b4f5c1e9a0d4f3e8c7b6a5d4e3f2a1b"
    assert choose(key, list(range(9)), []) == (murmur2(key) & 0x7FFFFFFF) % 9


def test_a_package_of_agents_that_does_not_import_stops_the_worker_naming_it() -> None:
    from streamapp.worker.app import StreamappApp, install_agents

    app = StreamappApp(Settings(), topology(Settings()))
    with pytest.raises(SystemExit, match=r"module agents_gone failed to import: ModuleNotFoundError\(\"No module named 'agents_gone'"):
        install_agents(app, "agents_gone")


def test_building_an_app_installs_the_agents_and_views_and_serves_the_page_at_the_root() -> None:
    """Nothing is discovered: the factory installs everything on the app it builds, from the settings given."""
    from streamapp.worker.app import create_app

    app = create_app(Settings(orders_topic="orders_x", partitions=3))
    assert set(app.agents) == set()  # users, their repartition and orders all go by batch delivery
    assert set(app.batch_handlers) == {"demo_user", "streamapp_demo_user_repartition", "orders_x"}
    assert [table.partitions for table in app.join_tables.by_name.values()] == [3, 3]


def test_the_changelog_names_the_producer_waits_on_are_fausts() -> None:
    """The demo producer knows the tables' changelogs without an app: the names must be the ones Faust creates."""
    from streamapp.demo.waits import table_changelogs
    from streamapp.worker.app import create_app

    settings = Settings(app_id="changelogs-x")
    app = create_app(settings)
    assert app.join_tables.changelog_topics() == table_changelogs(settings)
