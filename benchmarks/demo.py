"""The demo's Spark reconciliation: the job as ``streamapp demo`` runs it vs how it ran before (baseline).

Runs the demo once (Apache Kafka, worker, both producer runs) to get its
topic exports, then alternates, in ONE run, the reconciliation subprocess

- baseline: the demo's previous Spark settings (C2 JIT, progress bars) and
  schema inference on every JSON-lines export (one Spark job each);
- current: ``streamapp.cli.demo.SPARK_SUBMIT_ARGS`` and the explicit schema,

and prints wall times (subprocess start to exit: JVM start included) as ratios
against the baseline.  Both must write the same summary.

    .venv/bin/python benchmarks/demo.py --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import streamapp.cli.demo as demo  # noqa: E402
from streamapp.cli import main as cli_main  # noqa: E402

BASELINE_SUBMIT_ARGS = ("--conf spark.sql.shuffle.partitions=2 --conf spark.default.parallelism=2 "
                        "--conf spark.ui.enabled=false --conf spark.sql.adaptive.coalescePartitions.initialPartitionNum=2 "
                        "pyspark-shell")
#: The baseline's job: the explicit JSON schema switched off, so every export is inferred as before.
BASELINE_JOB = ("import sys, spark_batch.files_source as f; f.raw_json_schema = lambda line: None; "
                "from spark_batch.reconcile import main; sys.exit(main(sys.argv[1:]))")


def capture_exports(keep: Path) -> dict[str, Any]:
    """Run ``streamapp demo --no-reconcile``-like: the demo itself, its exports and job command kept, Spark not run."""
    captured: dict[str, Any] = {}
    original_export = demo.export_topics

    def export_topics(settings: Any, directory: Path) -> None:
        original_export(settings, directory)
        shutil.copytree(directory, keep)

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        captured.update(cmd=cmd, env=kwargs["env"])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    demo.export_topics, real_run = export_topics, demo.subprocess.run
    demo.subprocess.run = run
    try:
        cli_main(["demo"])
    finally:
        demo.export_topics, demo.subprocess.run = original_export, real_run
    return captured


def job(kind: str, captured: dict[str, Any], exports: Path, output: Path) -> tuple[float, dict[str, Any]]:
    cmd = list(captured["cmd"])
    cmd[cmd.index("--input") + 1], cmd[cmd.index("--output") + 1] = str(exports), str(output)
    args = cmd[3:]  # after python -m spark_batch.reconcile
    env = dict(captured["env"])
    if kind == "baseline":
        cmd, env["PYSPARK_SUBMIT_ARGS"] = [sys.executable, "-c", BASELINE_JOB, *args], BASELINE_SUBMIT_ARGS
    shutil.rmtree(output, ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{kind} job failed: {done.stderr.strip().splitlines()[-1:]}")
    summary = json.loads(next(output.glob("dt=*/summary.json")).read_text())
    summary.pop("versions")
    return took, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        exports = Path(tmp) / "exports"
        captured = capture_exports(exports)
        times: dict[str, list[float]] = {"baseline": [], "current": []}
        summaries = {}
        for round_number in range(args.rounds):
            for kind in ("baseline", "current") if round_number % 2 == 0 else ("current", "baseline"):
                took, summaries[kind] = job(kind, captured, exports, Path(tmp) / kind)
                times[kind].append(took)
                print(f"round {round_number + 1} {kind}: {took:.1f} s", flush=True)
        if summaries["baseline"] != summaries["current"]:
            raise SystemExit("the two jobs wrote different summaries")
    base, current = statistics.median(times["baseline"]), statistics.median(times["current"])
    print(f"Reconciliation job (median of {args.rounds}): baseline {base:.1f} s, current {current:.1f} s "
          f"= {current / base:.2f}x the baseline; same summary: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
