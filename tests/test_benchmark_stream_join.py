"""The windowed join benchmark's completeness checks (benchmarks/stream_join.py): a round counts only when the
worker wrote exactly the rows derived from the records (each once, none missing, none wrong) and the pipe copied
every record once; the derived rows are the pure engine's, so the check is the join's own semantics.  And a small run
with ``--kafka-streams`` on the session's broker, Kafka Streams with ``max.task.idle.ms`` 2000: at its own 0 (ksqlDB's)
its rows depend on how the two topics' records arrive (benchmarks/README.md, "Windowed join")."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from stream_join import (HOUR, MINUTE, Event, check_copies, check_rows, encoded, engine_rows,  # noqa: E402
                         expected_rows, generate)

T0 = 1_700_000_000_000
EVENTS = generate(400, 3, T0)


def test_the_rows_derived_from_the_records_are_the_pure_engines() -> None:
    expected = expected_rows(EVENTS)
    assert check_rows(expected, engine_rows(EVENTS).elements()) is None
    assert sum(expected.values()) == 440  # 7 in 10 orders joined once, 1 twice, 2 with no carrier
    assert sum(1 for row in expected.elements() if row[3] is None) == 80


def test_a_shipment_joins_within_an_hour_either_way_and_a_later_one_leaves_the_order_unshipped() -> None:
    order = Event("orders", 1, {"item": "a", "qty": 2}, T0)
    edges = [order, Event("shipments", 1, {"carrier": "ups"}, T0 - HOUR), Event("shipments", 1, {"carrier": "dhl"}, T0 + HOUR)]
    late = [order, Event("shipments", 1, {"carrier": "dhl"}, T0 + HOUR + 1)]
    assert sorted(expected_rows(edges).elements(), key=str) == [(1, "a", 2, "dhl", T0 + HOUR), (1, "a", 2, "ups", T0)]
    assert list(expected_rows(late).elements()) == [(1, "a", 2, None, T0)]
    for events in (edges, late):
        assert check_rows(expected_rows(events), engine_rows(events).elements()) is None


def test_a_missing_duplicated_or_wrong_row_fails() -> None:
    expected = expected_rows(EVENTS)
    good = list(expected.elements())
    assert check_rows(expected, reversed(good)) is None  # any order
    assert check_rows(expected, good[1:]) == f"1 rows missing, 0 extra or duplicated (of 440), e.g. missing {good[0]}"
    assert check_rows(expected, good + good[:1]) == f"0 rows missing, 1 extra or duplicated (of 440), e.g. extra {good[0]}"
    wrong = (*good[0][:3], "someone else's", good[0][4])
    assert check_rows(expected, [wrong, *good[1:]]) == (
        f"1 rows missing, 1 extra or duplicated (of 440), e.g. missing {good[0]}")
    moved = (*good[0][:4], good[0][4] + MINUTE)  # the right row at the wrong time
    assert (check_rows(expected, [moved, *good[1:]]) or "").startswith("1 rows missing, 1 extra")


def test_the_pipe_must_copy_every_record_once() -> None:
    records = encoded(EVENTS[:50], "t")
    copied = [(key, value) for _, key, value, _ in records]
    assert check_copies(records, copied) is None
    assert check_copies(records, copied[1:]) == "1 records missing, 0 extra or duplicated (of 50)"
    assert check_copies(records, copied + copied[:2]) == "0 records missing, 2 extra or duplicated (of 50)"


def test_the_sampled_stacks_say_each_functions_share_of_the_main_threads_work_the_waits_apart() -> None:
    """``--stacks``: a sample whose leaf is the event loop's select is a wait (another thread's CPU); a function's own
    share counts the samples it was the leaf of, its inclusive share those it was anywhere in (once, however deep),
    each sample its share of the process's CPU (4 s over 40 samples: 100 µs a record of 1,000)."""
    from stream_join import stack_summary

    loop, handle, join = "asyncio/base_events.py:1:_run_once", "agents/x.py:5:handle", "sql/y.py:9:process"
    sampled = {"cpu": {"MainThread": 3.0, "rocksdb:low": 1.0}, "interval": 0.005,
               "stacks": {f"{loop};{handle};{join}": 6, f"{loop};{handle}": 2, f"{loop};{handle};{handle}": 2,
                          f"{loop};selectors.py:3:select": 30}}
    assert stack_summary(sampled, 1_000) == [
        "CPU µs a record by thread: MainThread 3000.0, rocksdb:low 1000.0",
        "main thread: 10 samples working (1000.0 µs a record), 30 waiting",
        "  own:", "   60.0% 600.00 µs sql/y.py:9:process", "   40.0% 400.00 µs agents/x.py:5:handle",
        "  inclusive:", "  100.0% 1000.00 µs asyncio/base_events.py:1:_run_once",
        "  100.0% 1000.00 µs agents/x.py:5:handle", "   60.0% 600.00 µs sql/y.py:9:process"]


def test_thread_cpu_reads_each_threads_seconds_by_name() -> None:
    """The benchmarks split a process's CPU by thread (procfs.task_cpu): a thread that spins shows its seconds under
    its own name (the kernel's, as a JVM names its threads), apart from the main thread's, and a numbered name counts
    with its kind."""
    import ctypes
    import os
    import threading
    import time

    from procfs import task_cpu
    from stream_join import thread_cpu

    stop = threading.Event()

    def spin() -> None:
        ctypes.CDLL(None).prctl(15, b"spinner7", 0, 0, 0)  # PR_SET_NAME: this thread's name in /proc
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin, name="spinner7")
    spinner.start()
    try:
        deadline = time.monotonic() + 120  # a guard: 0.2 CPU-s takes well under 1 s
        while time.monotonic() < deadline and task_cpu(os.getpid()).get(spinner.native_id, ("", 0.0))[1] < 0.2:
            time.sleep(0.05)
        tasks, by_name = task_cpu(os.getpid()), thread_cpu(os.getpid(), "nothing-such")
    finally:
        stop.set()
        spinner.join()
    assert tasks[spinner.native_id][0] == "spinner7" and tasks[spinner.native_id][1] >= 0.2
    assert os.getpid() in tasks  # the main thread's id is the process's
    assert by_name["spinner"] >= 0.2
    assert task_cpu(2**22 + 1) == {}  # no such process: nothing, no error


def test_a_small_run_beside_kafka_streams_finishes_and_prints_its_figures(broker: Any, tmp_path: Path) -> None:
    """``--kafka-streams``: one round of 300 orders on the session's broker; the pipe, the worker and Kafka Streams
    (the ksql-equivalent program, given ``max.task.idle.ms`` through ``--streams-property``) each wrote what they
    must, and Kafka Streams' figures and medians are printed; ``--write-alike librdkafka``: the pipe also wrote (the
    copies by librdkafka) exactly as many records as the worker, its rows and its changelogs' records (more than one
    a record read)."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "stream_join.py"
    done = subprocess.run([sys.executable, str(script), "--orders", "300", "--rounds", "1", "--sample-seconds", "1",
                           "--kafka-streams", "--streams-property", "max.task.idle.ms=2000", "--write-alike",
                           "librdkafka", "--bootstrap", broker.bootstrap, "--csv", str(tmp_path / "curve.csv")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = " ".join(done.stdout.split())  # the console wraps long lines
    assert "round 1 (pipe, worker, Kafka Streams): pipe " in out and "max.task.idle.ms=2000" in out
    assert re.search(r"Kafka Streams [\d,]+/s \([\d.]+ s, [\d,]+ per CPU-s\): [\d.]+× the pipe, [\d.]+× per CPU-s; "
                     r"the worker [\d.]+× Kafka Streams, [\d.]+× per CPU-s; Kafka Streams wrote exactly the expected "
                     r"rows", out), out
    alike = re.search(r"the pipe writing as the worker by librdkafka \(([\d,]+) records for 600 read: ([\d.]+) a "
                      r"record\) [\d,]+/s, [\d,]+ per CPU-s: [\d.]+× the pipe, [\d.]+× per CPU-s; the worker "
                      r"[\d.]+× it per CPU-s", out)
    assert alike and float(alike[2]) > 1.5, out  # every record read is in a window store's changelog, and rows
    assert re.search(r"the pipe writing as the worker by librdkafka ÷ pipe median [\d.]+× per CPU second "
                     r"\([\d.]+× wall\)", out), out
    assert re.search(r"Kafka Streams ÷ pipe median [\d.]+× wall, [\d.]+× per CPU second; worker ÷ Kafka Streams "
                     r"median [\d.]+× wall, [\d.]+× per CPU second", out), out
