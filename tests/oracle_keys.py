"""Random keys for the oracle tests: the mix every client must agree on."""
from __future__ import annotations

import random


def random_keys(rng: random.Random, count: int) -> list[bytes]:
    """Empty, short binary, non-ASCII text, JSON-quoted ids and long keys, in a fixed mix."""
    keys: list[bytes] = [b"", b"\x00", b"\xff\xff\xff\xff", "ключ-üñï-🔑".encode(), b'"user_42"', b"user_42"]
    makers = [
        lambda: rng.randbytes(rng.randrange(0, 33)),
        lambda: "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0xA0, 0x3000), rng.randrange(0x1F300, 0x1F600)])) for _ in range(rng.randrange(1, 20))).encode(),
        lambda: f"user_{rng.randrange(10**6)}".encode(),
        lambda: rng.randbytes(rng.randrange(33, 2000)),
    ]
    while len(keys) < count:
        keys.append(makers[len(keys) % len(makers)]())
    return keys
