"""``streamapp partition``: expected partitions computed here from the reference hashes and zlib."""
from __future__ import annotations

import json
import subprocess
import sys
import zlib

import pytest

from streamapp.cli import main
from streamapp.partitioners import LIBRDKAFKA_NAMES, PARTITIONERS, PROFILES, hashes


def last_byte(key: bytes | None, n: int) -> int:
    """A user partitioner reached by dotted path (tests/ is on sys.path under pytest)."""
    return (key or b"\0")[-1] % n


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["partition", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def murmur(key: bytes, n: int) -> int:
    return hashes.to_positive(hashes.murmur2(key)) % n


def test_json_covers_every_librdkafka_name_and_client_profile(capsys) -> None:
    keys = ["user1", "order-42", "é", "a much longer key with spaces and 40 bytes"]
    data = run_json(capsys, "--partitions", "12", *keys)
    assert data["num_partitions"] == 12
    assert [r["key"] for r in data["results"]] == keys
    for result in data["results"]:
        key = result["key"].encode()
        parts = result["partitions"]
        assert set(LIBRDKAFKA_NAMES) | set(PROFILES) | set(PARTITIONERS) <= set(parts)
        assert parts["murmur2"] == parts["murmur2_random"] == murmur(key, 12)
        assert parts["consistent"] == parts["consistent_random"] == zlib.crc32(key) % 12
        assert parts["fnv1a"] == parts["fnv1a_random"] == hashes.fnv1a(key) % 12
        assert parts["random"] is None
        assert parts["java"] == parts["kafka-streams"] == parts["aiokafka"] == murmur(key, 12)
        assert parts["confluent-kafka"] == zlib.crc32(key) % 12
        assert parts["sarama"] == hashes.fnv1a(key) % 12
        for client, name in PROFILES.items():
            assert parts[client] == parts[name]


def test_null_and_empty_keys_follow_librdkafka_rules(capsys) -> None:
    data = run_json(capsys, "--partitions", "7", "", "--null-key")
    empty, null = (r["partitions"] for r in data["results"])
    assert data["results"][1]["key"] is None
    assert empty["murmur2"] == empty["murmur2_random"] == 0x106E08D9 % 7
    assert null["murmur2"] == 0x106E08D9 % 7 and null["murmur2_random"] is None
    assert empty["consistent"] == null["consistent"] == 0
    assert empty["consistent_random"] is None and null["consistent_random"] is None
    assert null["fnv1a"] == hashes.fnv1a(b"") % 7 and null["fnv1a_random"] is None
    assert null["java"] is None and empty["random"] is None


def test_hex_keys_and_chosen_partitioners(capsys) -> None:
    data = run_json(capsys, "--hex", "--partitioner", "java", "--partitioner", "sarama", "75736572", "00ff")
    assert data["num_partitions"] == 6
    assert [r["key"] for r in data["results"]] == ["75736572", "00ff"]
    user, binary = (r["partitions"] for r in data["results"])
    assert user == {"java": murmur(b"user", 6), "sarama": hashes.fnv1a(b"user") % 6}
    assert binary == {"java": murmur(b"\x00\xff", 6), "sarama": hashes.fnv1a(b"\x00\xff") % 6}


def test_dotted_path_partitioner_and_partitions_from_the_environment(capsys, monkeypatch) -> None:
    monkeypatch.setenv("STREAMAPP_PARTITIONS", "5")
    data = run_json(capsys, "--partitioner", "test_cli_partition:last_byte", "abc")
    assert data == {"num_partitions": 5, "results": [{"key": "abc", "partitions": {"test_cli_partition:last_byte": ord("c") % 5}}]}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--hex", "zz"], "key 'zz' is not valid hex"),
        (["--partitioner", "nope", "k"], "unknown partitioner 'nope'"),
        (["--partitions", "0", "k"], "partitions=0"),
        ([], "no KEY given"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message) -> None:
    assert main(["partition", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.count("\n") == 1


def test_table_shows_keys_partitioners_and_random(capsys) -> None:
    assert main(["partition", "--partitions", "9", "user1", "--null-key"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert set(rows) == {"user1", "NULL"}
    assert "random" in rows["NULL"] and f" {murmur(b'user1', 9)} " in rows["user1"]
    for name in PARTITIONERS:
        assert name in out
    assert "sarama" in out and "confluent-kafka" in out


def test_list_names_every_partitioner(capsys) -> None:
    assert main(["partition", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PARTITIONERS)


def test_installed_command_prints_exactly_one_json_object() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "streamapp", "partition", "--json", "--partitions", "3", "k1", "k2"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    data = json.loads(run.stdout)
    assert [r["partitions"]["murmur2"] for r in data["results"]] == [murmur(b"k1", 3), murmur(b"k2", 3)]
