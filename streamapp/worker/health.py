"""Whether the worker can reach Kafka, said once to people, to a supervisor through ``/health``, and by exiting.

Without this a worker whose brokers are gone retries for ever, logs thousands of lines a minute
and looks alive. A Metadata probe every few seconds decides; ``/health`` turns 503 after
``kafka_unreachable_timeout``, and the worker exits with :data:`UNREACHABLE_EXIT_CODE` after
``kafka_unreachable_exit``; :class:`RepeatFilter` quiets aiokafka's loggers.
See docs/explanation/worker-internals.md#whether-kafka-is-reachable.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from aiokafka.admin import AIOKafkaAdminClient

from ..kafka.security import aiokafka_options
from ..settings import Settings

logger = logging.getLogger(__name__)

#: Exit status of a worker that gave up on Kafka (1 is a crash, 2 the co-partitioning guard).
UNREACHABLE_EXIT_CODE = 3
#: How often the "unreachable" line, and each form of aiokafka message, may be repeated.
REPEAT_SECONDS = 60.0


def probe_interval(timeout: float) -> float:
    """Seconds between probes: several per ``timeout``, at most every 5 s, at least every 0.5 s."""
    return min(5.0, max(0.5, timeout / 4))


def probe_timeout(timeout: float) -> float:
    """How long one probe may wait for an answer (a broker that accepts nothing may never refuse)."""
    return min(10.0, max(1.0, timeout / 2))


@dataclass
class Reachability:
    """Since when Kafka has not answered, and what to say or do about it; pure, fed the loop's clock."""

    timeout: float
    exit_after: float  # 0: never exit
    last_answer: float
    servers: str = ""
    repeat: float = REPEAT_SECONDS
    failures: int = 0
    last_error: str = ""
    reported_at: float | None = None

    def silent_for(self, now: float) -> float:
        return max(0.0, now - self.last_answer)

    def healthy(self, now: float) -> bool:
        return self.silent_for(now) < self.timeout

    def answered(self, now: float) -> str | None:
        """A broker answered: the line to log if the worker had said Kafka was unreachable."""
        line = None
        if self.reported_at is not None:
            line = (f"Kafka reachable again after {self.silent_for(now):.0f} s without an answer "
                    f"({self.failures:,} failed probes); /health answers 200")
        self.last_answer, self.failures, self.last_error, self.reported_at = now, 0, "", None
        return line

    def failed(self, now: float, error: str) -> str | None:
        """A probe got no answer: the line to log when past the timeout, at most once per ``repeat``."""
        self.failures += 1
        self.last_error = error
        if self.healthy(now) or (self.reported_at is not None and now - self.reported_at < self.repeat):
            return None
        self.reported_at = now
        until = (f"the worker exits at {self.exit_after:.0f} s (kafka_unreachable_exit) unless it returns"
                 if self.exit_after else "the worker waits for it (kafka_unreachable_exit=0)")
        return (f"Kafka unreachable for {self.silent_for(now):.0f} s: no broker of {self.servers} has answered "
                f"({self.failures:,} failed probes, last: {error}); /health answers 503; {until}")

    def must_exit(self, now: float) -> bool:
        return bool(self.exit_after) and self.silent_for(now) >= self.exit_after

    def status(self, now: float) -> dict[str, Any]:
        """For ``/health`` and ``/stats``: JSON-ready."""
        return {
            "healthy": self.healthy(now),
            "kafka": {
                "bootstrap_servers": self.servers,
                "seconds_without_answer": round(self.silent_for(now), 1),
                "failed_probes": self.failures,
                "last_error": self.last_error,
                "unreachable_timeout": self.timeout,
                "unreachable_exit": self.exit_after,
            },
        }


@dataclass
class _Seen:
    since: float
    left_out: int = 0


class RepeatFilter(logging.Filter):
    """Passes a message form (logger and format string) at most once per ``window``, noting how many were left out."""

    def __init__(self, window: float = REPEAT_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window, self.clock = window, clock
        self.left_out = 0
        self._seen: dict[tuple[str, str], _Seen] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now, key = self.clock(), (record.name, str(record.msg))
        seen = self._seen.get(key)
        if seen is not None and now - seen.since < self.window:
            seen.left_out += 1
            self.left_out += 1
            return False
        self._seen[key] = _Seen(now)
        if seen is not None and seen.left_out:
            record.msg = (f"{record.getMessage()} [and {seen.left_out:,} more like this "
                          f"in the {now - seen.since:.0f} s before, not logged]")
            record.args = ()  # not None: mode's formatter turns None into (None,) and % then fails
        return True


def quiet_aiokafka(repeat_filter: RepeatFilter) -> int:
    """Put ``repeat_filter`` on every aiokafka logger (a logger's filter does not see its children's records)."""
    names = [n for n in list(logging.root.manager.loggerDict) if n == "aiokafka" or n.startswith("aiokafka.")]
    for name in names:
        log = logging.getLogger(name)
        if repeat_filter not in log.filters:
            log.addFilter(repeat_filter)
    return len(names)


def describe_error(exc: BaseException) -> str:
    """``Type: message`` once (aiokafka's errors already start with their type), at most 200 characters."""
    name = type(exc).__name__
    text = re.sub(r"\('([^']*)', (\d+), <AddressFamily\.\w+: \d+>\)", r"\1:\2", str(exc))
    return (text if text.startswith(name) else f"{name}: {text}" if text else name)[:200]


class KafkaMonitor:
    """Probes Kafka from the worker's event loop, logs, answers ``status()``, exits past the limit."""

    def __init__(self, settings: Settings, repeat_filter: RepeatFilter | None = None) -> None:
        self.servers = settings.bootstrap_list
        self.access = settings.kafka
        self.interval = probe_interval(settings.kafka_unreachable_timeout)
        self.probe_timeout = probe_timeout(settings.kafka_unreachable_timeout)
        self.state = Reachability(settings.kafka_unreachable_timeout, settings.kafka_unreachable_exit,
                                  last_answer=time.monotonic(), servers=",".join(self.servers))
        self.repeat_filter = repeat_filter or RepeatFilter()
        self._admin: AIOKafkaAdminClient | None = None
        self._running = False

    def status(self) -> dict[str, Any]:
        return self.state.status(time.monotonic())

    async def run(self) -> None:
        """The probe loop (a Faust app task: it starts once the worker is ready)."""
        if self._running:
            return
        self._running = True
        quiet_aiokafka(self.repeat_filter)
        try:
            while True:
                await self.probe_once()
                await asyncio.sleep(self.interval)
        finally:
            await self.close()

    async def probe_once(self) -> None:
        try:
            await asyncio.wait_for(self._ask(), self.probe_timeout)
        except Exception as exc:  # noqa: BLE001 - any failure to get an answer is "no answer"
            await self.close()  # the next probe bootstraps afresh from the configured servers
            error = describe_error(exc)
            line = self.state.failed(time.monotonic(), error)
            if line:
                logger.error("%s; %s repeated aiokafka log lines left out so far",
                             line, f"{self.repeat_filter.left_out:,}")
        else:
            line = self.state.answered(time.monotonic())
            if line:
                logger.warning(line)
        if self.state.must_exit(time.monotonic()):
            self.exit()

    async def _ask(self) -> None:
        if self._admin is None:
            admin = AIOKafkaAdminClient(**aiokafka_options(self.access), client_id="streamapp-health",
                                        request_timeout_ms=int(self.probe_timeout * 1000))
            self._admin = admin
            await admin.start()  # a Metadata request to the bootstrap servers
        await self._admin.describe_topics([])  # Metadata, no topics: the cheapest answer a broker gives

    async def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                await asyncio.wait_for(admin.close(), self.probe_timeout)
            except Exception:  # noqa: BLE001 - closing sockets to a dead broker may fail; they are dropped
                pass

    def exit(self) -> None:
        """Log why and leave at once with :data:`UNREACHABLE_EXIT_CODE` (see the module docstring for why at once)."""
        logger.critical(
            "Kafka unreachable for %.0f s, the kafka_unreachable_exit limit: exiting with status %d so that a "
            "supervisor restarts the worker; what was not committed is processed again then",
            self.state.silent_for(time.monotonic()), UNREACHABLE_EXIT_CODE,
        )
        self._leave()

    def before_stop(self) -> None:
        """At the start of the app's stop: when Kafka is unreachable, log why and leave at once (module docstring)."""
        now = time.monotonic()
        if self.state.healthy(now):
            return
        logger.critical(
            "Stopping while Kafka has been unreachable for %.0f s: leaving at once with status %d instead of "
            "committing and flushing to brokers that are gone; what was not committed is processed again after a "
            "restart", self.state.silent_for(now), UNREACHABLE_EXIT_CODE,
        )
        self._leave()

    def _leave(self) -> None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(UNREACHABLE_EXIT_CODE)


def install(app: Any, settings: Settings) -> KafkaMonitor:
    """Run a :class:`KafkaMonitor` as a task of ``app`` and quiet aiokafka's loggers now (imported by then)."""
    monitor = KafkaMonitor(settings)
    quiet_aiokafka(monitor.repeat_filter)
    app.task(monitor.run)
    return monitor
