"""The JVM side: where Maven put each module's jars, and which Java runs them.

``jvm/pom.xml`` pins every JVM artifact streamapp uses; ``make install`` copies
each module's runtime classpath into ``jvm/lib/<module>/``.  Everything that
starts a JVM (the broker, the Java oracle, Spark's Kafka source) asks here, so
a missing jar or an old Java is one line naming what to do.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from ..errors import StreamappError

#: The repository's Maven project; ``STREAMAPP_JVM_LIB`` points elsewhere (an installed copy).
JVM_DIR = Path(__file__).resolve().parents[2] / "jvm"
MIN_JAVA = 17


class JvmError(StreamappError):
    """Java or a Maven-installed jar is missing; the message names what to install."""


def lib_dir() -> Path:
    override = os.environ.get("STREAMAPP_JVM_LIB")
    return Path(override) if override else JVM_DIR / "lib"


def jars(module: str) -> list[Path]:
    """The jars of one ``jvm/`` module, in a stable order; a one-line error if it was never installed."""
    found = sorted((lib_dir() / module).glob("*.jar"))
    if not found:
        raise JvmError(
            f"the {module} jars are not installed in {lib_dir() / module}: run `make install` "
            f"(it runs `mvn -f jvm/pom.xml package`)"
        )
    return found


def classpath(module: str, *extra: Path | str) -> str:
    return os.pathsep.join([*map(str, extra), *map(str, jars(module))])


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise JvmError(f"Java {MIN_JAVA} or newer is required and `java` is not on PATH: install openjdk-17-jdk-headless")
    return found


@lru_cache(maxsize=4)
def java_version(java: str) -> int:
    """The feature version (17, 21, ...) that ``java -version`` reports."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except OSError as exc:
        raise JvmError(f"cannot run {java}: {exc.strerror}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise JvmError(f"cannot read the version of {java}: {out.strip()[:120]!r}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java() -> str:
    """The ``java`` to run, checked to be at least :data:`MIN_JAVA`."""
    binary = java_binary()
    version = java_version(binary)
    if version < MIN_JAVA:
        raise JvmError(f"{binary} is Java {version}; Java {MIN_JAVA} or newer is required: install openjdk-17-jdk-headless")
    return binary
