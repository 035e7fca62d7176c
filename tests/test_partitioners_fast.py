"""The C fast path equals the pure-Python specification, and the registry behaves for people.

``hashes.py`` / ``REFERENCE_PARTITIONERS`` is the specification; every
function of the ``_fast`` extension and every fast partitioner is compared
with it on random keys (empty, binary, non-ASCII, long) and partition counts.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.errors import StreamappError
from streamapp.partitioners import (
    FAST,
    LIBRDKAFKA_NAMES,
    PARTITIONERS,
    PROFILE_NOTES,
    PROFILES,
    REFERENCE_PARTITIONERS,
    Partitioner,
    PartitionerError,
    get_partitioner,
    hashes,
    partition,
    partition_batch,
)
from streamapp.partitioners import registry

KEYS = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=40).map(lambda s: s.encode("utf-8")),
    st.binary(min_size=200, max_size=2000),
)
COUNTS = st.one_of(st.integers(1, 64), st.integers(1, 2**31 - 1))
DETERMINISTIC = [name for name in PARTITIONERS if name != "random"]


def test_fast_path_is_built() -> None:
    """`pip install -e .` builds the C extension; without it every partition call is ~20x slower."""
    assert FAST and registry._fast is not None


@settings(max_examples=400)
@given(key=KEYS)
def test_fast_hashes_equal_specification(key: bytes) -> None:
    fast = registry._fast
    assert fast.murmur2(key) == hashes.murmur2(key)
    assert fast.crc32(key) == hashes.crc32(key)
    assert fast.fnv1a(key) == hashes.fnv1a(key)
    assert fast.fnv1a_raw(key) == hashes.fnv1a_raw(key)
    assert fast.kafkajs_legacy_murmur2(key) == hashes.kafkajs_legacy_murmur2(key)


@settings(max_examples=300)
@given(key=st.one_of(st.none(), KEYS), n=COUNTS)
def test_fast_partitioners_equal_specification(key: bytes | None, n: int) -> None:
    for name in DETERMINISTIC:
        fast, reference = PARTITIONERS[name], REFERENCE_PARTITIONERS[name]
        assert fast.is_deterministic(key) == reference.is_deterministic(key)
        got = fast(key, n)
        assert 0 <= got < n
        if reference.is_deterministic(key):
            assert got == reference(key, n), name


@settings(max_examples=100)
@given(keys=st.lists(st.one_of(st.none(), KEYS), max_size=50), n=COUNTS)
def test_batch_equals_single_calls(keys: list[bytes | None], n: int) -> None:
    for name in DETERMINISTIC:
        chooser = REFERENCE_PARTITIONERS[name]
        batch = partition_batch(name, keys, n)
        assert len(batch) == len(keys)
        for key, got in zip(keys, batch):
            assert 0 <= got < n
            if chooser.is_deterministic(key):
                assert got == chooser(key, n), name


def test_batch_accepts_tuples_bytearrays_and_memoryviews() -> None:
    keys = (b"user_1", bytearray(b"user_2"), memoryview(b"user_3"))
    expected = [hashes.to_positive(hashes.murmur2(bytes(k))) % 6 for k in keys]
    assert partition_batch("murmur2", keys, 6) == expected
    assert REFERENCE_PARTITIONERS["murmur2"].partition_batch(list(keys), 6) == expected


def test_random_keys_spread_over_all_partitions() -> None:
    """NULL keys under ``*_random`` and every key under ``random`` are random, not a constant."""
    for name in ("random", "murmur2_random", "consistent_random", "fnv1a_random"):
        seen = set(partition_batch(name, [None] * 400, 4))
        assert seen == {0, 1, 2, 3}, name
    assert set(partition_batch("consistent_random", [b""] * 400, 4)) == {0, 1, 2, 3}


def test_profiles_cover_every_client_of_the_issue() -> None:
    wanted = {
        "java", "librdkafka", "confluent-kafka", "sarama", "kafka-go", "kafkajs", "kafkajs-legacy",
        "kafka-python", "aiokafka", "franz-go", "quixstreams", "faust",
    }
    assert wanted <= set(PROFILES)
    assert set(PROFILES.values()) <= set(PARTITIONERS)
    assert set(PROFILE_NOTES) == set(PROFILES)
    assert set(LIBRDKAFKA_NAMES) <= set(PARTITIONERS)


def test_profiles_resolve_to_their_clients_default() -> None:
    """Java-compatible clients agree with each other and with librdkafka's murmur2_random, not with librdkafka's default."""
    key, n = b"user_42", 6
    java = get_partitioner("java")(key, n)
    for client in ("kafka-streams", "ksqldb", "kafkajs", "kafka-python", "aiokafka", "faust", "franz-go", "quixstreams"):
        assert get_partitioner(client)(key, n) == java, client
    assert get_partitioner("java").name == "murmur2_random"
    assert get_partitioner("confluent-kafka").name == "consistent_random"
    assert get_partitioner("sarama").name == "fnv1a_random"
    assert get_partitioner("kafkajs-legacy").name == "kafkajs_legacy"
    assert partition("quixstreams", None, n) == hashes.to_positive(0x106E08D9) % n


def test_json_quoted_key_lands_elsewhere() -> None:
    """Faust/Quix Streams JSON-serialize keys: with 6 partitions ``"user_42"`` and ``user_42`` part ways."""
    raw, quoted = partition("murmur2", b"user_42", 6), partition("murmur2", b'"user_42"', 6)
    assert (raw, quoted) == (hashes.to_positive(hashes.murmur2(b"user_42")) % 6, hashes.to_positive(hashes.murmur2(b'"user_42"')) % 6)
    assert raw != quoted


def test_dotted_path_partitioners(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("streamapp_test_custom_partitioner")
    module.first = lambda key, n: 0
    module.named = Partitioner("named", "a user Partitioner", lambda key, n: n - 1, lambda key: True)
    module.not_callable = 42
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert partition(f"{module.__name__}:first", b"k", 6) == 0
    assert get_partitioner(f"{module.__name__}:named") is module.named
    assert partition_batch(f"{module.__name__}:named", [b"a", b"b"], 6) == [5, 5]
    with pytest.raises(PartitionerError, match="not callable"):
        get_partitioner(f"{module.__name__}:not_callable")
    with pytest.raises(PartitionerError, match="cannot be imported"):
        get_partitioner(f"{module.__name__}:missing")
    with pytest.raises(PartitionerError, match="cannot be imported"):
        get_partitioner("no_such_module_anywhere:fn")


def test_a_user_partitioner_that_fails_or_answers_no_partition_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """Its error or a wrong answer names it and the key (no traceback of the user's code); a module that fails to
    import names its error; a numpy-like int is a partition."""
    class Index:
        def __index__(self) -> int:
            return 2

    module = types.ModuleType("streamapp_test_failing_partitioner")
    module.divides = lambda key, n: 1 // 0
    module.too_big, module.negative, module.text, module.boolean = (lambda key, n: n), (lambda key, n: -1), \
        (lambda key, n: "1"), (lambda key, n: True)
    module.index = lambda key, n: Index()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(PartitionerError) as failed:
        partition(f"{module.__name__}:divides", b"k1", 6)
    assert str(failed.value) == (f"partitioner '{module.__name__}:divides' failed on key b'k1': ZeroDivisionError: "
                                 "integer division or modulo by zero")
    for name, shown in (("too_big", "6"), ("negative", "-1"), ("text", "'1'"), ("boolean", "True")):
        with pytest.raises(PartitionerError) as wrong:
            partition_batch(f"{module.__name__}:{name}", [b"a", b"b"], 6)
        assert str(wrong.value) == (f"partitioner '{module.__name__}:{name}' returned {shown} for key b'a': a "
                                    "partition of 6 partitions is an int from 0 to 5")
    assert partition_batch(f"{module.__name__}:index", [b"a", None], 6) == [2, 2]
    (tmp_path / "streamapp_test_broken_module.py").write_text("def f(key, n) return 0\n")
    (tmp_path / "streamapp_test_raising_module.py").write_text("raise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PartitionerError, match=r"'streamapp_test_broken_module:f' cannot be imported: SyntaxError"):
        get_partitioner("streamapp_test_broken_module:f")
    with pytest.raises(PartitionerError, match=r"cannot be imported: RuntimeError: no config$"):
        get_partitioner("streamapp_test_raising_module:f")


@pytest.mark.parametrize("table", [PARTITIONERS, REFERENCE_PARTITIONERS], ids=["fast", "reference"])
def test_bad_input_is_a_clear_streamapp_error(table) -> None:
    chooser = table["murmur2"]
    with pytest.raises(PartitionerError, match=r"key must be bytes or None, got str 'user_1'"):
        chooser("user_1", 6)
    for bad in (0, -3, 2**31, "6", True, 6.0):
        with pytest.raises(PartitionerError, match=r"num_partitions must be"):
            chooser(b"k", bad)
    with pytest.raises(PartitionerError, match=r"keys\[1\]: key must be bytes or None, got int 17"):
        chooser.partition_batch([b"ok", 17], 6)
    assert chooser(b"k", numpy.int64(6)) == chooser(b"k", 6)
    assert chooser.partition_batch([b"k"], numpy.int32(6)) == [chooser(b"k", 6)]
    with pytest.raises(PartitionerError, match=r"partitioner 'murmur2': key must be bytes or None, got str"):
        partition("murmur2", "user_1", 6)
    with pytest.raises(PartitionerError, match=r"num_partitions must be"):
        partition_batch("murmur2", [b"a"], 0)
    assert issubclass(PartitionerError, StreamappError)


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(PartitionerError) as info:
        get_partitioner("murmur3")
    message = str(info.value)
    assert "'murmur3'" in message and "murmur2_random" in message and "sarama" in message
