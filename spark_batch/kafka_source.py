"""Read planned Kafka offset ranges into Spark: Spark's own ``kafka`` source, or a Python DataSource.

Spark's ``kafka`` source needs the spark-sql-kafka connector at exactly the
installed PySpark's version: ``make install`` puts it in ``jvm/lib/spark-kafka``
(``jvm/pom.xml``), and a session the job starts gets it as ``spark.jars``;
under spark-submit, ``--packages`` brings it.  ``streamapp_kafka_ranges`` (a
PySpark 4 Python DataSource) needs no jar: one input partition per
topic-partition offset range, read in parallel with confluent-kafka.  Both give
the same columns, ``RAW_SCHEMA``, and the same records: committed ones only.

A planned range is read whole or not at all: the Python reader never lets
librdkafka reset an offset (``auto.offset.reset=error``); an out-of-range or
transient fetch error re-seeks to the planned offset and retries ``RETRIES``
times, and a range it still cannot read, or a log that ends before the planned
end, fails the read with one line naming topic, partition and offsets.  Offsets
a reader never receives (compacted away, aborted transactions, transaction
markers) are skipped by position: the end is reached when the consumer's
position is there, not when a record at ``end - 1`` arrived.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyspark
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from streamapp.kafka import jvm
from streamapp.kafka.reader import reader_config
from streamapp.kafka.security import (
    Kafka, access_from_options, check_access_once, datasource_options, spark_kafka_options,
)

from .errors import ReconcileError
from .window import TopicRange

SOURCE_NAME = "streamapp_kafka_ranges"
#: The ``jvm/`` module whose jars are Spark's Kafka source.
SPARK_KAFKA_MODULE = "spark-kafka"
_CONNECTOR_JAR = re.compile(r"spark-sql-kafka-0-10_[\d.]+-(?P<version>.+)\.jar")
RAW_SCHEMA = "key binary, value binary, topic string, partition int, offset bigint, timestamp_ms bigint"
READERS = ("auto", "spark", "python")
BATCH_ROWS = 20_000
STALL_SECONDS = 30.0
#: Re-seeks to the planned offset after an out-of-range or transient fetch error, before the read fails.
RETRIES = 4
#: Seconds before the n-th retry: n times this.
RETRY_BACKOFF = 0.25
#: A read of at most this many offsets (the demo's: a few hundred) is this many tasks, not one per
#: topic-partition range: a task's own cost (scheduling, its Python worker for the decoding) is then
#: most of its time, and every step of the job reads inputs.
SMALL_READ_RECORDS = 50_000
SMALL_READ_TASKS = 2

_ARROW_SCHEMA = pa.schema(
    [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
     ("offset", pa.int64()), ("timestamp_ms", pa.int64())]
)


class OffsetRange(InputPartition):
    """One topic-partition's offsets [start, end): one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaRangeReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = access_from_options(options)  # servers and security
        self.ranges = json.loads(options["ranges"])

    def partitions(self) -> list[OffsetRange]:
        return [OffsetRange(t, int(p), int(s), int(e)) for t, p, s, e in self.ranges if int(e) > int(s)]

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        columns: list[list[object]] = [[], [], [], []]
        for records in read_range(self.bootstrap, partition.topic, partition.partition, partition.start, partition.end):
            for record in records:
                columns[0].append(record.key())
                columns[1].append(record.value())
                columns[2].append(record.offset())
                columns[3].append(record.timestamp()[1])
            if len(columns[0]) >= BATCH_ROWS:
                yield self._batch(partition, columns)
                columns = [[], [], [], []]
        if columns[0]:
            yield self._batch(partition, columns)

    @staticmethod
    def _batch(partition: OffsetRange, columns: list[list[object]]) -> pa.RecordBatch:
        n = len(columns[0])
        return pa.RecordBatch.from_arrays(
            [pa.array(columns[0], pa.binary()), pa.array(columns[1], pa.binary()),
             pa.array([partition.topic] * n, pa.string()), pa.array([partition.partition] * n, pa.int32()),
             pa.array(columns[2], pa.int64()), pa.array(columns[3], pa.int64())],
            schema=_ARROW_SCHEMA,
        )


class RangeReadError(ReconcileError):
    """A planned offset range that could not be read whole; the message names topic, partition and offsets."""


def read_range(access: Kafka, topic: str, partition: int, start: int, end: int,
               stall: float = STALL_SECONDS) -> Iterator[list[Message]]:
    """The committed records of ``topic[partition]`` at offsets [start, end), in batches; all of them or an error.

    A reconciliation that silently read less than its plan would report records
    as missing that are not: so no automatic offset reset, a bounded number of
    re-seeks to where the read is on a fetch error or a log end below the planned
    end, then :class:`RangeReadError`.  An open transaction holding the last stable
    offset below ``end`` is waited for up to ``stall`` seconds without progress.
    """
    check_access_once(access)
    # never jump to END/BEGINNING: a reset would read another range
    consumer = Consumer(reader_config(access, "streamapp-ranges", **{"auto.offset.reset": "error"}))
    position, failures, problem = start, 0, ""

    def fail(why: str) -> RangeReadError:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            held = f"the log holds offsets [{low}, {high})"
        except KafkaException as exc:
            held = f"its offsets cannot be listed: {exc.args[0].str()}"
        return RangeReadError(
            f"topic {topic} partition {partition}: planned offsets [{start}, {end}) cannot be read whole "
            f"(stopped at offset {position} after {failures} attempt(s); {held}): {why}"
        )

    def retry(why: str) -> None:
        nonlocal failures, problem
        failures, problem = failures + 1, why
        if failures > RETRIES:
            raise fail(why)
        time.sleep(RETRY_BACKOFF * failures)
        consumer.assign([TopicPartition(topic, partition, position)])  # re-seek to where the read is

    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        idle_since = time.monotonic()
        while position < end:
            batch: list[Message] = []
            for msg in consumer.consume(num_messages=BATCH_ROWS, timeout=0.1):
                error = msg.error()
                if error is None:
                    if position <= msg.offset() < end:
                        batch.append(msg)
                    position = max(position, min(msg.offset() + 1, end))
                    continue
                if error.code() == KafkaError._PARTITION_EOF:
                    position = max(position, min(msg.offset(), end))  # skipped offsets count as read
                    if position < end and _high_watermark(consumer, topic, partition) < end:
                        retry(f"the log ends at offset {msg.offset()}, before the planned end {end}")
                        break
                    continue
                if error.fatal():
                    raise fail(error.str())
                retry(error.str())  # out of range (no reset), or transient: librdkafka's own retries did not cure it
                break
            if batch:
                idle_since = time.monotonic()
                yield batch
            elif position < end and time.monotonic() - idle_since > stall:
                last = f"; last error: {problem}" if problem else ""
                raise fail(f"nothing arrived for {stall:.0f}s (an open transaction?{last})")
    finally:
        consumer.close()


_WORKER_ERROR = re.compile(r"^(?:[\w.]+\.)?RangeReadError: (?P<message>.+)$", re.MULTILINE)


def range_error(exc: BaseException) -> str | None:
    """The :class:`RangeReadError` line a Spark task's Python worker raised, found in the failure Spark reports
    (a ``PythonException`` whose first line names nothing), or None when the failure is something else."""
    found = _WORKER_ERROR.findall(str(exc))
    return found[-1].strip() if found else None


def _high_watermark(consumer: Consumer, topic: str, partition: int) -> int:
    """The partition's high watermark as the broker says now (-1 when it cannot be asked: treated as short)."""
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    except KafkaException:
        return -1


class KafkaRangeDataSource(DataSource):
    """``spark.read.format("streamapp_kafka_ranges").option("bootstrap", ...).option("ranges", json)``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return RAW_SCHEMA

    def reader(self, schema: StructType) -> KafkaRangeReader:
        return KafkaRangeReader(dict(self.options))


def spark_kafka_available(spark: SparkSession) -> bool:
    """True when Spark's own ``kafka`` source (spark-sql-kafka) is there.

    Asked of Spark itself, with a read that has no options: the source refuses it
    when it is there, and Spark names the source it cannot find when it is not.
    No JVM handle is needed, so this works under Spark Connect too.
    """
    try:
        spark.read.format("kafka").load().schema
    except AnalysisException as exc:
        return exc.getCondition() != "DATA_SOURCE_NOT_FOUND" and "Failed to find data source" not in str(exc)
    except Exception:  # noqa: BLE001 - the source is there and refuses a read without its options
        return True
    return True


def connector_jars(required: bool) -> list[Path]:
    """The installed spark-sql-kafka jars, checked against PySpark's version (a mismatch fails deep in Spark).

    Not installed: ``[]``, or with ``required`` the one-line ``JvmError`` naming ``make install``.
    """
    try:
        found = jvm.jars(SPARK_KAFKA_MODULE)
    except jvm.JvmError:
        if required:
            raise
        return []
    versions = {m["version"] for m in map(_CONNECTOR_JAR.fullmatch, (j.name for j in found)) if m}
    if versions != {pyspark.__version__}:
        got = ", ".join(sorted(versions)) or "no spark-sql-kafka jar"
        raise ReconcileError(
            f"{found[0].parent}: spark-sql-kafka {got}, but PySpark is {pyspark.__version__}; they must be equal: "
            f"set spark.version in jvm/pom.xml to the PySpark pin and run `make install`"
        )
    return found


def choose_reader(spark: SparkSession, wanted: str) -> str:
    if wanted not in READERS:
        raise ReconcileError(f"--kafka-reader={wanted!r}: expected one of {', '.join(READERS)}")
    available = spark_kafka_available(spark)
    if wanted == "spark" and not available:
        raise ReconcileError(
            "--kafka-reader=spark: spark-sql-kafka is not on the Spark session's classpath "
            "(run `make install`; under spark-submit, add --packages org.apache.spark:spark-sql-kafka-0-10_2.13:"
            f"{pyspark.__version__})"
        )
    if wanted == "auto":
        return "spark" if available else "python"
    return wanted


def read_ranges(spark: SparkSession, bootstrap: Kafka, planned: list[TopicRange], reader: str) -> DataFrame:
    """The records of the planned topics, as ``RAW_SCHEMA`` rows: one Spark read, one task per non-empty range
    (``SMALL_READ_TASKS`` for a small read)."""
    ranges = [(t.topic, p, s, e) for t in planned for p, (s, e) in sorted(t.ranges.items()) if e > s]
    if not ranges:
        return spark.createDataFrame([], RAW_SCHEMA)
    if reader == "spark":
        by_topic: dict[str, dict[str, tuple[int, int]]] = {}
        for topic, p, s, e in ranges:
            by_topic.setdefault(topic, {})[str(p)] = (s, e)
        frame = (
            spark.read.format("kafka")
            .options(**spark_kafka_options(bootstrap))  # kafka.bootstrap.servers and the security
            # librdkafka (the plan, the Python reader) reads committed records only; the Java client's
            # default would also return records of aborted transactions (ksqlDB with exactly_once_v2)
            .option("kafka.isolation.level", "read_committed")
            .option("assign", json.dumps({t: [int(p) for p in parts] for t, parts in by_topic.items()}))
            .option("startingOffsets", json.dumps({t: {p: r[0] for p, r in parts.items()} for t, parts in by_topic.items()}))
            .option("endingOffsets", json.dumps({t: {p: r[1] for p, r in parts.items()} for t, parts in by_topic.items()}))
            .load()
        )
        frame = frame.select("key", "value", "topic", "partition", "offset", F.unix_millis("timestamp").alias("timestamp_ms"))
    else:
        spark.dataSource.register(KafkaRangeDataSource)
        frame = spark.read.format(SOURCE_NAME).options(**datasource_options(bootstrap)).option("ranges", json.dumps(ranges)).load()
    if sum(e - s for _, _, s, e in ranges) <= SMALL_READ_RECORDS and len(ranges) > SMALL_READ_TASKS:
        frame = frame.coalesce(SMALL_READ_TASKS)  # each task reads several ranges, one after the other
    return frame

