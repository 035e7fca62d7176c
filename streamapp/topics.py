"""Topic administration: create the topics streamapp owns, explicitly, with the configured count.

streamapp never relies on broker auto-creation: Apache Kafka's default is one
partition, which silently breaks a join.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .errors import StreamappError

ADMIN_TIMEOUT = 15.0


class TopicError(StreamappError):
    """A topic is missing, or exists with a partition count that breaks the join."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int


#: librdkafka's connection retries go here instead of flooding stderr; errors reach users as TopicError.
CLIENT_LOGGER = logging.getLogger("streamapp.librdkafka")


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, "logger": CLIENT_LOGGER})


def describe(bootstrap: str, names: Iterable[str] | None = None, timeout: float = ADMIN_TIMEOUT) -> dict[str, TopicInfo]:
    """Partition counts of the named topics (all topics when ``names`` is None); missing ones left out."""
    try:
        metadata = admin_client(bootstrap).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise TopicError(f"cannot reach the Kafka brokers at {bootstrap}: {exc.args[0].str()}") from None
    wanted = None if names is None else set(names)
    return {
        name: TopicInfo(name, len(topic.partitions))
        for name, topic in metadata.topics.items()
        if (wanted is None or name in wanted) and topic.error is None
    }


def wait_listed(bootstrap: str, names: Iterable[str], timeout: float = ADMIN_TIMEOUT) -> dict[str, TopicInfo]:
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


def ensure_topics(bootstrap: str, wanted: Mapping[str, int], replication_factor: int = 1) -> dict[str, TopicInfo]:
    """Create each topic that does not exist; fail naming every topic whose count differs."""
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
