"""The demo's producers: the table with librdkafka's own partitioner, the stream the way ksqlDB would write it.

The table goes through confluent-kafka with ``partitioner=<name>``, so the partition
is librdkafka's own choice, not ours.  The stream goes through ksqlDB
(``/inserts-stream``) when it is reachable, otherwise through confluent-kafka with
``partitioner=murmur2``, which is bit-for-bit the Java producer's keyed partitioner.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable, Sequence

from confluent_kafka import Producer

from ..errors import StreamappError
from ..kafka.security import librdkafka_config
from .data import Encoded, Row
from .ksqldb import KsqlDBClient

logger = logging.getLogger(__name__)
Progress = Callable[[int], None]
JAVA_COMPATIBLE = "murmur2"
#: Times a record is offered to a full producer queue (0.1 s apart) before the run gives up.
BUFFER_RETRIES = 300


class ProduceError(StreamappError):
    """Records could not be delivered, or the cluster is unreachable; the message says which."""


def _deliver(producer: Producer, topic: str, records: Iterable[Encoded],
             progress: Progress | None) -> dict[bytes | None, int]:
    delivered: dict[bytes | None, int] = {}
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(f"{msg.key()!r}: {err}")  # type: ignore[attr-defined]
        else:
            delivered[msg.key()] = msg.partition()  # type: ignore[attr-defined]
            logger.debug("Message key %r delivered to topic %r, partition #%d, offset #%d",
                         msg.key(), msg.topic(), msg.partition(), msg.offset())  # type: ignore[attr-defined]
        if progress:
            progress(1)

    for record_key, value, ts in records:
        for _ in range(BUFFER_RETRIES):
            try:
                producer.produce(topic, key=record_key, value=value, timestamp=ts or 0, on_delivery=on_delivery)
                break
            except BufferError:  # librdkafka's queue is full: serve delivery reports, then try again
                producer.poll(0.1)
        else:
            raise ProduceError(f"{topic}: the producer's queue stayed full for {BUFFER_RETRIES * 0.1:.0f} s: "
                               f"the brokers are not taking records")
        producer.poll(0)
    left = producer.flush(30)
    if failures or left:
        raise ProduceError(f"{len(failures) + left} records to {topic} were not delivered: {'; '.join(failures[:3])}")
    return delivered


def _producer(bootstrap: str, client_id: str, partitioner: str) -> Producer:
    return Producer({**librdkafka_config(bootstrap), "client.id": client_id, "partitioner": partitioner,
                     "linger.ms": 5})


def produce_table(bootstrap: str, topic: str, records: Sequence[Encoded], partitioner: str, client_id: str,
                  progress: Progress | None = None) -> dict[bytes | None, int]:
    """Produce with librdkafka's own ``partitioner``; return key bytes -> partition from the delivery reports."""
    return _deliver(_producer(bootstrap, client_id, partitioner), topic, records, progress)


def produce_stream(bootstrap: str, topic: str, records: Sequence[Encoded], client_id: str,
                   progress: Progress | None = None) -> dict[bytes | None, int]:
    """Produce as a Java client would (murmur2 over all partitions), with each record's own timestamp."""
    return _deliver(_producer(bootstrap, client_id, JAVA_COMPATIBLE), topic, records, progress)


def insert_rows(client: KsqlDBClient, stream: str, key_column: str | None, rows: Sequence[Row],
                progress: Progress | None = None) -> None:
    """Every record into ksqlDB's stream in one ``/inserts-stream`` request: ksqlDB partitions them (murmur2)."""
    client.insert_rows(stream, [{**({key_column: row.key} if key_column else {}), **row.value} for row in rows])
    if progress:
        progress(len(rows))
