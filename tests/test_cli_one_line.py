"""Every ``streamapp`` mistake is one line naming the option, exit 2: argparse's own, an empty
``--bootstrap_server``, and a broker that does not answer (no librdkafka log lines before it)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from streamapp.cli import build_commands, main

OFFLINE = "127.0.0.1:1"  # nothing listens there


def parse_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("command", sorted(build_commands()[1]))
def test_a_bad_option_is_one_line_for_every_command(capsys: pytest.CaptureFixture[str], command: str) -> None:
    """The sub-command's parser says it (a missing required argument comes first)."""
    line = parse_error(capsys, command, "--no-such-option")
    assert line.startswith(f"streamapp {command}: ")
    assert "--no-such-option" in line or "the following arguments are required" in line
    assert line.endswith(f"(see streamapp {command} --help)")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        ([], "streamapp: the following arguments are required: COMMAND (see streamapp --help)"),
        (["nope"], "streamapp: argument COMMAND: invalid choice: 'nope' (choose from "),
        (["topics"], "streamapp topics: the following arguments are required: ACTION (see streamapp topics --help)"),
        (["topics", "delete"], "streamapp topics delete: the following arguments are required: topic "
                               "(see streamapp topics delete --help)"),
        (["partition", "--partitions", "x", "k"], "streamapp partition: argument --partitions: invalid int value: "
                                                  "'x' (see streamapp partition --help)"),
        (["fingerprint"], "streamapp fingerprint: the following arguments are required: --topic "),
        (["topics", "delete", "t", "--force"], "streamapp topics delete: unrecognized arguments: --force "
                                               "(see streamapp topics delete --help)"),
        (["guard", "extra"], "streamapp guard: unrecognized arguments: extra (see streamapp guard --help)"),
    ],
)
def test_argparse_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], line: str) -> None:
    assert parse_error(capsys, *argv).startswith(line)


def streamapp(*argv: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """A real ``streamapp`` process; standard input is not a terminal unless ``stdin`` is one."""
    return subprocess.run([sys.executable, "-m", "streamapp", *argv], capture_output=True, text=True, timeout=120,
                          stdin=stdin)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, (len(lines), lines[:3])
    return lines[0]


@pytest.mark.parametrize("value", ["", " ", ","])
def test_produce_refuses_an_empty_bootstrap_server(value: str) -> None:
    line = one_line(streamapp("produce", "--bootstrap_server", value))
    assert line == f"streamapp produce: --bootstrap_server={value!r} is empty: give host:port[,host:port]"


@pytest.mark.parametrize("value", ["", " "])
def test_produce_refuses_an_empty_topic(value: str) -> None:
    """Not the default in disguise: ``--topic ''`` had produced to demo_user."""
    line = one_line(streamapp("produce", "--topic", value))
    assert line == f"streamapp produce: --topic={value!r} is empty: give a topic name"


def test_fingerprint_against_no_broker_is_one_line() -> None:
    line = one_line(streamapp("fingerprint", "--topic", "anything", "--bootstrap-servers", OFFLINE))
    assert line.startswith(f"streamapp fingerprint: cannot reach the Kafka brokers at {OFFLINE}: ")
