"""``streamapp test-runner``: ksqlDB's ``ksql-test-runner`` files through streamapp's join engine or Kafka Streams,
no broker."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..kafka import streams_runner
from ..settings import Settings
from ..sql import runner

ENGINES = {"streamapp": runner.run_files, "kafka-streams": streams_runner.run_files}

DESCRIPTION = (
    "Runs a statements file's joins on the records of an input file, without Kafka, and compares what they "
    "write with an output file. The files are those of ksqlDB's ksql-test-runner: the statements, "
    '{"inputs": [{"topic", "key", "value", "timestamp"}, ...]} and {"outputs": [...]}. Records are fed one '
    "at a time in file order, as ksqlDB's runner feeds them, through streamapp's own join engine or, with "
    "--engine kafka-streams, through the Kafka Streams topology ksqlDB would build, under Kafka Streams' "
    "TopologyTestDriver (a JVM; `make install` builds it). Exit 0 when every output matches, 1 on a "
    "difference (each one printed), 2 when a file cannot be used (one line naming it)."
)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("test-runner", help="test declared joins on files of records, without Kafka",
                            description=DESCRIPTION)
    parser.add_argument("-s", "--sql-file", type=Path, required=True, help="the ksqlDB statements (.sql)")
    parser.add_argument("-i", "--input-file", type=Path, required=True, help='the input records: {"inputs": [...]}')
    parser.add_argument("-o", "--output-file", type=Path, default=None,
                        help='the expected records: {"outputs": [...]}; without it, what the joins write is printed')
    parser.add_argument("--engine", choices=sorted(ENGINES), default="streamapp",
                        help="streamapp: the pure Python engine the worker runs (default); kafka-streams: the "
                             "topology ksqlDB would build, run by Kafka Streams' TopologyTestDriver")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    plan, result = ENGINES[args.engine](args.sql_file, args.input_file, args.output_file)
    for line in result.skipped:
        print(line)
    written = sum(len(records) for records in result.actual.values())
    if args.output_file is None:
        for topic, records in result.actual.items():
            for record in records:
                print(f"{topic}: {record.shown()}")
        print(f"{written} records written by {len(plan.queries)} queries")
        return 0
    for difference in result.differences:
        print(difference)
    if result.differences:
        print(f"Test failed: {len(result.differences)} differences")
        return 1
    topics = ", ".join(f"{topic} ({len(records)})" for topic, records in result.actual.items()) or "no records"
    print(f"Test passed: every expected record written: {topics}")
    return 0
