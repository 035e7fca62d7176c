"""``streamapp topics delete`` never deletes Kafka's internal topics by mistake, and asks before it deletes.

Real ``streamapp`` processes: without a terminal a delete needs ``--yes``; on a
terminal (a pseudo-terminal here) it asks, and only ``y`` deletes. On the session's
broker, ``__consumer_offsets`` and a group's committed offset survive
``--yes``; a normal topic is deleted.
"""
from __future__ import annotations

import os
import pty
import subprocess
import uuid

from confluent_kafka import Consumer, TopicPartition

from streamapp.cli.topics import internal_topics
from streamapp.kafka.admin import describe
from test_cli_one_line import OFFLINE, one_line, streamapp


def test_internal_topics_are_the_double_underscore_ones_and_those_the_broker_marks() -> None:
    assert internal_topics(["__consumer_offsets", "orders", "__transaction_state", "_one"]) == [
        "__consumer_offsets", "__transaction_state"]
    assert internal_topics(["orders", "internal_by_broker"], marked={"internal_by_broker"}) == ["internal_by_broker"]


def test_an_internal_topic_is_refused_before_any_broker_is_asked() -> None:
    for argv in (["__consumer_offsets"], ["orders", "__consumer_offsets", "--yes"]):
        line = one_line(streamapp("topics", "delete", *argv, "--bootstrap-servers", OFFLINE))
        assert line.startswith("streamapp topics: topic __consumer_offsets: an internal topic of Kafka "
                               "(deleting __consumer_offsets loses every group's committed offsets")
        assert line.endswith("nothing deleted (--include-internal deletes it anyway)")


def test_without_a_terminal_a_delete_needs_yes() -> None:
    line = one_line(streamapp("topics", "delete", "orders", "payments", "--bootstrap-servers", OFFLINE))
    assert line == ("streamapp topics: deleting orders, payments loses their records: give --yes to confirm "
                    "(standard input is not a terminal, so there is no one to ask); nothing deleted")


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def test_consumer_offsets_survive_and_a_normal_topic_is_deleted_with_yes(bootstrap: str, new_topic) -> None:
    topic, group = new_topic("del", partitions=1), f"del-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
    consumer.close()
    assert committed(bootstrap, group, topic) == 10

    line = one_line(streamapp("topics", "delete", "__consumer_offsets", "--yes", "--bootstrap-servers", bootstrap))
    assert "nothing deleted (--include-internal deletes it anyway)" in line
    assert "__consumer_offsets" in describe(bootstrap, ["__consumer_offsets"])
    assert committed(bootstrap, group, topic) == 10

    done = streamapp("topics", "delete", topic, "--yes", "--bootstrap-servers", bootstrap)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"Deleted topics: {topic}", "")
    assert topic not in describe(bootstrap, [topic])


def on_terminal(answer: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``streamapp`` with a pseudo-terminal as standard input, ``answer`` typed into it."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode() + b"\n")
        return streamapp(*argv, stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)


def test_on_a_terminal_it_asks_and_only_yes_deletes(bootstrap: str, new_topic) -> None:
    topic = new_topic("ask", partitions=3)
    kept = on_terminal("n", "topics", "delete", topic, "--bootstrap-servers", bootstrap)
    assert kept.returncode == 1 and kept.stdout == ""
    assert kept.stderr == (f"Delete {topic} (3 partitions) on {bootstrap}? Their records are gone for good. [y/N] "
                           f"Nothing deleted.\n")
    assert topic in describe(bootstrap, [topic])
    gone = on_terminal("y", "topics", "delete", topic, "--bootstrap-servers", bootstrap)
    assert gone.returncode == 0 and f"Deleted topics: {topic}" in gone.stdout
    assert topic not in describe(bootstrap, [topic])
