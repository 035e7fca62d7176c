"""The Faust transport the worker runs on: Faust's aiokafka driver plus batch delivery.

Faust hands a stream one message at a time, and its per-message path (consumer
hand-off, conductor, stream, event, ack) costs the join more than the join
itself.  A topic with a batch handler
(:meth:`streamapp.worker.app.StreamappApp.batch_agent`) is instead handed each
fetch's messages at once, by partition, inline in the consumer's fetch loop.
Its partitions are still assigned by Faust, co-partitioned with the tables, and
the handler acks each message when its output is queued; Faust flushes the
producer before it commits, so delivery stays at-least-once.

The consumer also subscribes only once the broker lists every topic: Apache
Kafka answers CreateTopics before its metadata knows the new topic, and a
consumer that joins in that moment counts the changelog Faust has just created
as having no partitions until its next metadata refresh, so every
table write through it fails (``PartitionsMismatch``).
"""
from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message

from ..kafka.admin import TopicError, wait_listed
from . import faust_internals

logger = logging.getLogger(__name__)

#: Handles one fetch's messages of a topic, by partition in offset order; acks each one it is done with.
BatchHandler = Callable[[Mapping[TP, Sequence[Message]]], Awaitable[None]]


class Consumer(faust_aiokafka.Consumer):
    async def subscribe(self, topics: Iterable[str]) -> None:
        """Faust's subscribe, once the broker lists every topic (see the module's docstring)."""
        names = set(topics)
        servers = self.app.settings.kafka
        try:
            await asyncio.get_running_loop().run_in_executor(None, wait_listed, servers, names)
        except TopicError as exc:  # a topic nobody created: subscribe to it as Faust would
            logger.warning("Subscribing anyway: %s", exc)
        await super().subscribe(names)

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        """Faust's fetch, less the batch topics' messages, which go to their handlers afterwards.

        Each message's offset is kept as Faust's own fetch loop keeps it
        (:func:`~streamapp.worker.faust_internals.accept`), and after each batch
        Faust's ``commit_every`` rule applies as it does after each message there.
        A batch that a rebalance overtakes is dropped unhandled: the rebalance seeks
        back to the committed offsets, so it is fetched again by its next owner.
        """
        handlers: Mapping[str, BatchHandler] = self.app.batch_handlers
        batches: dict[str, dict[TP, list[Message]]] = {}
        generation: int | None = None
        async for tp, message in super().getmany(timeout):
            if generation is None:  # Faust has just checked each message against the current generation
                generation = self.app.consumer_generation_id
            if tp.topic not in handlers:
                yield tp, message
            elif await faust_internals.accept(self, tp, message):
                batches.setdefault(tp.topic, {}).setdefault(tp, []).append(message)
        for topic, by_partition in batches.items():
            if not self.flow_active or self.app.consumer_generation_id != generation:
                return
            await handlers[topic](by_partition)
            await faust_internals.commit_if_due(self)


class Transport(faust_aiokafka.Transport):
    Consumer = Consumer
