"""Adapters that plug a streamapp partitioner into each Python Kafka client."""
from __future__ import annotations

import random
import sys
from typing import Any, Sequence

from .registry import Partitioner, PartitionerError, get_partitioner

def _resolve(partitioner: str | Partitioner) -> Partitioner:
    return get_partitioner(partitioner) if isinstance(partitioner, str) else partitioner


class ClientPartitioner:
    """A streamapp partitioner in the shape Python clients call.

    aiokafka, Faust (``producer_partitioner``) and kafka-python 2.x call it as
    ``(key, all_partitions, available_partitions)``; kafka-python 3.x calls
    ``partition(topic, key, serialized_key, value, serialized_value, cluster)``
    (or, for objects it does not recognise, ``partition(topic, serialized_key, cluster)``).
    """

    def __init__(self, chosen: Partitioner) -> None:
        self.chosen = chosen
        self.__name__ = f"streamapp_{chosen.name}"

    def __repr__(self) -> str:
        return f"<{self.__name__}>"

    def __call__(self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        if available and not self.chosen.is_deterministic(key):
            return random.choice(list(available))
        ordered = sorted(all_partitions)
        index = self.chosen(key, len(ordered))
        if not (type(index) is int and 0 <= index < len(ordered)):
            raise PartitionerError(
                f"partitioner {self.chosen.name!r} returned {index!r} for {len(ordered)} partitions; expected 0..{len(ordered) - 1}"
            )
        return ordered[index]

    def partition(self, topic: str, *args: Any) -> int:
        serialized_key, cluster = (args[1], args[4]) if len(args) == 5 else (args[0], args[1])
        all_partitions = cluster.partitions_for_topic(topic)
        if not all_partitions:
            raise ValueError(f"topic {topic!r} is not in the producer's metadata yet")
        return self(serialized_key, list(all_partitions), list(cluster.available_partitions_for_topic(topic) or ()))


def _register_with_kafka_python() -> None:
    """Make kafka-python 3.x accept ClientPartitioner as a ``kafka.partitioner.Partitioner`` (no deprecation path).

    Only when kafka-python is already imported: importing it costs ~0.1 s a Faust worker need not pay.
    """
    module = sys.modules.get("kafka.partitioner")
    base = getattr(module, "Partitioner", None)
    if isinstance(base, type) and hasattr(base, "register") and not issubclass(ClientPartitioner, base):
        base.register(ClientPartitioner)


def client_partitioner(partitioner: str | Partitioner) -> ClientPartitioner:
    """For Faust's ``producer_partitioner`` and aiokafka's / kafka-python's ``partitioner=``.

    Keyed records are hashed over *all* partitions, as the Java client does, so a
    key's partition never depends on which brokers are up; keys the partitioner
    places at random (NULL keys, mostly) go to an available partition, as
    aiokafka's and kafka-python's DefaultPartitioner do.
    """
    _register_with_kafka_python()
    return ClientPartitioner(_resolve(partitioner))


def confluent_config(partitioner: str | Partitioner) -> dict[str, str]:
    """The librdkafka ``partitioner`` setting for confluent-kafka, where librdkafka has one."""
    chosen = _resolve(partitioner)
    if chosen.librdkafka_name is None:
        raise PartitionerError(
            f"librdkafka has no partitioner equivalent to {chosen.name!r}; "
            f"produce with an explicit partition=streamapp.partitioners.partition({chosen.name!r}, key, n)"
        )
    return {"partitioner": chosen.librdkafka_name}
