"""Apache Kafka's start-to-ready time, as a ratio to a bare ``java -version`` measured in the same run.

What the demo, the tests' session fixture and ``streamapp broker`` wait for:
``EmbeddedBroker().start()`` on a fresh temporary data directory (a storage-format
JVM, then the broker's JVM, then ready = it answers Metadata and its controller
accepts a topic), and the same on a data directory formatted before (a restart,
no format step).  The baseline is the cost of starting the same ``java`` at all.
Rounds interleave the three so that load from other work hits each alike.  Besides
the wall time, the CPU seconds of the JVMs until ready (the format JVM and the
broker's, read from /proc; Linux) are less sensitive to other work on the machine.

Run: ``.venv/bin/python benchmarks/broker.py [--rounds 5]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from streamapp.kafka.broker import EmbeddedBroker
from streamapp.kafka.jvm import java


def children_cpu() -> float:
    """CPU seconds of this process's finished children (the format JVM, ``java -version``)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds of a running process, all its threads (/proc/<pid>/stat utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def java_version_seconds(java_bin: str) -> tuple[float, float]:
    """(wall, CPU) seconds of a bare ``java -version``."""
    cpu, started = children_cpu(), time.perf_counter()
    subprocess.run([java_bin, "-version"], check=True, capture_output=True)
    return time.perf_counter() - started, children_cpu() - cpu


def broker_seconds(data_dir: Path | None) -> tuple[float, float, float]:
    """(start until ready, its JVMs' CPU until ready, stop) of one broker; ``data_dir=None`` is a fresh temporary one."""
    broker = EmbeddedBroker(data_dir=data_dir)
    cpu, started = children_cpu(), time.perf_counter()
    broker.start()
    ready = time.perf_counter() - started
    assert broker.pid is not None
    ready_cpu = children_cpu() - cpu + process_cpu(broker.pid)
    started = time.perf_counter()
    broker.stop()
    return ready, ready_cpu, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    java_bin = java()
    kept = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    try:
        broker_seconds(kept)  # formats it: the restarts below skip the format step
        times: dict[str, list[float]] = {"java -version": [], "fresh": [], "restart": []}
        cpus: dict[str, list[float]] = {key: [] for key in times}
        stops: list[float] = []
        load = os.getloadavg()[0]
        for n in range(rounds):
            wall, cpu = java_version_seconds(java_bin)
            times["java -version"].append(wall)
            cpus["java -version"].append(cpu)
            for key, data_dir in (("fresh", None), ("restart", kept)):
                wall, cpu, stop = broker_seconds(data_dir)
                times[key].append(wall)
                cpus[key].append(cpu)
                stops.append(stop)
            print(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s ({cpus[k][-1]:.2f} CPU s)" for k, v in times.items()),
                  flush=True)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    labels = {"java -version": "`java -version` (baseline)", "fresh": "`EmbeddedBroker().start()`, fresh data dir",
              "restart": "`EmbeddedBroker(data_dir=formatted).start()`"}
    base_wall, base_cpu = statistics.median(times["java -version"]), statistics.median(cpus["java -version"])
    print(f"\n{java_bin}, median of {rounds}, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"{'start until ready':<46} {'wall s':>7} {'x':>7} {'CPU s':>7} {'x':>7}")
    for key, label in labels.items():
        wall, cpu = statistics.median(times[key]), statistics.median(cpus[key])
        print(f"{label:<46} {wall:>7.2f} {wall / base_wall:>6.0f}x {cpu:>7.2f} {cpu / base_cpu:>6.0f}x")
    print(f"stop (SIGTERM, controlled shutdown), median {statistics.median(stops):.2f} s")


if __name__ == "__main__":
    main()
