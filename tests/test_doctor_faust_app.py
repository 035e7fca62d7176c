"""The doctor on a topic a real running Faust app wrote with its default JSON keys (a Table's changelog).

tests/faust_keys_app.py is a plain Faust app run as ``faust -A faust_keys_app
worker`` on the session's Apache Kafka broker: it sends users to its source topic
and its agent puts them into a Table, whose changelog Faust writes with the
Table's default key serializer, JSON.  Beside it, a topic written with the
Java producer's partitioner (librdkafka's ``murmur2_random``, the same hash).  The
doctor must name the changelog's encoding a JSON-quoted string written by a
murmur2 client Faust is one of, find the pair broken (no key bytes equal: every
lookup misses) and print the fix, raw keys; the same app run as the fix says
(``key_type=bytes`` on the Table: faust-streaming's Table takes no
``key_serializer``) must then make the pair sound.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from streamapp.copartition.doctor import JoinedPair, diagnose, sample_topics
from streamapp.kafka.admin import ensure_topics
from workerkit import end_process, produce, read_all

N = 6
COUNT = 400
TESTS = Path(__file__).parent


def run_faust_app(bootstrap: str, serializer: str, tmp_path: Path) -> str:
    """Run the Faust app until its table's changelog holds every user; return the changelog topic."""
    app_id = f"doctor-faust-{serializer}-{uuid.uuid4().hex[:6]}"
    source, changelog = f"{app_id}-source", f"{app_id}-users-changelog"
    ensure_topics(bootstrap, {source: N, changelog: N})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "FAUST_KEYS_APP_ID": app_id, "FAUST_KEYS_BOOTSTRAP": bootstrap, "FAUST_KEYS_SOURCE": source,
           "FAUST_KEYS_PARTITIONS": str(N), "FAUST_KEYS_COUNT": str(COUNT), "FAUST_KEYS_SERIALIZER": serializer,
           "FAUST_KEYS_DATADIR": str(tmp_path / app_id)}
    log = tmp_path / f"{app_id}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "faust", "-A", "faust_keys_app", "worker", "-l", "info"],
                                env=env, cwd=TESTS, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            records = read_all(bootstrap, changelog, N, COUNT, timeout=120)
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        finally:
            end_process(proc, 30)
    assert len(records) >= COUNT, log.read_text(errors="replace")[-3000:]
    return changelog


def test_a_faust_apps_json_keys_are_named_and_the_raw_key_fix_makes_the_pair_sound(
        bootstrap: str, tmp_path: Path) -> None:
    java = f"doctor_faust_java_{uuid.uuid4().hex[:6]}"
    ensure_topics(bootstrap, {java: N})
    produce(bootstrap, java, [(f"u{i}".encode(), b"{}") for i in range(COUNT)], partitioner="murmur2_random")
    changelog = run_faust_app(bootstrap, "json", tmp_path)

    report = diagnose(sample_topics(bootstrap, [java, changelog]), [JoinedPair(java, changelog, "test")])
    faust_topic = next(t for t in report.topics if t.name == changelog)
    assert faust_topic.encoding.encoding == "json_string" and faust_topic.encoding.share == 1.0
    assert faust_topic.encoding.label.startswith("JSON-quoted string"), faust_topic.encoding.label
    assert "murmur2_random" in faust_topic.family and "faust" in faust_topic.writers, faust_topic.verdict
    (pair,) = report.pairs
    assert pair.status == "broken" and pair.shared == COUNT and pair.miss_rate == 1.0, pair.checks
    (fix,) = [f for f in pair.fixes if f.kind == "serializer"]
    assert fix.topic == changelog and "Faust: key_type=bytes on the Table" in fix.text

    fixed = run_faust_app(bootstrap, "raw", tmp_path)  # the fix applied: the same app, raw keys
    after = diagnose(sample_topics(bootstrap, [java, fixed]), [JoinedPair(java, fixed, "test")])
    assert next(t for t in after.topics if t.name == fixed).encoding.encoding == "utf8_string"
    assert after.ok and after.pairs[0].status == "sound" and after.pairs[0].miss_rate == 0.0, after.pairs[0].checks
