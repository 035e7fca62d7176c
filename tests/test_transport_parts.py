"""The worker transport's whole-batch sends on the real Apache Kafka broker."""
from __future__ import annotations

import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamapp.batch_sender import BatchSender
from streamapp.partitioners import get_partitioner


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
