"""Read topic exports from a directory instead of Kafka: ``<topic>.parquet``, ``<topic>.jsonl`` or ``<topic>/``.

An export holds either Kafka-shaped rows (key, value JSON, partition, offset,
timestamp) or decoded columns; ``decode`` accepts both.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from .decode import is_raw, raw_export
from .errors import ReconcileError, one_line

if TYPE_CHECKING:
    import pyarrow.parquet as pq

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


RAW_COLUMNS = ("key", "value", "partition")
#: Spark types of the Kafka-shaped JSON fields; what schema inference would find for such lines.
RAW_JSON_TYPES = {"key": "string", "value": "string", "partition": "bigint", "offset": "bigint",
                  "timestamp": "bigint", "timestamp_ms": "bigint"}


def check_exports(input_dir: Path, topics: dict[str, str]) -> dict[str, Path]:
    """Every role's export path, checked before Spark starts, so a bad one is the only line on stderr."""
    paths = {role: locate(input_dir, topic) for role, topic in topics.items()}
    for path in paths.values():
        check_export(path)
    return paths


def data_files(path: Path) -> list[Path]:
    """The files Spark reads for an export: the file itself, or a directory's files except those it skips
    (names starting with ``_`` or ``.``: ``_SUCCESS``, ``.crc`` checksums)."""
    if not path.is_dir():
        return [path]
    return sorted(f for f in path.rglob("*") if f.is_file()
                  and not any(part.startswith(("_", ".")) for part in f.relative_to(path).parts))


def check_export(path: Path) -> None:
    """What can be known of an export without Spark: a file or a directory holding data files, no empty
    file, a Parquet footer that pyarrow can read, a JSON-lines file not cut in the middle of a record."""
    if not path.is_file() and not path.is_dir():
        raise ReconcileError(f"export {path} is neither a file nor a directory")
    files = data_files(path)
    if not files:
        raise ReconcileError(f"export {path} is a directory with no data files in it")
    parquet = _is_parquet(path)
    for file in files:
        try:
            size = file.stat().st_size
            with file.open("rb"):
                pass
        except OSError as exc:
            raise ReconcileError(f"export {file} cannot be opened: {exc.strerror or exc}") from None
        if parquet:
            _check_parquet(file)
        elif size == 0 and file == path:
            raise ReconcileError(f"export {path} is empty (0 bytes)")
        else:
            _check_complete(file, size)


def _check_parquet(file: Path) -> None:
    import pyarrow.parquet as pq  # deferred (0.3 s; only a Parquet export needs it): the footer Spark reads first

    if file.stat().st_size == 0:
        raise ReconcileError(f"export {file} is empty (0 bytes), not a Parquet file")
    try:
        pq.read_metadata(file)
    except Exception as exc:  # ArrowInvalid, OSError: the footer is missing or corrupt
        raise ReconcileError(f"export {file} is not a readable Parquet file: {one_line(exc)}") from None


#: The last line of a JSON-lines export is read back at most this far to see that it is complete.
TAIL_LIMIT = 16 << 20


def _check_complete(file: Path, size: int) -> None:
    """A JSON-lines file ending without a newline in a line that is not JSON was cut mid-record
    (an interrupted copy or export): the records after the cut are missing too, so the run stops
    rather than reconcile part of a day as if it were all of it."""
    if size == 0:
        return
    with file.open("rb") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        start = max(0, size - TAIL_LIMIT)
        handle.seek(start)
        tail = handle.read()
    cut = tail.rfind(b"\n")
    if cut < 0 and start > 0:
        return  # a last line longer than TAIL_LIMIT: left to Spark
    last = tail[cut + 1:]
    if not last.strip():
        return
    try:
        json.loads(last)
        return
    except ValueError:  # UnicodeDecodeError included
        pass
    raise ReconcileError(f"export {file} ends in the middle of a record (its last line, from byte {start + cut + 1}, "
                         "has no newline and is not complete JSON): it looks truncated, export it again")


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


#: Spark's type of a flat Parquet column, by (physical type, logical type as pyarrow gives it); what Spark's
#: own inference reads from the footer for these (under its defaults). Any other column leaves the
#: export to that inference.
_PARQUET_TYPES = {
    ("BOOLEAN", "None"): "boolean", ("INT32", "None"): "int", ("INT64", "None"): "bigint",
    ("INT32", "Int(bitWidth=8, isSigned=true)"): "tinyint", ("INT32", "Int(bitWidth=16, isSigned=true)"): "smallint",
    ("INT32", "Int(bitWidth=32, isSigned=true)"): "int", ("INT64", "Int(bitWidth=64, isSigned=true)"): "bigint",
    ("FLOAT", "None"): "float", ("DOUBLE", "None"): "double", ("BYTE_ARRAY", "String"): "string",
    ("BYTE_ARRAY", "None"): "binary", ("INT32", "Date"): "date",
}
#: The most digits a DECIMAL stored as each physical type may have for Spark to read it as decimal(p, s)
#: (Spark's ParquetToSparkSchemaConverter; a byte array's are Spark's 38).
_DECIMAL_DIGITS = {"INT32": 9, "INT64": 18, "FIXED_LEN_BYTE_ARRAY": 38, "BYTE_ARRAY": 38}


def _spark_type(column: pq.ColumnSchema) -> str | None:
    """Spark's type of a flat Parquet column (``_PARQUET_TYPES``, or a DECIMAL as its precision and scale)."""
    if column.logical_type.type == "DECIMAL":
        digits = _DECIMAL_DIGITS.get(column.physical_type, 0)
        if column.physical_type == "FIXED_LEN_BYTE_ARRAY":  # the digits its bytes can hold, as Spark checks
            digits = min(digits, int((8 * column.length - 1) * 0.30102999566398))
        if 0 <= column.scale <= column.precision <= digits:
            return f"decimal({column.precision},{column.scale})"
        return None
    return _PARQUET_TYPES.get((column.physical_type, str(column.logical_type)))


def parquet_schema(path: Path, binary_as_string: bool = False) -> str | None:
    """A one-file Parquet export's schema from its footer, as Spark's inference would find it, else None.

    Given to Spark, it spares the inference job (one per export: a task on an executor and back; the second
    join's DECIMAL amounts cost five, 1.6 s of a cold run); only flat columns of the types in ``_PARQUET_TYPES``
    and DECIMALs qualify. ``binary_as_string``: the session's
    ``spark.sql.parquet.binaryAsString`` (a BYTE_ARRAY without a logical type is then a string).
    """
    import pyarrow.parquet as pq  # deferred (0.3 s): only a Parquet export needs it

    try:
        schema = pq.read_metadata(path).schema
    except Exception:  # left to Spark, which names the problem
        return None
    fields = []
    for i in range(len(schema)):
        column = schema.column(i)
        spark_type = _spark_type(column)
        if spark_type == "binary" and binary_as_string:
            spark_type = "string"
        if spark_type is None or column.max_repetition_level or column.path != column.name or "`" in column.name:
            return None
        fields.append(f"`{column.name}` {spark_type}")
    if len(fields) != len(schema.to_arrow_schema()):  # a nested column is several leaves
        return None
    return ", ".join(fields) or None


def holds_no_rows(input_dir: Path, topic: str) -> bool:
    """The topic's export is Parquet whose footers count no row: a join's output that no record reached (the
    second join's by-id pair in the benchmark), which the job can leave out of the classification. Any other
    export, or a footer pyarrow cannot read, is not known to be empty."""
    import pyarrow.parquet as pq  # deferred (0.3 s): only a Parquet export needs it

    path = locate(input_dir, topic)
    if not _is_parquet(path):
        return False
    try:
        return all(pq.read_metadata(file).num_rows == 0 for file in data_files(path))
    except Exception:  # left to Spark, which names the problem
        return False


def _first_line(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.readline(1 << 20).decode("utf-8", "replace")


def read_export(spark: SparkSession, input_dir: Path, topic: str, decoded: tuple[str, ...],
                time: str | None = None) -> DataFrame:
    """One export, refused (naming the file) when Spark cannot read it or it lacks its role's columns: a
    Kafka-shaped one ``RAW_COLUMNS``, a decoded one ``decoded`` (lower-case) and a time (``timestamp_ms``,
    ``timestamp`` or the event-time column ``time``)."""
    path = locate(input_dir, topic)
    try:
        schema = raw_json_schema(_first_line(path)) if path.is_file() and not _is_parquet(path) else None
        if _is_parquet(path):
            as_string = spark.conf.get("spark.sql.parquet.binaryAsString", "false").lower() == "true"
            footer = parquet_schema(path, as_string) if path.is_file() else None
            frame = spark.read.parquet(str(path)) if footer is None else spark.read.schema(footer).parquet(str(path))
        else:
            frame = spark.read.json(str(path)) if schema is None else spark.read.schema(schema).json(str(path))
        columns = [c.lower() for c in frame.columns]
    except Exception as exc:  # Spark raises AnalysisException / Py4JJavaError with pages of JVM trace
        raise ReconcileError(f"export {path} cannot be read: {one_line(exc)}") from None
    if not columns or columns == ["_corrupt_record"]:
        raise ReconcileError(f"export {path} is empty or not JSON lines/Parquet")
    wanted = RAW_COLUMNS if "value" in columns else decoded
    lacking = [c for c in wanted if c not in columns]
    if "value" not in columns and not lacking and not {"timestamp_ms", "timestamp", *([time] if time else [])} & set(columns):
        lacking = ["timestamp_ms"]
    if lacking:
        raise ReconcileError(f"export {path} lacks column(s) {', '.join(lacking)}; it has {', '.join(frame.columns)}")
    return raw_export(frame, f"export {path}") if is_raw(frame) else frame
