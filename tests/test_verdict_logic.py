"""The verdict follows the data, the pure parts: the misplaced-key fact, when to judge again, what the checks say.

No broker: the facts are computed here from keys placed by the real hash functions, as a producer
with that partitioner would place them.  tests/test_verdict_follows_data.py runs the same on Apache Kafka.
"""
from __future__ import annotations


from streamapp.copartition.doctor import JoinedPair, TopicSample, diagnose
from streamapp.copartition.doctor_pairs import with_live
from streamapp.copartition.drift import (
    Placement,
    count_changes,
    drift_reason,
    judged_misplaced,
    live_message,
    writer_profile,
)
from streamapp.copartition.fingerprint import score
from streamapp.copartition.guard import TopicFacts, evaluate
from streamapp.partitioners import partition_batch
from streamapp.settings import Settings
from streamapp.worker.web.rechecks import failing, new_problems
from streamapp.worker.web.views import copartition_verdict, doctor_verdict
from test_guard import crc32_samples, murmur2_samples  # where a producer with that partitioner puts each key

N = 6  # test_guard's count too
KEYS = [f"user-{i:04d}".encode() for i in range(600)]


def placement_of(records: list[tuple[bytes, int]], topic: str = "users", n: int = N) -> Placement:
    """The worker's check over ``records`` as they arrive, a batch per partition (the agents' batches)."""
    placement = Placement()
    for partition in range(n):
        keys = [k for k, p in records if p == partition]
        if keys:
            placement.count(topic, partition, keys, partition_batch("murmur2", keys, n))
    return placement


def test_the_misplaced_key_is_one_fact_and_only_misplaced_keys_are_kept() -> None:
    healthy = placement_of(murmur2_samples(KEYS))
    [fact] = healthy.live({"users": N}).values()
    assert (fact.checked, fact.misplaced, fact.recent) == (len(KEYS), 0, ())
    switched = placement_of(murmur2_samples(KEYS[:300]) + crc32_samples(KEYS[300:]))
    fact = switched.live({"users": N})["users"]
    moved = {k for k, p in crc32_samples(KEYS[300:]) if p != partition_batch("murmur2", [k], N)[0]}
    assert fact.checked == len(KEYS) and fact.misplaced == len(moved) > 200
    assert {k for k, _ in fact.recent} == moved


def test_the_writer_now_seen_is_named_from_the_misplaced_keys() -> None:
    fact = placement_of(murmur2_samples(KEYS[:300]) + crc32_samples(KEYS[300:])).live({"users": N})["users"]
    assert writer_profile(fact) == "consistent/consistent_random (librdkafka, confluent-kafka)"
    assert live_message(fact, "murmur2").startswith(
        f"{fact.misplaced:,} of the {len(KEYS):,} keyed records of users the worker has read since it started")
    few = placement_of(crc32_samples(KEYS[:4])).live({"users": N})["users"]
    assert 0 < few.misplaced < 8 and writer_profile(few).startswith("a partitioner not named yet (Sample too small")


def test_partitions_added_since_the_start_are_scored_over_the_new_count() -> None:
    """Records on a partition the worker's count (6) does not have: misplaced, and scored over 12."""
    records = [(k, p) for k, p in murmur2_samples(KEYS, 12) if p >= N]
    placement = Placement()
    for partition in range(N, 12):
        keys = [k for k, p in records if p == partition]
        placement.count("orders", partition, keys, partition_batch("murmur2", keys, N))
    fact = placement.live({"orders": N})["orders"]
    assert fact.misplaced == len(records)
    assert writer_profile(fact).startswith("murmur2")


def report(settings: Settings, users: list[tuple[bytes, int]], live: dict | None = None) -> dict:
    facts = {settings.users_topic: TopicFacts(N, score(users, N)),
             settings.orders_topic: TopicFacts(N, score(murmur2_samples(KEYS[:200]), N)),
             settings.users_repartition_topic: TopicFacts(N)}
    return evaluate(settings, facts, {settings.users_topic: "raw"}, live=live).to_dict()


def test_the_guard_fails_a_topic_the_worker_found_misplaced_whatever_its_sample_says() -> None:
    s = Settings()
    sample = murmur2_samples(KEYS[:300])  # read before the producer changed
    assert report(s, sample)["ok"]
    live = placement_of(sample + crc32_samples(KEYS[300:]), s.users_topic).live({s.users_topic: N})
    after = report(s, sample, live)
    [problem] = after["problems"]
    assert problem.startswith(f"{s.users_topic} is not written with murmur2 only: ")
    assert "placed by consistent/consistent_random (librdkafka, confluent-kafka)" in problem
    assert "direct join (streamapp_DEMO_USER_ORDERS_MERGED) will miss about 83%" in problem
    assert judged_misplaced(after) == {s.users_topic}
    healthy = placement_of(sample, s.users_topic).live({s.users_topic: N})
    assert report(s, sample, healthy)["ok"]


def test_a_sample_too_small_decides_nothing() -> None:
    s = Settings()
    [check] = [c for c in report(s, murmur2_samples(KEYS[:5]))["checks"] if c["name"] == f"partitioner of {s.users_topic}"]
    assert check["ok"] is None and "Sample too small" in check["message"]


def test_when_to_judge_again() -> None:
    s = Settings()
    sample = murmur2_samples(KEYS[:300])
    ok = report(s, sample)
    live = placement_of(sample + crc32_samples(KEYS[300:]), s.users_topic).live({s.users_topic: N})
    misplaced = live[s.users_topic].misplaced
    assert drift_reason(None, live, {}, {}) is None  # before the start-up check
    reason = drift_reason(ok, live, {}, {})
    assert reason == (f"keyed records of {s.users_topic} arrived in a partition the join's partitioner does not pick "
                      f"({misplaced:,} since the last run)")
    assert drift_reason(ok, live, {s.users_topic: misplaced}, {}) is None  # nothing new since the last run
    assert drift_reason(report(s, sample, live), live, {}, {}) is None  # the verdict already says so
    healthy = placement_of(sample, s.users_topic).live({s.users_topic: N})
    assert drift_reason(ok, healthy, {}, {}) is None
    changed = count_changes({"orders": 6, "users": 6}, {"orders": 12, "users": 6, "gone": None})
    assert changed == {"orders": (6, 12)}
    assert count_changes({"orders": 6}, {"orders": None}) == {}
    assert drift_reason(ok, healthy, {}, changed) == "partitions of orders changed from 6 to 12"


def test_a_run_says_only_new_problems() -> None:
    s = Settings()
    sample = murmur2_samples(KEYS[:300])
    live = placement_of(sample + crc32_samples(KEYS[300:]), s.users_topic).live({s.users_topic: N})
    broken = report(s, sample, live)
    assert failing(report(s, sample)) == set()
    assert new_problems(broken, set()) == broken["problems"]
    assert new_problems(broken, failing(broken)) == []


def doctor_report(users: list[tuple[bytes, int]], live: dict | None = None) -> dict:
    s = Settings()
    orders = murmur2_samples(KEYS[:300])
    diagnosis = diagnose([TopicSample(s.users_topic, N, users), TopicSample(s.orders_topic, N, orders)],
                         [JoinedPair(s.orders_topic, s.users_topic, "worker:demo_user_orders_merged")])
    return with_live(diagnosis, live or {}, "murmur2").to_dict()


def test_the_doctor_and_the_guard_say_one_verdict() -> None:
    s = Settings()
    sample = murmur2_samples(KEYS[:300])
    live = placement_of(sample + crc32_samples(KEYS[300:]), s.users_topic).live({s.users_topic: N})
    sound, broken = doctor_report(sample), doctor_report(sample, live)
    assert doctor_verdict(sound) == "Doctor: all 1 joined pairs sound."
    [pair] = [p for p in broken["pairs"] if p["joined_by"]]
    assert pair["status"] == "broken" and pair["checks"][-1]["name"] == "placement seen by the worker"
    guard_ok, guard_broken = report(s, sample), report(s, sample, live)
    assert copartition_verdict(guard_ok, sound).startswith("Co-partitioned: ")
    # the worker's own reading: both say so
    assert copartition_verdict(guard_broken, broken).startswith("Not co-partitioned: ")
    assert doctor_verdict(broken, guard_broken) == (
        f"Doctor: 1 of 1 joined pairs broken: {s.orders_topic} × {s.users_topic} (the worker found misplaced keys).")
    # the doctor alone finds a broken pair (issue 32: "18%" beside "5 of 5 checks passed"): the headline says so
    mixed = doctor_report(sample[:150] + crc32_samples([k for k, _ in sample[150:]]))
    assert copartition_verdict(guard_ok, mixed).startswith(f"Not co-partitioned: the doctor finds {s.orders_topic} × ")
    # the guard alone: the doctor's line does not say "sound"
    assert "sound." not in doctor_verdict(sound, guard_broken) and "not co-partitioned" in doctor_verdict(sound, guard_broken)
