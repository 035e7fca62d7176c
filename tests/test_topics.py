"""`streamapp topics`: list, describe, create, delete and add-partitions (impact first) on the embedded broker.

Impact numbers are checked against partitions computed here from zlib's CRC-32
and the murmur2 reference, not from the code under test.
"""
from __future__ import annotations

import json
import random
import uuid
import zlib

import pytest

from streamapp.admin import partition_impact
from streamapp.cli import main
from streamapp.demo_data import key, make_users
from streamapp.partitioners.hashes import murmur2, to_positive
from streamapp.produce import produce_users
from streamapp.topics import describe


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
    code, out, _ = cli(capsys, bootstrap, "describe", topic, "--broker-profile", "embedded")
    assert f"{topic}: 3 partitions, 30 records; configs: cleanup.policy=compact" in out

    code, out, _ = cli(capsys, bootstrap, "delete", topic)
    assert code == 0 and f"Deleted topics: {topic}" in out
    assert topic not in describe(bootstrap, [topic])


def test_add_partitions_prints_the_impact_then_says_the_broker_lacks_the_api(bootstrap: str, capsys) -> None:
    topic = f"grow_{uuid.uuid4().hex[:8]}"
    cli(capsys, bootstrap, "create", topic, "--partitions", "6")
    users = make_users(400, random.Random(9))
    produce_users(bootstrap, topic, users, "murmur2_random", "test")
    moved = sum(java(key(u), 6) != java(key(u), 9) for u in users)

    code, out, err = cli(capsys, bootstrap, "add-partitions", topic, "--count", "9")
    assert f"Adding partitions to {topic}: 6 -> 9" in out and "fingerprinted" in out
    assert f" - Keys that would change partition: {moved} of 400 ({100 * moved / 400:.2f}%)" in out
    assert code == 2
    assert err.strip() == (
        f"streamapp topics: the broker at {bootstrap} does not support CreatePartitions (Kafka API 37) - the embedded "
        f"broker (Tansu) lacks it; {topic} keeps its 6 partitions, nothing was changed"
    )
    assert describe(bootstrap, [topic])[topic].partitions == 6


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
        (["create", "{t}"], "topic {t} already exists on {b}"),
        (["create", "other_{t}", "--config", "nonsense"], "--config 'nonsense': expected KEY=VALUE, e.g. cleanup.policy=compact"),
        (["delete", "missing_{t}"], "topic missing_{t} does not exist on {b}"),
        (["add-partitions", "{t}", "--count", "4", "--partitioner", "nope"], "unknown partitioner 'nope'"),
    ],
)
def test_bad_requests_are_one_line_errors(bootstrap: str, capsys, argv: list[str], message: str) -> None:
    topic = f"bad_{uuid.uuid4().hex[:8]}"
    cli(capsys, bootstrap, "create", topic, "--partitions", "3")
    code, _, err = cli(capsys, bootstrap, *(a.format(t=topic) for a in argv))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("streamapp topics: " + message.format(t=topic, b=bootstrap))
