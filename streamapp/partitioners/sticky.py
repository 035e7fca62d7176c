"""Where a Java producer under Kafka Streams puts a record with a null key: its sticky partitioner.

The keyed partitioners (:mod:`.registry`) place a key; a null key has no place of its
own, and the Java producer's built-in partitioner (KIP-794) sends such records to one
partition drawn at random until a batch's worth has gone there.
"""
from __future__ import annotations

import random
from typing import Callable

#: The Java producer's ``batch.size`` default (Kafka Streams keeps it): what its sticky partitioner
#: writes to one partition before it moves on (KIP-794).
STICKY_BATCH_SIZE = 16_384


class NullKeyPartitions:
    """Where each output's null-key records go: the Java producer's built-in sticky partitioner, as Kafka Streams
    (and so ksqlDB) uses it for a null key.

    A Kafka Streams sink with no ``StreamPartitioner`` (ksqlDB's ``SinkBuilder``, and the Kafka Streams
    program, write with ``Produced.with(key, value)``) leaves the partition to the producer; ``KafkaProducer.partition``
    hashes a key, and for a null one ``BuiltInPartitioner`` picks a partition at random and keeps it
    until :data:`STICKY_BATCH_SIZE` bytes have gone to it, then picks again (uniformly; with adaptive
    partitioning weighted by its queue lengths, which the worker does not measure).  Which partition a
    given record gets is therefore random on both engines: only the rule is the same.  Not the
    worker's ``partitioner`` setting, which places keys: ``murmur2`` would put every null key in the
    partition of the empty key, where ksqlDB spreads them.
    """

    def __init__(self, choose: Callable[[int], int] = random.randrange) -> None:
        #: ``choose(n)``: a partition in ``range(n)`` (a seeded one in tests).
        self._choose = choose
        #: topic -> (the sticky partition, bytes appended to it so far).
        self._sticky: dict[str, tuple[int, int]] = {}

    def partition(self, topic: str, partitions: int, size: int) -> int:
        """The partition of the next null-key record of ``size`` bytes (its value) to ``topic`` of ``partitions``."""
        current = self._sticky.get(topic)
        if current is None or current[1] >= STICKY_BATCH_SIZE or current[0] >= partitions:
            current = (self._choose(partitions), 0)
        self._sticky[topic] = (current[0], current[1] + size)
        return current[0]
