"""Pure logic of the web views: each client's placement (checked against librdkafka itself), verdicts, counters sums."""
from __future__ import annotations

import ctypes
import glob
import json
import os
import random
import zlib

import confluent_kafka
import pytest

from streamapp.worker.web.placement import diagnose, expected_partition, place, writers
from streamapp.worker.web.stats import merge

DETERMINISTIC = ("murmur2", "consistent", "fnv1a")


def _librdkafka() -> ctypes.CDLL:
    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    (path,) = glob.glob(os.path.join(libs, "librdkafka*.so*"))
    return ctypes.CDLL(path)


LIB = _librdkafka()


def rdkafka_partition(name: str, key: bytes, n: int) -> int:
    """librdkafka's own exported partitioner (rkt=NULL is allowed for the deterministic ones)."""
    fn = getattr(LIB, f"rd_kafka_msg_partitioner_{name}")
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    return fn(None, key, len(key), n, None, None)


def keys() -> list[bytes]:
    rng = random.Random(5)
    fixed = [b"a", b"abc", b"user_42", "größe-ü".encode(), b"\x00\xff\x80", b"x" * 1000]
    return fixed + [rng.randbytes(rng.randint(1, 40)) for _ in range(200)]


@pytest.mark.parametrize("n", [1, 6, 7, 100])
def test_placement_matches_librdkafka(n: int) -> None:
    for key in keys():
        got = place(key, n).by_partitioner
        for name in DETERMINISTIC:
            assert got[name] == rdkafka_partition(name, key, n), (name, key, n)
            assert got[f"{name}_random"] == rdkafka_partition(name, key, n), (name, key, n)
        assert got["consistent"] == zlib.crc32(key) % n
        assert got["random"] is None


def test_profiles_name_their_clients_defaults() -> None:
    key, n = b"6b1e9c0a4f2d4e8c9a1b2c3d4e5f6a7b", 6
    p = place(key, n)
    murmur = rdkafka_partition("murmur2", key, n)
    assert p.by_profile["ksqldb"] == p.by_profile["java"] == p.by_profile["kafka-streams"] == murmur
    assert p.by_profile["confluent-kafka"] == p.by_profile["librdkafka"] == zlib.crc32(key) % n
    assert p.by_profile["sarama"] == rdkafka_partition("fnv1a", key, n)
    assert p.to_dict()["profiles"]["confluent-kafka"] == "consistent_random"


def test_json_quoted_key_is_hashed_with_its_quotes() -> None:
    p = place(b"user_42", 6)
    assert p.json_quoted["murmur2"] == rdkafka_partition("murmur2", b'"user_42"', 6)
    assert p.json_quoted["murmur2"] != p.by_partitioner["murmur2"]


@pytest.mark.parametrize("text", ["é", "ключ-ü", "😀", 'a"b\\c', "tab\there"])
def test_a_non_ascii_key_is_quoted_as_fausts_json_key_serializer_writes_it(text: str) -> None:
    """Faust writes ``é`` as ``"\\u00e9"`` (ASCII-escaped), and the fingerprint quotes it so: the page must agree."""
    from faust.serializers import codecs

    from streamapp.model.key_forms import json_quoted

    written = codecs.dumps("json", text)  # what a Faust producer with a str key sends
    assert json_quoted(text.encode()) == written
    assert place(text.encode(), 6).json_quoted["murmur2"] == rdkafka_partition("murmur2", written, 6)


def test_a_key_that_is_not_utf8_has_no_json_form() -> None:
    assert place(b"\xff\xfe", 6).json_quoted == {}


def test_to_dict_is_json_and_names_the_key() -> None:
    data = json.loads(json.dumps(place(b"\xffab", 3).to_dict()))
    assert data["key_hex"] == "ff6162" and data["partitions"] == 3


def test_expected_partition_random_for_a_random_partitioner() -> None:
    assert expected_partition("random", b"k", 6) is None
    assert expected_partition("murmur2", b"k", 6) == rdkafka_partition("murmur2", b"k", 6)


def test_writers_are_the_clients_that_put_the_key_there() -> None:
    key = b"abc"
    p = place(key, 6)
    crc = zlib.crc32(key) % 6
    who = writers(p, crc)
    assert "confluent-kafka" in who and "librdkafka" in who
    assert ("ksqldb" in who) == (rdkafka_partition("murmur2", key, 6) == crc)


def _key_with_different_partitions() -> tuple[bytes, int, int]:
    for i in range(1000):
        key = f"user-{i}".encode()
        crc, mm = zlib.crc32(key) % 6, rdkafka_partition("murmur2", key, 6)
        if crc != mm:
            return key, crc, mm
    raise AssertionError("no key found")


def test_diagnose_direct_join_misses_repartitioned_finds() -> None:
    key, crc, mm = _key_with_different_partitions()
    text = diagnose(key.decode(), "murmur2", mm, [("users", crc), ("users_repartition", mm)], place(key, 6))
    assert f"partition {mm}" in text and f"partition {crc}" in text
    assert "confluent-kafka" in text and f"table users has it in partition {crc}" in text
    assert "so its join misses it" in text
    assert "table users_repartition has the row in the same partition, so its join finds it" in text


def test_diagnose_same_partition_and_missing() -> None:
    key, _, mm = _key_with_different_partitions()
    assert "its join finds it" in diagnose("u", "murmur2", mm, [("a", mm), ("b", None)], place(key, 6))
    assert "table b does not have the row" in diagnose("u", "murmur2", mm, [("a", mm), ("b", None)], place(key, 6))
    assert "is in no table (a, b)" in diagnose("u", "murmur2", mm, [("a", None), ("b", None)], place(key, 6))
    assert "random partition" in diagnose("u", "random", None, [("a", 1), ("b", 2)], place(key, 6))


def test_merge_sums_counters_of_workers() -> None:
    a = {"joined": {"out": {"0": 3, "1": 2}}, "totals": {"orders": 5, "joined": {"out": 5}}}
    b = {"joined": {"out": {"1": 4, "2": 1}}, "totals": {"orders": 5, "joined": {"out": 5}}, "note": "x"}
    assert merge([a, b]) == {"joined": {"out": {"0": 3, "1": 6, "2": 1}}, "totals": {"orders": 10, "joined": {"out": 10}}}
    assert merge([]) == {}
