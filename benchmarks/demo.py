"""The whole ``streamapp demo`` (``make demo`` after installation), wall time, against a baseline in the same run.

Alternates, in ONE run, two demos with the same seed:

- baseline: ``streamapp demo --no-reconcile``: Apache Kafka, the Faust worker and the
  Kafka Streams program (started side by side), both producer runs and their reports;
- current: ``streamapp demo``: the same, then the Spark reconciliation of the two
  engines, both read from Kafka by Spark's Kafka source (JVM start included),

and prints each one's wall time (process start to exit), its phases as the demo
prints them, and the load average at its start (the machine is shared), with the
medians as a ratio against the baseline.

    .venv/bin/python benchmarks/demo.py --rounds 3
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = {
    "broker": r"Apache Kafka .* after ([\d.]+)s",
    "engines": r"Kafka Streams ready .* after ([\d.]+)s",
    "run 1": r"Run 1 took ([\d.]+)s",
    "run 2": r"Run 2 took ([\d.]+)s",
    "reconciliation": r"Reconciliation took ([\d.]+)s",
}


def demo(kind: str, seed: int) -> tuple[float, dict[str, float], float]:
    """One demo: its wall seconds, its phases (seconds) and the 1-minute load average at its start."""
    cmd = [sys.executable, "-m", "streamapp", "demo", "--seed", str(seed)]
    if kind == "baseline":
        cmd.append("--no-reconcile")
    load = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{kind} demo failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    phases = {name: float(m.group(1)) for name, pattern in PHASES.items()
              if (m := re.search(pattern, done.stdout))}
    return took, phases, load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"baseline": [], "current": []}
    for round_number in range(args.rounds):
        for kind in ("baseline", "current") if round_number % 2 == 0 else ("current", "baseline"):
            took, phases, load = demo(kind, args.seed)
            times[kind].append(took)
            shown = ", ".join(f"{name} {seconds:.1f}" for name, seconds in phases.items())
            print(f"round {round_number + 1} {kind}: {took:.1f} s (load {load:.1f}; {shown})", flush=True)
    base, current = statistics.median(times["baseline"]), statistics.median(times["current"])
    print(f"Whole demo (median of {args.rounds}): baseline (--no-reconcile) {base:.1f} s, current {current:.1f} s "
          f"= {current / base:.2f}x the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
