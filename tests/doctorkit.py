"""Keys as the real serializers write them, for the doctor's tests: Confluent's own Schema Registry serializers.

confluent-kafka's AvroSerializer, ProtobufSerializer and JSONSerializer, with its
in-memory Schema Registry client (the first schema registered gets id 1), write
the Confluent wire format: magic byte 0, the 4-byte schema id, the payload.
"""
from __future__ import annotations

import warnings

import authlib.deprecate  # noqa: F401  sets its warning to 'always' on import: the filter below must come after it

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import wrappers_pb2


def confluent_keys(kind: str, values: list, topic: str = "doctor") -> list[bytes]:
    """``values`` serialized as keys by Confluent's serializer ``kind``: avro-string, avro-long, protobuf, json-schema."""
    registry = MockSchemaRegistryClient({"url": "mock://doctor"})
    ctx = SerializationContext(f"{topic}-{kind}", MessageField.KEY)
    if kind == "protobuf":
        proto = ProtobufSerializer(wrappers_pb2.StringValue, registry, {"use.deprecated.format": False})
        return [proto(wrappers_pb2.StringValue(value=v), ctx) for v in values]
    serialize = {
        "avro-string": lambda: AvroSerializer(registry, '"string"'),
        "avro-long": lambda: AvroSerializer(registry, '"long"'),
        "json-schema": lambda: JSONSerializer('{"type": "string"}', registry),
    }[kind]()
    return [serialize(v, ctx) for v in values]
