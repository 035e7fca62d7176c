"""Real clients, plugged with streamapp's adapters, put every key where streamapp predicts.

Records are produced to the session's Apache Kafka broker by aiokafka and
kafka-python (``partitioner=client_partitioner(name)``) and by confluent-kafka
(``**confluent_config(name)``, i.e. librdkafka's own partitioner), then read
back with a plain consumer: the partition each record was *stored* in is
compared with ``streamapp.partitioners.partition(name, key, n)``.
"""
from __future__ import annotations

from typing import Callable

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.partitioner import Partitioner as KafkaPythonPartitioner

from streamapp.kafka.reader import TopicReader
from streamapp.partitioners import LIBRDKAFKA_NAMES, Partitioner, PartitionerError, get_partitioner, partition
from streamapp.partitioners.adapters import client_partitioner, confluent_config

PARTITIONS = 7
KEYS = (
    [f"user_{i}".encode() for i in range(50)]
    + [bytes([i, 255 - i, i * 7 % 256]) for i in range(10)]
    + ["ключ-ü-🔑".encode(), b'"user_1"', b"x" * 300, b""]
)


def read_back(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes | None, int]]:
    """Every record's (key, partition) as stored by the broker, read to each partition's end."""
    with TopicReader(bootstrap, topic, range(PARTITIONS)) as reader:
        records = [(r.key, r.partition) for r in reader.read_to_end()]
    assert len(records) == expected, f"read {len(records)} of {expected} records from {topic}"
    return records


def assert_where_predicted(name: str, records: list[tuple[bytes | None, int]]) -> None:
    chooser = get_partitioner(name)
    checked = [(key, p) for key, p in records if chooser.is_deterministic(key)]
    assert len(checked) >= len(KEYS) - 2
    wrong = [(key, p, partition(name, key, PARTITIONS)) for key, p in checked if partition(name, key, PARTITIONS) != p]
    assert not wrong, f"{len(wrong)} of {len(checked)} records not where {name} puts them: {wrong[:5]}"


@pytest.mark.parametrize("name", ["murmur2_random", "fnv1a_reference", "kafkajs_legacy", "sarama"])
async def test_aiokafka_with_client_partitioner(bootstrap: str, new_topic: Callable[..., str], name: str) -> None:
    topic = new_topic("aiokafka", PARTITIONS)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, partitioner=client_partitioner(name))
    await producer.start()
    try:
        for key in [*KEYS, None, None]:
            await producer.send(topic, value=b"v", key=key)
        await producer.flush()
    finally:
        await producer.stop()
    assert_where_predicted(name, read_back(bootstrap, topic, len(KEYS) + 2))


@pytest.mark.parametrize("name", ["murmur2_random", "consistent", "fnv1a_unsigned"])
def test_kafka_python_with_client_partitioner(bootstrap: str, new_topic: Callable[..., str], name: str) -> None:
    topic = new_topic("kafkapython", PARTITIONS)
    chooser = client_partitioner(name)
    assert isinstance(chooser, KafkaPythonPartitioner), "kafka-python 3 would take its deprecated partitioner path"
    producer = KafkaProducer(bootstrap_servers=bootstrap, partitioner=chooser, enable_idempotence=False)
    try:
        for key in KEYS:
            producer.send(topic, value=b"v", key=key)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    assert_where_predicted(name, read_back(bootstrap, topic, len(KEYS)))


@pytest.mark.parametrize("name", [n for n in LIBRDKAFKA_NAMES if n != "random"])
def test_confluent_kafka_with_librdkafka_partitioner(bootstrap: str, new_topic: Callable[..., str], name: str) -> None:
    """librdkafka itself places the records (NULL keys included, where it hashes them); streamapp must agree."""
    topic = new_topic("confluent", PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, **confluent_config(name)})
    errors: list[object] = []
    keys = [*KEYS, None]
    for key in keys:
        producer.produce(topic, value=b"v", key=key, on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    records = read_back(bootstrap, topic, len(keys))
    assert_where_predicted(name, records)
    if get_partitioner(name).is_deterministic(None):
        assert [p for key, p in records if key is None] == [partition(name, None, PARTITIONS)]


def test_client_partitioner_matches_client_conventions() -> None:
    """Keyed records hash over *all* partitions in id order; NULL keys go to an available partition."""
    choose = client_partitioner("murmur2_random")
    expected = partition("murmur2_random", b"user_7", 6)
    assert choose(b"user_7", [5, 3, 1, 0, 2, 4], [0]) == expected
    assert all(choose(None, list(range(6)), [4]) == 4 for _ in range(20))
    assert choose.__name__ == "streamapp_murmur2_random"
    assert client_partitioner(get_partitioner("java"))(b"user_7", list(range(6)), []) == expected


def test_client_partitioner_rejects_out_of_range_user_partitioners() -> None:
    rogue = Partitioner("rogue", "returns a partition that does not exist", lambda key, n: n, lambda key: True)
    with pytest.raises(PartitionerError, match=r"'rogue' returned 6 for 6 partitions; expected 0..5"):
        client_partitioner(rogue)(b"k", list(range(6)), list(range(6)))


def test_confluent_config_names_librdkafka_setting() -> None:
    assert confluent_config("java") == {"partitioner": "murmur2_random"}
    assert confluent_config("sarama") == {"partitioner": "fnv1a_random"}
    assert confluent_config("quixstreams") == {"partitioner": "murmur2"}
    assert confluent_config("random") == {"partitioner": "random"}


@pytest.mark.parametrize("name", ["kafkajs_legacy", "fnv1a_reference", "fnv1a_unsigned"])
def test_confluent_config_refuses_what_librdkafka_lacks(name: str) -> None:
    with pytest.raises(PartitionerError, match=rf"librdkafka has no partitioner equivalent to '{name}'.*partition="):
        confluent_config(name)
