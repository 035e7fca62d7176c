"""`streamapp demo` end to end: real Apache Kafka broker, real Faust worker, real Kafka Streams program
(ksqlDB's joins, not ksqlDB), both runs' reports and the reconciliation of the two engines checked;
and the same demo on a team's own statements (customers x payments) on the session broker.

Each run's table rows are regenerated from its seed and their partitions computed
here from zlib's CRC-32 (librdkafka's consistent_random) and the murmur2
reference (the Java client / ksqlDB), independently of the code under test.
The record generator's own tests (pure, no broker) are at the end.
"""
from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
import uuid
import zlib
from decimal import Decimal
from pathlib import Path

import pytest

from streamapp.demo.data import Row, encode, generate, make_table
from streamapp.demo.shape import ShapeError, shape
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.partitioners.hashes import murmur2, to_positive
from streamapp.settings import Settings

from test_declared_join_broker import REKEYED, STATEMENTS as CUSTOMERS_PAYMENTS

pytestmark = pytest.mark.long

PARTITIONS = 6
MESSAGES = 30
SEED = 20261122
#: Where the demo's output for one run ends ("Run 1 took 4.2s").
RUN_ENDS = "\nRun "


def java(k: bytes) -> int:
    return to_positive(murmur2(k)) % PARTITIONS


def expected_users_partition(partitioner: str, k: bytes) -> int:
    return zlib.crc32(k) % PARTITIONS if partitioner == "consistent_random" else java(k)


SEED_SHAPE = shape(Settings())


def users(seed: int) -> tuple[Row, ...]:
    """A run's table rows (the seed's users), as the demo generates them from its seed."""
    return make_table(SEED_SHAPE, MESSAGES, random.Random(seed))


def key(row: Row) -> bytes:
    return SEED_SHAPE.table_codec.encode_key(row.key)


def run_demo(*extra: str, timeout: float, env: dict[str, str] | None = None) -> tuple[dict, str]:
    env = {**os.environ, "STREAMAPP_PARTITIONS": str(PARTITIONS), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-m", "streamapp", "demo", "--json", "--seed", str(SEED), "--messages", str(MESSAGES), *extra],
        capture_output=True, text=True, timeout=timeout, env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def between(text: str, start: str, end: str) -> str:
    """The part of ``text`` from the first ``start`` to the next ``end`` after it (all of it when absent)."""
    first = text.find(start)
    last = text.find(end, first)
    return text if first < 0 else text[first:last if last >= 0 else None]


def check_run(run: dict, seed: int, partitioner: str, people: str) -> list[str]:
    """Assert one run's reports against independently computed partitions; return the expected misses.

    ``people``: the demo's output for people, shown when an assertion fails (an engine that
    did not load the users in time has its last log lines there)."""
    rows = users(seed)
    assert run["partitioner"] == partitioner and run["seed"] == seed
    assert (run["table"], run["stream"], run["key_column"]) == ("DEMO_USER", "DEMO_USER_ORDERS", "USER_ID")
    assert run["worker_running"] is True and run["streams_running"] is True
    assert len({(w["engine"], w["topic"]) for w in run["waits"]}) == 4, run["waits"]  # the worker's repartition topic and two changelogs, Kafka Streams' table topic
    late = [w for w in run["waits"] if not w["complete"]]
    assert not late, f"{late}\n{between(people, 'users not in', RUN_ENDS)}"
    mismatched = sorted(
        (u.key, expected_users_partition(partitioner, key(u)), java(key(u)))
        for u in rows if expected_users_partition(partitioner, key(u)) != java(key(u))
    )
    direct = run["reports"]["Direct"]
    assert direct["total"] == MESSAGES and direct["matched"] == MESSAGES - len(mismatched)
    assert direct["matched_pct"] == round(100 * (MESSAGES - len(mismatched)) / MESSAGES, 2)
    assert [(e["key"], e["table_partition"], e["stream_partition"]) for e in direct["exceptions"]] == mismatched

    by_id = {u.key: (u.value["NAME"], u.value["AGE"]) for u in rows}
    for engine in ("Faust worker", "Kafka Streams"):
        repartitioned = run["reports"][f"Repartitioned ({engine})"]
        assert (repartitioned["total"], repartitioned["matched"], repartitioned["exceptions"]) == (MESSAGES, MESSAGES, [])
    for engine in ("Faust", "Kafka Streams"):  # the same misses in both engines: the users' placement, not the engine
        direct_join = run["joins"][f"{engine} join, direct"]
        missed = sorted(row["USER_ID"] for row in direct_join["rows"] if row["NAME"] is None)
        assert missed == [m[0] for m in mismatched], engine
        assert (direct_join["received"], direct_join["misses"]) == (MESSAGES, len(mismatched)), engine
        for row in direct_join["rows"]:
            assert row["partition"] == java(row["USER_ID"].encode())
            if row["NAME"] is not None:
                assert (row["NAME"], row["AGE"]) == by_id[row["USER_ID"]]
        for row in run["joins"][f"{engine} join, repartitioned"]["rows"]:
            assert (row["NAME"], row["AGE"]) == by_id[row["USER_ID"]]
            assert row["partition"] == java(row["USER_ID"].encode())
        assert run["joins"][f"{engine} join, repartitioned"]["misses"] == 0
    return missed


@pytest.fixture(scope="module")
def seed_demo() -> tuple[dict, str]:
    """``make demo``'s run, once for the tests below: the seed's two runs, then the reconciliation (its Spark
    starts beside the broker and reads once the runs are done)."""
    return run_demo(timeout=600)


def test_demo_first_run_misses_where_crc32_and_murmur2_disagree_second_run_none(seed_demo: tuple[dict, str]) -> None:
    report, people = seed_demo
    first, second = report["runs"]
    missed = check_run(first, SEED, "consistent_random", people)
    assert missed, "with 30 users crc32 and murmur2 agree on all with probability 6**-30"
    assert check_run(second, SEED + 1, "murmur2_random", people) == []
    assert second["reports"]["Direct"]["matched_pct"] == 100.0
    assert f" - Matched partitions: {first['reports']['Direct']['matched_pct']:.2f}%" in people
    # the two engines' direct joins side by side: a missed order shows ??? under both engines' NAME and AGE
    rows = [line for line in people.splitlines() if missed[0] in line and line.count("???") == 4]
    assert rows, people[-4000:]
    assert " - Faust: Joined: " in people and " - Kafka Streams: Joined: " in people
    assert "Faust worker and Kafka Streams stopped." in people and "Broker stopped; demo finished in" in people


def test_demo_refuses_zero_messages_before_starting_anything() -> None:
    done = subprocess.run([sys.executable, "-m", "streamapp", "demo", "--messages", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "streamapp demo: --messages=0: must be at least 1"
    assert done.stdout == ""


def test_a_stopped_demo_stops_everything_it_started(tmp_path: Path) -> None:
    """SIGTERM (a supervisor's stop, a CI timeout) unwinds the demo as Ctrl-C does: the broker's JVM and Spark's,
    started first, end with it instead of running on as orphans; exit status 130."""
    import psutil

    log = tmp_path / "demo.out"
    with log.open("w") as out:
        demo = subprocess.Popen([sys.executable, "-m", "streamapp", "demo", "--messages", "10"], stdout=out,
                                stderr=subprocess.STDOUT, text=True)
    try:
        me = psutil.Process(demo.pid)
        deadline = time.monotonic() + 120
        while "Spark (the reconciliation's JVM) starting" not in log.read_text() or not any(
                "java" in (c.name() or "") for c in me.children(recursive=True)):
            assert demo.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        started = me.children(recursive=True)
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=90) == 130, log.read_text()[-2000:]
        _, alive = psutil.wait_procs(started, timeout=30)
        assert alive == [], [(p.pid, p.name()) for p in alive]
    finally:
        if demo.poll() is None:
            demo.kill()


@pytest.mark.slow
def test_demo_reconciles_the_two_engines_from_kafka(seed_demo: tuple[dict, str]) -> None:
    """Spark's Kafka source reads both engines' outputs: run 1's direct misses are in both engines,
    so they are ``both_unenriched``, each caused by a ``copartition_violation``; nothing else differs."""
    report, people = seed_demo
    missed = check_run(report["runs"][0], SEED, "consistent_random", people)
    check_run(report["runs"][1], SEED + 1, "murmur2_random", people)
    reconciliation = report["reconciliation"]
    assert reconciliation["ran"] is True and reconciliation["exit_code"] == 1, people[-2000:]
    summary = reconciliation["summary"]
    assert summary["source"] == "kafka" and "Reading the planned offsets with Spark's kafka source" in people
    nonzero = {pair: {s: n for s, n in statuses.items() if n} for pair, statuses in summary["statuses"].items()}
    assert nonzero == {"direct": {"match": 2 * MESSAGES - len(missed), "both_unenriched": len(missed)},
                       "repartition": {"match": 2 * MESSAGES}}
    causes = {pair: {c: n for c, n in by.items() if n} for pair, by in summary["causes"].items()}
    assert causes == {"direct": {"copartition_violation": len(missed)}, "repartition": {}}


def test_join_tables_stand_side_by_side_with_misses_marked() -> None:
    """The report's pure part: each join's engines in one table, ??? where one missed, 'no output' where it wrote none."""
    from rich.console import Console

    from streamapp.demo.report import Columns, JoinResults, JoinRow, join_title, render_join_pairs

    columns = Columns("USER_ID", ("PRODUCT_ID", "CHANNEL"), ("NAME", "AGE"), ("NAME", "AGE"))

    def row(user_id: str, name: str | None, age: int | None) -> JoinRow:
        return JoinRow(user_id, 0, {"NAME": name, "AGE": age, "PRODUCT_ID": 7, "QTY": 1, "UNIT_PRICE": 2.5,
                                    "CHANNEL": "web", "TS": 1}, name is not None)

    faust = JoinResults("f_topic", [row("u1", "Ann", 30), row("u2", None, None), row("u3", "Cy", 5)], 3, columns)
    streams = JoinResults("s_topic", [row("u1", "Ann", 30), row("u2", None, None)], 3, columns)
    console = Console(width=200, record=True)
    render_join_pairs(console, [(join_title("Faust", "direct"), faust), (join_title("Kafka Streams", "direct"), streams)],
                      ("direct", "repartitioned"))
    text = console.export_text()
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert lines["u1"].count("Ann") == 2 and "???" not in lines["u1"]
    assert lines["u2"].count("???") == 4
    assert "Cy" in lines["u3"] and lines["u3"].count("no output") == 2
    assert "The direct join: Faust (f_topic), Kafka Streams (s_topic)" in text
    assert " - Faust: Joined: 2 of 3 records, missed (???): 1" in text
    assert " - Kafka Streams: Joined: 1 of 3 records, missed (???): 1, no output yet: 1" in text
    assert " - The engines agree on 2 of 3 records" in text
    assert "repartitioned join" not in text  # no engine reported it


# ---- a team's own statements: customers x payments on the session broker -------------------------------------------

def test_demo_runs_a_teams_statements_and_misses_exactly_where_the_partitioners_disagree(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """``streamapp demo --statements`` on the session broker (``--bootstrap-servers``): customers (BIGINT KAFKA key)
    written with librdkafka's crc32, payments (``TIMESTAMP='paid_at'``) with murmur2.  Both engines' direct joins
    show ``???`` for exactly the customers whose key the two partitioners place apart, and nowhere else; the join
    against the copied table finds every customer, with the values the generator wrote; the reconciliation of the
    two engines from the same statements calls each direct miss a ``copartition_violation``, and nothing else."""
    tag = uuid.uuid4().hex[:8]
    statements = tmp_path / "joins.sql"
    statements.write_text(CUSTOMERS_PAYMENTS.format(tag=tag), encoding="utf-8")
    report, people = run_demo(
        "--statements", str(statements), "--bootstrap-servers", broker.bootstrap, "--partitioner", "consistent_random",
        timeout=420,
        env={"STREAMAPP_APP_ID": f"demo-{tag}", "STREAMAPP_DEAD_LETTER_TOPIC": f"dead_{tag}"})
    [run] = report["runs"]
    assert (run["table"], run["stream"], run["key_column"]) == ("CUSTOMERS", "PAYMENTS", "CUSTOMER_ID")
    assert run["worker_running"] is True and run["streams_running"] is True
    assert all(w["complete"] for w in run["waits"]), run["waits"]
    customers = make_table(shape(Settings().replace(statements=str(statements))), MESSAGES, random.Random(SEED))
    packed = {str(c.key): struct.pack(">q", c.key) for c in customers}
    apart = sorted(k for k, b in packed.items() if zlib.crc32(b) % PARTITIONS != java(b))
    assert apart, "with 30 keys crc32 and murmur2 agree on all with probability 6**-30"
    assert [e["key"] for e in run["reports"]["Direct"]["exceptions"]] == apart
    by_key = {str(c.key): (c.value["EMAIL"], c.value["TIER"]) for c in customers}
    for engine in ("Faust", "Kafka Streams"):
        direct, copied = (run["joins"][f"{engine} join, {label}"] for label in ("direct", "repartitioned"))
        assert sorted(row["CUSTOMER_ID"] for row in direct["rows"] if row["EMAIL"] is None) == apart, engine
        assert direct["received"] == copied["received"] == MESSAGES and copied["misses"] == 0, engine
        for row in direct["rows"] + copied["rows"]:
            if row["EMAIL"] is not None:
                assert (row["EMAIL"], row["TIER"]) == by_key[row["CUSTOMER_ID"]]
            assert row["partition"] == java(packed[row["CUSTOMER_ID"]])
    # the people's table: ??? under both engines' EMAIL and TIER exactly on the rows of the keys placed apart
    direct_table = between(people, "The direct join:", "The repartitioned join:")
    marked = sorted(line.split("│")[1].strip() for line in direct_table.splitlines()
                    if line.startswith("│") and "???" in line)
    assert marked == [k for k in sorted(packed)[:25] if k in apart], direct_table  # the table shows 25 rows
    assert all(line.count("???") == 4 for line in direct_table.splitlines() if "???" in line and line.startswith("│"))
    copied_table = between(people, "The repartitioned join:", "Run 1 took")
    assert not [line for line in copied_table.splitlines() if line.startswith("│") and "???" in line], copied_table
    assert " - Faust: Joined: 30 of 30 records, missed (???): 0" in copied_table
    reconciliation = report["reconciliation"]
    assert reconciliation["ran"] is True and reconciliation["exit_code"] == 1, people[-2000:]
    summary = reconciliation["summary"]
    missed = sum(1 for row in run["joins"]["Faust join, direct"]["rows"] if row["EMAIL"] is None)
    nonzero = {pair: {s: n for s, n in statuses.items() if n} for pair, statuses in summary["statuses"].items()}
    assert nonzero == {"direct": {"match": MESSAGES - missed, "both_unenriched": missed},
                       "repartition": {"match": MESSAGES}}, nonzero
    causes = {pair: {c: n for c, n in by.items() if n} for pair, by in summary["causes"].items()}
    assert causes == {"direct": {"copartition_violation": missed}, "repartition": {}}


def test_demo_refuses_statements_it_cannot_produce_in_one_line(tmp_path: Path) -> None:
    statements = tmp_path / "no_join.sql"
    statements.write_text("CREATE STREAM s (id BIGINT KEY, v STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\n")
    done = subprocess.run([sys.executable, "-m", "streamapp", "demo", "--statements", str(statements)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"streamapp demo: {statements}: ")
    assert done.stderr.strip().endswith("no query: declare at least one CREATE STREAM ... AS SELECT ... JOIN")


# ---- the record generator: pure ---------------------------------------------------------------------------------------

def plan_shape(tmp_path: Path, text: str):
    statements = tmp_path / "joins.sql"
    statements.write_text(text.format(tag="t"), encoding="utf-8")
    return shape(Settings().replace(statements=str(statements)))


def test_generated_seed_records_are_what_ksqldb_writes_for_the_seed() -> None:
    made = generate(SEED_SHAPE, 50, random.Random(7), 1_700_000_000_000)
    keys = [row.key for row in made.table]
    assert len(set(keys)) == 50 and all(len(k) == 32 and int(k, 16) >= 0 for k in keys)
    assert all(isinstance(r.value["NAME"], str) and isinstance(r.value["AGE"], int) for r in made.table)
    assert [row.key for row in made.stream] == keys  # one order per user, keyed by its user
    assert [row.timestamp for row in made.stream] == [row.value["TS"] for row in made.stream] == \
        list(range(1_700_000_000_000, 1_700_000_000_050))
    assert all(isinstance(r.value["UNIT_PRICE"], float) and isinstance(r.value["CHANNEL"], str) for r in made.stream)
    [(k, v, ts)] = encode(SEED_SHAPE.table_codec, made.table[:1])
    assert k == keys[0].encode() and ts is None  # KAFKA STRING: the UTF-8 bytes, never JSON-quoted
    assert v == json.dumps(made.table[0].value, separators=(",", ":")).encode()  # ksqlDB's upper-case JSON
    for codec, rows in ((SEED_SHAPE.table_codec, made.table), (SEED_SHAPE.stream_codec, made.stream)):
        for (key_bytes, value, _), row in zip(encode(codec, rows), rows):
            assert (codec.decode_key(key_bytes), codec.decode_value(value)) == (row.key, row.value)
    assert generate(SEED_SHAPE, 50, random.Random(7), 1_700_000_000_000) == made  # reproducible from its seed


def test_generated_records_follow_declared_types_keys_and_timestamp_column(tmp_path: Path) -> None:
    demo = plan_shape(tmp_path, CUSTOMERS_PAYMENTS)
    made = generate(demo, 40, random.Random(3), 5_000)
    encoded = encode(demo.stream_codec, made.stream)
    for row, (key_bytes, value, ts) in zip(made.stream, encoded):
        assert key_bytes == struct.pack(">q", row.key)  # KAFKA BIGINT: 8 bytes big-endian
        assert ts == row.value["PAID_AT"] == row.timestamp
        amount = row.value["AMOUNT"]
        assert isinstance(amount, Decimal) and -amount.as_tuple().exponent == 2 and len(amount.as_tuple().digits) <= 10
        assert demo.stream_codec.decode_value(value) == row.value
    assert [r.key for r in made.stream] == [r.key for r in made.table]
    assert {type(r.key) for r in made.table} == {int} and len({r.key for r in made.table}) == 40


def test_a_join_on_a_value_column_gets_the_table_key_in_that_column(tmp_path: Path) -> None:
    demo = plan_shape(tmp_path, REKEYED)
    assert (demo.table.name, demo.stream.name, demo.join_column) == ("CUSTOMERS", "PAYMENTS", "CUSTOMER_ID")
    made = generate(demo, 20, random.Random(5), 0)
    assert [r.value["CUSTOMER_ID"] for r in made.stream] == [r.key for r in made.table]
    assert len({r.key for r in made.stream}) == 20 and all(isinstance(r.key, str) for r in made.stream)


def test_json_keys_and_delimited_values_are_written_as_ksqldb_writes_them(tmp_path: Path) -> None:
    demo = plan_shape(tmp_path, """
CREATE TABLE t (id INT PRIMARY KEY, a STRING, b DOUBLE) WITH (KAFKA_TOPIC='t', KEY_FORMAT='JSON', VALUE_FORMAT='DELIMITED');
CREATE STREAM s (id INT KEY, ok BOOLEAN) WITH (KAFKA_TOPIC='s', KEY_FORMAT='JSON', VALUE_FORMAT='DELIMITED');
CREATE STREAM j AS SELECT s.id, ok, a, b FROM s JOIN t ON s.id = t.id EMIT CHANGES;
""")
    made = generate(demo, 5, random.Random(1), 0)
    for row, (key_bytes, value, _) in zip(made.table, encode(demo.table_codec, made.table)):
        assert key_bytes == str(row.key).encode()  # a JSON INT key: its digits
        assert value == f"{row.value['A']},{row.value['B']!r}".encode()
    assert [v for _, v, _ in encode(demo.stream_codec, made.stream)] == \
        [b"true" if r.value["OK"] else b"false" for r in made.stream]


def test_joins_that_need_two_different_streams_are_refused(tmp_path: Path) -> None:
    """One stream joined on its key and on a value column: the demo writes one stream, so it cannot feed both."""
    with pytest.raises(ShapeError, match="^.*joins.sql: the joins of S with T read its key from different columns"):
        plan_shape(tmp_path, """
CREATE TABLE t (id INT PRIMARY KEY, a STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');
CREATE STREAM s (id INT KEY, other INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
CREATE STREAM j1 AS SELECT s.id, a FROM s JOIN t ON s.id = t.id EMIT CHANGES;
CREATE STREAM j2 AS SELECT s.other, a FROM s JOIN t ON s.other = t.id EMIT CHANGES;
""")
