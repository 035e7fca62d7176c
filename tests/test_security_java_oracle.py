"""The Java client oracle (tests/java/JavaProducer.java) on the SASL_SSL broker, configured by java_properties (issue 20).

The properties file is written as Kafka Streams' is (mode 0600, JAAS-quoted, escaped for
``Properties.load``) and deleted by the program once read; what it wrote is read back over
SASL_SSL by streamapp's reader, partition by partition.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from javatools import compile_java

from streamapp.kafka.ksql_equivalent import properties_text
from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.kafka.reader import key_partitions, read_topic
from streamapp.kafka.security import java_properties

COUNT = 60


def test_the_java_producer_writes_over_sasl_ssl(secured_broker: EmbeddedBroker, java_build_dir: Path, tmp_path: Path) -> None:
    access = secured_broker.access
    topic = "java_oracle_secured"
    ensure_topics(access, {topic: 4})
    config = tmp_path / "client.properties"
    config.touch(mode=0o600)
    config.write_text(properties_text(java_properties(access)), encoding="utf-8")
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    classpath = compile_java(java_build_dir, "JavaProducer")
    done = subprocess.run(["java", "-cp", classpath, "JavaProducer", "unused:1", topic, str(COUNT), "k", str(config)],
                          capture_output=True, text=True, timeout=240, env={**os.environ})
    assert done.returncode == 0, done.stderr[-2000:]
    assert not config.exists()  # read, then deleted by the program
    acknowledged = {key: int(p) for key, p in (line.split() for line in done.stdout.splitlines())}
    assert len(acknowledged) == COUNT
    assert key_partitions(read_topic(access, topic)) == acknowledged
    assert access.password not in done.stdout + done.stderr
