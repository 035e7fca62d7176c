"""A stand-in for the reconciliation under spark-submit (tests/airflow_probe.py): exits with the code it is given.

``1`` writes the summary.json a breached run writes (the real job's exit codes are tested
on the real job: tests/test_reconcile_kafka.py); ``1-no-summary`` exits 1 without it, as
spark-submit does on its own errors.  argv: CODE OUTPUT DATE
"""
import json
import sys
from pathlib import Path

code, output, date = sys.argv[1:4]
if code == "1":
    day = Path(output) / f"dt={date}"
    day.mkdir(parents=True, exist_ok=True)
    (day / "summary.json").write_text(json.dumps({
        "date": date, "totals": {"direct": {"orders": 63, "mismatches": 25, "mismatch_rate": 25 / 63}},
        "threshold": {"max_mismatch_rate": 0.01, "breached": True, "breached_pairs": ["direct"]},
    }))
sys.exit(int(code.split("-")[0]))
