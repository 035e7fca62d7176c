"""The worker transport's parts on the real Apache Kafka broker: whole-batch sends, subscribing to listed topics."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition
from confluent_kafka.admin import NewTopic

from streamapp.kafka.admin import TopicError, admin_client, wait_listed
from streamapp.partitioners import get_partitioner
from streamapp.worker.batch_sender import BatchSender


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


async def test_batch_sender_adds_a_changelog_partitions_records_in_order_with_the_calls_timestamp(
    bootstrap: str, new_topic
) -> None:
    """``add_all`` (a store's changelog records of a handler call) appends them in order to the partition's open batch,
    after what ``add_to`` put there and across full 2 KiB builders, each with the one timestamp given."""
    topic = new_topic("bsall", partitions=2)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=2048)
    await producer.start()
    first = [(b"k0", b"v0")]
    records = [(f"k{i}".encode(), None if i % 7 == 0 else b"x" * (i % 90)) for i in range(1, 300)]
    try:
        sender = BatchSender(producer, get_partitioner("murmur2"), {topic: 2})
        sender.add_to(topic, 1, b"k0", b"v0", 1_700_000_000_000)
        sender.add_all(topic, 1, iter(records), 1_700_000_000_123)
        await sender.send()
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            for tp, batch in (await consumer.getmany(timeout_ms=200)).items():
                got += [(tp.partition, r.key, r.value, r.timestamp) for r in batch]
    finally:
        await consumer.stop()
    assert got == [(1, key, value, 1_700_000_000_000 if key == b"k0" else 1_700_000_000_123)
                   for key, value in first + records]


async def test_a_batch_topic_stays_in_the_producers_metadata_when_a_new_topic_is_added(
    bootstrap: str, new_topic
) -> None:
    """aiokafka, once it tracks one topic, refreshes only the tracked ones and forgets the rest; a batch queued for a
    forgotten topic waits silently for another send to it (the demo's lost users).  BatchSender tracks its topics:
    after a send, adding another topic (the worker's first send to a changelog created late) keeps it known."""
    cached = new_topic("bscached", partitions=2)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.client.force_metadata_update()  # nothing tracked yet: every topic, ``cached`` among them
        assert producer.client.cluster.partitions_for_topic(cached) == {0, 1}
        late = new_topic("bslate", partitions=1)  # after the producer's last all-topics refresh
        sender = BatchSender(producer, get_partitioner("murmur2"), {cached: 2})
        sender.add_to(cached, 1, b"u1", b"row", 1_700_000_000_000)
        await sender.send()
        await producer.client.add_topic(late)  # the refresh that used to drop ``cached``
        assert producer.client.cluster.leader_for_partition(TopicPartition(cached, 1)) is not None
        await asyncio.wait_for(producer.flush(), 30)
    finally:
        await producer.stop()


def test_wait_listed_returns_a_topic_created_a_moment_ago_and_names_one_never_created(bootstrap: str) -> None:
    """What the worker's consumer waits for before it subscribes (no wait of our own after CreateTopics)."""
    topic = f"listed_{uuid.uuid4().hex[:8]}"
    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=5, replication_factor=1)])[topic].result(15)
    assert wait_listed(bootstrap, [topic])[topic].partitions == 5
    missing = f"never_{uuid.uuid4().hex[:8]}"
    with pytest.raises(TopicError, match=f"did not list topics {missing} within 1s"):
        wait_listed(bootstrap, [topic, missing], timeout=1.0)
