"""Orders joined per second by one worker with its metrics on and off, in the same run (issue 35: on >= 0.95x off).

"On" is the worker as it ships (``metrics`` true): ``/metrics`` served and its instruments installed (every batch
handler timed, the joined topics' keys checked against the declared partitioner, the commit sensor, a cause for
each miss), and nobody scrapes it. "Off" is ``STREAMAPP_METRICS=false``: no route, no instruments. Each run is
:func:`worker.bench_worker` of benchmarks/worker.py (its own topics, group and data directory; users loaded first,
the clock from the first order produced to the last one out of both outputs, every output record checked to
carry its user). Rounds alternate which of the two goes first, so that a drift of the machine's load falls on
both; a round's figure is on ÷ off, per wall-clock second and per CPU second of the worker, and the run's figure
is the median of the rounds. The 1-minute load average is printed with each run: on a shared machine it says
how far to trust a round.

    .venv/bin/python benchmarks/metrics.py [--orders 200000] [--users 10000] [--rounds 6]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from worker import Rate, bench_worker, orders_records, users_records

console = Console(width=160)
#: The goal of issue 35: the worker with its metrics on keeps this share of its rate with them off.
GOAL = 0.95


def expect_metrics(on: bool) -> Callable[[WorkerProcess], None]:
    """A check that the started worker serves ``/metrics`` (200) when on and not at all (404) when off."""
    def check(worker: WorkerProcess) -> None:
        status = worker.get("/metrics").status_code
        if status != (200 if on else 404):
            raise RuntimeError(f"metrics {'on' if on else 'off'}: GET /metrics answered {status}")
    return check


def ratios(pairs: list[tuple[Rate, Rate]]) -> tuple[float, float]:
    """Median of the rounds' on ÷ off, per wall-clock second and per CPU second."""
    return (statistics.median(on.wall / off.wall for on, off in pairs),
            statistics.median(on.cpu / off.cpu for on, off in pairs))


def run(args: argparse.Namespace) -> None:
    users = users_records(args.users, seed=1)
    orders = orders_records([k for k, _ in users], args.orders, seed=2)
    table = Table(title=f"Metrics on ÷ off: {args.orders:,} orders, {args.users:,} users, Apache Kafka, "
                        f"{args.rounds} rounds alternating which goes first")
    for column in ("round", "first", "on", "off", "on ÷ off", "on per CPU-s", "off per CPU-s", "on ÷ off (CPU)",
                   "load on", "load off"):
        table.add_column(column, justify="right")
    pairs: list[tuple[Rate, Rate]] = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = broker.settings(Settings())
        for round_ in range(1, args.rounds + 1):
            rates: dict[bool, Rate] = {}
            load: dict[bool, float] = {}
            order = (True, False) if round_ % 2 else (False, True)
            for on in order:
                rates[on] = bench_worker(base.replace(web_port=free_port(), metrics=on), tmp, users, orders,
                                         check=expect_metrics(on))
                load[on] = os.getloadavg()[0]
                console.print(f"round {round_}: metrics {'on' if on else 'off'} {rates[on].wall:,.0f}/s, "
                              f"{rates[on].cpu:,.0f} per CPU-s, load {load[on]:.1f}")
            on, off = rates[True], rates[False]
            pairs.append((on, off))
            table.add_row(str(round_), "on" if order[0] else "off", f"{on.wall:,.0f}/s", f"{off.wall:,.0f}/s",
                          f"{on.wall / off.wall:.3f}×", f"{on.cpu:,.0f}", f"{off.cpu:,.0f}",
                          f"{on.cpu / off.cpu:.3f}×", f"{load[True]:.1f}", f"{load[False]:.1f}")
    wall, cpu = ratios(pairs)
    table.add_row("median", "", "", "", f"{wall:.3f}×", "", "", f"{cpu:.3f}×", "", "")
    console.print(table)
    console.print(f"Metrics on ÷ off, median of {len(pairs)} rounds: {wall:.3f}× wall, {cpu:.3f}× per CPU-s "
                  f"(goal ≥ {GOAL}×: {'met' if min(wall, cpu) >= GOAL else 'not met'})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
