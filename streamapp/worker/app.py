"""The Faust application, built from :class:`~streamapp.settings.Settings`.

Agents live in the top-level ``agents`` package and are found by Faust's
autodiscovery; the topics and tables they share are in :mod:`streamapp.tables`.
Before any consumer subscribes, the app creates the topics it owns with the
configured partition count (a broker that auto-creates topics would give them
its own default count) and runs the co-partitioning guard.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, Callable

import faust

from ..errors import StreamappError
from ..kafka.admin import describe, ensure_topics
from ..partitioners.adapters import client_partitioner
from ..settings import Settings
from . import health
from .preflight import check_worker
from .transport import BatchHandler, Transport

logger = logging.getLogger(__name__)

#: Exit status of a worker stopped by the guard (``guard_policy=fail``), like the CLI's errors.
GUARD_EXIT_CODE = 2


def faust_config(settings: Settings) -> dict[str, Any]:
    """Faust keyword settings for ``settings``; pure, so it is tested without Faust."""
    return {
        "broker": ";".join(f"kafka://{server}" for server in settings.bootstrap_list),
        "store": "rocksdb://",
        "datadir": settings.data_dir,
        "autodiscover": ["agents", "streamapp.worker.web.views"],
        "origin": "streamapp",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": settings.replication_factor,
        "web_host": settings.web_host,
        "web_bind": settings.web_host,
        "web_port": settings.web_port,
        "web_tables_enabled": settings.web_table_blueprint,
        "broker_session_timeout": settings.broker_session_timeout,
        "table_cleanup_interval": 30.0,
        "producer_partitioner": client_partitioner(settings.partitioner),
    }


def owned_topics(settings: Settings) -> dict[str, int]:
    """The topics the worker reads or writes, each with the configured partition count."""
    names = (
        settings.users_topic,
        settings.orders_topic,
        settings.users_repartition_topic,
        settings.merged_topic,
        settings.merged_repartition_topic,
        settings.dead_letter_topic,
    )
    return {name: settings.partitions for name in names}


def create_missing_topics(settings: Settings) -> tuple[list[str], dict[str, int]]:
    """Create the owned topics that do not exist (existing ones are left for the guard to judge).

    Returns the names created and every owned topic's partition count.
    """
    wanted = owned_topics(settings)
    existing = describe(settings.bootstrap_servers, wanted)
    missing = {name: count for name, count in wanted.items() if name not in existing}
    if missing:
        existing = {**existing, **ensure_topics(settings.bootstrap_servers, missing, settings.replication_factor)}
    return sorted(missing), {name: info.partitions for name, info in existing.items()}


class StreamappApp(faust.App):
    """Faust's App plus streamapp's start-up: explicit topics, then the co-partitioning guard."""

    streamapp_settings: Settings
    #: Partition count of each owned topic, read at start: sends pick their partition from it.
    partition_counts: dict[str, int]
    #: Topic name -> the handler its fetched batches go to (see :mod:`streamapp.transport`).
    batch_handlers: dict[str, BatchHandler]
    #: Whether Kafka answers: ``/health``, ``/stats`` (see :mod:`streamapp.health`).
    kafka_monitor: health.KafkaMonitor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batch_handlers = {}

    def _on_autodiscovery_error(self, name: str) -> None:
        """Stop: Faust would log a warning and run on without that module's agents or views."""
        super()._on_autodiscovery_error(name)
        raise SystemExit(f"streamapp worker: module {name} failed to import: {sys.exc_info()[1]!r}")

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)

    def batch_agent(self, topic: faust.TopicT) -> Callable[[BatchHandler], BatchHandler]:
        """Subscribe ``topic`` and hand its messages to the decorated handler a fetched batch at a time.

        For a hot stream whose per-message work is small: Faust's one-event-at-a-time
        path would cost more than the work.  The partitions are assigned like any
        agent's, co-partitioned with the tables.
        """
        def register(handler: BatchHandler) -> BatchHandler:
            for name in topic.topics:
                self.batch_handlers[name] = handler
            self.topics.add(topic)
            return handler
        return register

    async def on_first_start(self) -> None:
        settings = self.streamapp_settings
        try:
            check_worker(settings)
        except StreamappError as exc:
            logger.error("Worker not started: %s", exc)
            raise SystemExit(GUARD_EXIT_CODE) from None
        await super().on_first_start()
        loop = asyncio.get_running_loop()
        created, self.partition_counts = await loop.run_in_executor(None, create_missing_topics, settings)
        if created:
            logger.info("Created topics with %d partitions: %s", settings.partitions, ", ".join(created))
        from ..copartition.guard import GuardError, run_guard
        from .tables import key_serializers

        try:
            await loop.run_in_executor(None, run_guard, settings, key_serializers())
        except GuardError as exc:
            logger.error("Worker not started: %s", exc)
            raise SystemExit(GUARD_EXIT_CODE) from None


def create_app(settings: Settings | None = None) -> StreamappApp:
    settings = settings or Settings.from_env()
    app = StreamappApp(settings.app_id, **faust_config(settings))
    app.streamapp_settings = settings
    app.kafka_monitor = health.install(app, settings)  # /health, the unreachable line, the exit
    return app


try:
    app = create_app()
except StreamappError as exc:
    raise SystemExit(f"streamapp worker: {exc}") from None
settings: Settings = app.streamapp_settings
