"""The real Java Kafka client as a test oracle: kafka-clients from jvm/clients/pom.xml, compiled against at test time."""
from __future__ import annotations

import subprocess
from pathlib import Path

from streamapp.kafka.jvm import classpath

JAVA_SOURCES = Path(__file__).parent / "java"


def compile_java(out_dir: Path, *names: str) -> str:
    """Compile ``tests/java/<name>.java`` into ``out_dir``; return the classpath to run them with."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = [str(JAVA_SOURCES / f"{name}.java") for name in names]
    subprocess.run(["javac", "-d", str(out_dir), "-cp", classpath("clients"), *sources], check=True, capture_output=True, text=True)
    return classpath("clients", out_dir)
