"""The statements' grammar, the planner's refusals, the formats' bytes and the engine's null rules, without Kafka."""
from __future__ import annotations

import os
import struct
from decimal import Decimal
from pathlib import Path

import pytest

from streamapp.model.records import RecordError
from streamapp.sql import plan as p
from streamapp.sql import types
from streamapp.sql.engine import Query, Record
from streamapp.sql.formats import Codec
from streamapp.sql.planner import PlanError, plan_file, plan_text
from streamapp.sql.syntax import SqlError, parse, parse_type

SOURCES = """
CREATE STREAM payments (customer_id BIGINT KEY, amount DECIMAL(10, 2), currency VARCHAR, paid_at BIGINT)
  WITH (kafka_topic='payments', value_format='JSON', timestamp='paid_at');
CREATE TABLE customers (id BIGINT PRIMARY KEY, email STRING, tier STRING)
  WITH (kafka_topic='customers', value_format='JSON');
"""
JOIN = SOURCES + """
CREATE STREAM enriched AS SELECT p.customer_id, amount, currency, paid_at, email, tier
  FROM payments p {kind} JOIN customers c ON p.customer_id = c.id EMIT CHANGES;
"""


def one_line_error(text: str) -> str:
    with pytest.raises(PlanError) as raised:
        plan_text(text, "joins.sql")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("joins.sql: ")
    return message


# ---- the grammar --------------------------------------------------------------------------------------------------------

def test_names_are_upper_cased_unless_quoted_and_keywords_are_case_insensitive() -> None:
    [statement] = parse("create stream `Mixed` (`the key` string key, Amount int) with (kafka_topic='t', "
                        "value_format='json');")
    assert statement.name == "Mixed"
    assert [c.name for c in statement.columns] == ["the key", "AMOUNT"]
    assert dict(statement.properties) == {"KAFKA_TOPIC": "t", "VALUE_FORMAT": "json"}


@pytest.mark.parametrize("text, printed", [
    ("varchar", "STRING"), ("INTEGER", "INT"), ("decimal(4,2)", "DECIMAL(4, 2)"), ("ARRAY<int>", "ARRAY<INT>"),
    ("MAP<STRING, BIGINT>", "MAP<STRING, BIGINT>"), ("STRUCT<a INT, `b` STRING>", "STRUCT<`A` INT, `b` STRING>"),
])
def test_types_print_as_ksqldb_names_them(text: str, printed: str) -> None:
    assert str(parse_type(text)) == printed


def test_a_syntax_error_names_the_line_and_the_token() -> None:
    with pytest.raises(SqlError) as raised:
        parse("CREATE STREAM s (a INT) WITH (kafka_topic='s', value_format='JSON');\nCREATE STREAM x AS SELEC a FROM s;")
    assert str(raised.value).startswith("line 2, column 20: syntax error at 'SELEC'")


def test_a_bad_type_names_its_line() -> None:
    assert "line 2" in one_line_error("CREATE STREAM s (a INT KEY,\n b DECIMAL(50, 2)) WITH (kafka_topic='s', "
                                      "value_format='JSON');")


# ---- the planner ----------------------------------------------------------------------------------------------------

def test_a_team_join_plans_its_columns_types_and_event_time() -> None:
    plan = plan_text(JOIN.format(kind="LEFT"))
    [query] = plan.joins
    sink = plan.sink_of(query)
    assert [(c.name, c.type) for c in sink.key_columns] == [("CUSTOMER_ID", "BIGINT")]
    assert [(c.name, c.type) for c in sink.value_columns] == [
        ("AMOUNT", "DECIMAL(10, 2)"), ("CURRENCY", "STRING"), ("PAID_AT", "BIGINT"), ("EMAIL", "STRING"),
        ("TIER", "STRING")]
    assert (sink.topic, query.join_type, query.repartition) == ("ENRICHED", "LEFT", False)
    assert plan.source("PAYMENTS").timestamp == "PAID_AT"


@pytest.mark.parametrize("statement, message", [
    ("CREATE STREAM r (k BIGINT KEY, v INT) WITH (kafka_topic='r', value_format='JSON');\n"
     "CREATE STREAM o AS SELECT * FROM payments p JOIN r ON p.customer_id = r.k;",
     "Stream-Stream joins must have a WITHIN clause specified. None was provided."),
    ("CREATE TABLE o AS SELECT * FROM customers a JOIN customers b ON a.id = b.id;",
     "self joins are not yet supported"),
    ("CREATE STREAM o AS SELECT p.customer_id, tier FROM payments p JOIN customers c ON p.customer_id = c.id "
     "WHERE tier = 'gold';", "not supported by streamapp yet: WHERE in a persistent query"),
    ("CREATE STREAM o AS SELECT p.customer_id, UCASE(tier) FROM payments p JOIN customers c "
     "ON p.customer_id = c.id;", "not supported by streamapp yet: function UCASE"),
    ("INSERT INTO payments SELECT * FROM payments;", "not supported by streamapp yet: INSERT INTO PAYMENTS"),
    ("INSERT INTO payments (customer_id, amount) VALUES (1, 2.5);", "not supported by streamapp yet: INSERT statements"),
    ("INSERT INTO customers SELECT * FROM customers;",
     "INSERT INTO can only be used to insert into a stream. CUSTOMERS is a table."),
    ("INSERT INTO nowhere SELECT * FROM payments;", "Source `NOWHERE` does not exist."),
    ("INSERT INTO payments SELECT customer_id, amount, paid_at, currency FROM payments;",
     "Incompatible schema between results and sink. Result schema is `CUSTOMER_ID` BIGINT KEY, `AMOUNT` "
     "DECIMAL(10, 2), `PAID_AT` BIGINT, `CURRENCY` STRING Sink schema is `CUSTOMER_ID` BIGINT KEY, `AMOUNT` "
     "DECIMAL(10, 2), `CURRENCY` STRING, `PAID_AT` BIGINT"),
    ("INSERT INTO payments SELECT p.customer_id, amount, currency, paid_at FROM payments p JOIN customers c "
     "ON p.customer_id = c.id;", "not supported by streamapp yet: INSERT INTO PAYMENTS"),
    ("INSERT INTO payments SELECT p.customer_id, q.amount, p.currency FROM payments p JOIN payments q WITHIN 1 SECOND "
     "ON p.customer_id = q.customer_id;", "self joins are not yet supported"),
    ("CREATE STREAM q (k BIGINT KEY, n INT) WITH (kafka_topic='q', value_format='JSON');\n"
     "CREATE TABLE o AS SELECT p.customer_id, SUM(n) FROM payments p JOIN q WITHIN 1 MINUTE "
     "ON p.customer_id = q.k GROUP BY p.customer_id HAVING SUM(q.n);",
     "Type error in HAVING expression: Should evaluate to boolean but is SUM(Q_N) (INTEGER) instead."),
    ("CREATE STREAM q (k BIGINT KEY, n INT) WITH (kafka_topic='q', value_format='JSON');\n"
     "CREATE TABLE o AS SELECT p.customer_id, COUNT(*) FROM payments p JOIN q WITHIN 1 MINUTE "
     "ON p.customer_id = q.k GROUP BY p.customer_id HAVING COUNT(*) > 'x';",
     "Error in HAVING expression: Cannot compare COUNT(*) (BIGINT) to 'x' (STRING) with GREATER_THAN."),
    ("CREATE STREAM q (k BIGINT KEY, n INT) WITH (kafka_topic='q', value_format='JSON');\n"
     "CREATE TABLE o AS SELECT p.customer_id, SUM(n) FROM payments p JOIN q WITHIN 1 MINUTE "
     "ON p.customer_id = q.n GROUP BY p.customer_id HAVING SUM(q.n) > 1;",
     "Invalid join condition: types don't match."),
    ("CREATE STREAM q (k BIGINT KEY, n INT) WITH (kafka_topic='q', value_format='JSON');\n"
     "CREATE TABLE o AS SELECT p.customer_id, SUM(n) FROM payments p JOIN q WITHIN 1 MINUTE "
     "ON p.customer_id = q.k GROUP BY p.customer_id HAVING SUM(q.n) > 1;",
     "not supported by streamapp yet: GROUP BY / HAVING in a persistent query"),
    ("CREATE STREAM q (k BIGINT KEY, n INT, s STRING) WITH (kafka_topic='q', value_format='JSON');\n"
     "CREATE TABLE o AS SELECT p.customer_id, COUNT(*) FROM payments p JOIN q WITHIN 1 MINUTE "
     "ON p.customer_id = q.k GROUP BY p.customer_id HAVING UCASE(q.s) = 'X';",
     "not supported by streamapp yet: a function call in a HAVING (UCASE(Q.S))"),
    ("CREATE STREAM o AS SELECT amount FROM payments p JOIN customers c ON p.customer_id = c.id;",
     "Key missing from projection"),
    ("CREATE STREAM o AS SELECT p.customer_id, tier FROM payments p JOIN customers c ON p.currency = c.id;",
     "Invalid join condition: types don't match. Got P.CURRENCY{STRING} = C.ID{BIGINT}."),
    ("CREATE STREAM o AS SELECT p.customer_id, nope FROM payments p JOIN customers c ON p.customer_id = c.id;",
     "SELECT column 'NOPE' cannot be resolved."),
    ("CREATE STREAM o AS SELECT p.customer_id, tier FROM payments p JOIN customers c ON p.customer_id = 0;",
     "Invalid comparison expression '0' in join '(P.CUSTOMER_ID = 0)'. Each side of the join comparision must "
     "contain references from exactly one source."),
])
def test_what_cannot_run_is_refused_in_one_line(statement: str, message: str) -> None:
    error = one_line_error(SOURCES + statement)
    assert message in error and f"line {6 + statement.count(chr(10))}" in error


def test_a_registry_format_is_refused_only_when_a_query_reads_it() -> None:
    avro = "CREATE STREAM a (k BIGINT KEY, v INT) WITH (kafka_topic='a', format='AVRO');\n"
    assert "key format AVRO" in one_line_error(SOURCES + avro + "CREATE STREAM o AS SELECT a.k, tier FROM a "
                                                 "JOIN customers c ON a.k = c.id;")


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot be read"):
        plan_file("/nonexistent/joins.sql")
    marked = tmp_path / "marked.sql"  # a byte order mark, as some editors write: not part of the first statement
    marked.write_bytes(b"\xef\xbb\xbf" + JOIN.format(kind="LEFT").encode())
    assert [q.name for q in plan_file(marked).queries] == ["ENRICHED"]
    latin = tmp_path / "latin.sql"
    latin.write_bytes("-- café\n".encode("latin-1"))
    with pytest.raises(PlanError, match=r"latin.sql' cannot be read: 'utf-8' codec can't decode byte 0xe9"):
        plan_file(latin)


def test_the_seed_is_the_demos_five_statements() -> None:
    plan = plan_file(p.__file__.replace("plan.py", "seed.sql"))
    assert [s.name for s in plan.sources] == ["DEMO_USER", "DEMO_USER_REPARTITION", "DEMO_USER_ORDERS",
                                               "DEMO_USER_ORDERS_MERGED", "DEMO_USER_ORDERS_MERGED_REPARTITION"]
    assert [q.kind for q in plan.queries] == [p.SELECT, p.STREAM_TABLE_JOIN, p.STREAM_TABLE_JOIN]
    assert [c.name for c in plan.source("DEMO_USER_ORDERS_MERGED").value_columns] == [
        "NAME", "AGE", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS"]



def test_a_seed_output_topic_setting_names_the_whole_topic_whatever_the_output_prefix() -> None:
    """``merged_topic=foo`` with ``output_prefix=x_`` had been ignored: the worker wrote x_DEMO_USER_ORDERS_MERGED."""
    from streamapp.settings import Settings
    from streamapp.sql.topology import topology

    merged = "DEMO_USER_ORDERS_MERGED"
    assert topology(Settings()).topics[merged] == f"{Settings.output_prefix}{merged}"
    assert topology(Settings(output_prefix="x_")).topics[merged] == f"x_{merged}"
    renamed = topology(Settings(output_prefix="x_", merged_topic="foo"))
    assert renamed.topics[merged] == "foo" and renamed.topics[f"{merged}_REPARTITION"] == f"x_{merged}_REPARTITION"
    assert topology(Settings(merged_topic="foo")).topics[merged] == "foo"
    # with no prefix the worker replaces ksqlDB: it writes the topic ksqlDB's setting names
    assert topology(Settings(output_prefix="", ksqldb_merged_topic="k")).topics[merged] == "k"


def test_a_join_on_expressions_of_a_stream_without_a_key_column_is_keyed_by_what_on_joins() -> None:
    """The synthetic ROWKEY took the left stream's key type, and a stream without one was an IndexError traceback."""
    plan = plan_text("""
        CREATE STREAM L (A INT, B INT) WITH (kafka_topic='l', value_format='JSON');
        CREATE STREAM R (A INT KEY, B INT) WITH (kafka_topic='r', value_format='JSON');
        CREATE STREAM OUT AS SELECT ROWKEY AS K, L.B, R.B AS RB FROM L JOIN R WITHIN 10 SECONDS ON ABS(L.A) = ABS(R.A);
    """)
    assert plan.source("OUT").key_columns == (p.Column("K", "INT"),)

# ---- formats ----------------------------------------------------------------------------------------------------------

def source(key_type: str, key_format: str = "KAFKA", value_format: str = "JSON", wrap: bool | None = None,
           values: tuple[p.Column, ...] = (p.Column("V", "STRING"),)) -> p.Source:
    return p.Source("S", p.STREAM, "s", (p.Column("K", key_type),), values, key_format, value_format, wrap)


@pytest.mark.parametrize("key_type, value, data", [
    ("INT", -2, struct.pack(">i", -2)), ("BIGINT", 2**40, struct.pack(">q", 2**40)),
    ("DOUBLE", 1.5, struct.pack(">d", 1.5)), ("STRING", "ü1", "ü1".encode()),
])
def test_kafka_keys_are_ksqldbs_bytes(key_type: str, value: object, data: bytes) -> None:
    codec = Codec(source(key_type))
    assert codec.encode_key(value) == data and codec.decode_key(data) == value


def test_a_kafka_key_of_the_wrong_size_names_the_column() -> None:
    with pytest.raises(RecordError, match="4 bytes: a KAFKA-format BIGINT key K is 8"):
        Codec(source("BIGINT")).decode_key(b"\0\0\0\1")


def test_json_and_delimited_keys_and_values() -> None:
    assert Codec(source("BIGINT", "JSON")).decode_key(b"12") == 12
    delimited = Codec(source("INT", "DELIMITED", "DELIMITED", values=(p.Column("A", "INT"), p.Column("B", "STRING"))))
    assert delimited.decode_key(b"7") == 7
    assert delimited.decode_value(b'3,"x,y"') == {"A": 3, "B": "x,y"}
    assert delimited.decode_value(b",") == {"A": None, "B": None}
    assert delimited.encode_value({"A": 3, "B": "x,y"}) == b'3,"x,y"'


def test_a_json_key_of_several_columns_is_an_object_read_as_ksqldb_reads_a_struct_key() -> None:
    keyed = p.Source("S", p.STREAM, "s", (p.Column("K", "INT"), p.Column("K2", "STRING")), (p.Column("V", "INT"),),
                     "JSON", "JSON")
    codec = Codec(keyed)
    assert codec.decode_key(b'{"k":"1","K2":"a","X":0}') == {"K": 1, "K2": "a"}  # any case; coerced by type
    assert codec.decode_key(b'{"K2":"a"}') == {"K": None, "K2": "a"}
    assert codec.decode_key(None) == codec.decode_key(b"null") == {"K": None, "K2": None}
    assert codec.encode_key({"K": 1, "K2": None}) == b'{"K":1,"K2":null}'
    with pytest.raises(RecordError, match="is not a JSON object: a key of the columns K, K2 is one"):
        codec.decode_key(b"1")
    with pytest.raises(PlanError, match="S has 2 key columns"):  # KAFKA has no such key; JSON only where it runs
        plan_text("CREATE STREAM s (k INT KEY, k2 INT KEY, v INT) WITH (kafka_topic='s', format='JSON');\n"
                  "CREATE STREAM o AS SELECT k, v FROM s;")


def test_an_unwrapped_single_value_is_the_bare_json() -> None:
    codec = Codec(source("BIGINT", wrap=False))
    assert codec.decode_value(b'"a"') == {"V": "a"} and codec.encode_value({"V": "a"}) == b'"a"'


# ---- the engine's null rules ----------------------------------------------------------------------------------------

def engine(kind: str) -> tuple[p.Plan, Query]:
    plan = plan_text(JOIN.format(kind=kind))
    return plan, Query(plan, plan.joins[0])


def test_a_null_key_payment_is_emitted_by_left_and_dropped_by_inner() -> None:
    payment = Record("payments", None, b'{"AMOUNT": 1.5, "CURRENCY": "EUR", "PAID_AT": 7}', 99)
    [output] = engine("LEFT")[1].process(payment)
    assert output.record.key is None and output.matched is False and output.record.timestamp == 7
    assert engine("INNER")[1].process(payment) == []


def test_table_rows_update_and_delete_and_a_null_value_payment_is_dropped() -> None:
    _, query = engine("INNER")
    key = struct.pack(">q", 5)
    query.process(Record("customers", key, b'{"email": "a@x", "tier": "gold"}', 1))
    payment = Record("payments", key, b'{"amount": "2.345", "currency": "EUR", "paid_at": 9}', 2)
    [output] = query.process(payment)
    assert output.record.value == (b'{"AMOUNT":2.35,"CURRENCY":"EUR","PAID_AT":9,"EMAIL":"a@x","TIER":"gold"}')
    assert query.process(Record("payments", key, None, 3)) == []
    query.process(Record("customers", key, None, 4))
    assert query.process(payment) == []


def test_unreadable_records_raise_record_errors_naming_the_field() -> None:
    _, query = engine("LEFT")
    with pytest.raises(RecordError, match="key is null"):
        query.process(Record("customers", None, b'{"email": "a"}', 1))
    with pytest.raises(RecordError, match="'PAID_AT' is missing or null"):
        query.process(Record("payments", struct.pack(">q", 1), b'{"amount": 1}', 1))
    with pytest.raises(RecordError, match="AMOUNT"):
        query.process(Record("payments", struct.pack(">q", 1), b'{"amount": "x", "paid_at": 1}', 1))


def test_a_tombstone_of_a_table_with_a_timestamp_column_is_dropped_as_kafka_streams_drops_it() -> None:
    plan = plan_text(SOURCES.replace("WITH (kafka_topic='customers', value_format='JSON')",
                                     "WITH (kafka_topic='customers', value_format='JSON', timestamp='since')")
                     .replace("tier STRING)", "tier STRING, since BIGINT)") + JOIN.split(";", 2)[2].format(kind="INNER"))
    query = Query(plan, plan.joins[0])
    key = struct.pack(">q", 5)
    query.process(Record("customers", key, b'{"email": "a@x", "tier": "gold", "since": 3}', 1))
    with pytest.raises(RecordError, match="timestamp extractor has no column to read"):
        query.process(Record("customers", key, None, 4))
    assert len(query.process(Record("payments", key, b'{"amount": 1, "paid_at": 9}', 9))) == 1


def test_the_worker_rekeys_a_stream_joined_on_a_value_column_through_an_app_scoped_topic() -> None:
    from pathlib import Path

    from streamapp.settings import Settings
    from streamapp.sql.topology import JOIN_KEY, ROWTIME, topology

    cases = Path(__file__).parent / "qtt"
    joins = topology(Settings(app_id="app", statements=str(cases / "joins-097-on_non_string_value_column" /
                                                           "statements.sql")))
    [join] = joins.joins
    assert (join.stream, join.rekeyed_from, joins.rekeyed_topics) == (
        "app-OUTPUT-Join-repartition", "stream_topic", ("stream_topic",))
    assert join.rekeyed is not None and [c.name for c in join.rekeyed.key_columns] == [JOIN_KEY]
    assert [c.name for c in join.rekeyed.value_columns] == ["SF", "K", ROWTIME]  # the stream's key in the value
    assert "app-OUTPUT-Join-repartition" in joins.owned_topics()


def test_the_worker_rekeys_a_table_joined_key_to_key_in_another_key_format_through_an_app_scoped_copy() -> None:
    """ksqlDB's #125: T's KAFKA keys are re-written in S's DELIMITED format (its RightSourceKeyed topic) and joined
    there; the declared plan, which ksqlDB and Kafka Streams run, is left as written."""
    from pathlib import Path

    from streamapp.settings import Settings
    from streamapp.sql import plan as p
    from streamapp.sql.topology import topology

    statements = Path(__file__).parent / "qtt" / "joins-125-stream_table_key_to_key_key_format_mismatch" / "statements.sql"
    joins = topology(Settings(app_id="app", statements=str(statements)))
    topic = "app-OUTPUT-RightSourceKeyed-SelectKey-repartition"
    [copy], [join] = joins.copies, joins.joins
    assert (copy.source_topic, copy.output, join.stream, join.table_topic) == ("t", topic, "s", topic)
    rekeyed = joins.plan.source(join.query.right or "")
    assert (rekeyed.key_format, [c.name for c in rekeyed.columns]) == ("DELIMITED", ["ID", "VAL"])
    assert [(x.name, x.key, x.expression) for x in copy.query.projection] == [
        ("ID", True, p.ColumnOf(p.LEFT_SIDE, "ID")), ("VAL", False, p.ColumnOf(p.LEFT_SIDE, "VAL"))]
    assert not join.query.repartition_right and topic in joins.owned_topics()
    assert [q.name for q in joins.declared.queries] == ["OUTPUT"] and joins.declared.joins[0].repartition_right
    assert joins.table_topics == (topic, "t") and "t" not in {t.topic for t in joins.tables}


@pytest.mark.parametrize("command", ["ksql-equivalent", "guard", "doctor"])
def test_every_command_that_takes_statements_refuses_a_bad_file_in_one_line(
        command: str, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamapp.cli import main

    bad = tmp_path / "joins.sql"
    bad.write_text(SOURCES + "CREATE STREAM o AS SELECT * FROM customers c FULL OUTER JOIN payments p "
                             "ON c.id = p.customer_id;", encoding="utf-8")
    assert main([command, "--statements", str(bad), "--bootstrap-servers", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: line 6" in err and "table-stream joins are not supported" in err


def test_the_parser_tables_are_cached_per_user_and_a_stale_cache_is_rebuilt(tmp_path) -> None:
    """Building lark's LALR tables costs about a second per process; a cached copy is loaded instead, from the
    user's own cache directory, and one that does not match the grammar (another version, a torn write) is
    rebuilt, never trusted."""
    import subprocess
    import sys

    cache_dir = tmp_path / "streamapp"
    cache_dir.mkdir(mode=0o700)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    probe = ("from streamapp.sql import syntax; from streamapp.sql.topology import seed_text; "
             "print(syntax._cache_file()); print(len(syntax.parse(seed_text())))")
    stale = None
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        path, statements = out.stdout.split()
        assert Path(path).parent == cache_dir and statements == "5", out
        if stale is None:
            stale = Path(path)
            stale.write_bytes(b"0" * 64 + b"\nnot a pickle")  # a cache of another grammar
    assert stale is not None and stale.read_bytes()[:64] != b"0" * 64  # rebuilt with the grammar's own hash


def test_the_type_rules_follow_ksqldbs() -> None:
    """Widening (INT to BIGINT to DECIMAL to DOUBLE, never back), a literal's type, and which comparisons ksqlDB
    takes; the QTT cases check the messages they lead to."""
    assert [types.widens(a, b) for a, b in (("INT", "BIGINT"), ("BIGINT", "DECIMAL(10, 2)"), ("DECIMAL(4, 1)", "DOUBLE"),
                                            ("DOUBLE", "INT"), ("STRING", "STRING"), ("INT", "STRING"))] == [
        True, True, True, False, True, False]
    assert [types.literal_type(v) for v in (None, True, 2**31 - 1, 2**31, Decimal("1.50"), Decimal("0.05"), 1.5,
                                            "a")] == [
        None, "BOOLEAN", "INT", "BIGINT", "DECIMAL(3, 2)", "DECIMAL(2, 2)", "DOUBLE", "STRING"]
    assert types.wider("INT", "BIGINT") == "BIGINT" and types.wider("BIGINT", "DOUBLE") == "DOUBLE"
    assert types.comparable("INT", "<", "DECIMAL(4, 2)") and types.comparable("STRING", "<", "STRING")
    assert types.comparable("BOOLEAN", "=", "BOOLEAN") and not types.comparable("BOOLEAN", "<", "BOOLEAN")
    assert not types.comparable("STRING", "=", "INT") and types.comparable(None, "=", "INT")
    assert types.message_name("MAP<STRING, INT>") == "MAP<STRING, INTEGER>" and types.message_name("BIGINT") == "BIGINT"
