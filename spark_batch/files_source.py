"""Read topic exports from a directory instead of Kafka: ``<topic>.parquet``, ``<topic>.jsonl`` or ``<topic>/``.

An export holds either Kafka-shaped rows (key, value JSON, partition, offset,
timestamp) or decoded columns; ``decode`` accepts both.
"""
from __future__ import annotations

import json
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
#: Spark types of the Kafka-shaped JSON fields; what schema inference would find for such lines.
RAW_JSON_TYPES = {"key": "string", "value": "string", "partition": "bigint", "offset": "bigint",
                  "timestamp": "bigint", "timestamp_ms": "bigint"}


def check_exports(input_dir: Path, topics: dict[str, str]) -> dict[str, Path]:
    """Every role's export path, before Spark starts, so a missing one is the only line on stderr."""
    return {role: locate(input_dir, topic) for role, topic in topics.items()}


def raw_json_schema(first_line: str) -> str | None:
    """The schema of a Kafka-shaped JSON line (string key/value, integer partition/offset/times), else None.

    Given to Spark, it spares the schema-inference pass (one Spark job per export,
    most of a small run's time); any other shape is left to inference.
    """
    try:
        row = json.loads(first_line)
    except ValueError:
        return None
    if not isinstance(row, dict) or "value" not in row or not set(row) <= set(RAW_JSON_TYPES):
        return None
    for name, value in row.items():
        wanted = str if RAW_JSON_TYPES[name] == "string" else int
        if value is not None and (type(value) is not wanted):
            return None
    return ", ".join(f"`{name}` {RAW_JSON_TYPES[name]}" for name in row)


def _first_line(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.readline(1 << 20).decode("utf-8", "replace")


def read_export(spark: SparkSession, input_dir: Path, topic: str, role: str) -> DataFrame:
    """One export, refused (naming the file) when Spark cannot read it or it lacks the role's columns."""
    path = locate(input_dir, topic)
    try:
        schema = raw_json_schema(_first_line(path)) if path.is_file() and not _is_parquet(path) else None
        if _is_parquet(path):
            frame = spark.read.parquet(str(path))
        else:
            frame = spark.read.json(str(path)) if schema is None else spark.read.schema(schema).json(str(path))
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
