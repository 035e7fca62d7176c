"""The windowed join's pure engine alone (``streamapp.sql.stream_join.StreamJoin``, state in memory, one task), in
CPU-µs a record, next to a baseline of JSON in and out (``json.loads`` then ``json.dumps`` of each record's value)
timed in the same rounds: no broker, no RocksDB, so what the engine itself costs the worker per record.

The records are ``stream_join.py``'s (``stream_join.sql``: orders × shipments, LEFT JOIN WITHIN 1 HOUR GRACE PERIOD
30 MINUTES, in event-time order, and a last shipment later than every window); every round's output must be exactly
the rows ``expected_rows`` derives from them.  The records and the rest built before the timing are frozen out of
the garbage collector's reach (``gc.freeze``): what it still does is the engine's (its state is held in memory
here).  ``--compare DIR`` times the engine of another tree too (a ``git archive`` of an older commit's
``streamapp``, with the partitioners' built extension copied in), each round in child
processes, alternating which goes first: the before and after of a change, at the same load.  ``--profile`` prints
where this tree's engine spends its time (cProfile, one more pass).

    .venv/bin/python benchmarks/stream_join_engine.py [--orders 50000] [--rounds 5] [--compare DIR] [--profile]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def measure(orders: int) -> dict[str, Any]:
    """One round in this process: the baseline's and the engine's CPU seconds on the same records."""
    sys.path.insert(0, str(HERE))
    import stream_join as bench  # noqa: PLC0415 - after the tree to time is first on the path
    from streamapp.sql import plan as p  # noqa: PLC0415
    from streamapp.sql.engine import Record  # noqa: PLC0415
    from streamapp.sql.planner import plan_text  # noqa: PLC0415
    from streamapp.sql.stream_join import StreamJoin  # noqa: PLC0415

    events = bench.generate(orders, 10, 1_700_000_000_000)
    encoded = bench.encoded(events, "x")
    last = max(r[3] for r in encoded) + bench.RETENTION + bench.MINUTE
    encoded.append(("shipments_x", bench.key_bytes(-1), b"{}", last))
    records = [Record(topic, key, value, timestamp, 0, offset)
               for offset, (topic, key, value, timestamp) in enumerate(encoded)]
    plan = plan_text(bench.STATEMENTS.read_text(encoding="utf-8").replace("{tag}", "x"))
    query = next(q for q in plan.queries if q.kind == p.STREAM_STREAM_JOIN)
    ticks = iter(range(0, 2**62, 10**6))
    join = StreamJoin(plan, query, clock=lambda: next(ticks))
    loads, dumps, process = json.loads, json.dumps, join.process
    gc.collect()  # the records and events built here are no part of the engine: the collector passes them by
    gc.freeze()

    started = time.process_time()
    for record in records:
        dumps(loads(record.value)).encode()
    baseline = time.process_time() - started
    outputs: list[Any] = []
    started = time.process_time()
    for record in records:
        outputs += process(record)
    engine = time.process_time() - started
    problem = bench.check_rows(bench.expected_rows(events), Counter(
        bench.decoded(o.record.key, o.record.value, o.record.timestamp) for o in outputs).elements())
    if problem:
        raise SystemExit(f"the engine's rows are not the expected ones: {problem}")
    return {"records": len(records), "outputs": len(outputs), "baseline_s": baseline, "engine_s": engine,
            "load": os.getloadavg()[0], "tree": str(Path(sys.modules["streamapp"].__file__ or "").parent.parent)}


def child(tree: Path, orders: int) -> dict[str, Any]:
    """One round in a child process whose ``streamapp`` is ``tree``'s."""
    done = subprocess.run([sys.executable, __file__, "child", "--orders", str(orders)], check=True, text=True,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def profile(orders: int) -> None:
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415
    cProfile.runctx("measure(orders)", globals(), {"orders": orders}, "/tmp/stream_join_engine.prof")
    pstats.Stats("/tmp/stream_join_engine.prof").sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=["child"], help=argparse.SUPPRESS)
    parser.add_argument("--orders", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", type=Path, help="another tree holding streamapp/ (e.g. a git archive)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.mode == "child":
        print(json.dumps(measure(args.orders)))
        return
    this = HERE.parent
    trees = [this] if args.compare is None else [this, args.compare.resolve()]
    results: dict[Path, list[dict[str, Any]]] = {tree: [] for tree in trees}
    for round_ in range(1, args.rounds + 1):
        order = trees if round_ % 2 else trees[::-1]
        for tree in order:
            result = child(tree, args.orders)
            results[tree].append(result)
            per = 1e6 / result["records"]
            print(f"round {round_} {tree}: engine {result['engine_s'] * per:.2f} CPU-us a record, baseline "
                  f"{result['baseline_s'] * per:.2f} ({result['engine_s'] / result['baseline_s']:.2f}x); "
                  f"{result['records']:,} records, {result['outputs']:,} rows, exactly the expected ones; "
                  f"load {result['load']:.1f}", flush=True)
    for tree, rounds in results.items():
        per = 1e6 / rounds[0]["records"]
        engine = statistics.median(r["engine_s"] * per for r in rounds)
        ratio = statistics.median(r["engine_s"] / r["baseline_s"] for r in rounds)
        loads = [r["load"] for r in rounds]
        print(f"{tree}: median engine {engine:.2f} CPU-us a record, {ratio:.2f}x the baseline "
              f"({len(rounds)} rounds, load {min(loads):.1f}-{max(loads):.1f})")
    if len(trees) == 2:
        before, after = (results[t] for t in trees[::-1])
        ratios = [a["engine_s"] / b["engine_s"] for a, b in zip(after, before)]
        print(f"this tree's engine / {trees[1]}'s, round by round: " + ", ".join(f"{r:.2f}" for r in ratios)
              + f"; median {statistics.median(ratios):.2f}")
    if args.profile:
        sys.path.insert(0, str(this))
        profile(args.orders)


if __name__ == "__main__":
    main()
