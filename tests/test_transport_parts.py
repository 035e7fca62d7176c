"""The worker transport's two parts on the real embedded broker: end offsets from a Fetch, whole-batch sends."""
from __future__ import annotations

import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition
from confluent_kafka import Producer

from streamapp.batch_sender import BatchSender
from streamapp.highwaters import fetched_highwaters
from streamapp.partitioners import get_partitioner


def produce_batched(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    """Many records per produce request, so the broker stores multi-record batches."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10_000})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)
    assert producer.flush(30) == 0


async def test_fetched_highwaters_are_the_record_counts_where_list_offsets_falls_short(
    bootstrap: str, new_topic
) -> None:
    topic = new_topic("hw", partitions=3)
    produce_batched(bootstrap, topic, {0: 500, 1: 1})
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        listed = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    fetched = await fetched_highwaters(bootstrap, listed)
    assert fetched == {tps[0]: 500, tps[1]: 1, tps[2]: 0}
    # what makes the Fetch necessary on this broker: ListOffsets(latest) stops at the last batch's start
    assert listed[tps[0]] < 500


async def test_batch_sender_puts_each_record_where_the_partitioner_says_with_its_timestamp(
    bootstrap: str, new_topic
) -> None:
    topics = [new_topic("bs", partitions=6), new_topic("bs", partitions=3)]
    counts = {topics[0]: 6, topics[1]: 3}
    murmur2 = get_partitioner("murmur2")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=2048)
    await producer.start()
    sent = {}
    try:
        sender = BatchSender(producer, murmur2, counts)
        for i in range(400):  # several full 2 KiB builders per partition
            key, value = uuid.uuid4().hex.encode(), b"x" * (i % 50)
            for topic in topics:
                sender.add(topic, key, value, 1_700_000_000_000 + i)
                sent[(topic, key)] = (murmur2(key, counts[topic]), value, 1_700_000_000_000 + i)
        await sender.send()
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    got = {}
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                for r in records:
                    got[(tp.topic, r.key)] = (tp.partition, r.value, r.timestamp)
    finally:
        await consumer.stop()
    assert got == sent
