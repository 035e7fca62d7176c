"""The Faust application: :func:`create_app` builds it from :class:`~streamapp.settings.Settings`.

Nothing happens at import: ``faust -A streamapp worker`` reads ``streamapp.app``,
which builds the one app of the process from the environment then
(:mod:`streamapp`).  The agents (the top-level ``agents`` package) and the web
views are installed by the factory, not discovered, so a test can build an app
of its own from any settings.  Before any consumer subscribes, the app creates
the topics it owns with the configured partition count (a broker that
auto-creates topics would give them its own default count) and runs the
co-partitioning guard.
"""
from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import socket
from typing import TYPE_CHECKING, Any, Callable

import faust
from faust.web.drivers import aiohttp as aiohttp_driver
from mode.utils.objects import cached_property

from ..copartition.guard import CopartitionReport, run_guard
from ..errors import StreamappError
from ..kafka.admin import KafkaUnreachable, describe, ensure_topics
from ..kafka.security import check_access_once, faust_credentials
from ..partitioners.adapters import client_partitioner
from ..settings import REQUEST_TIMEOUT_S, Settings
from ..sql.topology import PlanError, Topology, topology, worker_refusal
from . import faust_internals, health
from .counters import Counters
from .flow_control import FlowControl
from .health import REFUSED_EXIT_CODE, UNREACHABLE_EXIT_CODE
from .preflight import check_session_timeout, check_transactions, check_worker
from .tables import JoinTables, configure_window_changelogs
from .transport import BatchHandler, Transport
from .web import views
from .web.security import middlewares, quiet_malformed_requests

if TYPE_CHECKING:
    from .transactions import Transactions
    from .web.rechecks import Rechecks
    from .web.views import TopicCounts

logger = logging.getLogger(__name__)

#: The package whose ``install(app)`` adds the agents: ``agents/``, beside streamapp (it uses streamapp).
AGENTS = "agents"


#: How old the consumer's metadata may get: partitions added to a joined topic are noticed within it (one
#: Metadata request per period, see :mod:`streamapp.worker.web.rechecks`).
METADATA_MAX_AGE_MS = 30_000

#: Bind addresses that mean "every interface": no other worker can reach this one there.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def advertised_host(bind: str, hostname: str) -> str:
    """The host other workers use to reach this one's web server (Faust's ``canonical_url``).

    ``table_route`` forwards a lookup to the key's owner at the URL it advertised, so a worker
    bound to every interface (a container: ``0.0.0.0``) advertises its own hostname, which the
    container network resolves, not the wildcard, which would send the lookup back to itself.
    """
    return hostname if bind.strip() in WILDCARD_HOSTS else bind


#: The youngest generation's collection threshold once the start is frozen (CPython's default: 700 allocations):
#: a record's short-lived objects die before a collection sees them instead of being moved up and walked again.
GEN0_THRESHOLD = 10_000


def freeze_heap() -> int:
    """Collect once, move every object alive to the garbage collector's permanent generation and raise the
    youngest generation's threshold (:data:`GEN0_THRESHOLD`); returns how many objects are frozen.

    Called once the worker is ready: the imports', Faust's, aiokafka's and the app's objects (about 120,000) live
    as long as the process, yet each full collection walked them all again, about 70 ms each.  In the windowed
    join benchmark the collector took 5-7 of a record's 75-94 CPU-us, 0.7-1.2 after (benchmarks/README.md).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
    return gc.get_freeze_count()


class Worker(faust_internals.Worker):
    """The worker process (``faust worker`` builds it from ``app.conf.Worker``); the test runner and the CLI
    never build one, so their heaps stay as they are."""

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        frozen = freeze_heap()
        logger.info("Garbage collector: %s objects alive once ready frozen (full collections skip them), the youngest "
                    "generation collected every %s allocations", f"{frozen:,}", f"{gc.get_threshold()[0]:,}")


def faust_config(settings: Settings) -> dict[str, Any]:
    """Faust keyword settings for ``settings``; pure, so it is tested without building an app."""
    return {
        "broker": ";".join(f"kafka://{server}" for server in settings.bootstrap_list),
        "broker_credentials": faust_credentials(settings.kafka),  # TLS and SASL for every Faust client
        "store": "rocksdb://",
        "datadir": settings.data_dir,
        "autodiscover": False,  # the factory installs the agents and views itself
        "origin": "streamapp",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": settings.replication_factor,
        "web_host": advertised_host(settings.web_host, socket.gethostname()),
        "web_bind": settings.web_host,
        "web_port": settings.web_port,
        "web_tables_enabled": settings.web_table_blueprint,
        # Around every route, Faust's own blueprints included: errors as JSON, read-only, the token.
        "web_application_options": {"middlewares": middlewares(settings.web_token)},
        "broker_session_timeout": settings.broker_session_timeout,
        "broker_request_timeout": REQUEST_TIMEOUT_S,
        "table_cleanup_interval": 30.0,
        "producer_partitioner": client_partitioner(settings.partitioner),
        # A joined topic's new partition count reaches the rechecks within this (Kafka's default: 5 minutes).
        "consumer_metadata_max_age_ms": METADATA_MAX_AGE_MS,
        "TableManager": faust_internals.TableManager,
        "Worker": Worker,
    }


def create_missing_topics(settings: Settings, joins: Topology) -> tuple[list[str], dict[str, int]]:
    """Create the owned topics that do not exist (existing ones are left for the guard to judge).

    Returns the names created and every owned topic's partition count.
    """
    wanted = joins.owned_topics()
    existing = describe(settings.kafka, wanted)
    missing = {name: count for name, count in wanted.items() if name not in existing}
    if missing:
        existing = {**existing, **ensure_topics(settings.kafka, missing, settings.replication_factor)}
    return sorted(missing), {name: info.partitions for name, info in existing.items()}


class WebServer(aiohttp_driver.Web):
    """Faust's aiohttp server without its ``/`` placeholder (``{"status": "OK"}``): the page takes ``/``."""

    production_blueprints = []


class StreamappApp(faust.App):
    """Faust's App plus streamapp's start-up (explicit topics, then the guard) and what its agents share."""

    settings: Settings
    #: The declared joins as the worker runs them (:mod:`streamapp.sql.topology`).
    topology: Topology
    join_tables: JoinTables
    counters: Counters
    #: Partition count of each owned topic, read at start: sends pick their partition from it.
    partition_counts: dict[str, int]
    #: Topic name -> the handler its fetched batches go to (see :mod:`streamapp.worker.transport`).
    batch_handlers: dict[str, BatchHandler]
    #: Whether Kafka answers: ``/health``, ``/stats`` (see :mod:`streamapp.worker.health`).
    kafka_monitor: health.KafkaMonitor
    #: Partition counts of the input topics for the web views (see :mod:`streamapp.worker.web.views`).
    topic_counts: TopicCounts
    #: The guard and the doctor run again when keyed records arrive, or on demand (:mod:`streamapp.worker.web.rechecks`).
    rechecks: Rechecks
    #: Under ``processing_guarantee=exactly_once``, each stream topic's transactions (:mod:`streamapp.worker.transactions`).
    transactions: dict[str, Transactions]
    #: The guard's report at start (None: not run yet), until the checks run again (:attr:`rechecks`).
    guard_report: CopartitionReport | None

    def __init__(self, settings: Settings, joins: Topology) -> None:
        super().__init__(settings.app_id, **faust_config(settings))
        self.settings = settings
        self.topology = joins
        self.batch_handlers = {}
        self.partition_counts = {}
        self.transactions = {}
        self.guard_report = None
        self.counters = Counters()
        self.transport = Transport(self.conf.broker_consumer, self)  # before any topic asks for it
        self.join_tables = JoinTables(self, settings, joins)

    @cached_property
    def web(self) -> WebServer:
        return WebServer(self)

    @cached_property
    def flow_control(self) -> FlowControl:
        """Faust's flow control, less the loss of standby changelog rows (:mod:`streamapp.worker.flow_control`)."""
        return FlowControl(kept=lambda: self.tables.changelog_queue, loop=self.loop)

    @property
    def ready(self) -> bool:
        """Partitions assigned and tables recovered, no rebalance under way: when Faust logs "Worker ready"."""
        return self.tables.recovery.completed.is_set() and not self.rebalancing

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
        settings = self.settings
        try:
            check_worker(settings)
            # A wrong password, CA or protocol is one line naming the setting, not aiokafka's "Unable to bootstrap".
            await asyncio.get_running_loop().run_in_executor(None, check_access_once, settings.kafka)
            await asyncio.get_running_loop().run_in_executor(None, check_session_timeout, settings)
            if settings.exactly_once:  # never a quiet fall-back to at-least-once
                await check_transactions(settings)
        except StreamappError as exc:
            logger.error("Worker not started: %s", exc)
            raise SystemExit(REFUSED_EXIT_CODE) from None
        await super().on_first_start()
        loop = asyncio.get_running_loop()
        try:  # Kafka out of reach, a topic Kafka refuses: one line, as for the checks above
            created, self.partition_counts = await loop.run_in_executor(None, create_missing_topics, settings,
                                                                        self.topology)
            if created:
                logger.info("Created topics with %d partitions: %s", settings.partitions, ", ".join(created))
            configured = await loop.run_in_executor(None, configure_window_changelogs, settings.kafka,
                                                    self.join_tables.window_changelogs())
            if configured:
                logger.info("Window store changelogs made before their segments set as new ones are: %s",
                            "; ".join(configured))
            self.guard_report = await loop.run_in_executor(None, run_guard, settings,
                                                           self.join_tables.key_serializers())
        except StreamappError as exc:  # the guard's refusal (GuardError) included
            logger.error("Worker not started: %s", exc)
            # Kafka out of reach: the code of a Kafka gone while running, on which a supervisor restarts the worker
            raise SystemExit(UNREACHABLE_EXIT_CODE if isinstance(exc, KafkaUnreachable) else REFUSED_EXIT_CODE) from None

    async def on_stop(self) -> None:
        """Faust's stop commits offsets and flushes the producer: with Kafka unreachable the monitor leaves at once
        instead (:meth:`~streamapp.worker.health.KafkaMonitor.before_stop`), as a wait on gone brokers outlasts
        a supervisor's grace period."""
        self.kafka_monitor.before_stop()
        await super().on_stop()


def install_agents(app: StreamappApp, package: str = AGENTS) -> None:
    """Import the agents' package and let it install them on ``app``; a module that fails to import stops us.

    Faust's autodiscovery would log a warning and run on without that module's agents.
    """
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise SystemExit(f"streamapp worker: module {package} failed to import: {exc!r}") from None
    module.install(app)


def create_app(settings: Settings, agents: str = AGENTS) -> StreamappApp:
    """A worker app for ``settings``: its tables, agents, web views and Kafka monitor; nothing started.

    The joins come from the statements (``settings.statements``, else the seed's): a file that cannot be
    planned, or whose joins the worker does not run (:func:`worker_refusal`), is a StreamappError (one line) before
    anything starts.
    """
    joins = topology(settings)
    if (refusal := worker_refusal(joins.declared)) is not None:
        raise PlanError(refusal)
    app = StreamappApp(settings, joins)
    install_agents(app, agents)
    views.install(app)
    quiet_malformed_requests()
    app.kafka_monitor = health.install(app, settings)  # /health, the unreachable line, the exit
    return app
