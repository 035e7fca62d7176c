"""Whether the worker can reach Kafka and write its topics, said once to people, to a supervisor through ``/health``,
and by exiting.

Without this a worker whose brokers are gone, or one of whose output topics was deleted, retries for
ever, logs thousands of lines a minute and looks alive. A Metadata probe of the topics it writes every
few seconds decides, with what the batches say (:mod:`streamapp.worker.batch_sender`); ``/health``
turns 503 after ``kafka_unreachable_timeout`` (:class:`Reachability`) or :data:`OUTPUT_GRACE`
(:class:`OutputWatch`), the worker exits after ``kafka_unreachable_exit`` or ``output_failure_exit``,
a stop leaves at once while either holds and never takes longer than ``stop_timeout``;
:class:`RepeatFilter` quiets the loggers that flood.
See docs/explanation/worker-internals.md#whether-kafka-is-reachable.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from aiokafka import errors as kafka_errors
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.metadata import MetadataRequest

from ..kafka.security import aiokafka_options
from ..settings import Settings
from . import batch_sender

logger = logging.getLogger(__name__)

#: Exit status of a worker refused: at its start (a bad setting, statements it cannot run, topics Kafka refuses,
#: the co-partitioning guard under ``guard_policy=fail``) or by a re-check while it runs; like the CLI's errors.
#: 1 is a crash.
REFUSED_EXIT_CODE = 2
#: Exit status of a worker that gave up on Kafka.
UNREACHABLE_EXIT_CODE = 3
#: Exit status of a worker that could not write a topic for ``output_failure_exit``, or was stopped meanwhile.
OUTPUT_FAILURE_EXIT_CODE = 4
#: Exit status of a stop that took longer than ``stop_timeout``.
STOP_TIMEOUT_EXIT_CODE = 5
#: How often the "unreachable" and "cannot write" lines, and each form of aiokafka message, may be repeated.
REPEAT_SECONDS = 60.0
#: Seconds a topic may fail before it is a state (503, the line): a moment is a leader moving, not a deleted topic.
OUTPUT_GRACE = 5.0
#: Seconds a batch may wait for the broker's answer, Kafka answering the probe, before its topic counts as failing.
STALL_AFTER = 30.0


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


#: Where a topic's failure was seen: the probe's Metadata, the producer's metadata (a send waits), a refused batch,
#: a batch waiting for the broker's answer for :data:`STALL_AFTER`.
PROBE, PRODUCE, REFUSED, STALLED = "probe", "produce", "refused", "stalled"


@dataclass
class Failure:
    """One topic failing one way (:data:`PROBE`, :data:`PRODUCE`, :data:`REFUSED` or :data:`STALLED`)."""

    since: float
    reason: str
    count: int = 1


@dataclass
class OutputWatch:
    """Which topics the worker cannot write, since when, and what to say or do about it; pure, fed the loop's clock.

    A topic fails from the first sign (the probe finds it missing or not authorized, the producer
    does not know it, a batch to it is refused or waits) until the same source says otherwise: the
    probe what the probe said, a batch delivered what the producer said, and so on. A refused
    batch is never cleared: its records were acked, so nothing may be committed after it
    (:meth:`commits_held`) and only a restart processes them again.
    """

    exit_after: float  # 0: never exit
    grace: float = OUTPUT_GRACE
    repeat: float = REPEAT_SECONDS
    failing: dict[tuple[str, str], Failure] = field(default_factory=dict)
    reported_at: float | None = None

    def unwritable(self, topic: str, reason: str, now: float, source: str = PRODUCE) -> None:
        failure = self.failing.get((topic, source))
        if failure is None:
            self.failing[(topic, source)] = Failure(now, reason)
        else:
            failure.reason, failure.count = reason, failure.count + 1

    def writable(self, topic: str, now: float, source: str = PRODUCE) -> str | None:
        """``source`` finds ``topic`` writable (:data:`PRODUCE`: a batch was delivered to it): the line to log if that
        heals a report."""
        ended = [key for key in self.failing if key == (topic, source) and source != REFUSED]
        if not ended:
            return None
        since = min(self.failing[key].since for key in ended)
        for key in ended:
            del self.failing[key]
        if self.reported_at is None or self.failing:
            return None
        self.reported_at = None
        return f"Topic {topic} can be written again after {now - since:.0f} s; /health answers 200"

    def forget(self, source: str) -> None:
        """Drop what ``source`` said, without a line (it cannot tell now)."""
        for key in [key for key in self.failing if key[1] == source]:
            del self.failing[key]

    def commits_held(self) -> bool:
        """Whether a batch was refused: the offsets of the records acked with it must not be committed."""
        return any(source == REFUSED for _, source in self.failing)

    def failing_for(self, now: float) -> float:
        return max((now - f.since for f in self.failing.values()), default=0.0)

    def healthy(self, now: float) -> bool:
        return self.failing_for(now) < self.grace

    def topics(self) -> list[str]:
        return sorted({topic for topic, _ in self.failing})

    def reason(self, now: float) -> str:
        """One sentence: the topic failing longest, why, and how many others fail."""
        (topic, _), worst = max(self.failing.items(), key=lambda item: now - item[1].since)
        others = [other for other in self.topics() if other != topic]
        more = f" (and {len(others)} more: {', '.join(others)})" if others else ""
        times = "once" if worst.count == 1 else f"{worst.count:,} times"
        return f"cannot write topic {topic} for {now - worst.since:.0f} s: {worst.reason} (seen {times}){more}"

    def line(self, now: float) -> str | None:
        """The line to log while unhealthy: at once, then at most once per ``repeat``."""
        if self.healthy(now) or (self.reported_at is not None and now - self.reported_at < self.repeat):
            return None
        self.reported_at = now
        until = (f"the worker exits at {self.exit_after:.0f} s (output_failure_exit) so that a supervisor restarts it "
                 f"and it re-creates its topics" if self.exit_after
                 else "the worker waits for it (output_failure_exit=0)")
        held = "; no offset is committed any more" if self.commits_held() else ""
        return f"The worker {self.reason(now)}{held}; /health answers 503; {until}"

    def must_exit(self, now: float) -> bool:
        return bool(self.exit_after) and bool(self.failing) and self.failing_for(now) >= self.exit_after

    def status(self, now: float) -> dict[str, Any]:
        """For ``/health`` and ``/stats``: JSON-ready."""
        return {
            "healthy": self.healthy(now),
            "failing": [{"topic": topic, "source": source, "reason": f.reason, "times": f.count,
                         "seconds": round(now - f.since, 1)}
                        for (topic, source), f in sorted(self.failing.items())],
            "failure_exit": self.exit_after,
        }


def health_status(reach: Reachability, outputs: OutputWatch, now: float) -> dict[str, Any]:
    """``/health``'s body: healthy while Kafka answers and every topic can be written, else why not."""
    status = reach.status(now)
    status["kafka"]["reachable"] = status["healthy"]  # what the metrics' streamapp_kafka_reachable says
    written = outputs.status(now)
    status["outputs"] = written
    reasons = []
    if not status["healthy"]:
        reasons.append(f"Kafka unreachable for {reach.silent_for(now):.0f} s ({reach.last_error})")
    if not written["healthy"]:
        reasons.append(f"the worker {outputs.reason(now)}")
    status["healthy"] = not reasons
    if reasons:
        status["reason"] = "; ".join(reasons)
    return status


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


def quiet_repeats(log: logging.Logger) -> None:
    """Summarise ``log``'s repeated lines with a :class:`RepeatFilter` of its own (once: a logger lives as long as
    the process, a worker's apps come and go)."""
    if not any(isinstance(f, RepeatFilter) for f in log.filters):
        log.addFilter(RepeatFilter())


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
    """Probes Kafka and the topics the worker writes, from its event loop; logs, answers ``status()``, exits past a
    limit.

    ``written`` names the topics to probe (none until the worker has created them all).
    """

    def __init__(self, settings: Settings, repeat_filter: RepeatFilter | None = None,
                 written: Callable[[], Sequence[str]] = tuple, deliveries: batch_sender.Deliveries | None = None) -> None:
        """``deliveries``: what the worker's batch senders tell of its outputs (they are given this one)."""
        self.deliveries = deliveries if deliveries is not None else batch_sender.Deliveries()
        self.servers = settings.bootstrap_list
        self.access = settings.kafka
        self.interval = probe_interval(settings.kafka_unreachable_timeout)
        self.probe_timeout = probe_timeout(settings.kafka_unreachable_timeout)
        self.stop_timeout = settings.stop_timeout
        self.state = Reachability(settings.kafka_unreachable_timeout, settings.kafka_unreachable_exit,
                                  last_answer=time.monotonic(), servers=",".join(self.servers))
        self.outputs = OutputWatch(settings.output_failure_exit)
        self.written = written
        self.repeat_filter = repeat_filter or RepeatFilter()
        self._client: AIOKafkaClient | None = None
        self._running = False
        self._stopping: threading.Timer | None = None
        #: Since when Kafka answers the probe: a batch's wait for the broker counts from then at most.
        self._answering_since = time.monotonic()

    def status(self) -> dict[str, Any]:
        return health_status(self.state, self.outputs, time.monotonic())

    async def run(self) -> None:
        """The probe loop (a Faust app task: it starts once the worker is ready)."""
        if self._running:
            return
        self._running = True
        quiet_aiokafka(self.repeat_filter)
        self.deliveries.listen(self)
        try:
            while True:
                await self.probe_once()
                await asyncio.sleep(self.interval)
        finally:
            self.deliveries.unlisten(self)
            await self.close()

    async def probe_once(self) -> None:
        topics = list(self.written())
        try:
            answer = await asyncio.wait_for(self._ask(topics), self.probe_timeout)
        except Exception as exc:  # noqa: BLE001 - any failure to get an answer is "no answer"
            await self.close()  # the next probe bootstraps afresh from the configured servers
            error = describe_error(exc)
            line = self.state.failed(time.monotonic(), error)
            if line:
                logger.error("%s; %s repeated aiokafka log lines left out so far",
                             line, f"{self.repeat_filter.left_out:,}")
        else:
            if self.state.failures:
                self._answering_since = time.monotonic()
            line = self.state.answered(time.monotonic())
            if line:
                logger.warning(line)
            self.probed(answer)
        if self.state.failures:  # Kafka does not answer: that is said apart, and is no topic's fault
            self.outputs.forget(STALLED)
        else:
            self.stalled(self.deliveries.waiting(time.monotonic(), self._answering_since))
        now = time.monotonic()
        line = self.outputs.line(now)
        if line:
            logger.error(line)
        if self.state.must_exit(now):
            self.exit()
        if self.outputs.must_exit(now):
            self.exit_outputs()

    def probed(self, answer: Iterable[tuple[str, int]]) -> None:
        """The Metadata answer's (topic, error code) pairs, told to the output watch."""
        now = time.monotonic()
        for topic, code in answer:
            if code == 0:
                self._healed(self.outputs.writable(topic, now, PROBE))
            else:
                self.outputs.unwritable(topic, batch_sender.refusal(kafka_errors.for_code(code)), now, PROBE)

    def stalled(self, waits: Mapping[str, float]) -> None:
        """The topics whose oldest batch has waited :data:`STALL_AFTER` for the broker, Kafka answering."""
        now = time.monotonic()
        late = {topic: wait for topic, wait in waits.items() if wait >= STALL_AFTER}
        for topic, wait in late.items():
            self.outputs.unwritable(topic, f"its batches get no answer from the broker (the oldest for {wait:.0f} s)",
                                    now, STALLED)
        for topic in {topic for topic, source in self.outputs.failing if source == STALLED} - set(late):
            self._healed(self.outputs.writable(topic, now, STALLED))

    # -- what the batches say (Deliveries.listen) -------------------------------------------------

    def unwritable(self, topic: str, reason: str) -> None:
        self.outputs.unwritable(topic, reason, time.monotonic())

    def refused(self, topic: str, reason: str) -> None:
        self.outputs.unwritable(topic, f"a batch refused, {reason}", time.monotonic(), REFUSED)

    def written_to(self, topic: str) -> None:
        if self.outputs.failing:  # a dict lookup per delivered batch otherwise
            self._healed(self.outputs.writable(topic, time.monotonic()))

    @staticmethod
    def _healed(line: str | None) -> None:
        if line:
            logger.warning(line)

    async def _ask(self, topics: list[str]) -> list[tuple[str, int]]:
        """One Metadata request for ``topics``, never creating one (a broker that auto-creates topics would give
        a deleted output its own partition count); the first one bootstraps the client."""
        if self._client is None:
            client = AIOKafkaClient(**aiokafka_options(self.access), client_id="streamapp-health",
                                    request_timeout_ms=int(self.probe_timeout * 1000))
            self._client = client
            await client.bootstrap()  # a Metadata request to the bootstrap servers
        node = self._client.get_random_node()
        if node is None:
            raise kafka_errors.KafkaConnectionError("no broker known")
        response = await self._client.send(node, MetadataRequest(topics, allow_auto_topic_creation=False))
        return [(entry["topic"], entry["error_code"]) for entry in response.to_object()["topics"]]

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), self.probe_timeout)
            except Exception:  # noqa: BLE001 - closing sockets to a dead broker may fail; they are dropped
                pass

    def exit(self) -> None:
        """Log why and leave at once with :data:`UNREACHABLE_EXIT_CODE` (see the module docstring for why at once)."""
        logger.critical(
            "Kafka unreachable for %.0f s, the kafka_unreachable_exit limit: exiting with status %d so that a "
            "supervisor restarts the worker; what was not committed is processed again then",
            self.state.silent_for(time.monotonic()), UNREACHABLE_EXIT_CODE,
        )
        self._leave(UNREACHABLE_EXIT_CODE)

    def exit_outputs(self) -> None:
        """Log why and leave at once with :data:`OUTPUT_FAILURE_EXIT_CODE`: a clean stop would flush batches that
        wait for the topic, for ever."""
        logger.critical(
            "The worker %s, the output_failure_exit limit: exiting with status %d so that a supervisor restarts it; "
            "it re-creates its topics at start, and what was not committed is processed again then",
            self.outputs.reason(time.monotonic()), OUTPUT_FAILURE_EXIT_CODE,
        )
        self._leave(OUTPUT_FAILURE_EXIT_CODE)

    def before_stop(self) -> None:
        """At the start of the app's stop: with Kafka unreachable, or a topic failing, log why and leave at once
        (module docstring); otherwise leave at once should the stop outlast ``stop_timeout``."""
        now = time.monotonic()
        if not self.state.healthy(now):
            logger.critical(
                "Stopping while Kafka has been unreachable for %.0f s: leaving at once with status %d instead of "
                "committing and flushing to brokers that are gone; what was not committed is processed again after "
                "a restart", self.state.silent_for(now), UNREACHABLE_EXIT_CODE,
            )
            self._leave(UNREACHABLE_EXIT_CODE)
        if self.outputs.failing:
            logger.critical(
                "Stopping while the worker %s: leaving at once with status %d instead of flushing batches that wait "
                "for it; what was not committed is processed again after a restart",
                self.outputs.reason(now), OUTPUT_FAILURE_EXIT_CODE,
            )
            self._leave(OUTPUT_FAILURE_EXIT_CODE)
        if self._stopping is None:
            self._stopping = threading.Timer(self.stop_timeout, self._stop_overdue)
            self._stopping.daemon = True
            self._stopping.start()

    def _stop_overdue(self) -> None:
        """From the stop's timer thread: the stop is stuck (a commit, a flush, a batch): leave at once."""
        logger.critical(
            "The stop has taken stop_timeout=%g s: leaving at once with status %d; what was not committed is "
            "processed again after a restart", self.stop_timeout, STOP_TIMEOUT_EXIT_CODE,
        )
        self._leave(STOP_TIMEOUT_EXIT_CODE)

    @staticmethod
    def _leave(code: int) -> None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def written_topics(app: Any) -> Callable[[], Sequence[str]]:
    """The topics ``app`` writes (its outputs, dead letters, changelogs), once it has been ready: all exist then."""
    topics: list[str] = []

    def written() -> Sequence[str]:
        if not topics and app.ready:
            topics.extend(sorted({*app.topology.outputs, app.settings.dead_letter_topic,
                                  *app.join_tables.changelog_topics()}))
        return topics
    return written


def install(app: Any, settings: Settings) -> KafkaMonitor:
    """Run a :class:`KafkaMonitor` as a task of ``app`` and quiet aiokafka's loggers now (imported by then), and the
    batches' refusals (one line per refused batch)."""
    monitor = KafkaMonitor(settings, written=written_topics(app))
    quiet_aiokafka(monitor.repeat_filter)
    quiet_repeats(logging.getLogger(batch_sender.__name__))
    app.task(monitor.run)
    return monitor
