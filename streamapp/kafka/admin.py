"""Topic administration: create streamapp's own topics, list, describe, create, delete, add partitions.

streamapp never relies on broker auto-creation: Apache Kafka's default is one
partition, which silently breaks a join.  Creating a topic is checked before
anything is created: the name as Kafka's own rules allow it, the configs by the
broker itself (a validate-only CreateTopics), so a bad value is one line naming
it, not a half-made topic.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions,
                                  NewTopic)

from ..errors import StreamappError
from ..partitioners.registry import MAX_PARTITIONS
from . import CLIENT_LOGGER
from .reader import read_topic
from .security import Kafka, check_access_once, librdkafka_config

ADMIN_TIMEOUT = 15.0


#: The largest replication factor the admin client sends (librdkafka's bound; Kafka's field is an int16).
MAX_REPLICATION_FACTOR = 10_000


class TopicError(StreamappError):
    """A topic is missing, or exists with a partition count that breaks the join."""


class KafkaUnreachable(TopicError):
    """No broker answered for the topics' metadata: a wait (a restart) may be all it takes."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int




def admin_client(bootstrap: Kafka) -> AdminClient:
    """An admin client with the cluster's security; the first for a cluster checks it (a wrong setting is one line)."""
    check_access_once(bootstrap)
    return AdminClient({**librdkafka_config(bootstrap), "socket.timeout.ms": 10000, "logger": CLIENT_LOGGER})


def _cluster_metadata(admin: AdminClient, bootstrap: Kafka, timeout: float = ADMIN_TIMEOUT) -> Any:
    """The cluster's metadata (brokers, controller, topics), or :class:`KafkaUnreachable` naming the servers."""
    try:
        return admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaUnreachable(f"cannot reach the Kafka brokers at {bootstrap}: {exc.args[0].str()}") from None


def describe(bootstrap: Kafka, names: Iterable[str] | None = None, timeout: float = ADMIN_TIMEOUT) -> dict[str, TopicInfo]:
    """Partition counts of the named topics (all topics when ``names`` is None); missing ones left out."""
    metadata = _cluster_metadata(admin_client(bootstrap), bootstrap, timeout)
    wanted = None if names is None else set(names)
    return {
        name: TopicInfo(name, len(topic.partitions))
        for name, topic in metadata.topics.items()
        if (wanted is None or name in wanted) and topic.error is None
    }


def wait_listed(bootstrap: Kafka, names: Iterable[str], timeout: float = ADMIN_TIMEOUT) -> dict[str, TopicInfo]:
    """``describe`` once every named topic is listed.

    Apache Kafka answers CreateTopics before its broker has a leader for each
    new partition; until then Metadata gives the topic an error and ``describe``
    leaves it out, so a caller reading the counts straight after would miss it.
    """
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while True:
        result = describe(bootstrap, wanted)
        unlisted = sorted(wanted - set(result))
        if not unlisted:
            return result
        if time.monotonic() > deadline:
            raise TopicError(f"the brokers at {bootstrap} did not list topics {', '.join(unlisted)} within {timeout:.0f}s")
        time.sleep(0.1)


def check_counts(partitions: int, replication_factor: int) -> None:
    """A new topic's counts as Kafka can hold them, checked before the client (which raises on its own bounds)."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise TopicError(f"partitions={partitions}: must be from 1 to {MAX_PARTITIONS} (Kafka's int32)")
    if not 1 <= replication_factor <= MAX_REPLICATION_FACTOR:
        raise TopicError(f"replication_factor={replication_factor}: must be from 1 to {MAX_REPLICATION_FACTOR}")


def ensure_topics(bootstrap: Kafka, wanted: Mapping[str, int], replication_factor: int = 1) -> dict[str, TopicInfo]:
    """Create each topic that does not exist; fail naming every topic whose count differs."""
    for count in wanted.values():
        check_counts(count, replication_factor)
    existing = describe(bootstrap, wanted)
    missing = [
        NewTopic(name, num_partitions=count, replication_factor=replication_factor)
        for name, count in wanted.items()
        if name not in existing
    ]
    if missing:
        admin = admin_client(bootstrap)
        futures = admin.create_topics(missing, operation_timeout=ADMIN_TIMEOUT)
        for name, future in futures.items():
            try:
                future.result(ADMIN_TIMEOUT)
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise TopicError(f"could not create topic {name}: {exc.args[0].str()}") from None
    result = wait_listed(bootstrap, wanted) if missing else existing
    wrong = {name: info for name, info in result.items() if info.partitions != wanted[name]}
    if wrong:
        details = "; ".join(
            f"{name} has {info.partitions} partitions, expected {wanted[name]}" for name, info in wrong.items()
        )
        raise TopicError(f"existing topics have the wrong partition count: {details}")
    return result


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


def _existing(bootstrap: Kafka, topic: str) -> TopicInfo:
    info = describe(bootstrap, [topic])
    if topic not in info:
        raise TopicError(f"topic {topic} does not exist on {bootstrap}")
    return info[topic]


def list_topics(bootstrap: Kafka, include_internal: bool = False) -> list[TopicInfo]:
    topics = describe(bootstrap).values()
    return sorted((t for t in topics if include_internal or not t.name.startswith("__")), key=lambda t: t.name)


def describe_topic(bootstrap: Kafka, topic: str) -> TopicDetail:
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


def topic_configs(bootstrap: Kafka, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (DescribeConfigs), as ``kafka-configs --describe`` lists them.

    Not every entry that is not ``is_default``: a value the broker's own
    properties set (a single node's ``min.insync.replicas=1``) would be listed
    for every topic, though nobody chose it for this one.
    """
    return _configs(bootstrap, [topic], missing_ok=False)[topic]


def topics_configs(bootstrap: Kafka, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """:func:`topic_configs` of each of ``topics`` that exists (missing ones left out), one DescribeConfigs for all."""
    return _configs(bootstrap, topics, missing_ok=True)


def _configs(bootstrap: Kafka, topics: Iterable[str], missing_ok: bool) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics]
    if not resources:
        return {}
    admin = admin_client(bootstrap)  # held until the answers
    found = {}
    for resource, future in admin.describe_configs(resources).items():
        try:
            found[resource.name] = _set_on_topic(future.result(ADMIN_TIMEOUT))
        except KafkaException as exc:
            if not (missing_ok and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                raise TopicError(f"could not read the configs of topic {resource.name}: {exc.args[0].str()}") from None
    return found


def broker_configs(bootstrap: Kafka, names: Iterable[str]) -> dict[str, str]:
    """The effective values (defaults included) of the named configs of one broker of the cluster, its controller
    when known: the group settings that a consumer must fit are the same on every broker of a sane cluster."""
    admin = admin_client(bootstrap)  # held until the answer
    metadata = _cluster_metadata(admin, bootstrap)
    broker = str(metadata.controller_id if metadata.controller_id >= 0 else min(metadata.brokers))
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, broker)]).values()
    try:
        entries = future.result(ADMIN_TIMEOUT)
    except KafkaException as exc:
        raise TopicError(f"could not read the configs of broker {broker}: {exc.args[0].str()}") from None
    return {name: str(entries[name].value) for name in names if name in entries}


def _set_on_topic(entries: Mapping[str, ConfigEntry]) -> dict[str, str]:
    return {name: str(e.value) for name, e in sorted(entries.items()) if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def set_topic_configs(bootstrap: Kafka, topic: str, configs: Mapping[str, str]) -> None:
    """``configs`` set on the topic (IncrementalAlterConfigs, SET: its other configs stay as they are)."""
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = admin_client(bootstrap)  # held until the answer: a client collected before it cancels the request
    _result({topic: next(iter(admin.incremental_alter_configs([resource]).values()))}, "set the configs of")


def _result(futures: Mapping[str, object], what: str) -> None:
    for name, future in futures.items():
        try:
            future.result(ADMIN_TIMEOUT)  # type: ignore[attr-defined]
        except KafkaException as exc:
            raise TopicError(f"could not {what} topic {name}: {exc.args[0].str()}") from None


#: Kafka's own rules for a topic name (org.apache.kafka.common.internals.Topic.validate).
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME = 249


def _shown(name: str, limit: int = 40) -> str:
    """A name as an error shows it: quoted, and cut with its length when long (one line stays readable)."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}… ({len(name)} characters)"


def validate_topic_name(topic: str) -> None:
    """Refuse a name Kafka would refuse, before asking it: the error names the field and the value."""
    if not topic:
        raise TopicError("topic='': a topic name cannot be empty")
    if topic in (".", ".."):
        raise TopicError(f"topic={topic!r}: '.' and '..' are not allowed as topic names")
    if len(topic) > MAX_TOPIC_NAME:
        raise TopicError(f"topic={_shown(topic)}: a topic name is at most {MAX_TOPIC_NAME} characters")
    if not TOPIC_NAME.fullmatch(topic):
        bad = "".join(sorted({c for c in topic if not TOPIC_NAME.fullmatch(c)}))
        raise TopicError(
            f"topic={_shown(topic)}: contains {bad!r}; a topic name may contain only ASCII letters, digits, "
            f"'.', '_' and '-'"
        )


def _validate_only(bootstrap: Kafka, new: NewTopic) -> KafkaError | None:
    """The broker's answer to CreateTopics with validate_only: None when it would create ``new``."""
    admin = admin_client(bootstrap)  # held: a client collected early cancels its own request
    futures = admin.create_topics([new], operation_timeout=ADMIN_TIMEOUT, validate_only=True)
    try:
        futures[new.topic].result(ADMIN_TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]
    return None


def _refused(bootstrap: Kafka, topic: str, partitions: int, replication_factor: int, config: dict[str, str],
             error: KafkaError) -> TopicError:
    """One line for the broker's refusal, naming the field it refused and its value."""
    if error.name() == "INVALID_CONFIG":
        # Ask again per config, so the line names the one the broker refuses, not the whole set.
        for name, value in config.items():
            alone = _validate_only(bootstrap, NewTopic(topic, partitions, replication_factor, config={name: value}))
            if alone is not None and alone.name() == "INVALID_CONFIG":
                return TopicError(f"config {name}={value}: the broker at {bootstrap} refuses it: {alone.str()}")
        pairs = ", ".join(f"{k}={v}" for k, v in config.items())
        return TopicError(f"config {pairs}: the broker at {bootstrap} refuses them together: {error.str()}")
    field = {
        "INVALID_REPLICATION_FACTOR": f"replication_factor={replication_factor}",
        "INVALID_PARTITIONS": f"partitions={partitions}",
        "TOPIC_EXCEPTION": f"topic={_shown(topic)}",
        "INVALID_TOPIC_EXCEPTION": f"topic={_shown(topic)}",
    }.get(error.name(), f"topic {topic}")
    return TopicError(f"{field}: the broker at {bootstrap} refuses it: {error.name()}: {error.str()}")


def create_topic(bootstrap: Kafka, topic: str, partitions: int, replication_factor: int = 1,
                 config: Mapping[str, str] | None = None) -> TopicInfo:
    """Create ``topic`` only once its name and the broker's validate-only answer say it will be created as asked.

    A bad config would otherwise surface as the whole CreateTopics error, or a
    name Kafka cannot hold as a client-side exception; both become one line.
    """
    check_counts(partitions, replication_factor)
    validate_topic_name(topic)
    if topic in describe(bootstrap, [topic]):
        raise TopicError(f"topic {topic} already exists on {bootstrap}")
    configs = dict(config or {})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=configs)
    error = _validate_only(bootstrap, new)
    if error is not None:
        raise _refused(bootstrap, topic, partitions, replication_factor, configs, error)
    admin = admin_client(bootstrap)
    _result(admin.create_topics([new], operation_timeout=ADMIN_TIMEOUT), "create")
    return _existing(bootstrap, topic)


def delete_topic(bootstrap: Kafka, topic: str) -> None:
    _existing(bootstrap, topic)
    admin = admin_client(bootstrap)
    _result(admin.delete_topics([topic], operation_timeout=ADMIN_TIMEOUT), "delete")


def check_new_count(bootstrap: Kafka, topic: str, new_count: int) -> int:
    """The topic's current count, or an error when ``new_count`` would not add partitions."""
    if new_count > MAX_PARTITIONS:
        raise TopicError(f"count={new_count}: more than Kafka's {MAX_PARTITIONS} partitions (an int32)")
    current = _existing(bootstrap, topic).partitions
    if new_count <= current:
        raise TopicError(f"count={new_count}: topic {topic} has {current} partitions; Kafka can only add partitions")
    return current


def add_partitions(bootstrap: Kafka, topic: str, new_count: int) -> TopicInfo:
    """CreatePartitions (Kafka API 37), then wait until the broker's metadata shows the new count.

    Producers started after this returns see the new count, so the keys the
    impact named move from then on.  A refusal is one line naming the broker
    and Kafka's error; CreatePartitions is all-or-nothing, so nothing changed.
    """
    current = check_new_count(bootstrap, topic, new_count)
    admin = admin_client(bootstrap)
    futures = admin.create_partitions([NewPartitions(topic, new_count)], operation_timeout=ADMIN_TIMEOUT)
    try:
        futures[topic].result(ADMIN_TIMEOUT)
    except KafkaException as exc:
        error = exc.args[0]
        if error.name() in ("_TIMED_OUT", "REQUEST_TIMED_OUT"):
            # No answer is not a refusal: the change may still be applied, so do not claim it was not.
            raise TopicError(
                f"count={new_count}: the broker at {bootstrap} did not answer CreatePartitions for {topic} "
                f"within {ADMIN_TIMEOUT:.0f} s ({error.name()}); see `streamapp topics describe {topic}`"
            ) from None
        raise TopicError(
            f"count={new_count}: the broker at {bootstrap} refused CreatePartitions for {topic}: "
            f"{error.name()}: {error.str().rstrip('.')}; {topic} keeps its {current} partitions"
        ) from None
    # The controller has committed the change; the broker's metadata follows a moment later.
    deadline = time.monotonic() + ADMIN_TIMEOUT
    while (info := _existing(bootstrap, topic)).partitions != new_count and time.monotonic() < deadline:
        time.sleep(0.1)
    if info.partitions != new_count:
        raise TopicError(
            f"count={new_count}: the broker at {bootstrap} accepted CreatePartitions for {topic} but its "
            f"metadata still shows {info.partitions} partitions after {ADMIN_TIMEOUT:.0f} s"
        )
    return info


#: Consumer group states in which the group has (or is getting) live members.
ACTIVE_GROUP_STATES = ("STABLE", "PREPARING_REBALANCING", "COMPLETING_REBALANCING")


def group_active(bootstrap: Kafka, group_id: str) -> bool:
    """True when the consumer group has a live member (a running worker); False too when the group is unknown."""
    admin = admin_client(bootstrap)
    try:
        described = admin.describe_consumer_groups([group_id])[group_id].result(ADMIN_TIMEOUT)
    except (KafkaException, TimeoutError):
        return False
    return bool(described.members) or described.state.name in ACTIVE_GROUP_STATES
