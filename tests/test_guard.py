"""The co-partitioning guard: pure checks on computed facts, then against real topics on Apache Kafka."""
from __future__ import annotations

import json
import zlib

import pytest

from streamapp.copartition.fingerprint import score
from streamapp.copartition.guard import (
    GuardError,
    TopicFacts,
    check_copartitioning,
    evaluate,
    run_guard,
)
from streamapp.partitioners.hashes import murmur2
from streamapp.settings import Settings

from workerkit import isolated, produce

N = 6
KEYS = [f"user-{i:04d}".encode() for i in range(400)]


def murmur2_samples(keys: list[bytes], n: int = N) -> list[tuple[bytes, int]]:
    return [(k, (murmur2(k) & 0x7FFFFFFF) % n) for k in keys]


def crc32_samples(keys: list[bytes], n: int = N) -> list[tuple[bytes, int]]:
    return [(k, zlib.crc32(k) % n) for k in keys]


def facts(settings: Settings, users: TopicFacts, orders: TopicFacts | None = None, repartition: int = N) -> dict:
    return {
        settings.users_topic: users,
        settings.orders_topic: orders or TopicFacts(N, score(murmur2_samples(KEYS[:200]), N)),
        settings.users_repartition_topic: TopicFacts(repartition),
    }


def test_all_checks_pass_when_users_were_written_with_murmur2() -> None:
    s = Settings()
    report = evaluate(s, facts(s, TopicFacts(N, score(murmur2_samples(KEYS), N))), {"demo_user": "raw"})
    assert report.ok and report.problems == [] and report.skipped == []
    assert report.partitioner == "murmur2"


def test_crc32_users_say_the_direct_join_misses_five_sixths() -> None:
    s = Settings()
    report = evaluate(s, facts(s, TopicFacts(N, score(crc32_samples(KEYS), N))))
    assert not report.ok
    [problem] = report.problems
    expected_share = f"{1 - 1 / N:.0%}"
    assert expected_share == "83%"
    assert "demo_user was not written with murmur2" in problem
    assert f"direct join (streamapp_DEMO_USER_ORDERS_MERGED) will miss about {expected_share} (1 − 1/{N})" in problem
    assert "repartitioned join (streamapp_DEMO_USER_ORDERS_MERGED_REPARTITION) is the correct one" in problem
    assert "consistent" in problem  # the fingerprint's verdict names what did write it


def test_partition_count_mismatch_names_both_topics_and_counts() -> None:
    s = Settings()
    users = TopicFacts(4, score(murmur2_samples(KEYS, 4), 4))
    report = evaluate(s, facts(s, users))
    assert any(
        "Can't join demo_user_orders with demo_user since the number of partitions don't match: "
        "demo_user_orders has 6 partitions, demo_user has 4" in p for p in report.problems
    )
    assert not any("streamapp_demo_user_repartition" in p for p in report.problems)


def test_missing_topic_is_a_problem() -> None:
    s = Settings()
    report = evaluate(s, {s.users_topic: TopicFacts(N)})
    assert any("demo_user_orders does not exist: create it" in p for p in report.problems)


def test_a_missing_topic_the_worker_creates_is_judged_by_the_count_it_creates_it_with() -> None:
    """Custom users and orders topics: the worker's repartition topic does not exist yet, and that is no problem."""
    s = Settings(users_topic="my_users", orders_topic="my_orders")
    present = {s.users_topic: TopicFacts(N), s.orders_topic: TopicFacts(N)}
    [check] = [c for c in evaluate(s, present).checks if s.users_repartition_topic in c.name]
    assert check.ok is True
    assert check.message == (f"{s.users_repartition_topic} does not exist yet: the worker creates it with {N} "
                             f"partitions, as my_orders has")
    [problem] = evaluate(s.replace(partitions=4), present).problems
    assert problem == (f"{s.users_repartition_topic} does not exist yet and the worker would create it with 4 "
                       f"partitions (partitions=4), but my_orders has {N}: set partitions={N}")


def test_json_quoted_keys_and_quoting_serializers_are_problems() -> None:
    s = Settings()
    quoted = [json.dumps(k.decode()).encode() for k in KEYS]
    report = evaluate(s, facts(s, TopicFacts(N, score(murmur2_samples(quoted), N))), {"demo_user": "json"})
    [key_problem] = [p for p in report.problems if "raw key bytes" in p]
    assert "demo_user uses 'json'" in key_problem
    report = evaluate(s, facts(s, TopicFacts(N, score(murmur2_samples(quoted), N))), {"demo_user": "raw"})
    assert any("keys of demo_user are JSON-quoted" in p for p in report.problems)


def test_missing_fingerprint_is_skipped_with_a_reason_not_failed() -> None:
    s = Settings()
    report = evaluate(s, facts(s, TopicFacts(N, None, "streamapp.fingerprint is not available: boom")))
    assert report.ok
    assert any("fingerprint not available (streamapp.fingerprint is not available: boom)" in m
               for m in report.skipped)


def test_empty_topic_is_skipped() -> None:
    s = Settings()
    report = evaluate(s, facts(s, TopicFacts(N, score([], N))))
    assert report.ok and any("no keyed records yet" in m for m in report.skipped)


def test_orders_not_written_with_the_join_partitioner_break_both_joins() -> None:
    s = Settings()
    report = evaluate(s, facts(s, TopicFacts(N, score(murmur2_samples(KEYS), N)),
                              orders=TopicFacts(N, score(crc32_samples(KEYS), N))))
    [problem] = report.problems
    assert "demo_user_orders was not written with murmur2" in problem
    assert ("every join of it (streamapp_DEMO_USER_ORDERS_MERGED, streamapp_DEMO_USER_ORDERS_MERGED_REPARTITION) "
            "will miss about 83%") in problem


def test_report_to_dict_is_json_ready() -> None:
    s = Settings()
    report = evaluate(s, facts(s, TopicFacts(N, score(crc32_samples(KEYS), N))))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["policy"] == "warn" and len(data["problems"]) == 1
    assert {c["name"] for c in data["checks"]} >= {"partitioner of demo_user", "key serialization demo_user"}


def test_guard_on_real_topics(broker_settings: Settings, new_topic) -> None:
    """Topics on Apache Kafka: users by librdkafka's default (crc32), repartition topic with 4 partitions."""
    s = isolated(broker_settings)
    s = s.replace(users_topic=new_topic("users", N), orders_topic=new_topic("orders", N),
                  users_repartition_topic=new_topic("repart", 4))
    produce(s.bootstrap_servers, s.users_topic, ((k, b'{"name":"a","age":1}') for k in KEYS), "consistent_random")
    produce(s.bootstrap_servers, s.orders_topic, ((k, b"{}") for k in KEYS), "murmur2")
    report = check_copartitioning(s, {s.users_topic: "raw"})
    problems = report.problems
    assert len(problems) == 2, problems
    assert any(f"{s.users_repartition_topic} has 4" in p for p in problems)
    assert any(f"{s.users_topic} was not written with murmur2" in p for p in problems)
    assert run_guard(s).ok is False
    with pytest.raises(GuardError, match="guard_policy=fail: 2 co-partitioning problem"):
        run_guard(s.replace(guard_policy="fail"))
