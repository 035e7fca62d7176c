"""How fast streamapp's murmur2 partitioner is, next to zlib.crc32 and aiokafka's murmur2, in one run.

Prints ns per 32-byte key for single calls and for the batch API, each as a
ratio to a ``zlib.crc32`` call measured in the same run (a C hash of the same
key: the cheapest thing Python can call per key).  Goals from issue 3: a single
murmur2 partition call at most 2x a crc32 call; batch at least 10 M keys/s on one core.

    .venv/bin/python benchmarks/partitioners.py [--keys 1000000] [--repeat 7]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import random
import timeit
import zlib

import confluent_kafka
import numpy as np
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamapp.partitioners import FAST, REFERENCE_PARTITIONERS, get_partitioner, hashes, partition

KEY_SIZE = 32
PARTITIONS = 6


def per_call_ns(stmt: str, env: dict[str, object], number: int, repeat: int) -> float:
    """Best of ``repeat`` runs (the least disturbed by other processes), in ns per execution of ``stmt``."""
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=repeat)) / number * 1e9


def librdkafka_murmur2() -> ctypes._CFuncPtr:
    """librdkafka's own exported partitioner (the third technique considered), from the confluent-kafka wheel."""
    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    lib = ctypes.CDLL(os.path.join(libs, sorted(f for f in os.listdir(libs) if f.startswith("librdkafka"))[0]))
    fn = lib.rd_kafka_msg_partitioner_murmur2
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    return fn


def numpy_murmur2_batch(keys: list[bytes], n: int) -> np.ndarray:
    """murmur2 partitions vectorized with numpy (the second technique considered); fixed 32-byte keys only."""
    m = np.uint32(0x5BD1E995)
    words = np.frombuffer(b"".join(keys), dtype="<u4").reshape(len(keys), KEY_SIZE // 4)
    h = np.full(len(keys), 0x9747B28C ^ KEY_SIZE, dtype=np.uint32)
    for i in range(KEY_SIZE // 4):
        k = words[:, i] * m
        k ^= k >> np.uint32(24)
        k *= m
        h *= m
        h ^= k
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return (h & np.uint32(0x7FFFFFFF)) % np.uint32(n)


def measure(keys: int, repeat: int) -> list[tuple[str, float]]:
    murmur = get_partitioner("murmur2")
    env: dict[str, object] = {
        "key": os.urandom(KEY_SIZE),
        "batch": [os.urandom(KEY_SIZE) for _ in range(keys)],
        "n": PARTITIONS,
        "crc32": zlib.crc32,
        "murmur": murmur,
        "choose": murmur.choose,
        "partition": partition,
        "aiokafka_murmur2": aiokafka_murmur2,
        "reference": REFERENCE_PARTITIONERS["murmur2"],
        "spec_murmur2": hashes.murmur2,
        "rdk": librdkafka_murmur2(),
        "key_len": KEY_SIZE,
        "numpy_batch": numpy_murmur2_batch,
    }
    expected = murmur.partition_batch(env["batch"], PARTITIONS)
    assert numpy_murmur2_batch(env["batch"], PARTITIONS).tolist() == expected, "numpy variant is wrong"
    assert env["rdk"](None, env["key"], KEY_SIZE, PARTITIONS, None, None) == murmur(env["key"], PARTITIONS)
    calls = 200_000
    single = [
        ("zlib.crc32(key)  [baseline]", "crc32(key)", calls),
        ("streamapp get_partitioner('murmur2').choose(key, n)", "choose(key, n)", calls),
        ("streamapp get_partitioner('murmur2')(key, n)", "murmur(key, n)", calls),
        ("streamapp partition('murmur2', key, n)", "partition('murmur2', key, n)", calls),
        ("librdkafka rd_kafka_msg_partitioner_murmur2 via ctypes", "rdk(None, key, key_len, n, None, None)", calls // 4),
        ("aiokafka murmur2(key) (pure Python, no % n)", "aiokafka_murmur2(key)", calls // 20),
        ("streamapp reference (pure-Python spec)", "reference(key, n)", calls // 20),
        ("streamapp hashes.murmur2(key) (spec, hash only)", "spec_murmur2(key)", calls // 20),
    ]
    rows = [(label, per_call_ns(stmt, env, number, repeat)) for label, stmt, number in single]
    rows.append((f"streamapp partition_batch('murmur2', {keys:,} keys, n) per key",
                 per_call_ns("murmur.partition_batch(batch, n)", env, 1, repeat) / keys))
    rows.append((f"numpy vectorized murmur2, {keys:,} keys (join + hash) per key",
                 per_call_ns("numpy_batch(batch, n)", env, 1, repeat) / keys))
    rows.append((f"[zlib.crc32(k) for k in {keys:,} keys] per key",
                 per_call_ns("[crc32(k) for k in batch]", env, 1, repeat) / keys))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in the batch measurement")
    parser.add_argument("--repeat", type=int, default=7, help="timing repeats; the best is kept")
    args = parser.parse_args()
    random.seed(0)
    rows = measure(args.keys, args.repeat)
    baseline = rows[0][1]
    table = Table(title=f"murmur2 partition of a {KEY_SIZE}-byte key, {PARTITIONS} partitions (C fast path: {FAST})")
    table.add_column("what")
    table.add_column("ns/key", justify="right")
    table.add_column("x zlib.crc32 call", justify="right")
    for label, ns in rows:
        table.add_row(escape(label), f"{ns:,.1f}", f"{ns / baseline:,.2f}x")
    console = Console(width=110)
    console.print(table)
    single = dict(rows)["streamapp get_partitioner('murmur2')(key, n)"]
    batch_ns = rows[-3][1]
    console.print(
        f"Single call: {single / baseline:.2f}x a crc32 call (goal <= 2x); "
        f"aiokafka's murmur2: {dict(rows)['aiokafka murmur2(key) (pure Python, no % n)'] / baseline:.1f}x. "
        f"Batch: {1e3 / batch_ns:,.1f} M keys/s on one core (goal >= 10), "
        f"{batch_ns / baseline:.2f}x a crc32 call per key."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
