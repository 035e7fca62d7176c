"""CPU seconds of a process's threads from ``/proc``: what the benchmarks split a process's CPU by (a JVM's stream
thread against its JIT compilers and collector, Spark's driver against its executors' kinds)."""
from __future__ import annotations

import os
from pathlib import Path


def task_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of ``pid`` by its id: its name (the kernel keeps 15 characters) and its CPU seconds, user and
    system; a thread gone since the listing, or the process, is left out."""
    ticks = os.sysconf("SC_CLK_TCK")
    tasks: dict[int, tuple[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        tasks[int(task.name)] = name, (int(fields[11]) + int(fields[12])) / ticks
    return tasks
