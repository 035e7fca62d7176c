"""The Faust application, built from :class:`~streamapp.settings.Settings`.

Agents live in the top-level ``agents`` package and are found by Faust's
autodiscovery, so this module knows nothing about any particular agent.
"""
from __future__ import annotations

from typing import Any

import faust

from .settings import Settings

#: What the embedded broker (Tansu) needs for Faust to be correct on it; see README.
EMBEDDED_BROKER_OVERRIDES: dict[str, Any] = {
    "broker_session_timeout": 6.0,
    "broker_heartbeat_interval": 1.0,
    "producer_max_batch_size": 1,
}


def faust_config(settings: Settings) -> dict[str, Any]:
    """Faust keyword settings for ``settings``; pure, so it is tested without Faust."""
    config: dict[str, Any] = {
        "broker": ";".join(f"kafka://{server}" for server in settings.bootstrap_list),
        "store": "rocksdb://",
        "datadir": settings.data_dir,
        "autodiscover": ["agents"],
        "origin": "streamapp",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": settings.replication_factor,
        "web_host": settings.web_host,
        "web_port": settings.web_port,
        "web_tables_enabled": settings.web_table_blueprint,
        "broker_session_timeout": settings.broker_session_timeout,
        "table_cleanup_interval": 30.0,
    }
    if settings.embedded:
        config.update(EMBEDDED_BROKER_OVERRIDES)
    return config


def create_app(settings: Settings | None = None) -> faust.App:
    settings = settings or Settings.from_env()
    app = faust.App(settings.app_id, **faust_config(settings))
    app.streamapp_settings = settings  # type: ignore[attr-defined]
    return app


app = create_app()
settings: Settings = app.streamapp_settings  # type: ignore[attr-defined]
