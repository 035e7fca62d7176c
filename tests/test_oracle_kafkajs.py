"""streamapp's kafkajs partitioners against the REAL kafkajs 2.2.4, run by the machine's Node.js.

tests/kafkajs/oracle.js calls kafkajs' public ``Partitioners.LegacyPartitioner()`` (the
default before 2.0, with its broken murmur2) and ``Partitioners.DefaultPartitioner()``
(Java-compatible) on 20,000 random keys (empty, binary, non-ASCII, up to 2,000 bytes) passed hex-encoded in a file, plus the two murmur2
modules themselves.  kafkajs is installed from the npm registry by ``make install``
(``npm ci --prefix tests/kafkajs``, pinned by tests/kafkajs/package-lock.json).
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

from oracle_keys import random_keys

from streamapp.partitioners import PARTITIONERS, REFERENCE_PARTITIONERS, get_partitioner, hashes, registry

ORACLE_DIR = Path(__file__).parent / "kafkajs"
COUNTS = (1, 6, 7, 100)
#: kafkajs hashes ~30x slower than the C path and its partitioners rehash per call: 20,000 keys take ~6 s.
KEY_COUNT = 20_000
REFERENCE_SAMPLE = 5_000


def run_oracle(tmp_path: Path, keys: list[bytes]) -> list[list[int]]:
    node = shutil.which("node")
    assert node, "Node.js is required for the kafkajs oracle: install it, e.g. 'apt-get install nodejs npm'"
    assert (ORACLE_DIR / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: run 'make install'"
    keys_file, out_file = tmp_path / "keys.hex", tmp_path / "kafkajs.out"
    keys_file.write_text("".join(k.hex() + "\n" for k in keys), encoding="ascii")
    subprocess.run(
        [node, str(ORACLE_DIR / "oracle.js"), str(keys_file), ",".join(map(str, COUNTS)), str(out_file)],
        check=True, capture_output=True, text=True, timeout=300, cwd=ORACLE_DIR,
    )
    return [list(map(int, line.split())) for line in out_file.read_text(encoding="ascii").splitlines()]


def test_kafkajs_agrees_on_random_keys(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(8), "big")
    keys = random_keys(random.Random(seed), KEY_COUNT)
    rows = run_oracle(tmp_path, keys)
    assert len(rows) == len(keys), f"seed={seed}"

    fast = registry._fast
    assert fast is not None, "the C fast path is not built"
    assert [hashes.to_signed32(fast.kafkajs_legacy_murmur2(k)) for k in keys] == [r[0] for r in rows], f"seed={seed}"
    assert [hashes.to_signed32(fast.murmur2(k)) for k in keys] == [r[1] for r in rows], f"seed={seed}"
    sample = keys[:REFERENCE_SAMPLE]
    assert [hashes.to_signed32(hashes.kafkajs_legacy_murmur2(k)) for k in sample] == [r[0] for r in rows[:REFERENCE_SAMPLE]]

    for i, n in enumerate(COUNTS):
        legacy = [row[2 + 2 * i] for row in rows]
        default = [row[3 + 2 * i] for row in rows]
        assert get_partitioner("kafkajs-legacy").partition_batch(keys, n) == legacy, f"n={n} seed={seed}"
        assert get_partitioner("kafkajs").partition_batch(keys, n) == default, f"n={n} seed={seed}"
        assert REFERENCE_PARTITIONERS["kafkajs_legacy"].partition_batch(sample, n) == legacy[:REFERENCE_SAMPLE]


def test_legacy_and_default_kafkajs_disagree(tmp_path: Path) -> None:
    """Upgrading kafkajs to 2.x without ``createPartitioner: Partitioners.LegacyPartitioner`` moves most keys."""
    keys = [f"user_{i}".encode() for i in range(3000)]
    rows = run_oracle(tmp_path, keys)
    n_index = COUNTS.index(6)
    moved = sum(row[2 + 2 * n_index] != row[3 + 2 * n_index] for row in rows) / len(keys)
    assert 0.75 < moved < 0.92, f"expected ~5/6 of keys to move, got {moved:.2%}"
    assert PARTITIONERS["kafkajs_legacy"].partition_batch(keys, 6) == [row[2 + 2 * n_index] for row in rows]
