"""Adapters that plug a streamapp partitioner into each Python Kafka client."""
from __future__ import annotations

import random
from typing import Callable, Sequence

from .registry import Partitioner, PartitionerError, get_partitioner

#: aiokafka, kafka-python and Faust call ``partitioner(key, all_partitions, available_partitions)``.
ClientPartitioner = Callable[[bytes | None, Sequence[int], Sequence[int]], int]


def _resolve(partitioner: str | Partitioner) -> Partitioner:
    return get_partitioner(partitioner) if isinstance(partitioner, str) else partitioner


def client_partitioner(partitioner: str | Partitioner) -> ClientPartitioner:
    """For Faust's ``producer_partitioner`` and aiokafka's / kafka-python's ``partitioner=``.

    Keyed records are hashed over *all* partitions, as the Java client does, so a
    key's partition never depends on which brokers are up; keys the partitioner
    places at random (NULL keys, mostly) go to an available partition, as
    aiokafka's and kafka-python's DefaultPartitioner do.
    """
    chosen = _resolve(partitioner)

    def choose(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        if available and not chosen.is_deterministic(key):
            return random.choice(list(available))
        ordered = sorted(all_partitions)
        return ordered[chosen(key, len(ordered))]

    choose.__name__ = f"streamapp_{chosen.name}"
    choose.__qualname__ = choose.__name__
    return choose


def confluent_config(partitioner: str | Partitioner) -> dict[str, str]:
    """The librdkafka ``partitioner`` setting for confluent-kafka, where librdkafka has one."""
    chosen = _resolve(partitioner)
    if chosen.librdkafka_name is None:
        raise PartitionerError(
            f"librdkafka has no partitioner equivalent to {chosen.name!r}; "
            f"produce with an explicit partition=streamapp.partitioners.partition({chosen.name!r}, key, n)"
        )
    return {"partitioner": chosen.librdkafka_name}
