"""The hash functions Kafka clients partition keys with, in plain Python.

This module is the specification: every fast path in streamapp (the C
extension ``_fast``) is tested to give exactly these results, and these are
tested against upstream vectors, the real librdkafka and the real Java client.
Every function takes the key bytes and returns an unsigned 32-bit int (the
same bits Java and JavaScript see as a signed int32), except where noted.
"""
from __future__ import annotations

import zlib

MASK32 = 0xFFFFFFFF

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
FNV1A_OFFSET = 0x811C9DC5
FNV1A_PRIME = 0x01000193


def murmur2(data: bytes) -> int:
    """Kafka's murmur2: Java ``Utils.murmur2`` (as uint32), librdkafka ``rd_murmur2``.

    MurmurHash2 with seed 0x9747b28c; little-endian words; the 1-3 tail bytes
    fall through (3: ``<<16``, 2: ``<<8``, 1: xor then multiply).
    """
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
    """The int32 a Java/Go/JS program sees for these 32 bits."""
    value &= MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def to_positive(value: int) -> int:
    """Java ``Utils.toPositive``: clears the sign bit (not ``abs``, so INT32_MIN becomes 0)."""
    return value & 0x7FFFFFFF


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE), librdkafka's ``consistent`` hash; equal to ``zlib.crc32``. ``crc32(b"") == 0``."""
    return zlib.crc32(data) & MASK32


def fnv1a_raw(data: bytes) -> int:
    """Plain 32-bit FNV-1a, Go's ``hash/fnv.New32a().Sum32()``."""
    h = FNV1A_OFFSET
    for byte in data:
        h ^= byte
        h = (h * FNV1A_PRIME) & MASK32
    return h


def fnv1a(data: bytes) -> int:
    """librdkafka ``rd_fnv1a``, equal to Sarama's default ``NewHashPartitioner`` after ``% n``.

    FNV-1a as int32, negated if negative; INT32_MIN negates to itself, so it
    stays 0x80000000 and, unsigned, still gives Sarama's ``abs(int32 % n)``.
    """
    h = to_signed32(fnv1a_raw(data))
    if h < 0:
        h = -h
    return h & MASK32


def _js_int32(value: int | float) -> int:
    """ECMAScript ToInt32 of an integer-valued number: its exact value modulo 2**32, signed."""
    return to_signed32(int(value))


def kafkajs_legacy_murmur2(data: bytes) -> int:
    """kafkajs ``LegacyPartitioner``'s murmur2 (its default before 2.0), as uint32.

    A faithful port of tulios/kafkajs ``src/producer/partitioners/legacy/murmur2.js``
    with JavaScript number semantics, which make it differ from Kafka's murmur2:
    the word loop runs ``ceil(len / 4)`` times (``i < length / 4`` on a float),
    so a partial last word is mixed in with missing bytes read as 0 *and* again
    as the tail; and ``k *= M`` / ``h *= M`` multiply in IEEE doubles, rounding
    products above 2**53 before ``^``/``>>>`` truncate them to 32 bits.
    """
    length = len(data)
    m = float(MURMUR2_M)

    def byte(i: int) -> int:
        return data[i] if i < length else 0

    h: int | float = _js_int32(MURMUR2_SEED ^ length)
    for i4 in range(0, length, 4):
        k: int | float = byte(i4) + (byte(i4 + 1) << 8) + (byte(i4 + 2) << 16) + _js_int32(byte(i4 + 3) << 24)
        k = float(k) * m
        k = _js_int32(k) ^ ((int(k) & MASK32) >> 24)
        k = float(k) * m
        h = float(h) * m
        h = _js_int32(h) ^ _js_int32(k)
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h = _js_int32(h) ^ (data[tail + 2] << 16)
    if rest >= 2:
        h = _js_int32(h) ^ (data[tail + 1] << 8)
    if rest >= 1:
        h = _js_int32(h) ^ data[tail]
        h = float(h) * m
    h = _js_int32(h) ^ ((int(h) & MASK32) >> 13)
    h = float(h) * m
    h = _js_int32(h) ^ ((int(h) & MASK32) >> 15)
    return h & MASK32
