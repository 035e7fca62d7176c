"""CLI input that used to end in a traceback: each is one line on stderr and exit 2 (or a clean exit).

Real ``streamapp`` processes, so what a user sees is exactly what is asserted.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from streamapp.partitioners import PARTITIONERS, PROFILES


def streamapp(*argv: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "streamapp", *argv], capture_output=True, timeout=120)


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_partition_key_that_is_not_utf8_names_its_hex() -> None:
    line = one_line(streamapp("partition", b"\xff\xfe"))
    assert line == r"streamapp partition: key b'\xff\xfe' is not valid UTF-8: give its bytes as hex instead (--hex fffe)"


def test_partition_hex_key_from_that_hint_works() -> None:
    result = streamapp("partition", "--json", "--hex", "fffe", "--partitioner", "murmur2")
    assert result.returncode == 0
    assert json.loads(result.stdout)["results"][0]["key"] == "fffe"


def test_partition_json_list_is_json() -> None:
    result = streamapp("partition", "--json", "--list")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert [row["name"] for row in data["partitioners"]] == list(PARTITIONERS)
    assert data["profiles"] == dict(PROFILES)
    assert "java" in next(row for row in data["partitioners"] if row["name"] == "murmur2_random")["clients"]


@pytest.mark.parametrize("wait", ["-1", "nan"])
def test_produce_negative_wait_is_refused_before_connecting(wait: str) -> None:
    line = one_line(streamapp("produce", "--wait", wait, "--bootstrap_server", "127.0.0.1:1"))
    assert line == f"streamapp produce: --wait={float(wait)}: seconds to wait must be 0 or more"


def test_output_into_a_closed_pipe_is_not_a_traceback() -> None:
    """Megabytes of output (far beyond a pipe's buffer), read 10 bytes of, as `| head -c 10` would."""
    keys = [f"user{i}" for i in range(3_000)]
    proc = subprocess.Popen([sys.executable, "-m", "streamapp", "partition", "--json", *keys],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    assert proc.wait(60) in (0, 141)
    assert b"Traceback" not in proc.stderr.read()


@pytest.mark.parametrize("sample", ["0", "-5"])
def test_guard_sample_below_one_is_refused_as_the_doctor_refuses_it(sample: str) -> None:
    """It passed with exit 0 and 'Co-partitioned' before: a check of no records."""
    line = one_line(streamapp("guard", "--sample", sample, "--bootstrap-servers", "127.0.0.1:1"))
    assert line == f"streamapp guard: sample={sample}: must be at least 1"


def test_a_user_partitioner_that_fails_is_one_line(tmp_path) -> None:
    (tmp_path / "team_hash.py").write_text("def place(key, n):\n    return 1 // 0\n")
    result = subprocess.run([sys.executable, "-m", "streamapp", "partition", "--partitioner", "team_hash:place", "k"],
                            capture_output=True, timeout=120, cwd=tmp_path)
    assert one_line(result) == ("streamapp partition: partitioner 'team_hash:place' failed on key b'k': "
                                "ZeroDivisionError: integer division or modulo by zero")


def test_ksql_equivalent_state_dir_that_is_a_file_is_one_line_before_the_jvm(tmp_path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    line = one_line(streamapp("ksql-equivalent", "--state-dir", str(tmp_path / "a-file"),
                              "--bootstrap-servers", "127.0.0.1:1"))
    assert line == f"streamapp ksql-equivalent: --state-dir='{tmp_path / 'a-file'}': is a file, not a directory"
