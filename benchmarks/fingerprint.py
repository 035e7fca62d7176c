"""Cost of scoring a fingerprint, as a ratio to one batch partition call over the same keys.

``score`` runs every known partitioner over the keys as stored, JSON-quoted and
(for JSON keys) unquoted, so its floor is about partitioners x forms batch calls;
this shows how close it gets.  Run: ``.venv/bin/python benchmarks/fingerprint.py``.
"""
from __future__ import annotations

import json
import time
from typing import Callable

from streamapp.copartition.fingerprint import score
from streamapp.partitioners import PARTITIONERS, partition_batch

N = 6
SIZES = (1_000, 100_000)


def best_of(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    print(f"{len(PARTITIONERS)} partitioners, {N} partitions, best of 5")
    print(f"{'sample':>8} {'key form':<12} {'baseline ns/key':>16} {'score ns/key':>13} {'ratio':>8}")
    for size in SIZES:
        for label, make in (("raw", lambda i: f"user{i}".encode()), ("JSON", lambda i: json.dumps(f"user{i}").encode())):
            keys = [make(i) for i in range(size)]
            samples = list(zip(keys, partition_batch("murmur2", keys, N)))
            baseline = best_of(5, lambda: partition_batch("murmur2", keys, N)) / size * 1e9
            scoring = best_of(5, lambda: score(samples, N)) / size * 1e9
            print(f"{size:>8,} {label:<12} {baseline:>16.1f} {scoring:>13.1f} {scoring / baseline:>7.1f}x")


if __name__ == "__main__":
    main()
