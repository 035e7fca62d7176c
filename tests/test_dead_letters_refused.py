"""A batch the cluster refuses under at_least_once is not dead-lettered: its commits are held and the restart
writes its records again (a letter would be a second copy); one its records caused still is, and so is any under
exactly_once, whose offsets go in transactions that no hold stops."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from aiokafka import errors as kafka_errors

from agents.dead_lettering import DeadLettering, letters_for_refusal
from streamapp.settings import Settings
from streamapp.worker.app import create_app

CLUSTER = [kafka_errors.TopicAuthorizationFailedError(), kafka_errors.UnknownTopicOrPartitionError(),
           kafka_errors.NotEnoughReplicasError(), kafka_errors.KafkaTimeoutError()]
RECORDS = [kafka_errors.MessageSizeTooLargeError(), kafka_errors.RecordListTooLargeError(),
           kafka_errors.InvalidTimestampError()]


def test_only_a_refusal_the_records_caused_is_dead_lettered_under_at_least_once() -> None:
    assert [letters_for_refusal(e, "at_least_once") for e in CLUSTER] == [False] * len(CLUSTER)
    assert [letters_for_refusal(e, "at_least_once") for e in RECORDS] == [True] * len(RECORDS)
    assert all(letters_for_refusal(e, "exactly_once") for e in CLUSTER + RECORDS)


async def test_the_workers_on_failure_skips_a_batch_refused_for_the_cluster_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dead_letters = DeadLettering(create_app(Settings(data_dir=str(tmp_path / "alo"))))
    with caplog.at_level(logging.WARNING, logger="agents.dead_lettering"):
        dead_letters.refused("out", 3, ["order 6", "order 7"], kafka_errors.TopicAuthorizationFailedError())
    assert not dead_letters._pending and dead_letters.app.counters.snapshot()["dead_lettered"] == {}
    assert [r.getMessage() for r in caplog.records] == [
        "2 records of the batch refused for out[3] are not dead-lettered: no offset is committed any more, so the "
        "worker's restart reads and writes them again"]
    eos = DeadLettering(create_app(Settings(data_dir=str(tmp_path / "eos"), processing_guarantee="exactly_once")))
    eos.refused("out", 3, ["order 6"], kafka_errors.TopicAuthorizationFailedError())
    [letters] = eos._pending  # the letters are on their way (a broker would take them)
    letters.cancel()
    await asyncio.gather(letters, return_exceptions=True)
