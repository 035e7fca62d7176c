"""Topic administration beyond creating streamapp's own topics: list, describe, create, delete, add partitions.

Adding partitions moves keys: a keyed record's partition is ``hash(key) % n``,
so after ``n -> m`` most existing keys would be written elsewhere and a join or
a compacted table no longer finds their history.  ``partition_impact`` measures
that share before anything is changed.  The embedded broker has no
CreatePartitions (Kafka API 37); that is said plainly, not hidden.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource, NewPartitions, NewTopic

from .partitioners import get_partitioner
from .topic_reader import read_topic
from .topics import ADMIN_TIMEOUT, TopicError, TopicInfo, admin_client, describe


@dataclass(frozen=True)
class PartitionDetail:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    records: int


@dataclass(frozen=True)
class TopicDetail:
    name: str
    partitions: list[PartitionDetail]
    configs: dict[str, str]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "partitions": [p.__dict__ for p in self.partitions], "configs": self.configs}


@dataclass(frozen=True)
class PartitionImpact:
    """How many of a topic's distinct keys would change partition at the new count."""

    topic: str
    partitioner: str
    old_count: int
    new_count: int
    keys: int
    moved: int
    unscored: int

    @property
    def moved_pct(self) -> float:
        return 100.0 * self.moved / self.keys if self.keys else 0.0

    def to_dict(self) -> dict[str, object]:
        return {**self.__dict__, "moved_pct": round(self.moved_pct, 2)}


def partition_impact(
    topic: str, keys: Iterable[bytes | None], partitioner: str, old_count: int, new_count: int
) -> PartitionImpact:
    """Pure: the share of distinct keys whose partition differs between ``old_count`` and ``new_count``.

    Keys the partitioner places at random (a NULL key, mostly) have no fixed
    partition to lose and are counted as ``unscored``.
    """
    chooser = get_partitioner(partitioner)
    distinct = set(keys)
    scored = [k for k in distinct if chooser.is_deterministic(k)]
    moved = sum(chooser(k, old_count) != chooser(k, new_count) for k in scored)
    return PartitionImpact(topic, chooser.name, old_count, new_count, len(scored), moved, len(distinct) - len(scored))


def _existing(bootstrap: str, topic: str) -> TopicInfo:
    info = describe(bootstrap, [topic])
    if topic not in info:
        raise TopicError(f"topic {topic} does not exist on {bootstrap}")
    return info[topic]


def list_topics(bootstrap: str, include_internal: bool = False) -> list[TopicInfo]:
    topics = describe(bootstrap).values()
    return sorted((t for t in topics if include_internal or not t.name.startswith("__")), key=lambda t: t.name)


def describe_topic(bootstrap: str, topic: str) -> TopicDetail:
    """Leader, replicas and ISR of each partition, and its record count read to the partition's end."""
    _existing(bootstrap, topic)
    metadata = admin_client(bootstrap).list_topics(topic, timeout=ADMIN_TIMEOUT).topics[topic]
    counts: dict[int, int] = {}
    for record in read_topic(bootstrap, topic):
        counts[record.partition] = counts.get(record.partition, 0) + 1
    return TopicDetail(topic, [
        PartitionDetail(p, m.leader, list(m.replicas), list(m.isrs), counts.get(p, 0))
        for p, m in sorted(metadata.partitions.items())
    ], topic_configs(bootstrap, topic))


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (DescribeConfigs), as ``kafka-configs --describe`` lists them.

    Not every entry that is not ``is_default``: a value the broker's own
    properties set (a single node's ``min.insync.replicas=1``) would be listed
    for every topic, though nobody chose it for this one.
    """
    admin = admin_client(bootstrap)
    future = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    try:
        entries = next(iter(future.values())).result(ADMIN_TIMEOUT)
    except KafkaException as exc:
        raise TopicError(f"could not read the configs of topic {topic}: {exc.args[0].str()}") from None
    return {name: str(e.value) for name, e in sorted(entries.items()) if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def _result(futures: Mapping[str, object], what: str) -> None:
    for name, future in futures.items():
        try:
            future.result(ADMIN_TIMEOUT)  # type: ignore[attr-defined]
        except KafkaException as exc:
            raise TopicError(f"could not {what} topic {name}: {exc.args[0].str()}") from None


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 config: Mapping[str, str] | None = None) -> TopicInfo:
    if partitions < 1:
        raise TopicError(f"partitions={partitions}: must be at least 1")
    if topic in describe(bootstrap, [topic]):
        raise TopicError(f"topic {topic} already exists on {bootstrap}")
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {}))
    admin = admin_client(bootstrap)
    _result(admin.create_topics([new], operation_timeout=ADMIN_TIMEOUT), "create")
    return _existing(bootstrap, topic)


def delete_topic(bootstrap: str, topic: str) -> None:
    _existing(bootstrap, topic)
    admin = admin_client(bootstrap)
    _result(admin.delete_topics([topic], operation_timeout=ADMIN_TIMEOUT), "delete")


def check_new_count(bootstrap: str, topic: str, new_count: int) -> int:
    """The topic's current count, or an error when ``new_count`` would not add partitions."""
    current = _existing(bootstrap, topic).partitions
    if new_count <= current:
        raise TopicError(f"count={new_count}: topic {topic} has {current} partitions; Kafka can only add partitions")
    return current


def add_partitions_impact(bootstrap: str, topic: str, new_count: int, partitioner: str) -> PartitionImpact:
    """Measure what the new count would move, reading every key of the topic."""
    current = check_new_count(bootstrap, topic, new_count)
    keys = [record.key for record in read_topic(bootstrap, topic)]
    return partition_impact(topic, keys, partitioner, current, new_count)


def add_partitions(bootstrap: str, topic: str, new_count: int) -> TopicInfo:
    """CreatePartitions (Kafka API 37); a broker without it gets a plain error and nothing changes."""
    current = check_new_count(bootstrap, topic, new_count)
    admin = admin_client(bootstrap)
    futures = admin.create_partitions([NewPartitions(topic, new_count)], operation_timeout=ADMIN_TIMEOUT)
    try:
        futures[topic].result(ADMIN_TIMEOUT)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION):
            raise TopicError(
                f"the broker at {bootstrap} does not support CreatePartitions (Kafka API 37) - the embedded "
                f"broker (Tansu) lacks it; {topic} keeps its {current} partitions, nothing was changed"
            ) from None
        raise TopicError(f"could not add partitions to {topic}: {error.str()}") from None
    return _existing(bootstrap, topic)
