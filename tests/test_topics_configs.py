"""Topic configs on Apache Kafka: what `streamapp topics describe` shows for the worker's changelog topics.

A Faust table's changelog must be compacted (``cleanup.policy=compact``): it is
the table's only durable copy, and under the default ``delete`` policy Kafka
drops old segments after a week, so a worker recovering its table would lose
every user that had not changed since.  The broker is asked, through the CLI.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from streamapp.cli import main
from streamapp.demo.waits import table_changelogs
from streamapp.kafka.admin import list_topics
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import isolated


def test_the_worker_creates_its_changelog_topics_compacted(
    broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its own app id, so the changelogs it finds are this worker's.
    app_id = f"streamapp-configs-{uuid.uuid4().hex[:8]}"
    settings = isolated(broker.settings(Settings()), data_dir=str(tmp_path / "data"), app_id=app_id)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        changelogs = sorted(
            t.name for t in list_topics(settings.bootstrap_servers)
            if t.name.startswith(f"{settings.app_id}-") and t.name.endswith("-changelog")
        )
        assert set(table_changelogs(settings)) <= set(changelogs), changelogs
        for topic in changelogs:
            code = main(["topics", "describe", topic, "--json", "--bootstrap-servers", settings.bootstrap_servers])
            out, err = capsys.readouterr()
            assert code == 0, err
            assert json.loads(out)["configs"].get("cleanup.policy") == "compact", (topic, out)
            code = main(["topics", "describe", topic, "--bootstrap-servers", settings.bootstrap_servers])
            out, _ = capsys.readouterr()
            assert "cleanup.policy=compact" in out, out
    finally:
        assert worker.stop() == 0, worker.tail()
