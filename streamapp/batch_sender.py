"""Send many already-encoded records with one aiokafka batch per topic partition.

The join writes two records per order; handing each to the producer one by one
(``send`` awaits, checks metadata, looks the partition up and appends) costs more
than building the record.  Here a whole fetched batch's records are appended to
aiokafka's batch builders and each builder is queued with one ``send_batch``.
They go through Faust's own aiokafka producer, whose ``flush()`` Faust awaits
before every offset commit, so once :meth:`BatchSender.send` has returned the
records are covered by the next commit exactly as single sends are.
"""
from __future__ import annotations

from typing import Any, Callable

Partitioner = Callable[[bytes | None, int], int]


class BatchSender:
    """Collects records per (topic, partition), then queues them as whole batches."""

    def __init__(self, producer: Any, partitioner: Partitioner, partition_counts: dict[str, int]) -> None:
        self._producer = producer
        self._partitioner = partitioner
        self._counts = partition_counts
        self._open: dict[tuple[str, int], Any] = {}
        self._full: list[tuple[str, int, Any]] = []

    def add(self, topic: str, key: bytes, value: bytes, timestamp_ms: int) -> None:
        """Append a record to the batch of the partition the partitioner picks (over the counts read at start)."""
        tp = (topic, self._partitioner(key, self._counts[topic]))
        builder = self._open.get(tp)
        if builder is None:
            builder = self._open[tp] = self._producer.create_batch()
        if builder.append(timestamp=timestamp_ms, key=key, value=value) is None:
            self._full.append((*tp, builder))
            builder = self._open[tp] = self._producer.create_batch()
            builder.append(timestamp=timestamp_ms, key=key, value=value)

    async def send(self) -> None:
        """Queue every collected batch with the producer (not waiting for the broker's acknowledgement)."""
        batches = self._full + [(topic, partition, b) for (topic, partition), b in self._open.items()]
        self._full, self._open = [], {}
        for topic, partition, builder in batches:
            builder.close()
            await self._producer.send_batch(builder, topic, partition=partition)
