"""The reconciliation job's errors on bad options and broken exports: one line naming the option or file, exit 2.

What can be checked before Spark starts is (``--master``, ``--output``, each export's kind, size, Parquet
footer and last line): those cases run the real ``python -m spark_batch.reconcile`` command, as a scheduler
does, and a Spark start would show in its stderr (Spark logs its warnings there), so exactly one line proves
the check came first. A half line in the middle of an export is no error but must be counted, not dropped:
that one runs ``main`` in-process on the session's SparkSession. The exports are written by
tests/reconcile_scenario.py (ksqlDB cannot run here; its output format is reproduced there).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import reconcile_scenario as sc
from spark_batch.errors import one_line
from spark_batch.files_source import check_export
from spark_batch.options import check_master
from spark_batch.reconcile import main
from spark_batch.window import window_for

ROOT = Path(__file__).resolve().parent.parent
TOPICS = {role: f"err_{role}" for role in sc.ROLES}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spark_batch.reconcile", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def files_args(input_dir: Path, output: Path, *extra: str) -> list[str]:
    topics = [arg for role, flag in sc.FLAGS.items() for arg in (flag, TOPICS[role])]
    return ["--date", sc.DAY, "--source", "files", "--input", str(input_dir), "--output", str(output),
            *topics, "--max-mismatch-rate", "1", *extra]


def exports(directory: Path) -> Path:
    """A good day's exports, as JSON lines (Kafka-shaped), one file per topic."""
    sc.export(directory, TOPICS, sc.build(regular_users=4))
    return directory


def jsonl(directory: Path, role: str) -> Path:
    return directory / f"{TOPICS[role]}.jsonl"


def _garbage_parquet(d: Path) -> str:
    jsonl(d, "users").unlink()
    (d / f"{TOPICS['users']}.parquet").write_bytes(os.urandom(300))
    return f"export {d / TOPICS['users']}.parquet is not a readable Parquet file: Parquet magic bytes not found"


def _empty_parquet(d: Path) -> str:
    jsonl(d, "orders").unlink()
    (d / f"{TOPICS['orders']}.parquet").write_bytes(b"")
    return f"export {d / TOPICS['orders']}.parquet is empty (0 bytes), not a Parquet file"


def _directory_named_jsonl(d: Path) -> str:
    jsonl(d, "faust_direct").unlink()
    jsonl(d, "faust_direct").mkdir()
    return f"export {jsonl(d, 'faust_direct')} is a directory with no data files in it"


def _truncated_mid_line(d: Path) -> str:
    """An export cut in the middle of its last record, as an interrupted copy leaves it."""
    path = jsonl(d, "ksqldb_repartition")
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: start + (len(data) - start) // 2])
    return f"export {path} ends in the middle of a record (its last line, from byte {start},"


@pytest.mark.parametrize("breaker", [_garbage_parquet, _empty_parquet, _directory_named_jsonl, _truncated_mid_line])
def test_broken_export_is_one_line_before_spark_starts(breaker: Callable[[Path], str], tmp_path: Path) -> None:
    words = breaker(exports(tmp_path / "in"))
    done = cli(*files_args(tmp_path / "in", tmp_path / "out"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert lines == [lines[0]] and lines[0].startswith(f"reconcile: error: {words}"), lines[:20]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("master", "words"), [
    ("nonsense", "--master='nonsense': not a Spark master URL; expected local, local[N], local[*]"),
    ("local[0]", "--master='local[0]': Spark needs at least 1 local thread"),
    ("local[two]", "--master='local[two]': not a Spark master URL"),
])
def test_bad_master_is_one_line_before_spark_starts(master: str, words: str, tmp_path: Path) -> None:
    done = cli(*files_args(exports(tmp_path / "in"), tmp_path / "out", "--master", master))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert lines == [lines[0]] and lines[0].startswith(f"reconcile: error: {words}"), lines[:20]


@pytest.mark.parametrize("master", ["local", "local[1]", "local[*]", "local[2,3]", "local[*, 4]",
                                    "local-cluster[2, 1, 1024]", "spark://host:7077", "spark://a:7077,b:7077",
                                    "yarn", "k8s://https://host:6443", None])
def test_masters_spark_accepts_pass(master: str | None) -> None:
    check_master(master)


@pytest.mark.parametrize(("output", "words"), [
    (lambda tmp: tmp / "a-file", "is a file, not a directory"),
    (lambda tmp: tmp / "a-file" / "under", "cannot create it, '{tmp}/a-file' is a file"),
])
def test_output_that_cannot_be_a_directory_is_one_line_before_spark_starts(
        output: Callable[[Path], Path], words: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    target = output(tmp_path)
    done = cli(*files_args(exports(tmp_path / "in"), target))
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [f"reconcile: error: --output='{target}': {words.format(tmp=tmp_path)}"]
    assert (tmp_path / "a-file").read_text() == "not a directory\n"


def test_half_line_inside_an_export_is_counted_undecodable(spark, tmp_path: Path) -> None:
    """A line cut short inside a file (a truncated export with another appended to it) is no record Spark
    can parse: it used to fall out of the time window without a word; it is now read and counted undecodable."""
    directory = exports(tmp_path / "in")
    path = jsonl(directory, "faust_direct")
    lines = path.read_text().splitlines(keepends=True)
    window = window_for(sc.DAY, None, None)
    in_day = [window.start_ms <= json.loads(line)["timestamp"] < window.end_ms for line in lines]
    lines[3] = lines[3][: len(lines[3]) // 2] + "\n"
    path.write_text("".join(lines))
    assert main(files_args(directory, tmp_path / "out")) == 0
    summary = json.loads((tmp_path / "out" / f"dt={sc.DAY}" / "summary.json").read_text())
    whole = sum(in_day) - in_day[3]
    assert summary["output_records"]["faust_direct"] == {"rows": whole + 1, "undecodable": 1}


def test_exports_spark_writes_pass_the_checks(spark, tmp_path: Path) -> None:
    """Spark's own output directories (part files, _SUCCESS, .crc checksums, empty parts) are exports too."""
    frame = spark.createDataFrame([(f"u{i}", i) for i in range(5)], "key string, partition int").repartition(8)
    frame.write.parquet(str(tmp_path / "t.parquet"))
    frame.write.json(str(tmp_path / "t"))
    assert any(name.startswith(".") for name in os.listdir(tmp_path / "t.parquet"))
    check_export(tmp_path / "t.parquet")
    check_export(tmp_path / "t")


def test_spark_failure_is_one_line_that_names_the_cause(spark, tmp_path: Path) -> None:
    """What Py4J says of a failed Spark call (``An error occurred while calling o71.parquet.``) names
    neither the file nor the reason; the line the job prints names both."""
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1" + b"\x00not a parquet file" * 10)
    with pytest.raises(Exception) as raised:
        spark.read.parquet(str(garbage)).collect()
    line = one_line(raised.value)
    assert "\n" not in line and "An error occurred while calling" not in line
    assert "garbage.parquet" in line, line


def test_start_then_wait_reads_only_once_told(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``--start-then-wait`` (the demo starts Spark beside the engines): nothing is checked or read until a
    line arrives on stdin; stdin closed first is one line, exit 2; told to go, the summary is the plain run's."""
    directory = exports(tmp_path / "in")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(files_args(directory, tmp_path / "closed", "--start-then-wait")) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "reconcile: error: --start-then-wait: standard input closed before the line that starts the reading"]
    assert not list((tmp_path / "closed").glob("*dt=*")), "read before it was told to"
    monkeypatch.setattr(sys, "stdin", io.StringIO("go\n"))
    assert main(files_args(directory, tmp_path / "told", "--start-then-wait")) == 0
    assert main(files_args(directory, tmp_path / "plain")) == 0
    told, plain = (json.loads((tmp_path / run / f"dt={sc.DAY}" / "summary.json").read_text()) for run in ("told", "plain"))
    assert told == plain
    assert sorted(p.name for p in (tmp_path / "told").iterdir()) == [f"dt={sc.DAY}"], "the warm-up left files behind"
