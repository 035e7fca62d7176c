"""streamapp against the Python clients' OWN partitioners, on random keys.

aiokafka (``aiokafka/partitioner.py``: ``murmur2``, ``DefaultPartitioner``) and
kafka-python (``kafka/partitioner/default.py``) ship Java-compatible murmur2
partitioners in pure Python; streamapp's ``murmur2_random`` (their profile) and
the ``client_partitioner`` adapter must choose what they choose for every key.
"""
from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner as AiokafkaDefault
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from streamapp.partitioners import get_partitioner, hashes
from streamapp.partitioners.adapters import client_partitioner

KEYS = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=30).map(lambda s: s.encode("utf-8")),
    st.binary(min_size=100, max_size=1500),
)


@settings(max_examples=300)
@given(key=KEYS)
def test_murmur2_equals_aiokafka_and_kafka_python(key: bytes) -> None:
    ours = hashes.to_signed32(hashes.murmur2(key))
    assert hashes.to_signed32(aiokafka_murmur2(key)) == ours
    assert hashes.to_signed32(kafka_python_murmur2(key)) == ours


@settings(max_examples=300)
@given(key=KEYS, all_partitions=st.lists(st.integers(0, 500), min_size=1, max_size=40, unique=True))
def test_adapter_equals_aiokafka_default_partitioner(key: bytes, all_partitions: list[int]) -> None:
    """aiokafka's producer passes partitions sorted by id and hashes over them; the adapter sorts them itself."""
    expected = AiokafkaDefault()(key, sorted(all_partitions), all_partitions)
    assert client_partitioner("aiokafka")(key, all_partitions, all_partitions[:1]) == expected
    assert sorted(all_partitions)[get_partitioner("kafka-python")(key, len(all_partitions))] == expected
