"""The real Java Kafka client as a test oracle: kafka-clients.jar from a PyPI wheel, compiled against at test time."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pyflink

JAVA_SOURCES = Path(__file__).parent / "java"
LIB = Path(list(pyflink.__path__)[0]) / "lib"
#: kafka-clients and what KafkaProducer needs at run time (logging API, compression codecs).
CLASSPATH_JARS = [LIB / name for name in ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")]


def classpath(*extra: Path) -> str:
    missing = [str(jar) for jar in CLASSPATH_JARS if not jar.is_file()]
    if missing:
        raise FileNotFoundError(f"kafka-clients wheel incomplete, missing: {', '.join(missing)}")
    return ":".join(str(p) for p in [*extra, *CLASSPATH_JARS])


def compile_java(out_dir: Path, *names: str) -> str:
    """Compile ``tests/java/<name>.java`` into ``out_dir``; return the classpath to run them with."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = [str(JAVA_SOURCES / f"{name}.java") for name in names]
    subprocess.run(["javac", "-d", str(out_dir), "-cp", classpath(), *sources], check=True, capture_output=True, text=True)
    return classpath(out_dir)
