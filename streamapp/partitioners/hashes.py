"""The hash functions Kafka clients partition keys with, in plain Python.

This module is the specification: every fast path in streamapp is tested to
give exactly these results.  All functions take the key bytes and return an
unsigned 32-bit int (the same bits Java sees as a signed int).
"""
from __future__ import annotations

import zlib

MASK32 = 0xFFFFFFFF

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
FNV1A_OFFSET = 0x811C9DC5
FNV1A_PRIME = 0x01000193


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Java ``Utils.murmur2``, librdkafka ``rd_murmur2``), as uint32."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & MASK32
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * MURMUR2_M) & MASK32
        k ^= k >> 24
        k = (k * MURMUR2_M) & MASK32
        h = (h * MURMUR2_M) & MASK32
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * MURMUR2_M) & MASK32
    h ^= h >> 13
    h = (h * MURMUR2_M) & MASK32
    h ^= h >> 15
    return h


def to_signed32(value: int) -> int:
    value &= MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def to_positive(value: int) -> int:
    """Java ``Utils.toPositive``: clears the sign bit (not ``abs``)."""
    return value & 0x7FFFFFFF


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE), librdkafka's ``consistent`` hash; equal to ``zlib.crc32``."""
    return zlib.crc32(data) & MASK32


def fnv1a_raw(data: bytes) -> int:
    """Plain 32-bit FNV-1a."""
    h = FNV1A_OFFSET
    for byte in data:
        h ^= byte
        h = (h * FNV1A_PRIME) & MASK32
    return h


def fnv1a(data: bytes) -> int:
    """librdkafka ``rd_fnv1a`` and Sarama's default: FNV-1a as int32, negated if negative.

    INT32_MIN negates to itself, so it stays 0x80000000.
    """
    h = to_signed32(fnv1a_raw(data))
    if h < 0:
        h = -h
    return h & MASK32
