"""The doctor's pure part: topic verdicts, key-space overlap, pair diagnoses, miss rates and fixes, without a broker.

Samples are placed by streamapp's partitioners, which the oracle tests hold to
the real clients; the broker tests (tests/test_doctor_broker.py) use the real clients.
"""
from __future__ import annotations

import random

import pytest
from faust.serializers import codecs

from streamapp.copartition.doctor import (
    JoinedPair, TopicSample, diagnose, diagnose_pair, select_topics, topic_report,
)
from streamapp.copartition.doctor_fixes import PRODUCER_SETTINGS
from streamapp.copartition.doctor import DoctorError
from streamapp.partitioners import partition_batch

USERS = [f"u{i}".encode() for i in range(400)]


def placed(name: str, keys: list[bytes], partitioner: str, n: int = 6) -> TopicSample:
    return TopicSample(name, n, list(zip(keys, partition_batch(partitioner, keys, n))))


def test_topic_report_names_partitioner_writers_and_encoding() -> None:
    report = topic_report(placed("users", USERS, "consistent_random"))
    assert report.family == ["consistent", "consistent_random"]
    assert "librdkafka" in report.writers and report.encoding.encoding == "utf8_string"
    assert report.placements["u1"] == {partition_batch("consistent", [b"u1"], 6)[0]}


def test_sound_pair_same_partitioner_count_and_bytes() -> None:
    a, b = topic_report(placed("orders", USERS, "murmur2_random")), topic_report(placed("users", USERS[:200], "murmur2"))
    d = diagnose_pair(a, b, ["file:1"])
    assert d.status == "sound" and d.miss_rate == 0.0 and d.shared == 200 and d.fixes == ()


def test_partitioner_mismatch_predicts_the_miss_rate_and_fixes_the_odd_writer() -> None:
    a, b = topic_report(placed("orders", USERS, "murmur2_random")), topic_report(placed("users", USERS, "fnv1a_random"))
    d = diagnose_pair(a, b, ["file:1"])
    murmur, fnv = partition_batch("murmur2", USERS, 6), partition_batch("fnv1a", USERS, 6)
    expected = sum(x != y for x, y in zip(murmur, fnv)) / len(USERS)
    assert d.status == "broken" and d.miss_rate == pytest.approx(expected) and d.partition_miss_rate == d.miss_rate
    producer = {f.client: f.setting for f in d.fixes if f.kind == "producer"}
    assert producer == {"sarama": PRODUCER_SETTINGS["sarama"]["murmur2_random"],
                        "kafka-go": "Writer.Balancer = &kafka.Murmur2Balancer{}"}
    assert all(f.topic == "users" for f in d.fixes)
    assert any(f.kind == "repartition" and "CREATE STREAM USERS_COPARTITIONED" in f.text for f in d.fixes)


def test_librdkafka_topic_gets_partitioner_murmur2_random() -> None:
    a, b = topic_report(placed("java", USERS, "murmur2_random")), topic_report(placed("rdk", USERS, "consistent_random"))
    settings = {f.client: f.setting for f in diagnose_pair(a, b, ["x"]).fixes if f.kind == "producer"}
    assert settings["librdkafka"] == settings["confluent-kafka"] == "partitioner=murmur2_random"


def test_json_quoted_keys_share_the_key_space_but_miss_every_lookup() -> None:
    quoted = [codecs.dumps("json", k.decode()) for k in USERS]
    a, b = topic_report(placed("raw", USERS, "murmur2_random")), topic_report(placed("faust", quoted, "murmur2_random"))
    assert b.encoding.encoding == "json_string" and set(a.placements) == set(b.placements)
    d = diagnose_pair(a, b, ["x"])
    assert d.miss_rate == 1.0 and 0.7 < d.partition_miss_rate < 0.95
    encoding = next(c for c in d.checks if c.name == "key encodings")
    assert encoding.ok is False and "different bytes" in encoding.message
    assert d.fixes[0].kind == "serializer" and d.fixes[0].topic == "faust" and 'key_serializer="raw"' in d.fixes[0].text


def test_partition_count_mismatch_offers_added_partitions_with_the_share_that_moves() -> None:
    a, b = topic_report(placed("six", USERS, "murmur2_random", 6)), topic_report(placed("four", USERS, "murmur2_random", 4))
    d = diagnose_pair(a, b, ["x"])
    assert next(c for c in d.checks if c.name == "partition counts").ok is False
    grow = next(f for f in d.fixes if f.kind == "partitions")
    four, six = partition_batch("murmur2", USERS, 4), partition_batch("murmur2", USERS, 6)
    assert grow.topic == "four" and grow.moved_share == pytest.approx(sum(x != y for x, y in zip(four, six)) / len(USERS))
    assert "--count 6" in grow.text and "re-write its records" in grow.text


def test_overlap_and_key_spaces_group_topics_by_logical_key() -> None:
    quoted = [codecs.dumps("json", k.decode()) for k in USERS[:100]]
    products = [f"p{i}".encode() for i in range(100)]
    report = diagnose([placed("users", USERS, "murmur2_random"), placed("faust_users", quoted, "murmur2_random"),
                       placed("products", products, "murmur2_random"), placed("orders", USERS[50:], "murmur2_random")])
    assert [(o.left, o.right, o.shared) for o in report.overlaps][:1] == [("orders", "users", 350)]
    assert ("faust_users", "users") in {(o.left, o.right) for o in report.overlaps}
    assert list(report.key_spaces) == [("faust_users", "orders", "users"), ("products",)]
    assert report.ok  # no joined pair: the shared-key pairs are diagnosed but do not fail the exit status
    assert {p.status for p in report.pairs} >= {"broken"} and not any(p.joined for p in report.pairs)


def test_a_broken_joined_pair_fails_the_report_and_a_missing_topic_too() -> None:
    samples = [placed("a", USERS, "murmur2_random"), placed("b", USERS, "consistent_random")]
    assert not diagnose(samples, [JoinedPair("a", "b", "file:1")]).ok
    assert diagnose(samples, [JoinedPair("a", "a2", "file:2")]).missing[0].right == "a2"
    assert not diagnose(samples, [JoinedPair("a", "a2", "file:2")]).ok
    assert diagnose(samples[:1], [JoinedPair("a", "a", "file:3")]).ok


def test_random_placement_is_broken_with_a_rewrite_fix() -> None:
    rng = random.Random(7)
    scattered = TopicSample("scattered", 6, [(k, rng.randrange(6)) for k in USERS])
    d = diagnose_pair(topic_report(placed("a", USERS, "murmur2_random")), topic_report(scattered), ["x"])
    assert d.status == "broken" and 0.7 < d.miss_rate < 0.95
    assert any(f.topic == "scattered" and "not placed by a known key hash" in f.text for f in d.fixes)


def test_unreadable_and_empty_topics_are_reported_not_raised() -> None:
    report = diagnose([TopicSample("gone", 0, (), "topic gone does not exist"), TopicSample("empty", 3, [])])
    by_name = {t.name: t for t in report.topics}
    assert by_name["gone"].verdict == "topic gone does not exist" and by_name["empty"].encoding is None
    assert by_name["empty"].partitioner_label == "no keyed records"


def test_topic_selection_leaves_internal_topics_out_and_refuses_a_bad_pattern() -> None:
    names = ["__consumer_offsets", "_schemas", "orders", "users", "orders-dlq"]
    assert select_topics(names, None, False) == ["orders", "orders-dlq", "users"]
    assert select_topics(names, "orders.*", False) == ["orders", "orders-dlq"]
    assert "__consumer_offsets" in select_topics(names, None, True)
    with pytest.raises(DoctorError, match=r"topics='\(': not a regular expression"):
        select_topics(names, "(", False)


def test_json_output_is_plain_data() -> None:
    import json
    report = diagnose([placed("a", USERS, "murmur2_random"), placed("b", USERS, "fnv1a_random")],
                      [JoinedPair("a", "b", "file:1")])
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["pairs"][0]["status"] == "broken"
    assert data["topics"][0]["encoding"]["encoding"] == "utf8_string"


def test_html_page_escapes_names_and_draws_one_curve_per_pair() -> None:
    from streamapp.copartition.doctor_report import render_html

    report = diagnose([placed("a<b>", USERS, "murmur2_random"), placed("c", USERS, "fnv1a_random"),
                       placed("d", USERS, "murmur2_random")], [JoinedPair("a<b>", "c", "file:1")])
    page = render_html(report)
    assert "a&lt;b&gt;" in page and "<b>" not in page
    assert page.count("<path ") == len(report.pairs) == 3
    assert page.count('stroke="#c62828"') == 2 and page.count('stroke="#2e7d32"') == 1  # a×c, c×d broken; a×d sound
    assert page.count('stroke-dasharray') == 2  # only a×c is joined
