"""The producer's edges: reading topics to their end, and endpoint reachability, on real sockets and the real broker."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Iterator

import pytest
from confluent_kafka import Producer

from streamapp.demo.endpoints import EndpointError, check_http, check_kafka, validate_http_url
from streamapp.kafka.admin import describe
from streamapp.kafka.broker import free_port
from streamapp.kafka.reader import TopicReader, TopicReadError, key_partitions, read_topic


def test_read_topic_returns_every_record_of_multi_record_batches(bootstrap: str, new_topic) -> None:
    """Multi-record batches: every record of a batch is read, not one per batch."""
    topic = new_topic("batches", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "batch.num.messages": 1000})
    for i in range(3000):
        producer.produce(topic, key=f"k{i}".encode(), value=str(i).encode(), partition=i % 3)
    producer.produce(topic, key=b"moved", value=b"old", partition=0, timestamp=1_000)
    producer.produce(topic, key=b"moved", value=b"new", partition=2, timestamp=2_000)
    assert producer.flush(30) == 0
    records = read_topic(bootstrap, topic)
    assert len(records) == 3002
    assert sorted(int(r.value) for r in records if r.key != b"moved") == list(range(3000))
    assert [r.offset for r in records if r.partition == 1] == list(range(1000))
    assert key_partitions(records) == {**{f"k{i}": i % 3 for i in range(3000)}, "moved": 2}


def test_read_topic_on_an_empty_topic_returns_nothing_quickly(bootstrap: str, new_topic) -> None:
    assert read_topic(bootstrap, new_topic("empty", partitions=4), timeout=10) == []


def test_a_reader_returns_only_what_arrived_since_its_last_read(bootstrap: str, new_topic) -> None:
    """Waiting for records reads each record once: the reader keeps its place between reads."""
    topic = new_topic("incremental", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, key=b"first", value=str(i).encode(), partition=i % 3)
    assert producer.flush(30) == 0
    with TopicReader(bootstrap, topic) as reader:
        assert sorted(int(r.value) for r in reader.read_to_end()) == list(range(10))
        assert reader.read_to_end() == []
        for i in range(10, 15):
            producer.produce(topic, key=b"then", value=str(i).encode(), partition=i % 3)
        assert producer.flush(30) == 0
        later = reader.read_to_end()  # the end as of this call: every record flushed before it
    assert sorted(int(r.value) for r in later) == list(range(10, 15))
    assert {r.key for r in later} == {b"then"}


def test_a_log_ending_in_transaction_markers_is_read_to_its_end(bootstrap: str, new_topic) -> None:
    """A consumer never receives the commit and abort markers: the end is where the Fetch says, not offset end-1."""
    topic = new_topic("txn", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{topic}"})
    producer.init_transactions(30)
    for value, commit in ((b"kept", True), (b"aborted", False), (b"kept too", True)):
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=value)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    records = read_topic(bootstrap, topic, timeout=20)
    assert [r.value for r in records] == [b"kept", b"kept too"]
    assert records[-1].offset < 5  # the log goes on past it: 3 records and 3 markers


def test_a_missing_topic_is_named_and_not_auto_created(bootstrap: str) -> None:
    with pytest.raises(TopicReadError, match="topic never_created_xyz does not exist"):
        read_topic(bootstrap, "never_created_xyz")
    assert describe(bootstrap, ["never_created_xyz"]) == {}


class _Status(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/info" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_endpoint_reachable_even_on_404_and_unreachable_when_closed(http_url: str) -> None:
    assert check_http("ksqlDB", http_url, "/info").detail == "HTTP 200 on /info"
    missing = check_http("Control Center", http_url)
    assert missing.reachable and missing.detail == "HTTP 404 on /"
    closed = check_http("ksqlDB", f"http://127.0.0.1:{free_port()}", "/info", timeout=1)
    assert not closed.reachable and "refused" in closed.detail.lower()


def test_kafka_endpoint(bootstrap: str) -> None:
    assert check_kafka(bootstrap).reachable
    assert not check_kafka(f"127.0.0.1:{free_port()}", timeout=1).reachable


@pytest.mark.parametrize("url, problem", [("localhost:8088", "expected http://host:port"),
                                          ("http://", "expected http://host:port"),
                                          ("http://h:99999", "the port is not a number")])
def test_bad_urls_name_the_option(url: str, problem: str) -> None:
    with pytest.raises(EndpointError, match=f"ksqldb_endpoint={url!r}: {problem}"):
        validate_http_url("ksqldb_endpoint", url)
    assert validate_http_url("x", "http://h:8088/") == "http://h:8088"
