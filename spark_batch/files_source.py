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


#: Columns a decoded export must have, per role (``offset`` defaults to row order).
DECODED_COLUMNS = {
    "users": ("user_id", "name", "age", "partition"),
    "orders": ("user_id", "ts", "product_id", "qty", "unit_price", "channel", "partition"),
    "output": ("user_id", "ts", "product_id", "qty", "unit_price", "channel", "name", "age", "partition"),
}
RAW_COLUMNS = ("key", "value", "partition")


def check_exports(input_dir: Path, topics: dict[str, str]) -> dict[str, Path]:
    """Every role's export path, before Spark starts, so a missing one is the only line on stderr."""
    return {role: locate(input_dir, topic) for role, topic in topics.items()}


def read_export(spark: SparkSession, input_dir: Path, topic: str, role: str) -> DataFrame:
    """One export, refused (naming the file) when Spark cannot read it or it lacks the role's columns."""
    path = locate(input_dir, topic)
    try:
        frame = spark.read.parquet(str(path)) if _is_parquet(path) else spark.read.json(str(path))
        columns = [c.lower() for c in frame.columns]
    except Exception as exc:  # Spark raises AnalysisException / Py4JJavaError with pages of JVM trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReconcileError(f"export {path} cannot be read: {first[:300]}") from None
    if not columns or columns == ["_corrupt_record"]:
        raise ReconcileError(f"export {path} is empty or not JSON lines/Parquet")
    wanted = RAW_COLUMNS if "value" in columns else DECODED_COLUMNS["users" if role == "users" else "orders" if role == "orders" else "output"]
    lacking = [c for c in wanted if c not in columns]
    if "value" not in columns and not lacking and not {"timestamp_ms", "timestamp", "ts"} & set(columns):
        lacking = ["timestamp_ms"]
    if lacking:
        raise ReconcileError(f"export {path} lacks column(s) {', '.join(lacking)}; it has {', '.join(frame.columns)}")
    return raw_export(frame, f"export {path}") if is_raw(frame) else frame
