"""streamapp against the REAL librdkafka partitioners, called through ctypes.

librdkafka exports its built-in partitioners as public API (rdkafka.h:
``int32_t rd_kafka_msg_partitioner_<name>(const rd_kafka_topic_t *rkt, const void *key,
size_t keylen, int32_t partition_cnt, void *rkt_opaque, void *msg_opaque)``), and the
confluent-kafka wheel bundles the library under ``confluent_kafka.libs/``.  The
hashing ones never touch ``rkt``, so they are called with NULL; the ``*_random``
ones only with keys they hash (their random branch needs a real topic handle).
Source: confluentinc/librdkafka src/rdkafka_msg.c.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import confluent_kafka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.partitioners import LIBRDKAFKA_NAMES, PARTITIONERS, REFERENCE_PARTITIONERS

HASHING = [name for name in LIBRDKAFKA_NAMES if name != "random"]


def _load() -> ctypes.CDLL:
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    assert found, f"no librdkafka in {libs}: is the confluent-kafka wheel installed?"
    lib = ctypes.CDLL(str(found[0]))
    for name in LIBRDKAFKA_NAMES:
        fn = getattr(lib, f"rd_kafka_msg_partitioner_{name}")
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    return lib


LIB = _load()


def librdkafka(name: str, key: bytes | None, n: int) -> int:
    fn = getattr(LIB, f"rd_kafka_msg_partitioner_{name}")
    return fn(None, key, 0 if key is None else len(key), n, None, None)


def hashes_key(name: str, key: bytes | None) -> bool:
    """Whether librdkafka's function hashes this key (else it would go random, which needs a topic)."""
    if name == "consistent_random":
        return bool(key)
    if name.endswith("_random"):
        return key is not None
    return True


KEYS = st.one_of(
    st.binary(max_size=40),
    st.text(min_size=1, max_size=30).map(lambda s: s.encode("utf-8")),
    st.binary(min_size=100, max_size=3000),
)
COUNTS = st.one_of(st.integers(1, 100), st.integers(1, 2**31 - 1))


def test_library_is_the_one_confluent_kafka_uses() -> None:
    version = ctypes.CDLL(LIB._name).rd_kafka_version_str
    version.restype = ctypes.c_char_p
    assert version().decode() == confluent_kafka.libversion()[0]


@settings(max_examples=500)
@given(key=st.one_of(st.none(), KEYS), n=COUNTS)
def test_every_librdkafka_partitioner_matches(key: bytes | None, n: int) -> None:
    for name in HASHING:
        if not hashes_key(name, key):
            assert not PARTITIONERS[name].is_deterministic(key), name
            continue
        expected = librdkafka(name, key, n)
        assert PARTITIONERS[name].is_deterministic(key), name
        assert PARTITIONERS[name](key, n) == expected, name
        assert REFERENCE_PARTITIONERS[name](key, n) == expected, name


@pytest.mark.parametrize("name", HASHING)
def test_null_and_empty_keys(name: str) -> None:
    """The NULL/empty-key rules of rdkafka_msg.c, where librdkafka hashes them, on 1..300 partitions."""
    for key in (None, b""):
        if not hashes_key(name, key):
            continue
        for n in range(1, 301):
            assert PARTITIONERS[name](key, n) == librdkafka(name, key, n), (name, key, n)


def test_batch_matches_librdkafka_on_many_keys() -> None:
    keys = [f"user-{i}".encode() for i in range(5000)] + [bytes([i % 256]) * (i % 37) for i in range(1, 2000)]
    for name in HASHING:
        eligible = [k for k in keys if hashes_key(name, k)]
        for n in (1, 6, 7, 64, 1000):
            assert PARTITIONERS[name].partition_batch(eligible, n) == [librdkafka(name, k, n) for k in eligible], name
