"""A stand-in for the reconciliation under spark-submit (tests/airflow_probe.py): exits with the code it is given.

``1`` writes the summary.json a breached run writes, through the job's own :class:`~spark_batch.summary.Summary`
(the real job's exit codes are tested on the real job: tests/test_reconcile_kafka.py); ``1-no-summary`` exits 1
without it, as spark-submit does on its own errors.  argv: CODE OUTPUT DATE
"""
import json
import sys
from pathlib import Path

from spark_batch.summary import PairTotals, Summary, Threshold
from spark_batch.window import window_for

code, output, date = sys.argv[1:4]
if code == "1":
    statuses = {"direct": {"match": 38, "both_unenriched": 25}}
    summary = Summary(window=window_for(date, None, None), source="kafka", topics={}, pairs={}, stream_partitions={},
                      offsets=None, output_records={}, input_records={}, statuses=statuses,
                      totals={pair: PairTotals.of(counts) for pair, counts in statuses.items()}, causes={},
                      by_partition_pair=(), threshold=Threshold(0.01, ("direct",)), detail="", versions={})
    day = Path(output) / f"dt={date}"
    day.mkdir(parents=True, exist_ok=True)
    (day / "summary.json").write_text(json.dumps(summary.to_dict()))
sys.exit(int(code.split("-")[0]))
