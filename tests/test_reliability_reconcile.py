"""The reconciliation job on bad days: missing topics, unreadable exports, bad dates -> exit 2 and one line.

Real ``python -m spark_batch.reconcile`` subprocesses where the command line
itself is under test (what a scheduler sees), the job's ``main`` in-process with
the session's real SparkSession elsewhere (a JVM start costs ~30 s here), real
Apache Kafka broker; the exports are tests/reconcile_scenario.py's predicted records.
That two runs for a date give byte-identical summaries is shown on the known answers
(tests/test_reconcile_kafka.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import reconcile_scenario as sc
from spark_batch.options import build_parser
from spark_batch.reconcile import main
from streamapp.settings import Settings

def cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spark_batch.reconcile", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=Path(__file__).resolve().parent.parent,
                          env=None if env is None else {**os.environ, **env})


def topic_args(topics: dict[str, str]) -> list[str]:
    return [arg for role, flag in sc.FLAGS.items() for arg in (flag, topics[role])]


@pytest.mark.parametrize(("args", "words"), [
    (["--date", "2026-13-01"], "--date='2026-13-01'"),
    (["--date", "2026-02-30"], "--date='2026-02-30'"),
    (["--date", "yesterday"], "--date='yesterday'"),
    (["--date", "2026-11-21T00:00"], "--date="),
    ([], "--date"),
    (["--from", "2026-11-22", "--to", "2026-11-21"], "--to='2026-11-21' is not after --from='2026-11-22'"),
    (["--from", "2026-11-21"], "--to"),
    (["--date", "2026-11-21", "--from", "2026-11-21"], "--date cannot be combined"),
    (["--date", "2026-11-21", "--max-mismatch-rate", "1.5"], "--max-mismatch-rate=1.5"),
])
def test_bad_dates_and_options_exit_2_with_one_line(args: list[str], words: str, tmp_path: Path) -> None:
    done = cli(*args, "--output", str(tmp_path / "out"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("reconcile: error: ") and words in lines[0], lines
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def missing_topic_run(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One real CLI run whose orders topic does not exist (the other topics exist); one JVM start serves two tests."""
    from streamapp.kafka.admin import ensure_topics

    topics = {role: f"rel_missing_{role}_{uuid.uuid4().hex[:6]}" for role in sc.ROLES}
    ensure_topics(bootstrap, {t: 6 for role, t in topics.items() if role != "orders"})
    topics["orders"] = "reliability_no_such_orders"
    out = tmp_path_factory.mktemp("missing") / "out"
    return cli("--date", sc.DAY, "--bootstrap-server", bootstrap,
               *topic_args(topics), "--output", str(out)), out


def test_missing_topic_exit_2_naming_it(missing_topic_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, out = missing_topic_run
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("reconcile: error: ") and "reliability_no_such_orders (--orders-topic)" in last, last
    assert "Traceback" not in done.stderr and not list(out.glob("dt=*"))


def test_missing_topic_error_is_the_only_stderr_line(missing_topic_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, _ = missing_topic_run
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_spark_reader_without_the_connector_exit_2_naming_make_install(bootstrap: str, new_topic, tmp_path: Path) -> None:
    """Checked before Spark starts: the scheduler's log gets the one line that says what to run."""
    topics = {role: new_topic(role[:10], 1) for role in sc.ROLES}
    done = cli("--date", sc.DAY, "--bootstrap-server", bootstrap, *topic_args(topics), "--kafka-reader", "spark",
               "--output", str(tmp_path / "out"), env={"STREAMAPP_JVM_LIB": str(tmp_path / "no-jars")})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("reconcile: error: ") and "spark-kafka" in lines[0], lines
    assert "make install" in lines[0] and not (tmp_path / "out").exists()


def test_missing_topic_error_names_options_that_exist(bootstrap: str, tmp_path: Path, capsys, spark) -> None:
    args = ["--date", sc.DAY, "--bootstrap-server", bootstrap,
            *topic_args({role: f"reliability_missing_{role}" for role in sc.FLAGS}), "--output", str(tmp_path / "o")]
    assert main(args) == 2
    error = capsys.readouterr().err.strip()
    known = {flag for action in build_parser(Settings())._actions for flag in action.option_strings}
    named = {word.strip("(),") for word in error.split() if word.strip("(),").startswith("--")}
    assert named and named <= known, sorted(named - known)


def write_exports(directory: Path, topics: dict[str, str], broken_role: str, broken: Any) -> None:
    """The scenario's exports with one role's export replaced by ``broken`` (bytes, or a callable making it)."""
    sc.export(directory, topics, sc.build(regular_users=4))
    target = directory / f"{topics[broken_role]}.jsonl"
    target.unlink()
    broken(directory, topics[broken_role])


def _corrupt_parquet(d: Path, topic: str) -> None:
    (d / f"{topic}.parquet").write_bytes(b"PAR1" + b"\x00not a parquet file" * 10)


def _binary_jsonl(d: Path, topic: str) -> None:
    (d / f"{topic}.jsonl").write_bytes(bytes(range(256)) * 8)


def _empty_jsonl(d: Path, topic: str) -> None:
    (d / f"{topic}.jsonl").write_bytes(b"")


def _wrong_columns(d: Path, topic: str) -> None:
    (d / f"{topic}.jsonl").write_text('{"k": "u1", "v": 1}\n')


def _missing(d: Path, topic: str) -> None:
    pass


@pytest.mark.parametrize(("role", "breaker"), [
    ("users", _corrupt_parquet),
    ("orders", _binary_jsonl),
    ("faust_direct", _empty_jsonl),
    ("ksqldb_repartition", _wrong_columns),
    ("ksqldb_direct", _missing),
])
def test_unreadable_export_exit_2_naming_the_file(role: str, breaker: Any, tmp_path: Path, capsys, spark) -> None:
    topics = {r: f"rel_{r}" for r in sc.ROLES}
    write_exports(tmp_path / "in", topics, role, breaker)
    code = main(["--date", sc.DAY, "--source", "files", "--input", str(tmp_path / "in"),
                 *topic_args(topics), "--output", str(tmp_path / "out")])
    error = capsys.readouterr().err.strip()
    assert code == 2, error
    assert len(error.splitlines()) == 1 and error.startswith("reconcile: error: ") and topics[role] in error, error
    assert not list((tmp_path / "out").glob("dt=*"))
