"""Where the doctor finds joined pairs: a --pairs file, streamapp's worker, and ksqlDB against RECORDED responses.

ksqlDB cannot run on this machine: its answer to ``SHOW QUERIES EXTENDED; SHOW
STREAMS; SHOW TABLES;`` is recorded in tests/recorded/ksqldb/show_queries_extended.json
in the shapes of ksqlDB's REST entities, and replayed by the same local server as
the ksqlDB client's tests (tests/test_ksqldb.py), so the doctor's HTTP call runs for real.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from streamapp.copartition.doctor import DoctorError, JoinedPair
from streamapp.copartition.doctor_pairs import LISTING, pairs_from_file, pairs_from_ksqldb, pairs_from_listing, pairs_from_worker
from streamapp.settings import Settings
from test_ksqldb import RECORDED, Replay, replay  # noqa: F401 - replay: the recorded ksqlDB server fixture


def test_ksqldb_joins_are_read_from_its_persistent_queries(replay: Replay) -> None:
    pairs, queries = pairs_from_ksqldb(Settings(ksqldb_endpoint=replay.url))
    assert queries == 3
    assert pairs == [
        JoinedPair("demo_user_orders", "demo_user", "ksqldb:CSAS_DEMO_USER_ORDERS_MERGED_7"),
        JoinedPair("demo_user_orders", "demo_user_repartition", "ksqldb:CSAS_DEMO_USER_ORDERS_MERGED_REPARTITION_9"),
    ]
    request = replay.requests[0]
    assert request["path"] == "/ksql" and request["body"]["ksql"] == LISTING
    assert request["headers"]["Accept"] == "application/vnd.ksql.v1+json"


def test_listing_parsing_is_pure_and_names_an_unknown_source() -> None:
    entities = json.loads((RECORDED / "show_queries_extended.json").read_text())["response"]["body"]
    assert len(pairs_from_listing(entities)[0]) == 2
    entities[0]["queryDescriptions"][1]["sources"] = ["DEMO_USER_ORDERS", "NOWHERE"]
    with pytest.raises(DoctorError, match="CSAS_DEMO_USER_ORDERS_MERGED_7: source NOWHERE is in no stream or table"):
        pairs_from_listing(entities)


def test_ksqldb_unreachable_refused_and_bad_url_are_one_line(replay: Replay) -> None:
    with pytest.raises(DoctorError, match="ksqldb_endpoint='localhost:8088': expected http://host:port"):
        pairs_from_ksqldb(Settings(ksqldb_endpoint="localhost:8088"))
    replay.shutdown()
    replay.server_close()
    with pytest.raises(DoctorError, match=f"ksqlDB at {replay.url} is unreachable"):
        pairs_from_ksqldb(Settings(ksqldb_endpoint=replay.url), timeout=2)


def test_ksqldb_error_answer_is_named(replay: Replay) -> None:
    replay.recordings = [r for r in replay.recordings if "SHOW QUERIES" not in r["request"].get("ksql_match", "")]
    with pytest.raises(DoctorError, match=r"refused .*HTTP 404.*no recording"):
        pairs_from_ksqldb(Settings(ksqldb_endpoint=replay.url))


def test_pairs_file(tmp_path: Path) -> None:
    path = tmp_path / "pairs.txt"
    path.write_text("# joins of team A\norders users\n\norders,  products  # the catalog join\n")
    assert pairs_from_file(str(path)) == [JoinedPair("orders", "users", "file:2"), JoinedPair("orders", "products", "file:4")]
    path.write_text("orders users\norders\n")
    with pytest.raises(DoctorError, match=r"pairs=.*pairs.txt, line 2: expected two topics \('left right'\), got 'orders'"):
        pairs_from_file(str(path))
    with pytest.raises(DoctorError, match="pairs=.*missing.txt: cannot be read: No such file or directory"):
        pairs_from_file(str(tmp_path / "missing.txt"))


def test_worker_pairs_are_its_two_joins() -> None:
    settings = Settings(orders_topic="o", users_topic="u", users_repartition_topic="ur")
    assert pairs_from_worker(settings) == [JoinedPair("o", "u", "worker:demo_user_orders_merged"),
                                           JoinedPair("o", "ur", "worker:demo_user_orders_merged_repartition")]


def test_ksqldb_basic_auth_is_sent_when_set(replay: Replay) -> None:
    settings = Settings(ksqldb_endpoint=replay.url, ksqldb_username="alice", ksqldb_password="s3cret")
    pairs_from_ksqldb(settings)
    assert replay.requests[0]["headers"]["Authorization"] == "Basic " + base64.b64encode(b"alice:s3cret").decode()
