"""Read topic exports from a directory instead of Kafka: ``<topic>.parquet``, ``<topic>.jsonl`` or ``<topic>/``.

An export holds either Kafka-shaped rows (key, value JSON, partition, offset,
timestamp) or decoded columns; ``decode`` accepts both.
"""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from .decode import is_raw, raw_export
from .errors import ReconcileError

SUFFIXES = (".parquet", ".jsonl", ".json")


def locate(input_dir: Path, topic: str) -> Path:
    for candidate in [input_dir / f"{topic}{suffix}" for suffix in SUFFIXES] + [input_dir / topic]:
        if candidate.exists():
            return candidate
    tried = ", ".join(f"{topic}{s}" for s in SUFFIXES)
    raise ReconcileError(f"no export for topic {topic} in {input_dir} (looked for {tried} and {topic}/)")


def _is_parquet(path: Path) -> bool:
    if path.is_dir():
        return any(path.rglob("*.parquet"))
    return path.suffix == ".parquet"


def read_export(spark: SparkSession, input_dir: Path, topic: str) -> DataFrame:
    path = locate(input_dir, topic)
    frame = spark.read.parquet(str(path)) if _is_parquet(path) else spark.read.json(str(path))
    if not frame.columns:
        raise ReconcileError(f"export {path} is empty or unreadable")
    return raw_export(frame, f"export {path}") if is_raw(frame) else frame
