"""The worker's view of Kafka's reachability (streamapp.worker.health): the decisions, the log filter, the probe on a real broker.

The decisions are pure and take the clock as numbers, so the timeout, the
once-a-minute repeat and the exit limit are checked exactly, without waiting.
The probe talks to the session's Apache Kafka and to a port where nothing
listens.  The whole path in a worker (503, one line, exit 3, resuming after a
restart) is tests/test_reliability_broker_restart.py.
"""
from __future__ import annotations

import asyncio
import io
import logging

import pytest

from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings, SettingsError
from streamapp.worker.health import KafkaMonitor, Reachability, RepeatFilter, probe_interval, quiet_aiokafka


def test_unreachable_past_the_timeout_is_one_line_then_once_a_minute() -> None:
    state = Reachability(timeout=60.0, exit_after=300.0, last_answer=1000.0, servers="k1:9092,k2:9092")
    assert [state.failed(1000.0 + t, "refused") for t in (5, 30, 59.9)] == [None, None, None]
    assert state.healthy(1059.9)
    line = state.failed(1060.0, "KafkaConnectionError: refused")
    assert line is not None and not state.healthy(1060.0)
    assert line.startswith("Kafka unreachable for 60 s: no broker of k1:9092,k2:9092 has answered (4 failed probes")
    assert "KafkaConnectionError: refused" in line and "/health answers 503" in line and "exits at 300 s" in line
    assert [state.failed(1060.0 + t, "refused") for t in (5, 30, 59.9)] == [None, None, None]
    assert (state.failed(1120.0, "refused") or "").startswith("Kafka unreachable for 120 s")
    assert not state.must_exit(1299.9) and state.must_exit(1300.0)
    status = state.status(1130.0)
    assert status["healthy"] is False
    assert status["kafka"]["seconds_without_answer"] == 130.0 and status["kafka"]["failed_probes"] == 8


def test_an_answer_after_the_report_is_said_once_and_heals() -> None:
    state = Reachability(timeout=60.0, exit_after=300.0, last_answer=0.0)
    state.failed(61.0, "refused")
    assert state.answered(75.0) == "Kafka reachable again after 75 s without an answer (1 failed probes); /health answers 200"
    assert state.answered(80.0) is None
    assert state.healthy(80.0) and state.status(80.0)["kafka"]["failed_probes"] == 0
    assert not state.must_exit(80.0 + 299.0)


def test_a_blip_shorter_than_the_timeout_says_nothing() -> None:
    state = Reachability(timeout=60.0, exit_after=300.0, last_answer=0.0)
    assert state.failed(10.0, "refused") is None
    assert state.answered(20.0) is None


def test_exit_zero_means_never() -> None:
    state = Reachability(timeout=60.0, exit_after=0.0, last_answer=0.0)
    assert "the worker waits for it" in (state.failed(100.0, "refused") or "")
    assert not state.must_exit(10**9)


def test_repeat_filter_passes_each_form_once_a_window_and_counts_the_rest() -> None:
    now = [0.0]
    repeat = RepeatFilter(window=60.0, clock=lambda: now[0])
    log = logging.getLogger("aiokafka.test_health_flood")
    log.propagate = False
    kept: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: kept.append(record.getMessage())  # type: ignore[method-assign]
    log.addHandler(handler)
    log.addFilter(repeat)
    try:
        for second in range(120):
            now[0] = float(second)
            for _ in range(10):
                log.error("Unable connect to node with id %s: %s", 1, "refused")
            log.error("Unable to update metadata from %s", [1])
    finally:
        log.removeHandler(handler)
        log.removeFilter(repeat)
    assert kept == [
        "Unable connect to node with id 1: refused",
        "Unable to update metadata from [1]",
        "Unable connect to node with id 1: refused [and 599 more like this in the 60 s before, not logged]",
        "Unable to update metadata from [1] [and 59 more like this in the 60 s before, not logged]",
    ]
    assert repeat.left_out == 2 * 599 + 2 * 59  # the last window's are told with the next line of that form


def test_a_rewritten_line_formats_through_the_workers_own_formatter() -> None:
    """The summary line must survive mode's ExtensionFormatter, which the worker logs through.

    It turns ``record.args = None`` into ``(None,)`` and then ``%`` fails ("not all arguments
    converted"): a logging-error traceback in the worker's log, seen on a rebalance.
    """
    from mode.utils.logging import ExtensionFormatter

    now = [0.0]
    repeat = RepeatFilter(window=60.0, clock=lambda: now[0])
    log = logging.getLogger("aiokafka.test_health_formatter")
    log.propagate = False
    log.setLevel(logging.INFO)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(ExtensionFormatter(stream=out, fmt="%(message)s"))
    handler.handleError = lambda record: (_ for _ in ()).throw(AssertionError(record.msg))  # type: ignore[method-assign]
    log.addHandler(handler)
    log.addFilter(repeat)
    try:
        for second in (0.0, 1.0, 61.0):
            now[0] = second
            log.info("Revoking previously assigned partitions %s for group %s", {"t-0"}, "g 100%")
    finally:
        log.removeHandler(handler)
        log.removeFilter(repeat)
    assert out.getvalue().splitlines() == [
        "Revoking previously assigned partitions {'t-0'} for group g 100%",
        "Revoking previously assigned partitions {'t-0'} for group g 100% [and 1 more like this in the 61 s before, not logged]",
    ]


def test_quiet_aiokafka_reaches_every_aiokafka_logger_once() -> None:
    import aiokafka.consumer.fetcher  # noqa: F401 - one of the loggers that flooded

    repeat = RepeatFilter()
    assert quiet_aiokafka(repeat) > 3
    quiet_aiokafka(repeat)
    for name in ("aiokafka", "aiokafka.consumer.fetcher", "aiokafka.consumer.group_coordinator"):  # aiokafka.client logs as "aiokafka"
        assert logging.getLogger(name).filters.count(repeat) == 1
        logging.getLogger(name).removeFilter(repeat)


@pytest.mark.parametrize("changes, fragment", [
    ({"kafka_unreachable_timeout": 0.0}, "kafka_unreachable_timeout=0.0: must be above 0"),
    ({"kafka_unreachable_timeout": float("nan")}, "kafka_unreachable_timeout=nan"),
    ({"kafka_unreachable_exit": 30.0}, r"kafka_unreachable_exit=30.0: must be 0 \(never\) or at least kafka_unreachable_timeout \(60.0\)"),
    ({"kafka_unreachable_exit": -1.0}, "kafka_unreachable_exit=-1.0"),
])
def test_bad_limits_name_the_setting(changes: dict[str, float], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        Settings(**changes)


def test_limits_from_the_environment() -> None:
    settings = Settings.from_env({"STREAMAPP_KAFKA_UNREACHABLE_TIMEOUT": "5", "STREAMAPP_KAFKA_UNREACHABLE_EXIT": "0"})
    assert (settings.kafka_unreachable_timeout, settings.kafka_unreachable_exit) == (5.0, 0.0)
    assert probe_interval(5.0) == 1.25 and probe_interval(60.0) == 5.0 and probe_interval(0.1) == 0.5


def test_probe_answers_on_kafka_and_fails_where_nothing_listens(broker: EmbeddedBroker) -> None:
    async def probe(servers: str) -> Reachability:
        monitor = KafkaMonitor(Settings(bootstrap_servers=servers, kafka_unreachable_timeout=2.0))
        try:
            await monitor.probe_once()
            await monitor.probe_once()  # the second through the client the first one bootstrapped
        finally:
            await monitor.close()
        return monitor.state

    up = asyncio.run(probe(broker.bootstrap))
    assert up.failures == 0 and up.last_error == ""
    nowhere = f"127.0.0.1:{free_port()}"
    down = asyncio.run(probe(nowhere))
    assert down.failures == 2 and down.last_error == f"KafkaConnectionError: Unable to bootstrap from [{nowhere}]"
