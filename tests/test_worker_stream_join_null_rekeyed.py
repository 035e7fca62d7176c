"""A null value on a side the worker re-keys moves stream time, as in ksqlDB (issue 37), without a broker.

ksqlDB re-keys a null-value record too (its new key from the key columns alone: null when the join key reads the
value), and Kafka Streams' ``KStreamKStreamJoin`` moves stream time by it before dropping it, so an unmatched
later record whose window that time has closed is written at once, and the records waiting in the outer store
are written as of that time.  The pure engine reads the declared
stream and does so; the worker's re-key (:meth:`~streamapp.sql.topology.Rekeyer.null_value`) must carry the record
to the join's repartition topic for its join to do the same.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamapp.settings import Settings

STREAMS = """
CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');
CREATE STREAM R (ID BIGINT KEY, B STRING) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON', KEY_FORMAT='{r_key}');
CREATE STREAM O WITH (KAFKA_TOPIC='o') AS SELECT {select} FROM L LEFT JOIN R
  WITHIN 1 SECOND GRACE PERIOD 0 SECONDS ON {on};
"""
#: (topic, key, value or None, time): L's x waits for its window to close; R's null value at 5000 moves stream time,
#: so L's y at 1200, unmatched, finds its window (to 2200) already closed and is written at once with NULLs; L's z at
#: 5000 then writes the x that waited.  Had stream time stayed at 1200, y would have waited too, written after x.
RECORDS = [("l", 1, {"A": "x"}, 1000), ("r", 2, None, 5000), ("l", 2, {"A": "y"}, 1200), ("l", 3, {"A": "z"}, 5000)]


def joined(case: str, tmp_path: Path) -> tuple[list[Any], list[Any], int, int]:
    """(the worker's outputs, the engine's, the worker's late count, the engine's): each record of a re-keyed topic
    through the stream agent's re-key (a null value's key by :meth:`Rekeyer.null_value`) into the repartition
    topic, and from there, a record a fetch, into the join and its RocksDB stores."""
    from aiokafka.structs import ConsumerRecord

    from agents.stream_joins import StreamJoinRun
    from agents.streams import StreamReader
    from streamapp.sql.runner import TestRecord, encode_inputs
    from streamapp.sql.stream_join import StreamJoin
    from streamapp.sql.topology import Rekeyer
    from streamapp.worker.app import create_app

    path = tmp_path / "joins.sql"
    path.write_text(STREAMS.format(**CASES[case]), encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    topology = app.topology
    [join] = topology.stream_joins
    assert [r.stream for r in topology.rekeys] == CASES[case]["rekeyed"]
    run, engine = StreamJoinRun(app, join, clock=lambda: 0), StreamJoin(topology.declared, topology.declared.queries[-1])
    records = encode_inputs(topology.declared, [TestRecord(t, k, v, ts, i) for i, (t, k, v, ts) in enumerate(RECORDS)],
                            "input")
    worker, pure = [], []
    for offset, record in enumerate(records):
        msg = ConsumerRecord(record.topic, 0, offset, record.timestamp, 0, record.key, record.value, None, 0, 0, [])
        fed = [(record.topic, msg)]
        for rekey in (r for r in topology.rekeys if r.stream == record.topic):
            rekeyer = Rekeyer(rekey)
            if record.value is None:
                assert rekeyer.forwards_null
                key, value, timestamp = rekeyer.null_value(record.key), None, record.timestamp
            else:
                row = StreamReader(rekey.declared, False).row(msg)
                (key, value), timestamp = rekeyer.rekey(row, 0, offset), row[1]
            fed = [(rekey.topic, ConsumerRecord(rekey.topic, 0, offset, timestamp, 0, key, value, None, 0, 0, []))]
        for topic, fed_msg in fed:
            worker += [(k, v, ts) for _, k, v, ts in run.process(topic, 0, fed_msg)]
            run.stored()
        pure += [(o.record.key, o.record.value, o.record.timestamp) for o in engine.process(record._replace(offset=offset))]
    return worker, pure, run.engine.late, engine.late


CASES = {
    # the join key is a value column: the null value's new key is null, and it still moves stream time
    "on a value column": {"select": "L.A, L.ID AS LID, R.ID AS RID, B", "on": "L.A = R.B", "r_key": "KAFKA",
                          "rekeyed": ["l", "r"]},
    # the key, in another format: the null value's new key is its own key, re-written
    "on the key, another format": {"select": "L.ID, A, B", "on": "L.ID = R.ID", "r_key": "JSON", "rekeyed": ["r"]},
}


@pytest.mark.parametrize("case", CASES)
def test_a_null_value_on_a_rekeyed_side_moves_stream_time_as_the_engine_does(case: str, tmp_path: Path) -> None:
    worker, pure, late, engine_late = joined(case, tmp_path)
    assert worker == pure and late == engine_late
    assert [timestamp for _, _, timestamp in pure] == [1200, 1000], pure  # y at once, then the x that waited
    assert all(b'"B":null' in value for _, value, _ in pure), pure
