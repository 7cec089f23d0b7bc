"""Typed values with a real schema registry: confluent-kafka's AvroSerializer
and JSONSerializer register their schemas in a running Apicurio Registry
(tests/schema_registry_server.py) and frame the values with its ids;
``kcodec.decode(schemas=URL)`` finds the ids there and decodes equal to
confluent-kafka's own deserializers reading through the same registry."""
import json
import uuid

import pytest

import kcodec
from kcodec.errors import UnknownSchemaError
from needs import require_module
from avro_values import assert_rows, normalize
from schema_registry_server import schema_registry  # noqa: F401  (fixture)
from test_values_avro import ORDER, ORDER_TYPE, ORDERS


@pytest.fixture(scope="module")
def confluent():
    require_module("confluent_kafka.schema_registry.avro")
    require_module("confluent_kafka.schema_registry.json_schema")
    from confluent_kafka import schema_registry as registry
    from confluent_kafka.schema_registry import avro, json_schema
    from confluent_kafka.serialization import MessageField, SerializationContext
    return registry, avro, json_schema, MessageField, SerializationContext


def _topic():
    return f"orders-{uuid.uuid4().hex[:8]}"


def test_avro_evolution_through_a_real_registry(schema_registry, confluent):
    registry, avro, _, field, context = confluent
    client = registry.SchemaRegistryClient({"url": schema_registry.url})
    topic = _topic()
    ctx = context(topic, field.VALUE)
    # Version 2 adds a field with a default: BACKWARD compatible, as registries ask.
    evolved = dict(ORDER, fields=ORDER["fields"] + [
        {"name": "channel", "type": "string", "default": "web"}])
    first = avro.AvroSerializer(client, json.dumps(ORDER))
    second = avro.AvroSerializer(client, json.dumps(evolved))
    values = [first(o, ctx) for o in ORDERS[:40]]
    values += [second(dict(o, channel=f"app-{i}"), ctx) for i, o in enumerate(ORDERS[40:])]
    ids = [int.from_bytes(v[1:5], "big") for v in values]
    assert ids[0] != ids[-1] and len(set(ids)) == 2

    data = kcodec.encode([kcodec.Record(value=v) for v in values], base_offset=100)
    table = kcodec.decode(data, value_format="avro", schemas=schema_registry.url)
    # The reader is the newest id's schema: the older records take the default.
    assert table.schema.field("value").type.field("channel").type == "string"
    assert table.column("valueSchemaId").to_pylist() == ids
    reader = avro.AvroDeserializer(client, json.dumps(evolved))
    expected = [normalize(evolved, reader(v, ctx)) for v in values]
    assert_rows(table.column("value").to_pylist(), expected)
    assert [r["channel"] for r in table.column("value").to_pylist()[:3]] == ["web"] * 3

    # The same through a SchemaRegistry object, and with the older schema as reader.
    older = kcodec.decode(data, value_format="avro", schemas=kcodec.SchemaRegistry(
        schema_registry.url), value_schema=ORDER)
    assert older.schema.field("value").type == ORDER_TYPE
    plain = avro.AvroDeserializer(client, json.dumps(ORDER))
    assert_rows(older.column("value").to_pylist(),
                [normalize(ORDER, plain(v, ctx)) for v in values])


def test_unknown_id_in_a_real_registry(schema_registry, confluent):
    missing = 987654
    value = b"\x00" + missing.to_bytes(4, "big") + b"\x02"
    data = kcodec.encode([kcodec.Record(value=value)], base_offset=7)
    with pytest.raises(UnknownSchemaError) as caught:
        kcodec.decode(data, value_format="avro", schemas=schema_registry.url)
    assert caught.value.offset == 7 and caught.value.schema_id == missing
    table = kcodec.decode(data, value_format="avro", schemas=schema_registry.url,
                          value_schema=ORDER, on_value_error="null")
    assert table.column("value").to_pylist() == [None]
    assert str(missing) in table.column("valueError")[0].as_py()


def test_json_through_a_real_registry(schema_registry, confluent):
    registry, _, json_schema, field, context = confluent
    client = registry.SchemaRegistryClient({"url": schema_registry.url})
    ctx = context(_topic(), field.VALUE)
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order",
        "type": "object", "properties": {
            "id": {"type": "integer"}, "customer": {"type": "string"},
            "amount": {"type": "number"}, "paid": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["null", "string"]}},
        "required": ["id", "customer"]}
    serializer = json_schema.JSONSerializer(json.dumps(schema), client)
    orders = [{"id": i, "customer": f"c{i}", "amount": i / 4, "paid": i % 2 == 0,
               "tags": ["x"] * (i % 3), "note": None if i % 2 else "hé"} for i in range(50)]
    values = [serializer(o, ctx) for o in orders]
    data = kcodec.encode([kcodec.Record(value=v) for v in values])
    table = kcodec.decode(data, value_format="json", schemas=schema_registry.url)
    deserializer = json_schema.JSONDeserializer(json.dumps(schema), schema_registry_client=client)
    assert table.column("value").to_pylist() == [deserializer(v, ctx) for v in values]
    assert len(set(table.column("valueSchemaId").to_pylist())) == 1
