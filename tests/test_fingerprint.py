"""The pure scoring function: samples built from the reference hashes, verdicts checked without a broker.

Expected partitions are computed here from ``streamapp.partitioners.hashes``
(and ``zlib`` for crc32), not through the registry that ``score`` uses.
"""
from __future__ import annotations

import json
import math
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.copartition.fingerprint import Fingerprint, score
from streamapp.copartition.scoring import FingerprintError, min_sample_size
from streamapp.model.key_forms import json_quoted, json_unquoted
from streamapp.partitioners import PARTITIONERS, PROFILES, hashes, partition


def java(key: bytes, n: int) -> int:
    return hashes.to_positive(hashes.murmur2(key)) % n


def crc(key: bytes, n: int) -> int:
    return zlib.crc32(key) % n


def fnv(key: bytes, n: int) -> int:
    return hashes.fnv1a(key) % n


def keys(count: int, prefix: str = "user") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


def family_of(result: Fingerprint, name: str) -> list[str]:
    return next(f for f in result.families if name in f)


@pytest.mark.parametrize(
    ("place", "expected", "others"),
    [(java, "murmur2", ("consistent", "fnv1a")), (crc, "consistent", ("murmur2", "fnv1a")), (fnv, "fnv1a", ("murmur2", "consistent"))],
)
def test_each_hash_is_recognised_and_only_it(place, expected, others) -> None:
    sample = [(k, place(k, 6)) for k in keys(300)]
    result = score(sample, 6)
    assert expected in result.stored.explaining
    assert not set(others) & set(result.stored.explaining)
    assert len(result.families) == 1 and expected in result.families[0]
    assert not result.ambiguous
    assert result.stored.shares[expected] == 1.0
    assert f"explains 100% of {len(sample)} keyed records" in result.verdict
    assert expected in result.verdict


def test_murmur2_family_groups_java_and_the_librdkafka_variants() -> None:
    result = score([(k, java(k, 12)) for k in keys(200)], 12)
    assert {"murmur2", "murmur2_random", PROFILES["java"]} <= set(family_of(result, "murmur2"))
    assert any("same hash" in note for note in result.notes)
    assert "java" in result.verdict and "kafka-python" in result.verdict


def test_empty_keys_tell_consistent_from_consistent_random() -> None:
    n = 6
    keyed = [(k, crc(k, n)) for k in keys(100)]
    on_zero = score(keyed + [(b"", 0)] * 5, n)
    assert {"consistent", "consistent_random"} <= set(on_zero.stored.explaining)
    assert on_zero.stored.scored["consistent"] == 105 and on_zero.stored.scored["consistent_random"] == 100

    spread = score(keyed + [(b"", p) for p in (1, 3, 5, 2)], n)
    assert "consistent_random" in spread.stored.explaining
    assert "consistent" not in spread.stored.explaining
    assert spread.stored.shares["consistent"] == pytest.approx(100 / 104)


def test_null_keys_are_left_out_and_counted() -> None:
    rng = random.Random(7)
    sample = [(k, java(k, 6)) for k in keys(50)] + [(None, rng.randrange(6)) for _ in range(30)]
    result = score(sample, 6)
    assert (result.sample_size, result.keyed) == (80, 50)
    assert "murmur2" in result.stored.explaining and result.stored.scored["murmur2"] == 50
    assert any("30 records with NULL keys" in note for note in result.notes)


def test_random_placement_claims_no_hash() -> None:
    rng = random.Random(42)
    n = 6
    result = score([(k, rng.randrange(n)) for k in keys(600)], n)
    assert result.stored.explaining == [] and result.quoted.explaining == [] and result.families == []
    assert "explains 100%" not in result.verdict
    assert "random" in result.verdict
    best = max(result.stored.shares.values())
    assert f"{best:.2%}" in result.verdict
    assert f"{1 / n:.2%}" in result.verdict


def test_a_topic_written_entirely_before_partitions_were_added() -> None:
    sample = [(k, java(k, 4)) for k in keys(600)]
    result = score(sample, 6)
    assert result.stored.explaining == []
    expected_share = sum(java(k, 4) == java(k, 6) for k, _ in sample) / len(sample)
    assert result.stored.shares["murmur2"] == pytest.approx(expected_share)
    assert result.resized is not None and result.resized[1] == 4 and "murmur2" in result.resized[0]
    assert "Partitions were added" in result.verdict


def test_mostly_hashed_records_are_not_called_random() -> None:
    rng = random.Random(5)
    sample = [(k, java(k, 6) if i % 5 else rng.randrange(6)) for i, k in enumerate(keys(600))]
    result = score(sample, 6)
    assert result.stored.explaining == [] and result.resized is None
    assert result.stored.shares["murmur2"] == pytest.approx(sum(java(k, 6) == p for k, p in sample) / len(sample))
    assert f"{result.stored.shares['murmur2']:.2%}" in result.verdict and "partition count" in result.verdict


def test_keys_that_land_alike_under_two_hashes_are_ambiguous() -> None:
    n = 2
    alike = [k for k in keys(400) if java(k, n) == crc(k, n)][:40]
    result = score([(k, java(k, n)) for k in alike], n)
    assert "murmur2" in result.stored.explaining and "consistent" in result.stored.explaining
    assert result.ambiguous
    assert "cannot tell" in result.verdict
    assert "murmur2" in result.verdict and "consistent" in result.verdict


def test_a_tiny_sample_says_how_many_records_are_needed() -> None:
    n = 6
    murmur2_family = set(score([(k, java(k, n)) for k in keys(300)], n).stored.explaining)
    others = [name for name in PARTITIONERS if name not in murmur2_family and name != "random"]
    distinct = [k for k in keys(300) if all(partition(name, k, n) != java(k, n) for name in others)]
    result = score([(k, java(k, n)) for k in distinct[:3]], n)
    needed = next(k for k in range(1, 100) if n ** -k <= 1e-6)
    assert result.min_sample == needed == min_sample_size(n)
    assert result.ambiguous
    assert "too small" in result.verdict and f"at least {needed}" in result.verdict
    assert f"{n ** -3:.2%}" in result.verdict


def test_one_partition_and_no_keys_cannot_be_fingerprinted() -> None:
    one = score([(k, 0) for k in keys(20)], 1)
    assert one.ambiguous and one.min_sample is None and "1 partition" in one.verdict
    nulls = score([(None, 2), (None, 0)], 3)
    assert nulls.ambiguous and nulls.keyed == 0 and "No keyed records" in nulls.verdict


def test_json_quoted_keys_stored_as_such_name_the_key_format() -> None:
    n = 6
    raw = keys(300)
    quoted = [json.dumps(k.decode()).encode() for k in raw]
    result = score([(q, java(q, n)) for q in quoted], n)
    assert result.json_keys
    assert "murmur2" in result.stored.explaining and not result.ambiguous
    assert "JSON-quoted" in result.verdict
    moved = sum(java(r, n) != java(q, n) for r, q in zip(raw, quoted)) / len(raw)
    assert any(f"{moved:.2%} of these keys would land on a different partition" in note for note in result.notes)


def test_raw_keys_hashed_json_quoted_is_a_key_format_mismatch() -> None:
    n = 6
    raw = keys(300)
    result = score([(k, java(json.dumps(k.decode()).encode(), n)) for k in raw], n)
    assert result.stored.explaining == []
    assert "murmur2" in result.quoted.explaining
    assert "Key-format mismatch" in result.verdict and "JSON-quoted" in result.verdict
    assert result.families_key_form == "quoted" and "murmur2" in result.families[0]


def test_quoted_keys_hashed_raw_is_a_key_format_mismatch() -> None:
    n = 6
    raw = keys(300)
    result = score([(json.dumps(k.decode()).encode(), fnv(k, n)) for k in raw], n)
    assert "fnv1a" in result.unquoted.explaining and result.stored.explaining == []
    assert "Key-format mismatch" in result.verdict and "quotes removed" in result.verdict
    assert result.families_key_form == "unquoted"


def test_json_quoting_follows_python_json_and_undoes_itself() -> None:
    for text in ("user1", "é", 'a"b', "tab\t"):
        quoted = json_quoted(text.encode())
        assert quoted == json.dumps(text).encode()
        assert json_unquoted(quoted) == text.encode()
    assert json_quoted(b"\xff\xfe") is None
    assert json_unquoted(b"42") is None and json_unquoted(b'"') is None and json_unquoted(b'"a"b"') is None


@pytest.mark.parametrize(
    ("sample", "n", "message"),
    [
        ([(b"a", 6)], 6, "partition=6"),
        ([(b"a", -1)], 6, "partition=-1"),
        ([(b"a", 0)], 0, "num_partitions=0"),
        ([("a", 0)], 6, "key='a'"),
    ],
)
def test_bad_samples_are_named(sample, n, message) -> None:
    with pytest.raises(FingerprintError, match=message.replace("(", r"\(")):
        score(sample, n)


def test_binary_keys_and_the_dict_form() -> None:
    rng = random.Random(3)
    binary = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(200)]
    result = score([(k, fnv(k, 9)) for k in binary], 9)
    assert "fnv1a" in result.stored.explaining
    assert json.loads(json.dumps(result.to_dict()))["explaining"] == result.stored.explaining


@settings(max_examples=40)
@given(
    st.lists(st.binary(min_size=1, max_size=64), min_size=20, max_size=60, unique=True),
    st.integers(min_value=2, max_value=64),
)
def test_any_murmur2_sample_is_explained_by_murmur2(sample_keys: list[bytes], n: int) -> None:
    result = score([(k, java(k, n)) for k in sample_keys], n)
    assert "murmur2" in result.stored.explaining and PROFILES["java"] in result.stored.explaining
    assert math.isclose(result.stored.shares["murmur2"], 1.0)


def test_hashes_that_coincide_for_this_partition_count_are_one_family() -> None:
    """uint32 FNV-1a and its sign-masked form agree modulo any power of two, never modulo 6."""
    sample8 = [(k, hashes.fnv1a_raw(k) % 8) for k in keys(300)]
    result = score(sample8, 8)
    assert {"fnv1a_unsigned", "fnv1a_reference"} <= set(result.stored.explaining)
    assert {"fnv1a_unsigned", "fnv1a_reference"} <= set(family_of(result, "fnv1a_unsigned"))
    assert not result.ambiguous
    assert any("different hashes" in note and "8 partitions" in note for note in result.notes)

    sample6 = [(k, hashes.fnv1a_raw(k) % 6) for k in keys(300)]
    assert "fnv1a_reference" not in score(sample6, 6).stored.explaining


def first_byte(key: bytes | None, n: int) -> int:
    """A user's own partitioner, reached by dotted path (tests/ is on sys.path under pytest)."""
    return (key or b"\0")[0] % n


def test_a_user_partitioner_by_dotted_path_can_be_the_verdict() -> None:
    sample = [(bytes([b]) + b"-key", b % 5) for b in range(40, 140)]
    result = score(sample, 5, [*PARTITIONERS, "test_fingerprint:first_byte"])
    assert result.stored.explaining == ["test_fingerprint:first_byte"]
    assert "test_fingerprint:first_byte explains 100% of 100 keyed records" in result.verdict


@settings(max_examples=300)
@given(st.one_of(st.binary(max_size=12), st.text(max_size=12).map(lambda t: json.dumps(t, ensure_ascii=False).encode())))
def test_json_key_forms_equal_the_json_module(key: bytes) -> None:
    """The fast paths of json_quoted/json_unquoted give exactly what json.dumps/json.loads give."""
    try:
        expected_quoted = json.dumps(key.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        expected_quoted = None
    assert json_quoted(key) == expected_quoted
    try:
        value = json.loads(key.decode("utf-8")) if key[:1] == b'"' and key[-1:] == b'"' else None
    except (UnicodeDecodeError, ValueError):
        value = None
    assert json_unquoted(key) == (value.encode("utf-8") if isinstance(value, str) else None)


def test_partitions_added_later_are_recognised() -> None:
    old, new = keys(150, "old"), keys(150, "new")
    sample = [(k, fnv(k, 4)) for k in old] + [(k, fnv(k, 6)) for k in new]
    result = score(sample, 6)
    assert result.stored.explaining == [] and result.resized is not None
    name, earlier = result.resized
    assert earlier == 4 and name in ("fnv1a", "fnv1a_random")
    assert "Partitions were added" in result.verdict and "4 partitions" in result.verdict


def test_random_placement_is_not_taken_for_added_partitions() -> None:
    rng = random.Random(11)
    result = score([(k, rng.randrange(8)) for k in keys(400)], 8)
    assert result.resized is None and "random" in result.verdict
