"""`streamapp topics`: list, describe, create, delete and add-partitions (impact first) on Apache Kafka.

Impact numbers are checked against partitions computed here from zlib's CRC-32
and the murmur2 reference, not from the code under test; the keys that move
when partitions are added are read back from where a real librdkafka producer
(murmur2_random, Java's placement) put them before and after.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
import zlib

import pytest

from streamapp.cli import main
from streamapp.copartition.impact import partition_impact
from streamapp.demo.data import Row, encode, make_table
from streamapp.demo.producer import produce_table
from streamapp.demo.shape import shape
from streamapp.kafka.admin import describe
from streamapp.partitioners.hashes import murmur2, to_positive
from streamapp.settings import Settings

from workerkit import produce, read_all

#: The seed's users table, as the demo generates and writes it.
SEED = shape(Settings())


def make_users(count: int, rng: random.Random) -> tuple[Row, ...]:
    return make_table(SEED, count, rng)


def key(user: Row) -> bytes:
    return SEED.table_codec.encode_key(user.key)


def produce_users(bootstrap: str, topic: str, users: tuple[Row, ...], partitioner: str, client_id: str) -> None:
    produce_table(bootstrap, topic, encode(SEED.table_codec, users), partitioner, client_id)


def java(k: bytes, n: int) -> int:
    return to_positive(murmur2(k)) % n


def cli(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> tuple[int, str, str]:
    code = main(["topics", *argv, "--bootstrap-servers", bootstrap])
    out, err = capsys.readouterr()
    return code, out, err


def test_impact_counts_distinct_keys_that_move_and_leaves_random_ones_out() -> None:
    keys = [f"user-{i}".encode() for i in range(300)] + [b"user-1", None, None]
    impact = partition_impact("t", keys, "murmur2_random", 6, 8)
    expected = sum(java(f"user-{i}".encode(), 6) != java(f"user-{i}".encode(), 8) for i in range(300))
    assert (impact.keys, impact.moved, impact.unscored) == (300, expected, 1)
    assert f"{impact.moved_pct:.2f}" == f"{100 * expected / 300:.2f}"
    crc = partition_impact("t", keys[:300], "consistent", 4, 5)
    assert crc.moved == sum(zlib.crc32(k) % 4 != zlib.crc32(k) % 5 for k in keys[:300])


def test_doubling_moves_exactly_the_keys_whose_hash_lands_in_the_upper_half() -> None:
    keys = [f"k{i}".encode() for i in range(1000)]
    impact = partition_impact("t", keys, "murmur2", 6, 12)
    assert impact.moved == sum(java(k, 12) >= 6 for k in keys)


def test_impact_names_each_moved_key_with_its_old_and_new_partition() -> None:
    keys = [f"k{i}".encode() for i in range(200)] + [b"\xff\x00"]
    impact = partition_impact("t", keys, "murmur2", 3, 5)
    expected = {k: (java(k, 3), java(k, 5)) for k in keys if java(k, 3) != java(k, 5)}
    assert {m.key: (m.old_partition, m.new_partition) for m in impact.moved_keys} == expected
    named = {m["key"]: (m["from"], m["to"]) for m in impact.to_dict()["moved_keys"]}  # type: ignore[union-attr]
    assert named == {k.decode("utf-8", "backslashreplace"): v for k, v in expected.items()}
    json.dumps(impact.to_dict())


def test_create_list_describe_delete_round_trip(bootstrap: str, capsys) -> None:
    topic = f"admin_{uuid.uuid4().hex[:8]}"
    code, out, _ = cli(capsys, bootstrap, "create", topic, "--partitions", "3", "--config", "cleanup.policy=compact")
    assert code == 0 and f"Created topic {topic} with 3 partitions" in out
    assert describe(bootstrap, [topic])[topic].partitions == 3

    code, out, _ = cli(capsys, bootstrap, "list", "--json")
    assert {"name": topic, "partitions": 3} in json.loads(out)

    users = make_users(30, random.Random(5))
    produce_users(bootstrap, topic, users, "consistent", "test")
    code, out, _ = cli(capsys, bootstrap, "describe", topic, "--json")
    detail = json.loads(out)
    expected = [sum(zlib.crc32(key(u)) % 3 == p for u in users) for p in range(3)]
    assert [p["records"] for p in detail["partitions"]] == expected
    assert detail["configs"] == {"cleanup.policy": "compact"}
    code, out, _ = cli(capsys, bootstrap, "describe", topic)
    assert f"{topic}: 3 partitions, 30 records; configs: cleanup.policy=compact" in out

    code, out, _ = cli(capsys, bootstrap, "delete", topic, "--yes")
    assert code == 0 and f"Deleted topics: {topic}" in out
    assert topic not in describe(bootstrap, [topic])


def landed(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[tuple[int, int], bytes]:
    """Every record's key by (partition, offset), read back with a plain consumer."""
    records = read_all(bootstrap, topic, partitions, expected)
    assert len(records) == expected
    return {(r.partition, r.offset): r.key for r in records if r.key is not None}


def test_add_partitions_moves_exactly_the_keys_the_impact_named(bootstrap: str, capsys) -> None:
    topic = f"grow_{uuid.uuid4().hex[:8]}"
    cli(capsys, bootstrap, "create", topic, "--partitions", "6")
    keys = [key(u) for u in make_users(400, random.Random(9))]
    produce(bootstrap, topic, ((k, b"before") for k in keys), "murmur2_random")
    before = landed(bootstrap, topic, 6, len(keys))
    old_partition = {k: p for (p, _), k in before.items()}
    assert old_partition == {k: java(k, 6) for k in keys}

    code, out, err = cli(capsys, bootstrap, "add-partitions", topic, "--count", "9", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["applied"] is True and result["partitioner_source"].startswith("fingerprinted")
    named = {m["key"].encode(): (m["from"], m["to"]) for m in result["impact"]["moved_keys"]}
    assert describe(bootstrap, [topic])[topic].partitions == 9

    produce(bootstrap, topic, ((k, b"after") for k in keys), "murmur2_random")
    after = {k: p for (p, o), k in landed(bootstrap, topic, 9, 2 * len(keys)).items() if (p, o) not in before}
    moved = {k: (old_partition[k], after[k]) for k in keys if after[k] != old_partition[k]}
    assert moved == named
    assert 0 < len(moved) < len(keys)


def test_add_partitions_refused_by_the_broker_prints_the_impact_then_one_line(bootstrap: str, capsys) -> None:
    """Apache Kafka refuses more than 10,000 new partitions in one request: a real refusal, nothing changes."""
    topic = f"grow_{uuid.uuid4().hex[:8]}"
    cli(capsys, bootstrap, "create", topic, "--partitions", "3")
    users = make_users(40, random.Random(4))
    produce_users(bootstrap, topic, users, "murmur2_random", "test")
    moved = sorted(key(u) for u in users if java(key(u), 3) != java(key(u), 20000))

    code, out, err = cli(capsys, bootstrap, "add-partitions", topic, "--count", "20000")
    assert f"Adding partitions to {topic}: 3 -> 20000" in out and "fingerprinted" in out
    assert f" - Keys that would change partition: {len(moved)} of 40 ({100 * len(moved) / 40:.2f}%)" in out
    shown = [f"     {k.decode()}: {java(k, 3)} -> {java(k, 20000)}" for k in moved[:5]]
    assert "\n".join([*shown, f"     and {len(moved) - 5} more (--json lists every one)"]) in out
    assert code == 2
    assert err.strip() == (
        f"streamapp topics: count=20000: the broker at {bootstrap} refused CreatePartitions for {topic}: "
        f"POLICY_VIOLATION: Excessively large number of additional partitions per request; "
        f"{topic} keeps its 3 partitions"
    )
    assert describe(bootstrap, [topic])[topic].partitions == 3


def test_guard_reports_the_count_mismatch_after_adding_partitions(bootstrap: str, new_topic, capsys) -> None:
    users, orders, repartition = new_topic("users"), new_topic("orders"), new_topic("repart")
    produce(bootstrap, users, ((key(u), b"{}") for u in make_users(50, random.Random(3))), "murmur2_random")
    code, _, err = cli(capsys, bootstrap, "add-partitions", users, "--count", "8")
    assert code == 0, err

    guard = subprocess.run(
        [sys.executable, "-m", "streamapp", "guard", "--json", "--bootstrap-servers", bootstrap,
         "--users-topic", users, "--orders-topic", orders, "--users-repartition-topic", repartition],
        capture_output=True, text=True, timeout=120,
    )
    assert guard.returncode == 1, guard.stderr
    problems = json.loads(guard.stdout)["problems"]
    assert (
        f"Can't join {orders} with {users} since the number of partitions don't match: "
        f"{orders} has 6 partitions, {users} has 8. Repartition one of them so the counts match."
    ) in problems


def test_add_partitions_dry_run_with_given_partitioner_as_json(bootstrap: str, capsys) -> None:
    topic = f"grow_{uuid.uuid4().hex[:8]}"
    cli(capsys, bootstrap, "create", topic, "--partitions", "4")
    users = make_users(100, random.Random(2))
    produce_users(bootstrap, topic, users, "consistent_random", "test")
    code, out, _ = cli(capsys, bootstrap, "add-partitions", topic, "--count", "5", "--partitioner", "consistent",
                       "--dry-run", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["applied"] is False and result["partitioner_source"] == "given with --partitioner"
    assert result["impact"]["moved"] == sum(zlib.crc32(key(u)) % 4 != zlib.crc32(key(u)) % 5 for u in users)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["add-partitions", "{t}", "--count", "2"], "count=2: topic {t} has 3 partitions; Kafka can only add partitions"),
        (["add-partitions", "{t}", "--count", "2147483648", "--dry-run"],
         "count=2147483648: more than Kafka's 2147483647 partitions (an int32)"),
        (["create", "other_{t}", "--partitions", "2147483648"],
         "partitions=2147483648: must be from 1 to 2147483647 (Kafka's int32)"),
        (["create", "other_{t}", "--replication-factor", "40000"], "replication_factor=40000: must be from 1 to 10000"),
        (["create", "{t}"], "topic {t} already exists on {b}"),
        (["create", "other_{t}", "--config", "nonsense"], "--config 'nonsense': expected KEY=VALUE, e.g. cleanup.policy=compact"),
        (["delete", "missing_{t}", "--yes"], "topic missing_{t} does not exist on {b}"),
        (["add-partitions", "{t}", "--count", "4", "--partitioner", "nope"], "unknown partitioner 'nope'"),
        (["create", "bad name"], "topic='bad name': contains ' '; a topic name may contain only ASCII letters, "
                                 "digits, '.', '_' and '-'"),
        (["create", "."], "topic='.': '.' and '..' are not allowed as topic names"),
        (["create", ".."], "topic='..': '.' and '..' are not allowed as topic names"),
        (["create", "a" * 300], f"topic={'a' * 40!r}… (300 characters): a topic name is at most 249 characters"),
        (["create", "other_{t}", "--config", "cleanup.policy=bogus"],
         "config cleanup.policy=bogus: the broker at {b} refuses it: Invalid value bogus for configuration "
         "cleanup.policy: String must be one of: compact, delete"),
        (["create", "other_{t}", "--config", "retention.ms=1000", "--config", "no.such.config=1"],
         "config no.such.config=1: the broker at {b} refuses it: Unknown topic config name: no.such.config"),
        (["create", "other_{t}", "--replication-factor", "3"],
         "replication_factor=3: the broker at {b} refuses it: INVALID_REPLICATION_FACTOR: "),
    ],
)
def test_bad_requests_are_one_line_errors(bootstrap: str, capsys, argv: list[str], message: str) -> None:
    topic = f"bad_{uuid.uuid4().hex[:8]}"
    cli(capsys, bootstrap, "create", topic, "--partitions", "3")
    code, _, err = cli(capsys, bootstrap, *(a.format(t=topic) for a in argv))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("streamapp topics: " + message.format(t=topic, b=bootstrap))
    assert f"other_{topic}" not in describe(bootstrap)
