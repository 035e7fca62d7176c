"""The worker's decoders against the Kafka Streams program's own JSON reader (ValueFormat; this file kept its name, which
tests/test_reconcile_inputs.py imports its values from), value for value.

The program (``jvm/ksql-equivalent``, PlanStreams) reads a source's values with ``ValueFormat``,
written after ksqlDB's ``KsqlJsonDeserializer``.  ``tests/java/ValueFormatOracle.java`` runs that
very class, for the seed plan's users table and orders stream, on thousands of generated values
in one JVM; each value must decode in the worker (the plan's :class:`~streamapp.sql.formats.Codec`)
to the same row, or be refused where the program skips it.  Where the worker is stricter on
purpose, the test says so: a string with a lone surrogate (ksqlDB reads it but cannot write it as
UTF-8) is a dead letter.  (An order whose ``ts`` is missing or negative has no event time: both
engines drop it at the join, which tests/test_engines_agree.py checks on the broker.)
"""
from __future__ import annotations

import base64
import json
import math
import random
import subprocess
from typing import Any

import pytest

from streamapp.kafka.jvm import classpath
from streamapp.model.records import RecordError, has_lone_surrogate
from streamapp.settings import Settings
from streamapp.sql.formats import Codec
from streamapp.sql.topology import topology

from javatools import JAVA_SOURCES

NODES = [
    "1", "-0", "0", "30", "27.9", "-27.9", "1.50", "1e5", "2.5E-3", "-0.0", "0.0000001", "1e400", "-1e400",
    "9223372036854775807", "9223372036854775808", "18446744073709551621", "-9223372036854775809", "1e19",
    "123456789012345678901234567890.5", "1677844043886", "1.6778440438869e12",
    "true", "false", "null",
    '"41"', '" 5"', '"+5"', '"-0"', '"1.5"', '"12.5"', '" 12.5\\n"', '"NaN"', '"-Infinity"', '"Infinity"',
    '"Infinityf"', '"0x1.8p1"', '"0x1p99999"', '"1e5f"', '"2D"', '".5"', '"5."', '"abc"', '""', '"\\u0663"',
    '"9223372036854775808"', '"1_0"', '"1677844043886"', '"store"', '"Zoë 😀"', '"\\ud83d\\ude00"',
    '"\\ud800"', '"a\\u001fb\\"c"',
    "[]", "{}", '[1, "a", null, [true, "b"]]', '{"k": [1.0, {"z": null}], "j": "\\u001f/"}', '[1e2, -0.0, "x"]',
    '{"a": 1, "a": 2}', '["\\ud800"]',
]
USER_NAMES = ["name", "NAME", "Name", "nAmE", "age", "AGE", "Age", "extra", "user_id"]
ORDER_NAMES = ["ts", "TS", "Ts", "product_id", "PRODUCT_ID", "qty", "QTY", "unit_price", "UNIT_PRICE", "Unit_Price",
               "channel", "CHANNEL", "Channel", "extra"]
RAW = [None, b"null", b" null ", b"[]", b'"x"', b"12", b"true", b"", b"   ", b"not json", b"{", b'{"a": NaN}',
       b'{"a": Infinity}', b'{"name": "x", "age": 1} trailing', b'{"name": "x"}{"age": 1}',
       b"\xef\xbb\xbf" + b'{"name": "x", "age": 1}', '{"name": "Zoë", "age": 3}'.encode("utf-16-le"),
       '{"name": "Zoë", "age": 3}'.encode("utf-16"), '{"name": "Zoë", "age": 3}'.encode("utf-32"),
       b'{"name": "\xff", "age": 1}', b'{"name": "\xed\xa0\x80", "age": 1}', b"{'name': 'x'}",
       b'{"name": "x", "age": 01}', b'{"name": "x", "age": 1,}', b'{"name": "x", "age": +1}',
       b'{"name": "x", "age": .5}', b'{"name": "tab\there", "age": 1}',
       b'{"age": ' + b"1" * 1001 + b"}", b'{"age": ' + b"1" * 999 + b"}", b'{"age": 1.' + b"5" * 1001 + b"}",
       b'{"age": "' + b"9" * 5000 + b'"}', b'{"age": "-' + b"0" * 40 + b'9223372036854775808"}',
       b'{"age": "' + b"0" * 5000 + b'7"}']


def documents(names: list[str], rng: random.Random, count: int) -> list[bytes | None]:
    made: list[bytes | None] = list(RAW)
    for _ in range(count):
        fields = [f'"{rng.choice(names)}": {rng.choice(NODES)}' for _ in range(rng.randint(0, 6))]
        made.append(("{" + ", ".join(fields) + "}").encode("utf-8", "surrogatepass"))
    return made


PLAN = topology(Settings()).declared
USERS, ORDERS = (Codec(PLAN.source(name)) for name in ("DEMO_USER", "DEMO_USER_ORDERS"))


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("oracle")
    plan = out / "plan.json"
    plan.write_text(PLAN.to_json(), encoding="utf-8")
    cp = classpath("ksql-equivalent")
    subprocess.run(["javac", "-d", str(out), "-cp", cp, str(JAVA_SOURCES / "ValueFormatOracle.java")],
                   check=True, capture_output=True, text=True)

    def run(source: str, values: list[bytes | None]) -> list[dict[str, Any]]:
        lines = "".join(f"{source} {'-' if v is None else base64.b64encode(v).decode()}\n" for v in values)
        done = subprocess.run(["java", "-cp", f"{out}:{cp}", "io.streamapp.ksql.ValueFormatOracle", str(plan)],
                              input=lines, capture_output=True, text=True, check=True, timeout=300)
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(answers) == len(values), done.stderr[-2000:]
        return answers
    return run


def java_double(text: str | None) -> float | None:
    return None if text is None else float(text.replace("Infinity", "inf"))


def same_double(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def outcome(codec: Codec, value: bytes | None) -> Any:
    try:
        return codec.decode_value(value)
    except RecordError as error:
        return error


def test_users_decode_as_the_program_reads_them(oracle) -> None:
    values = documents(USER_NAMES, random.Random(16), 3000)
    differences = []
    for value, answer in zip(values, oracle("DEMO_USER", values)):
        got = outcome(USERS, value)
        if "skip" in answer:
            ok = isinstance(got, RecordError)
        elif "tombstone" in answer:
            ok = got is None
        else:
            name, age = answer["row"]
            if name is not None and has_lone_surrogate(name):
                ok = isinstance(got, RecordError) and "lone surrogate" in got.reason  # the worker's own refusal
            else:
                ok = got == {"NAME": name, "AGE": age}
        if not ok:
            differences.append((value, answer, got))
    assert not differences, f"{len(differences)} differences, e.g. {differences[:5]}"


def test_orders_decode_as_the_program_reads_them(oracle) -> None:
    values = documents(ORDER_NAMES, random.Random(15), 4000)
    differences, rows = [], 0
    for value, answer in zip(values, oracle("DEMO_USER_ORDERS", values)):
        got = outcome(ORDERS, value)
        if "skip" in answer:
            ok = isinstance(got, RecordError)
        elif "tombstone" in answer:
            ok = got is None  # a null order: neither engine joins it
        else:
            ts, product_id, qty, price, channel = answer["row"]
            if channel is not None and has_lone_surrogate(channel):
                ok = isinstance(got, RecordError) and "lone surrogate" in got.reason
            else:
                ok = (isinstance(got, dict) and (got["TS"], got["PRODUCT_ID"], got["QTY"], got["CHANNEL"])
                      == (ts, product_id, qty, channel) and same_double(got["UNIT_PRICE"], java_double(price)))
                rows += ok and ts is not None and ts >= 0
        if not ok:
            differences.append((value, answer, got))
    assert not differences, f"{len(differences)} differences, e.g. {differences[:5]}"
    assert rows > 300  # the generated values reach the join often enough to mean something
