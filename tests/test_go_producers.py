"""The real Go producers (Sarama, kafka-go, franz-go) write each key where streamapp's partitioner says, on Apache Kafka 4.4.

Each client+partitioner of ``gotools.GO_PARTITIONERS`` produces the same keyed records
(empty, binary, non-ASCII, long, and a few nil keys) through its own producer to a topic
on the session broker; confluent-kafka reads them back.  Every record must be stored
once, with its key unchanged, where the client said it put it, and, where the client is
deterministic, in the partition streamapp's matching partitioner names.  This is also
the proof that these client versions speak to Apache Kafka 4.4, which removed the
protocol versions older than Kafka 2.1 (KIP-896).
"""
from __future__ import annotations

import os
import random

import pytest
from gotools import GO_PARTITIONERS, go_produce
from oracle_keys import random_keys

from streamapp.kafka.reader import read_topic

#: A prime, so hash variants that agree modulo small powers of two still differ.
PARTITIONS = 7
KEY_COUNT = 300
NIL_KEYS = 5


@pytest.fixture(scope="module")
def records() -> list[tuple[bytes | None, bytes]]:
    """(key, value) pairs; each value is unique so a record read back names its input line."""
    seed = int.from_bytes(os.urandom(8), "big")
    keys: list[bytes | None] = [*random_keys(random.Random(seed), KEY_COUNT), *[None] * NIL_KEYS]
    return [(key, f"{seed}-{i}".encode()) for i, key in enumerate(keys)]


@pytest.mark.parametrize("name", sorted(GO_PARTITIONERS))
def test_go_producer_places_keys_where_streamapp_says(name: str, bootstrap: str, new_topic, records) -> None:
    topic = new_topic("go", partitions=PARTITIONS)
    placed = go_produce(bootstrap, topic, name, records)

    stored = {r.value: r for r in read_topic(bootstrap, topic)}
    assert len(stored) == len(records), f"{name}: {len(stored)} records stored for {len(records)} produced"
    spec = GO_PARTITIONERS[name]
    wrong = []
    for (key, value), (partition, offset) in zip(records, placed):
        record = stored[value]
        assert record.key == key, f"{name} stored key {key!r} as {record.key!r}"
        assert (record.partition, record.offset) == (partition, offset), f"{name} reported another place than the broker's"
        if spec.client_deterministic(key):
            expected = spec.partitioner_for(key)(key, PARTITIONS)
            if record.partition != expected:
                wrong.append(f"{'nil' if key is None else key[:16].hex()}: partition {record.partition}, streamapp {expected}")
    seed = records[0][1].split(b"-")[0].decode()
    assert not wrong, f"{name} vs streamapp {spec.streamapp}, seed={seed}: {len(wrong)} keys differ, first " + "; ".join(wrong[:5])
