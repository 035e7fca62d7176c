"""`streamapp produce` and its parts: demo records, librdkafka's partitioners on the real broker, the reports.

Expected partitions are computed here from the hash definitions (zlib's CRC-32,
the murmur2 reference), never taken from the code under test.
"""
from __future__ import annotations

import json
import random
import uuid
import zlib

import pytest

from streamapp.cli import main
from streamapp.demo.data import Row, encode, make_stream, make_table
from streamapp.demo.producer import produce_stream, produce_table
from streamapp.demo.report import Columns, join_results, match_partitions
from streamapp.demo.shape import shape
from streamapp.demo.waits import wait_for_rows
from streamapp.kafka.admin import describe, ensure_topics
from streamapp.kafka.reader import Record, read_topic
from streamapp.partitioners.hashes import murmur2, to_positive
from streamapp.settings import Settings
from streamapp.sql.formats import Codec

#: The seed's table (users) and stream (orders), as `streamapp produce` writes them.
SEED = shape(Settings())


def make_users(count: int, rng: random.Random) -> tuple[Row, ...]:
    return make_table(SEED, count, rng)


def key(row: Row) -> bytes:
    """ksqlDB's KAFKA STRING key: the id's UTF-8 bytes (a user and its order share it)."""
    return SEED.table_codec.encode_key(row.key)


def java(k: bytes, n: int) -> int:
    return to_positive(murmur2(k)) % n


def crc(k: bytes, n: int) -> int:
    return zlib.crc32(k) % n


def test_users_have_distinct_32_hex_ids_and_decode_as_the_worker_reads_them() -> None:
    users = make_users(500, random.Random(7))
    assert len({u.key for u in users}) == 500
    for user, (k, value, _) in zip(users, encode(SEED.table_codec, users)):
        assert len(user.key) == 32 and int(user.key, 16) >= 0 and k == user.key.encode()
        assert isinstance(user.value["NAME"], str) and isinstance(user.value["AGE"], int)
        assert SEED.table_codec.decode_value(value) == user.value


def test_one_order_per_user_in_timestamp_order_and_decodable() -> None:
    users = make_users(50, random.Random(1))
    orders = make_stream(SEED, users, random.Random(2), 1_700_000_000_000)
    assert [o.key for o in orders] == [u.key for u in users]
    assert [o.value["TS"] for o in orders] == sorted(o.timestamp for o in orders)
    for order, (_, value, ts) in zip(orders, encode(SEED.stream_codec, orders)):
        assert order.value["QTY"] >= 1 and ts == order.value["TS"]
        assert SEED.stream_codec.decode_value(value) == order.value


def test_match_report_counts_and_lists_every_mismatch() -> None:
    users = {"a": 0, "b": 1, "c": 2, "d": 3}
    orders = {"a": 0, "b": 2, "c": 2}
    report = match_partitions("u", users, "o", orders)
    assert (report.total, report.matched) == (4, 2)
    assert f"{report.matched_pct:.2f}" == "50.00"
    assert [(e.key, e.table_partition, e.stream_partition) for e in report.exceptions] == [("b", 1, 2), ("d", 3, None)]
    assert report.to_dict()["matched_pct"] == 50.0


def test_join_results_mark_misses_and_absent_orders() -> None:
    def rec(user: str, value: object) -> Record:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        return Record("m", 0, 0, user.encode(), raw, 0)

    hit = {"NAME": "Ada", "AGE": 36, "PRODUCT_ID": 1, "QTY": 2, "UNIT_PRICE": 3.5, "CHANNEL": "web", "TS": 9}
    miss = {**hit, "NAME": None, "AGE": None}
    records = [rec("u1", hit), rec("u2", miss), rec("other", hit), rec("u4", b"not json")]
    merged = Codec(SEED.joins[0].sink)
    columns = Columns("USER_ID", ("PRODUCT_ID", "CHANNEL"), ("NAME", "AGE"), ("NAME", "AGE"))
    results = join_results("m", records, {f"u{i}".encode(): f"u{i}" for i in range(1, 5)}, merged, columns)
    assert (results.hits, results.misses, results.absent, results.undecodable) == (1, 1, 2, 1)


@pytest.mark.parametrize("partitioner, expected", [("consistent_random", crc), ("murmur2_random", java), ("consistent", crc)])
def test_users_land_where_librdkafka_puts_them(bootstrap: str, new_topic, partitioner: str, expected) -> None:
    topic = new_topic("users", partitions=6)
    users = make_users(60, random.Random(3))
    delivered = produce_table(bootstrap, topic, encode(SEED.table_codec, users), partitioner, "test")
    read_back = {r.key: r.partition for r in read_topic(bootstrap, topic)}
    assert delivered == read_back == {key(u): expected(key(u), 6) for u in users}


def test_orders_land_where_the_java_client_puts_them_with_ts_as_timestamp(bootstrap: str, new_topic) -> None:
    topic = new_topic("orders", partitions=5)
    orders = make_stream(SEED, make_users(40, random.Random(4)), random.Random(5), 1_700_000_000_000)
    produce_stream(bootstrap, topic, encode(SEED.stream_codec, orders), "test")
    records = {r.key: r for r in read_topic(bootstrap, topic)}
    assert {k: r.partition for k, r in records.items()} == {key(o): java(key(o), 5) for o in orders}
    assert {k: r.timestamp for k, r in records.items()} == {key(o): o.value["TS"] for o in orders}


def test_partitioner_choices_are_librdkafkas_seven() -> None:
    from streamapp.cli.produce import PARTITIONER_CHOICES
    from streamapp.partitioners import LIBRDKAFKA_NAMES

    assert sorted(PARTITIONER_CHOICES) == sorted(LIBRDKAFKA_NAMES) and len(PARTITIONER_CHOICES) == 7


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_report_matches_independently_computed_partitions(bootstrap: str, capsys) -> None:
    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    argv = ["produce", "--bootstrap_server", bootstrap, "--topic", topic, "--partitions", "6", "--messages", "60",
            "--partitioner", "consistent_random", "--seed", "11", "--wait", "1", "--json"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    report = json.loads(out)
    users = make_users(60, random.Random(11))
    mismatched = sorted((u.key, crc(key(u), 6), java(key(u), 6)) for u in users if crc(key(u), 6) != java(key(u), 6))
    direct = report["reports"]["Direct"]
    assert (direct["table_topic"], direct["stream_topic"]) == (topic, f"{topic}_orders")
    assert direct["matched"] == 60 - len(mismatched)
    assert direct["matched_pct"] == round(100 * (60 - len(mismatched)) / 60, 2)
    assert [(e["key"], e["table_partition"], e["stream_partition"]) for e in direct["exceptions"]] == mismatched
    assert report["worker_running"] is False and "No Faust worker is running" in report["notes"][0]
    assert describe(bootstrap, [topic, f"{topic}_orders"]) and report["stream_via"].startswith("confluent-kafka")


def test_cli_people_output_with_murmur2_random_matches_all(bootstrap: str, capsys) -> None:
    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    code, out, _ = run_cli(capsys, "produce", "--bootstrap_server", bootstrap, "--topic", topic, "--messages", "25",
                           "--wait", "1")
    assert code == 0
    assert f"Kafka at {bootstrap}: reachable" in out
    assert f"{topic} vs {topic}_orders (25 keys)" in out
    assert " - Matched partitions: 100.00%" in out and "exceptions" not in out


def test_cli_progress_bar_run_reports_all_messages(bootstrap: str, capsys) -> None:
    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    code, out, _ = run_cli(capsys, "produce", "--bootstrap_server", bootstrap, "--topic", topic, "--messages", "2000",
                           "--partitioner", "fnv1a", "--seed", "3", "--wait", "1")
    assert code == 0
    users = make_users(2000, random.Random(3))
    matched = sum(_fnv(key(u)) % 6 == java(key(u), 6) for u in users)
    assert f" - Matched partitions: {100 * matched / 2000:.2f}%" in out


def _fnv(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (-signed if signed < 0 else signed) & 0xFFFFFFFF


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--messages", "0"], "--messages=0: must be at least 1"),
        (["--ksqldb_endpoint", "localhost:8088"], "ksqldb_endpoint='localhost:8088': expected http://host:port or https://host:port"),
        (["--c3_endpoint", "ftp://x"], "c3_endpoint='ftp://x': expected http://host:port or https://host:port"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(bootstrap: str, capsys, argv: list[str], message: str) -> None:
    code, _, err = run_cli(capsys, "produce", "--bootstrap_server", bootstrap, "--topic", f"bad_{uuid.uuid4().hex[:6]}", *argv)
    assert code == 2
    assert err.strip().splitlines() == [f"streamapp produce: {message}"]


def test_cli_unreachable_kafka_is_named(capsys) -> None:
    from streamapp.kafka.broker import free_port

    address = f"127.0.0.1:{free_port()}"
    code, _, err = run_cli(capsys, "produce", "--bootstrap_server", address)
    assert code == 2
    assert f"bootstrap_server={address!r} is unreachable" in err


def test_cli_existing_topic_with_other_count_is_refused(bootstrap: str, capsys) -> None:
    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, {topic: 3})
    code, _, err = run_cli(capsys, "produce", "--bootstrap_server", bootstrap, "--topic", topic, "--wait", "1")
    assert code == 2
    assert f"{topic} has 3 partitions, expected 6" in err


def test_cli_unreachable_ksqldb_falls_back_to_the_java_compatible_producer(bootstrap: str, capsys) -> None:
    from streamapp.kafka.broker import free_port

    url = f"http://127.0.0.1:{free_port()}"
    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    code, out, _ = run_cli(capsys, "produce", "--bootstrap_server", bootstrap, "--topic", topic, "--messages", "5",
                           "--ksqldb_endpoint", url, "--c3_endpoint", url, "--wait", "1")
    assert code == 0
    assert f"ksqlDB at {url}: UNREACHABLE" in out and f"Control Center at {url}: UNREACHABLE" in out
    assert "records via confluent-kafka partitioner=murmur2 (Java-compatible)" in " ".join(out.split())
    assert " - Matched partitions: 100.00%" in out


def test_cli_debug_logs_every_delivery_with_its_partition(bootstrap: str, capsys, caplog) -> None:
    import logging

    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.DEBUG, logger="streamapp.demo.producer"):
        code, _, _ = run_cli(capsys, "produce", "--bootstrap_server", bootstrap, "--topic", topic, "--messages", "3",
                             "--seed", "4", "--wait", "1", "--debug")
    assert code == 0
    users = make_users(3, random.Random(4))
    lines = [r.getMessage() for r in caplog.records if "delivered to topic" in r.getMessage()]
    for i, user in enumerate(users):
        p = java(key(user), 6)
        offset = sum(java(key(u), 6) == p for u in users[:i])
        assert f"Message key {key(user)!r} delivered to topic '{topic}', partition #{p}, offset #{offset}" in lines
        assert f"Message key {key(user)!r} delivered to topic '{topic}_orders', partition #{p}, offset #{offset}" in lines


def test_people_tables_show_the_first_rows_and_say_how_many_more() -> None:
    from rich.console import Console

    from streamapp.demo.report import TABLE_ROWS, render_match

    users = {f"u{i:03d}": 0 for i in range(TABLE_ROWS + 7)}
    console = Console(record=True, width=200)
    render_match(console, "Direct", match_partitions("u", users, "o", {}))
    text = console.export_text()
    assert " - Matched partitions: 0.00%" in text and f"{TABLE_ROWS + 7} exceptions" in text
    assert f"u{TABLE_ROWS - 1:03d}" in text and f"u{TABLE_ROWS:03d}" not in text
    assert " ... 7 more rows (--json lists them all)" in text


def test_a_wait_for_users_an_engine_did_not_write_says_how_many_are_missing(broker_settings, new_topic) -> None:
    """An engine that did not load a run's users in time is named with the count it lacks, not left to guess."""
    topic = new_topic("users-wait")
    users = make_users(5, random.Random(3))
    produce_table(broker_settings.kafka, topic, encode(SEED.table_codec, users[:3]), "murmur2_random", "test")
    ids = [key(u) for u in users]
    wait = wait_for_rows("Faust", broker_settings, topic, ids, 1.0)
    assert (wait.found, wait.expected, wait.complete) == (3, 5, False)
    assert wait.seconds >= 1.0
    assert wait.line().startswith(f"Faust: 2 of 5 keys not in {topic} after ")
    done = wait_for_rows("Faust", broker_settings, topic, ids[:3], 30.0)
    assert (done.found, done.expected, done.complete) == (3, 3, True)
