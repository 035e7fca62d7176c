"""The doctor's fixes: for a broken pair, the concrete change that makes it sound.

Three kinds, cheapest first: a producer setting for the client family that wrote
the odd topic (so new records land where the other topic's do), a key serializer
(so the same key is the same bytes), or a rewrite of the data (a ksqlDB
``CREATE … AS SELECT``, streamapp's repartition topic, or partitions added with
the share of keys that would move).  The settings are each client's own words,
read from its source (tests/go/clients.go, tests/kafkajs/oracle.js use them).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..partitioners import LIBRDKAFKA_NAMES
from .impact import partition_impact
from .key_encoding import CONFLUENT, JSON_NUMBER, JSON_STRING, UTF8

if TYPE_CHECKING:
    from .doctor import PairDiagnosis, TopicReport

#: Client profile -> target partitioner -> the producer setting that makes the client use it.
PRODUCER_SETTINGS: dict[str, dict[str, str]] = {
    "librdkafka": {name: f"partitioner={name}" for name in LIBRDKAFKA_NAMES if name != "random"},
    "java": {"murmur2_random": "the default partitioner: remove partitioner.class from the producer config"},
    "kafka-streams": {"murmur2_random": "the default partitioner: remove partitioner.class / the custom StreamPartitioner"},
    "sarama": {
        "murmur2_random": "config.Producer.Partitioner = sarama.NewMurmur2Partitioner",
        "fnv1a_random": "config.Producer.Partitioner = sarama.NewHashPartitioner",
        "fnv1a_reference": "config.Producer.Partitioner = sarama.NewReferenceHashPartitioner",
        "consistent_random": "config.Producer.Partitioner = sarama.NewConsistentCRCHashPartitioner",
    },
    "kafka-go": {
        "murmur2_random": "Writer.Balancer = &kafka.Murmur2Balancer{}",
        "murmur2": "Writer.Balancer = &kafka.Murmur2Balancer{Consistent: true}",
        "fnv1a_random": "Writer.Balancer = &kafka.Hash{}",
        "fnv1a_reference": "Writer.Balancer = &kafka.ReferenceHash{}",
        "consistent_random": "Writer.Balancer = &kafka.CRC32Balancer{}",
    },
    "franz-go": {
        "murmur2_random": "kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)) (kgo's default)",
        "fnv1a_random": "kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a)))",
        "fnv1a_unsigned": "kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaHasher(fnv32a)))",
        "fnv1a_reference": "kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.KafkaHasher(fnv32a)))",
        "consistent_random": "kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaHasher(crc32.ChecksumIEEE)))",
    },
    "kafkajs": {
        "murmur2_random": "createPartitioner: Partitioners.DefaultPartitioner",
        "kafkajs_legacy": "createPartitioner: Partitioners.LegacyPartitioner",
    },
    "kafka-python": {"murmur2_random": "the default partitioner (DefaultPartitioner): remove partitioner="},
    "aiokafka": {"murmur2_random": "the default partitioner (DefaultPartitioner): remove partitioner="},
    "faust": {"murmur2_random": "the default producer partitioner (aiokafka's): remove producer_partitioner="},
    "quixstreams": {"murmur2": "the default: remove the librdkafka partitioner override"},
}
PRODUCER_SETTINGS["confluent-kafka"] = PRODUCER_SETTINGS["librdkafka"]
PRODUCER_SETTINGS["kafkajs-legacy"] = PRODUCER_SETTINGS["kafkajs"]

#: The family the doctor moves a broken pair to when either side already uses it: Java's, Kafka Streams' and ksqlDB's.
JAVA_FAMILY = ("murmur2_random", "murmur2")

#: Encoding -> how its writers make the key the plain UTF-8 string instead.
TO_RAW_KEYS: dict[str, str] = {
    JSON_STRING: ("Faust: key_type=bytes on the Table (its keys are JSON otherwise; a Table takes no key_serializer), "
                  "key_serializer=\"raw\" on a topic; Quix Streams: key_serializer=\"str\"; any other client: a "
                  "string key serializer, not a JSON one"),
    **{enc: ("a string key serializer (Java StringSerializer, ksqlDB KEY_FORMAT='KAFKA') instead of the Schema "
             "Registry serializer, or the same serializer and schema on both topics") for enc in CONFLUENT},
}


@dataclass(frozen=True)
class Fix:
    """One change that repairs ``problem``; the fixes of one problem are alternatives, those of different problems all apply.

    ``client``/``setting`` are set for a producer setting.
    """

    #: The failing check it fixes ("key encodings", "partition counts", "partitioners", "shared keys").
    problem: str
    kind: str
    topic: str
    text: str
    client: str | None = None
    setting: str | None = None
    #: For added partitions: the share of the topic's sampled keys that would move.
    moved_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ksql_name(topic: str) -> str:
    """The ksqlDB object name a topic is usually declared as (upper case, ``_`` for the rest)."""
    return re.sub(r"[^A-Z0-9_]", "_", topic.upper())


def ksql_rewrite(topic: str, partitions: int) -> str:
    """A ksqlDB statement that rewrites ``topic`` through ksqlDB's producer (murmur2 over the KAFKA-format key)."""
    name = ksql_name(topic)
    return (f"CREATE STREAM {name}_COPARTITIONED WITH (KAFKA_TOPIC='{topic}_copartitioned', PARTITIONS={partitions}, "
            f"KEY_FORMAT='KAFKA') AS SELECT * FROM {name} EMIT CHANGES; (CREATE TABLE for a table), then join "
            f"{topic}_copartitioned")


def producer_fixes(topic: TopicReport, target: str) -> list[Fix]:
    """The setting, per client family that wrote ``topic``, that makes new records land as ``target`` puts them."""
    fixes = []
    for client in topic.writers:
        setting = PRODUCER_SETTINGS.get(client, {}).get(target)
        if setting is None and target in JAVA_FAMILY:
            setting = PRODUCER_SETTINGS.get(client, {}).get(JAVA_FAMILY[0] if target != JAVA_FAMILY[0] else JAVA_FAMILY[1])
        if setting is not None:
            fixes.append(Fix("partitioners", "producer", topic.name, f"{client}: {setting}, then re-write the records of {topic.name}",
                             client, setting))
    if not fixes:
        fixes.append(Fix("partitioners", "producer", topic.name, (
            f"write {topic.name} with the {target} partitioner (no client default of its writer family "
            f"{'/'.join(topic.family) or 'unknown'} has a setting for it), then re-write its records")))
    return fixes


def _target(a: TopicReport, b: TopicReport) -> tuple[TopicReport, str]:
    """The topic to change and the partitioner to move it to: towards Java's murmur2 when either side has it."""
    for keep, change in ((a, b), (b, a)):
        if set(JAVA_FAMILY) & set(keep.family):
            return change, next(n for n in JAVA_FAMILY if n in keep.family)
    return b, a.family[0]


def fixes_for(a: TopicReport, b: TopicReport, diagnosis: PairDiagnosis) -> list[Fix]:
    """Every fix for the failing checks of ``diagnosis``; pure."""
    failed = {check.name for check in diagnosis.checks if check.ok is False}
    fixes: list[Fix] = []
    if "key encodings" in failed:
        fixes += _encoding_fixes(a, b)
    if "partition counts" in failed:
        fixes += _count_fixes(a, b)
    if "partitioners" in failed:
        change, target = _target(a, b)
        keep = a if change is b else b
        fixes += producer_fixes(change, target)
        if target in JAVA_FAMILY:
            fixes.append(Fix("partitioners", "repartition", change.name, "ksqlDB: " + ksql_rewrite(change.name, keep.partitions)))
        fixes.append(Fix("partitioners", "repartition", change.name, (
            f"streamapp: join against a repartition topic the worker writes from {change.name} with "
            f"partitioner={target} (as it does users -> users_repartition_topic)")))
    if failed == {"shared keys"}:
        fixes += _placement_fixes(a, b)
    return fixes


def _encoding_fixes(a: TopicReport, b: TopicReport) -> list[Fix]:
    assert a.encoding is not None and b.encoding is not None
    raw = (UTF8, JSON_NUMBER)
    change, keep = (a, b) if b.encoding.encoding in raw else (b, a)
    assert change.encoding is not None and keep.encoding is not None
    how = TO_RAW_KEYS.get(change.encoding.encoding) if keep.encoding.encoding in raw else None
    text = how or f"write the keys of {change.name} as {keep.encoding.label}, as those of {keep.name} are"
    fixes = [Fix("key encodings", "serializer", change.name, f"{text}, then re-write the records of {change.name}")]
    if keep.encoding.encoding in raw:
        source_format = {JSON_STRING: "JSON", "confluent_avro": "AVRO", "confluent_protobuf": "PROTOBUF",
                         "confluent_json_schema": "JSON_SR"}.get(change.encoding.encoding)
        if source_format:
            fixes.append(Fix("key encodings", "repartition", change.name, (
                f"ksqlDB: declare {ksql_name(change.name)} over {change.name} with KEY_FORMAT='{source_format}', then "
                + ksql_rewrite(change.name, keep.partitions))))
    return fixes


def _count_fixes(a: TopicReport, b: TopicReport) -> list[Fix]:
    small, large = (a, b) if a.partitions < b.partitions else (b, a)
    fixes = []
    if small.family:
        impact = partition_impact(small.name, small.stored.values(), small.family[0], small.partitions, large.partitions)
        share = impact.moved / impact.keys if impact.keys else 0.0
        fixes.append(Fix("partition counts", "partitions", small.name, (
            f"give {small.name} {large.partitions} partitions (streamapp topics add-partitions {small.name} --count "
            f"{large.partitions}, or a new topic of {large.partitions}) and re-write its records: {share:.0%} of its "
            f"sampled keys move, and the records already written stay where the old count put them"),
            moved_share=share))
    fixes.append(Fix("partition counts", "repartition", small.name, "ksqlDB: " + ksql_rewrite(small.name, large.partitions)))
    return fixes


def _placement_fixes(a: TopicReport, b: TopicReport) -> list[Fix]:
    """Same partitioner, count and bytes, yet keys apart: records written before a resize, or placed by hand."""
    fixes = []
    for topic in (a, b):
        fp = topic.fingerprint
        if fp is not None and fp.resized is not None:
            name, earlier = fp.resized
            fixes.append(Fix("shared keys", "repartition", topic.name, (
                f"{topic.name} grew from {earlier} to {topic.partitions} partitions: re-write the records written "
                f"before ({'ksqlDB: ' + ksql_rewrite(topic.name, topic.partitions)})")))
        elif not topic.family:
            fixes.append(Fix("shared keys", "repartition", topic.name, (
                f"the records of {topic.name} are not placed by a known key hash (explicit partitions or random): write "
                f"them keyed with one default partitioner, or ksqlDB: {ksql_rewrite(topic.name, topic.partitions)}")))
    return fixes
