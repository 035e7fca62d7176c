"""`streamapp demo` end to end: real Apache Kafka broker, real Faust worker, real Kafka Streams program
(ksqlDB's joins, not ksqlDB), both runs' reports and the reconciliation of the two engines checked.

Each run's users are regenerated from its seed and their partitions computed
here from zlib's CRC-32 (librdkafka's consistent_random) and the murmur2
reference (the Java client / ksqlDB), independently of the code under test.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zlib

import pytest

from streamapp.demo.data import key, make_users
from streamapp.partitioners.hashes import murmur2, to_positive

PARTITIONS = 6
MESSAGES = 30
SEED = 20261122
#: Where the demo's output for one run ends ("Run 1 took 4.2s").
RUN_ENDS = "\nRun "


def java(k: bytes) -> int:
    return to_positive(murmur2(k)) % PARTITIONS


def expected_users_partition(partitioner: str, k: bytes) -> int:
    return zlib.crc32(k) % PARTITIONS if partitioner == "consistent_random" else java(k)


def run_demo(*extra: str, timeout: float) -> tuple[dict, str]:
    env = {**os.environ, "STREAMAPP_PARTITIONS": str(PARTITIONS)}
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
    users = make_users(MESSAGES, random.Random(seed))
    assert run["partitioner"] == partitioner and run["seed"] == seed
    assert run["worker_running"] is True and run["streams_running"] is True
    assert len({(w["engine"], w["topic"]) for w in run["waits"]}) == 4, run["waits"]  # the worker's repartition topic and two changelogs, Kafka Streams' table topic
    late = [w for w in run["waits"] if not w["complete"]]
    assert not late, f"{late}\n{between(people, 'users not in', RUN_ENDS)}"
    mismatched = sorted(
        (u.user_id, expected_users_partition(partitioner, key(u)), java(key(u)))
        for u in users if expected_users_partition(partitioner, key(u)) != java(key(u))
    )
    direct = run["reports"]["Direct"]
    assert direct["total"] == MESSAGES and direct["matched"] == MESSAGES - len(mismatched)
    assert direct["matched_pct"] == round(100 * (MESSAGES - len(mismatched)) / MESSAGES, 2)
    assert [(e["user_id"], e["users_partition"], e["orders_partition"]) for e in direct["exceptions"]] == mismatched

    by_id = {u.user_id: u for u in users}
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
                assert (row["NAME"], row["AGE"]) == (by_id[row["USER_ID"]].name, by_id[row["USER_ID"]].age)
        for row in run["joins"][f"{engine} join, repartitioned"]["rows"]:
            assert (row["NAME"], row["AGE"]) == (by_id[row["USER_ID"]].name, by_id[row["USER_ID"]].age)
            assert row["partition"] == java(row["USER_ID"].encode())
        assert run["joins"][f"{engine} join, repartitioned"]["misses"] == 0
    return missed


def test_demo_first_run_misses_where_crc32_and_murmur2_disagree_second_run_none() -> None:
    report, people = run_demo("--no-reconcile", timeout=240)
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
    assert report["reconciliation"] == {"ran": False}


def test_demo_refuses_zero_messages_before_starting_anything() -> None:
    done = subprocess.run([sys.executable, "-m", "streamapp", "demo", "--messages", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "streamapp demo: --messages=0: must be at least 1"
    assert done.stdout == ""


@pytest.mark.slow
def test_demo_reconciles_the_two_engines_from_kafka() -> None:
    """Spark's Kafka source reads both engines' outputs: run 1's direct misses are in both engines,
    so they are ``both_unenriched``, each caused by a ``copartition_violation``; nothing else differs."""
    report, people = run_demo(timeout=600)
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

    from streamapp.demo.report import JoinResults, JoinRow, join_title, render_join_pairs

    def row(user_id: str, name: str | None, age: int | None) -> JoinRow:
        return JoinRow(user_id, 0, {"NAME": name, "AGE": age, "PRODUCT_ID": 7, "QTY": 1, "UNIT_PRICE": 2.5,
                                    "CHANNEL": "web", "TS": 1})

    faust = JoinResults("f_topic", [row("u1", "Ann", 30), row("u2", None, None), row("u3", "Cy", 5)], 3)
    streams = JoinResults("s_topic", [row("u1", "Ann", 30), row("u2", None, None)], 3)
    console = Console(width=200, record=True)
    render_join_pairs(console, [(join_title("Faust", "direct"), faust), (join_title("Kafka Streams", "direct"), streams)])
    text = console.export_text()
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert lines["u1"].count("Ann") == 2 and "???" not in lines["u1"]
    assert lines["u2"].count("???") == 4
    assert "Cy" in lines["u3"] and lines["u3"].count("no output") == 2
    assert "The direct join: Faust (f_topic), Kafka Streams (s_topic)" in text
    assert " - Faust: Joined: 2 of 3 orders, missed (???): 1" in text
    assert " - Kafka Streams: Joined: 1 of 3 orders, missed (???): 1, no output yet: 1" in text
    assert " - The engines agree on 2 of 3 orders" in text
    assert "repartitioned join" not in text  # no engine reported it
