"""The key-encoding classifier and the logical key behind each encoding, without a broker.

The encoded keys come from the real serializers where one runs here: Confluent's
own AvroSerializer, ProtobufSerializer and JSONSerializer (confluent-kafka, with
its in-memory Schema Registry client), Faust's JSON key codec, Python's struct
for the big-endian integers Java's IntegerSerializer/LongSerializer write.
"""
from __future__ import annotations

import struct

import pytest
from faust.serializers import codecs
from hypothesis import given, settings, strategies as st

from streamapp.copartition.key_encoding import (
    AVRO, INT32, INT64, JSON_NUMBER, JSON_SCHEMA, JSON_STRING, OPAQUE, PROTOBUF, UTF8, classify, normalized, read_as,
    readings,
)

from doctorkit import confluent_keys

USERS = [f"u{i}" for i in range(50)] + ["é-user", "用户-7", "a b"]


@pytest.mark.parametrize("kind, values, encoding", [
    ("avro-string", USERS, AVRO),
    ("avro-long", list(range(-5, 300, 7)), AVRO),
    ("protobuf", USERS, PROTOBUF),
    ("json-schema", USERS, JSON_SCHEMA),
])
def test_confluent_wire_format_keys_are_named_and_read_back(kind, values, encoding) -> None:
    keys = confluent_keys(kind, values)
    found = classify(keys)
    assert found is not None and found.encoding == encoding and found.share == 1.0
    assert found.schema_ids == (1,) and "schema id 1" in found.label
    assert normalized(keys, found) == [str(v) for v in values]


def test_faust_json_keys_are_json_strings_and_read_as_the_raw_string() -> None:
    keys = [codecs.dumps("json", v) for v in USERS]
    found = classify(keys)
    assert found.encoding == JSON_STRING and normalized(keys, found) == USERS


@pytest.mark.parametrize("pack, encoding", [(">i", INT32), (">q", INT64)])
def test_big_endian_integers(pack, encoding) -> None:
    values = [0, 1, 42, 255, 65_536, -1, -(2**31)] + list(range(1000, 1100))
    keys = [struct.pack(pack, v) for v in values]
    found = classify(keys)
    assert found.encoding == encoding
    assert normalized(keys, found) == [str(v) for v in values]


def test_text_of_eight_or_four_characters_stays_text() -> None:
    keys = [f"order-{i:02d}".encode() for i in range(40)] + [f"u{i:03d}".encode() for i in range(40)]
    assert classify(keys).encoding == UTF8


def test_json_numbers_and_utf8_digits_are_the_same_bytes_and_the_same_key() -> None:
    keys = [str(i).encode() for i in range(100)]
    found = classify(keys)
    assert found.encoding == JSON_NUMBER
    assert normalized(keys, found) == [str(i) for i in range(100)]
    assert read_as(b"42", UTF8) == read_as(b"42", JSON_NUMBER) == read_as(struct.pack(">i", 42), INT32) == "42"


def test_u1_raw_json_and_avro_are_one_logical_key() -> None:
    raw, quoted, avro = b"u1", codecs.dumps("json", "u1"), confluent_keys("avro-string", ["u1"])[0]
    assert read_as(raw, UTF8) == read_as(quoted, JSON_STRING) == read_as(avro, AVRO) == "u1"
    assert len({raw, quoted, avro}) == 3


def test_binary_keys_are_opaque_and_compare_by_their_bytes() -> None:
    keys = [bytes([0xFF, i, 0xFE, 0x80, 1]) for i in range(30)]
    found = classify(keys)
    assert found.encoding == OPAQUE and normalized(keys, found)[0] == "0xff00fe8001"


def test_a_mixed_topic_names_its_main_encoding_and_the_others() -> None:
    keys = [f'"u{i}"'.encode() for i in range(97)] + [b"\xff\xfe", b"\xff\xfd", b"\xff\xfc"]
    found = classify(keys)
    assert found.encoding == JSON_STRING and found.mixed and found.share == 0.97
    assert dict(found.others) == {OPAQUE: 3}
    assert classify([]) is None


def test_schema_id_zero_is_not_the_wire_format() -> None:
    """Schema Registry's ids start at 1: an 8-byte integer below 2**32 has a zero 'id' and is an integer."""
    keys = [struct.pack(">q", v) for v in range(1, 60)]
    assert all(r.encoding not in (AVRO, PROTOBUF, JSON_SCHEMA) for k in keys for r in readings(k))


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_every_key_reads_at_least_as_opaque_bytes(key: bytes) -> None:
    found = readings(key)
    assert found[-1].encoding == OPAQUE and found[-1].value == "0x" + key.hex()


@settings(max_examples=300)
@given(st.text(min_size=1, max_size=40).filter(str.isprintable))
def test_any_printable_string_reads_back_the_same_through_each_text_encoding(text: str) -> None:
    assert read_as(text.encode(), UTF8) == text
    assert read_as(codecs.dumps("json", text), JSON_STRING) == text
