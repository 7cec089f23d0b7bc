"""Avro values to typed columns (kcodec/values/avro.py, kcodec/_core/avro.pyx):
datums written by fastavro, the Apache ``avro`` package and confluent-kafka's
AvroSerializer decoded equal to those libraries' own readers, record for
record (after normalizing the peer's value into Spark's shapes, see
avro_values.normalize); the Arrow types Spark's ``from_avro`` gives
(SchemaConverters); ``kcodec.decode()`` end to end over record sets; and
hypothesis-generated schemas and data over every type, nesting and union
shape."""
import datetime
import decimal
import json
import math
import random
import struct
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcodec
from avro_values import (
    EPOCH, UTC, MappingSource, assert_rows, frame, install_schema_source, normalize, read_apache,
    read_fastavro, validate, write_apache, write_fastavro,
)
from kcodec.errors import SchemaError, ValueDecodeError
from kcodec.values.avro import arrow_type, decode_avro
from needs import require_module


def kschema(schema):
    """A schema for kcodec: a Python str is schema JSON *text* there, so a
    bare primitive name is given as its JSON ('"int"')."""
    return json.dumps(schema) if isinstance(schema, str) else schema


def decode_unframed(datums, schema, **options):
    decoded = decode_avro(pa.array(datums, pa.binary()), framed=False,
                          reader_schema=kschema(schema), **options)
    validate(decoded.values)
    return decoded


# ------------------------------------------------------------------ a realistic record

DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
ORDER = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["NEW", "PAID", "SHIPPED", "CANCELLED"]}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "street", "type": "string"},
            {"name": "city", "type": "string"},
            {"name": "zip", "type": ["null", "string"]}]}},
        {"name": "items", "type": {"type": "array", "items": {
            "type": "record", "name": "Item", "fields": [
                {"name": "sku", "type": "string"},
                {"name": "price", "type": DECIMAL},
                {"name": "count", "type": "int"}]}}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "discount", "type": ["null", "float"]},
        {"name": "ref", "type": ["null", "long", "string"]},
        {"name": "shipped", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "payload", "type": ["null", "bytes"]},
    ]}

ORDER_TYPE = pa.struct([
    pa.field("id", pa.int64(), False),
    pa.field("customer", pa.string(), False),
    pa.field("email", pa.string(), True),
    pa.field("amount", pa.float64(), False),
    pa.field("quantity", pa.int32(), False),
    pa.field("status", pa.string(), False),
    pa.field("created", pa.timestamp("ms", tz="UTC"), False),
    pa.field("address", pa.struct([
        pa.field("street", pa.string(), False), pa.field("city", pa.string(), False),
        pa.field("zip", pa.string(), True)]), False),
    pa.field("items", pa.list_(pa.field("element", pa.struct([
        pa.field("sku", pa.string(), False), pa.field("price", pa.decimal128(12, 2), False),
        pa.field("count", pa.int32(), False)]), False)), False),
    pa.field("tags", pa.map_(pa.string(), pa.field("value", pa.string(), False)), False),
    pa.field("discount", pa.float32(), True),
    pa.field("ref", pa.struct([pa.field("member0", pa.int64()),
                               pa.field("member1", pa.string())]), True),
    pa.field("shipped", pa.date32(), True),
    pa.field("payload", pa.binary(), True),
])


def order(i, rng):
    """A realistic order: unicode, empty and long strings, nulls, large longs."""
    names = ["Ada", "Grace", "Zoë", "李雷", "", "O'Brien \U0001F600", "x" * 300]
    return {
        "id": rng.choice([i, -i, 2**62 + i, -2**63 + i]),
        "customer": rng.choice(names),
        "email": None if i % 3 == 0 else f"user{i}@example.com",
        "amount": rng.choice([0.0, -1.5, 1e300, rng.random() * 1000]),
        "quantity": rng.choice([0, 1, -2**31, 2**31 - 1]),
        "status": ["NEW", "PAID", "SHIPPED", "CANCELLED"][i % 4],
        "created": datetime.datetime(2020, 1, 1, tzinfo=UTC)
        + datetime.timedelta(milliseconds=rng.randrange(10**11)),
        "address": {"street": f"{i} Main St", "city": rng.choice(names),
                    "zip": None if i % 2 else f"{i:05d}"},
        "items": [{"sku": f"sku-{i}-{j}",
                   "price": decimal.Decimal(rng.randrange(-10**11, 10**11)).scaleb(-2),
                   "count": j} for j in range(i % 5)],
        "tags": {f"k{j}": "v" * j for j in range(i % 4)},
        "discount": None if i % 2 else struct.unpack("<f", struct.pack("<f", i / 7))[0],
        "ref": [None, i * 1000, f"ref-{i}"][i % 3],
        "shipped": None if i % 5 == 0 else datetime.date(2000, 1, 1) + datetime.timedelta(days=i),
        "payload": None if i % 4 == 0 else bytes(range(i % 256)),
    }


ORDERS = [order(i, random.Random(i)) for i in range(80)]


def test_order_type_is_sparks():
    assert arrow_type(ORDER) == ORDER_TYPE
    assert arrow_type(json.dumps(ORDER)) == ORDER_TYPE


def test_fastavro_written_orders_decode_as_fastavro_reads_them():
    datums = [write_fastavro(ORDER, o) for o in ORDERS]
    decoded = decode_unframed(datums, ORDER)
    assert decoded.values.type == ORDER_TYPE
    assert decoded.errors is None
    assert decoded.schema_ids.null_count == len(datums)
    peers = [normalize(ORDER, read_fastavro(ORDER, d)) for d in datums]
    assert_rows(decoded.values.to_pylist(), peers)
    # and the value fastavro was given, normalized, is what both say
    assert_rows(peers, [normalize(ORDER, o) for o in ORDERS])


def test_apache_avro_written_orders_decode_as_apache_avro_reads_them():
    datums = [write_apache(ORDER, o) for o in ORDERS]
    decoded = decode_unframed(datums, ORDER)
    peers = [normalize(ORDER, read_apache(ORDER, d)) for d in datums]
    assert_rows(decoded.values.to_pylist(), peers)
    # both peers write the same bytes for these values
    assert datums == [write_fastavro(ORDER, o) for o in ORDERS]


@pytest.fixture(scope="module")
def confluent():
    avro_serde = require_module("confluent_kafka.schema_registry.avro")
    mock = require_module("confluent_kafka.schema_registry._sync.mock_schema_registry_client")
    serialization = require_module("confluent_kafka.serialization")
    # The in-process mock registry only produces the frames and the ids here;
    # a test against a real registry server is separate.
    client = mock.MockSchemaRegistryClient({"url": "mock://kcodec-avro"})
    return avro_serde, client, serialization


def _ctx(serialization, topic, key=False):
    field = serialization.MessageField.KEY if key else serialization.MessageField.VALUE
    return serialization.SerializationContext(topic, field)


def test_confluent_serializer_values_decode_as_its_deserializer(confluent, monkeypatch):
    install_schema_source(monkeypatch)
    avro_serde, client, serialization = confluent
    ctx = _ctx(serialization, "orders")
    serializer = avro_serde.AvroSerializer(client, json.dumps(ORDER))
    values = [serializer(o, ctx) for o in ORDERS]
    schema_id = client.get_latest_version("orders-value").schema_id
    assert all(v[:5] == frame(schema_id, b"") for v in values)
    registered = client.get_schema(schema_id).schema_str
    records = [kcodec.Record(key=str(i).encode(), value=v) for i, v in enumerate(values)]
    records.append(kcodec.Record(key=b"tombstone", value=None))
    table = kcodec.decode(kcodec.encode(records, base_offset=500), value_format="avro",
                          schemas={schema_id: registered})
    assert table.schema.names[:3] == ["key", "value", "valueSchemaId"]
    assert table.schema.field("value").type == ORDER_TYPE
    assert table.column("valueSchemaId").type == pa.int32()
    assert table.column("valueSchemaId").to_pylist() == [schema_id] * len(values) + [None]
    assert "valueError" not in table.schema.names
    deserializer = avro_serde.AvroDeserializer(client)
    peers = [deserializer(v, ctx) for v in values]
    expected = [normalize(ORDER, p) for p in peers] + [None]
    assert_rows(table.column("value").to_pylist(), expected)
    assert table.column("key").to_pylist()[:2] == [b"0", b"1"]


# ------------------------------------------------------------------ Spark's types

def rec(*fields, name="R"):
    return {"type": "record", "name": name, "fields": [
        {"name": n, "type": t} for n, t in fields]}


SPARK_TYPES = [
    ("null", pa.null()),
    ("boolean", pa.bool_()),
    ("int", pa.int32()),
    ("long", pa.int64()),
    ("float", pa.float32()),
    ("double", pa.float64()),
    ("bytes", pa.binary()),
    ("string", pa.string()),
    ({"type": "string"}, pa.string()),
    ({"type": "int", "logicalType": "date"}, pa.date32()),
    # Spark has no time type: time-millis stays IntegerType, time-micros LongType
    ({"type": "int", "logicalType": "time-millis"}, pa.int32()),
    ({"type": "long", "logicalType": "time-micros"}, pa.int64()),
    ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC")),
    ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("ms")),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
    ({"type": "string", "logicalType": "uuid"}, pa.string()),
    ({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3},
     pa.decimal128(10, 3)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0},
     pa.decimal128(38, 0)),
    ({"type": "fixed", "name": "D", "size": 9, "logicalType": "decimal", "precision": 20,
      "scale": 4}, pa.decimal128(20, 4)),
    # a logical type that does not fit its base type is ignored (the spec)
    ({"type": "string", "logicalType": "date"}, pa.string()),
    ({"type": "int", "logicalType": "timestamp-millis"}, pa.int32()),
    ({"type": "bytes", "logicalType": "decimal"}, pa.binary()),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, pa.string()),
    ({"type": "fixed", "name": "F", "size": 4}, pa.binary()),
    ({"type": "array", "items": "long"}, pa.list_(pa.field("element", pa.int64(), False))),
    ({"type": "array", "items": ["null", "long"]},
     pa.list_(pa.field("element", pa.int64(), True))),
    ({"type": "map", "values": "string"},
     pa.map_(pa.string(), pa.field("value", pa.string(), False))),
    ({"type": "map", "values": ["null", "double"]},
     pa.map_(pa.string(), pa.field("value", pa.float64(), True))),
    (["int", "long"], pa.int64()),
    (["long", "int"], pa.int64()),
    (["float", "double"], pa.float64()),
    (["null", "int", "long"], pa.int64()),
    (["double", "null", "float"], pa.float64()),
    (["null", "string"], pa.string()),
    (["string", "null"], pa.string()),
    (["int", "string"], pa.struct([pa.field("member0", pa.int32()),
                                   pa.field("member1", pa.string())])),
    (["null", "int", "string"], pa.struct([pa.field("member0", pa.int32()),
                                           pa.field("member1", pa.string())])),
    (["long", "double"], pa.struct([pa.field("member0", pa.int64()),
                                    pa.field("member1", pa.float64())])),
    (["int", "long", "string"], pa.struct([pa.field("member0", pa.int32()),
                                           pa.field("member1", pa.int64()),
                                           pa.field("member2", pa.string())])),
    (["null", {"type": "enum", "name": "E", "symbols": ["A"]}, "bytes"],
     pa.struct([pa.field("member0", pa.string()), pa.field("member1", pa.binary())])),
    (rec(("a", "int"), ("b", ["null", "string"]), ("c", rec(("x", "double"), name="C"))),
     pa.struct([pa.field("a", pa.int32(), False), pa.field("b", pa.string(), True),
                pa.field("c", pa.struct([pa.field("x", pa.float64(), False)]), False)])),
    (rec(("u", ["int", "string"])),
     pa.struct([pa.field("u", pa.struct([pa.field("member0", pa.int32()),
                                         pa.field("member1", pa.string())]), False)])),
    (rec(), pa.struct([])),
]


@pytest.mark.parametrize("schema, kind", SPARK_TYPES, ids=lambda x: json.dumps(x)[:60]
                         if not isinstance(x, pa.DataType) else str(x))
def test_arrow_types_are_spark_from_avros(schema, kind):
    assert arrow_type(kschema(schema)) == kind
    # the column decoded has it too
    decoded = decode_avro(pa.array([], pa.binary()), framed=False, reader_schema=kschema(schema))
    assert decoded.values.type == kind


def test_named_type_reused_types_alike():
    schema = rec(("a", {"type": "fixed", "name": "F", "size": 2}), ("b", "F"),
                 ("c", {"type": "array", "items": "F"}))
    assert arrow_type(schema) == pa.struct([
        pa.field("a", pa.binary(), False), pa.field("b", pa.binary(), False),
        pa.field("c", pa.list_(pa.field("element", pa.binary(), False)), False)])


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]},
    {"type": "record", "name": "A", "fields": [
        {"name": "b", "type": {"type": "record", "name": "B", "fields": [
            {"name": "a", "type": {"type": "array", "items": "A"}}]}}]},
    {"type": "record", "name": "T", "namespace": "n", "fields": [
        {"name": "m", "type": {"type": "map", "values": "n.T"}}]},
])
def test_recursive_records_are_schema_errors(schema):
    with pytest.raises(SchemaError, match="recursive"):
        arrow_type(schema)
    with pytest.raises(SchemaError):
        decode_avro(pa.array([b""], pa.binary()), framed=False, reader_schema=schema)


@pytest.mark.parametrize("schema", [
    "nope", '{"type": "no-such-type"}', {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "a", "type": "int"}]},
    {"type": "enum", "name": "E", "symbols": ["A", "A"]},
    {"type": "fixed", "name": "F"},
    ["int", "int"],
    ["null", ["int"]],
    {"type": "record", "fields": []},
    {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0},
    "{not json",
])
def test_invalid_schemas_are_schema_errors(schema):
    with pytest.raises(SchemaError):
        arrow_type(schema)


# ------------------------------------------------------------------ one schema per type

NOW_MS = 1_700_000_000_123
PER_TYPE = [
    # (schema, values given to the writers; Apache avro's are separate where it
    # cannot take fastavro's)
    ("null", [None]),
    ("boolean", [True, False]),
    ("int", [0, 1, -1, 2**31 - 1, -2**31, 63, 64, -65]),
    ("long", [0, -1, 2**63 - 1, -2**63, 2**31, 1 << 56]),
    ("float", [0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), 3.4028234663852886e38,
               1.401298464324817e-45]),
    ("double", [0.0, -0.0, 1e308, 5e-324, float("nan"), float("-inf")]),
    ("bytes", [b"", b"\x00", bytes(range(256)), b"\xff" * 1000]),
    ("string", ["", "a", "Zoë", "\U0001F600" * 50, "\x00", "\u0800\uffff"]),
    ({"type": "int", "logicalType": "date"},
     [datetime.date(1970, 1, 1), datetime.date(1, 1, 1), datetime.date(9999, 12, 31),
      datetime.date(1969, 12, 31)]),
    ({"type": "int", "logicalType": "time-millis"},
     [datetime.time(0, 0), datetime.time(23, 59, 59, 999000), datetime.time(12, 0, 0, 1000)]),
    ({"type": "long", "logicalType": "time-micros"},
     [datetime.time(0, 0), datetime.time(23, 59, 59, 999999)]),
    ({"type": "long", "logicalType": "timestamp-millis"},
     [datetime.datetime(1970, 1, 1, tzinfo=UTC), datetime.datetime(1969, 12, 31, 23, 59, 59,
                                                                   999000, tzinfo=UTC),
      datetime.datetime.fromtimestamp(NOW_MS / 1000, UTC)
      .replace(microsecond=123000), datetime.datetime(9999, 1, 1, tzinfo=UTC),
      datetime.datetime(1, 1, 2, tzinfo=UTC)]),
    ({"type": "long", "logicalType": "timestamp-micros"},
     [datetime.datetime(2024, 2, 29, 1, 2, 3, 456789, tzinfo=UTC),
      datetime.datetime(1900, 1, 1, tzinfo=UTC)]),
    ({"type": "long", "logicalType": "local-timestamp-millis"},
     [datetime.datetime(2024, 2, 29, 1, 2, 3, 456000), datetime.datetime(1960, 1, 1)]),
    ({"type": "long", "logicalType": "local-timestamp-micros"},
     [datetime.datetime(2024, 2, 29, 1, 2, 3, 456789)]),
    ({"type": "string", "logicalType": "uuid"},
     [uuid.UUID(int=0), uuid.UUID("12345678-1234-5678-1234-567812345678")]),
    ({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
     [decimal.Decimal("0.00"), decimal.Decimal("-0.01"), decimal.Decimal("9999999999.99"),
      decimal.Decimal("-9999999999.99"), decimal.Decimal("1.28"), decimal.Decimal("-1.28")]),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10},
     [decimal.Decimal("9" * 28 + "." + "9" * 10), decimal.Decimal("-" + "9" * 28 + "." + "9" * 10),
      decimal.Decimal("1E-10")]),
    ({"type": "fixed", "name": "Money", "size": 5, "logicalType": "decimal", "precision": 11,
      "scale": 3}, [decimal.Decimal("0.000"), decimal.Decimal("-1.000"),
                    decimal.Decimal("99999999.999"), decimal.Decimal("-99999999.999")]),
    ({"type": "fixed", "name": "Big", "size": 16, "logicalType": "decimal", "precision": 38,
      "scale": 0}, [decimal.Decimal(10**38 - 1), decimal.Decimal(-(10**38 - 1)),
                    decimal.Decimal(0)]),
    ({"type": "enum", "name": "Suit", "symbols": ["S", "H", "D", "C"]}, ["S", "C", "H"]),
    ({"type": "fixed", "name": "Four", "size": 4}, [b"\x00\x01\x02\x03", b"abcd"]),
    ({"type": "fixed", "name": "Zero", "size": 0}, [b""]),
    ({"type": "array", "items": "string"}, [[], ["a"], ["x", "", "z" * 200]]),
    ({"type": "array", "items": {"type": "array", "items": "int"}}, [[], [[]], [[1, 2], [], [3]]]),
    ({"type": "array", "items": "null"}, [[], [None] * 50]),
    ({"type": "map", "values": "long"}, [{}, {"a": 1}, {"": -1, "é": 2**40, "z": 0}]),
    ({"type": "map", "values": {"type": "map", "values": ["null", "string"]}},
     [{}, {"a": {}}, {"a": {"x": None, "y": "Y"}, "b": {"q": "Q"}}]),
    (["null", "string"], [None, "", "s"]),
    (["string", "null"], [None, "s"]),
    (["int", "long"], [1, 2**40, -2**63]),
    (["float", "double"], [1.5, 1e300]),
    (["null", "int", "string", "bytes", {"type": "array", "items": "int"}],
     [None, 5, "five", b"5", [5, 5]]),
    (["boolean", {"type": "map", "values": "int"}, {"type": "enum", "name": "U", "symbols": ["X"]}],
     [True, {"k": 1}, "X"]),
    (["null"], [None]),
    # nullable records, arrays and maps (their column is the member's own)
    (["null", rec(("a", "int"), ("b", ["null", "string"]), name="NR")],
     [None, {"a": 1, "b": None}, {"a": 2, "b": "x"}, None]),
    (["null", {"type": "array", "items": ["null", "long"]}], [None, [], [1, None, 3], None]),
    ([{"type": "map", "values": "string"}, "null"], [None, {}, {"k": "v"}]),
    ({"type": "array", "items": ["null", rec(("x", {"type": "map", "values": "int"}),
                                             name="AR")]},
     [[], [None, {"x": {}}, {"x": {"a": 1}}, None]]),
    (rec(("a", "int"),
         ("b", rec(("c", ["null", rec(("d", "string"), name="D")]), name="B")),
         name="Outer"),
     [{"a": 1, "b": {"c": None}}, {"a": 2, "b": {"c": {"d": "deep"}}}]),
    (rec(name="Empty"), [{}]),
    (rec(("e", rec(name="E0")), ("n", "null"), ("arr", {"type": "array", "items": rec(name="E1")})),
     [{"e": {}, "n": None, "arr": [{}, {}, {}]}]),
]


def _apache_value(schema, value):
    """The Apache package takes no local-timestamps (it ignores the logical
    type, so the long) and wants uuids as strings."""
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical and logical.startswith("local-timestamp"):
        unit = 1000 if logical.endswith("millis") else 1
        return (value - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=unit)
    if logical == "uuid":
        return str(value)
    return value


@pytest.mark.parametrize("schema, values", PER_TYPE, ids=lambda x: json.dumps(x, default=str)[:50])
def test_each_type_decodes_as_both_peers_read_it(schema, values):
    for writer, reader in ((write_fastavro, read_fastavro), (write_apache, read_apache)):
        given = values if writer is write_fastavro else [_apache_value(schema, v) for v in values]
        datums = [writer(schema, v) for v in given]
        decoded = decode_unframed(datums + [datums[0]], schema)
        assert decoded.values.type == arrow_type(kschema(schema))
        peers = [normalize(schema, reader(schema, d)) for d in datums]
        assert_rows(decoded.values.to_pylist(), peers + peers[:1])
        # what the peer read back is the value it was given, in Spark's shape
        assert_rows(peers, [normalize(schema, v) for v in values])


def test_decimal_scale_is_the_readers_for_bytes_written_unscaled():
    # the datum holds the unscaled integer: 12345 with scale 2 is 123.45
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}
    datum = write_fastavro("bytes", (12345).to_bytes(2, "big", signed=True))
    assert decode_unframed([datum], schema).values.to_pylist() == [decimal.Decimal("123.45")]


def test_views_of_strings_and_bytes_are_copied_out():
    # the values column need not stay alive: the decoded strings are kcodec's
    schema = rec(("s", "string"), ("b", "bytes"))
    data = [write_fastavro(schema, {"s": f"s{i}" * i, "b": bytes([i]) * i}) for i in range(20)]
    array = pa.array(data, pa.binary())
    decoded = decode_avro(array, framed=False, reader_schema=schema)
    del array, data
    assert decoded.values.to_pylist() == [{"s": f"s{i}" * i, "b": bytes([i]) * i}
                                          for i in range(20)]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_binary_like_inputs_and_slices(kind):
    schema = rec(("a", "long"), ("s", ["null", "string"]))
    values = [{"a": i, "s": None if i % 3 else str(i)} for i in range(30)]
    array = pa.array([write_fastavro(schema, v) if i != 7 else None
                      for i, v in enumerate(values)], kind)
    sliced = array.slice(5, 20)
    decoded = decode_avro(sliced, framed=False, reader_schema=schema)
    validate(decoded.values)
    expected = [None if i == 7 else values[i] for i in range(5, 25)]
    assert decoded.values.to_pylist() == expected


# ------------------------------------------------------------------ kcodec.decode end to end

KEY = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}]}
V1 = {"type": "record", "name": "Event", "namespace": "ev", "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "old", "type": "string"}]}
V2 = {"type": "record", "name": "Event", "namespace": "ev", "fields": [
    {"name": "id", "type": "long"},                                        # int -> long
    {"name": "name", "type": "string"},
    {"name": "score", "type": ["null", "double"], "default": None},       # added
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]},
     "default": "A"}]}                                                    # "old" removed
V3 = {"type": "record", "name": "Event", "namespace": "ev", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": ["null", "double"], "default": None},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]},
     "default": "A"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["t"]}]}


def _v1(i):
    return {"id": i, "name": f"n{i}", "old": "gone"}


def _v2(i):
    return {"id": i + 2**40, "name": f"n{i}", "score": i / 2 if i % 2 else None,
            "kind": "B"}


def _v3(i):
    return {"id": -i, "name": f"n{i}", "score": 1.0, "kind": "C", "tags": [str(i)] * (i % 3)}


def evolving_records():
    """Records of three writer schemas (ids 11, 12, 13), interleaved; keys
    framed with id 20; a tombstone and a null key."""
    records, expected_values, ids = [], [], []
    for i in range(30):
        which = i % 3
        writer, make, schema_id = [(V1, _v1, 11), (V2, _v2, 12), (V3, _v3, 13)][which]
        v = make(i)
        key = frame(20, write_fastavro(KEY, {"id": i})) if i != 4 else None
        value = frame(schema_id, write_fastavro(writer, v)) if i != 9 else None
        records.append(kcodec.Record(key=key, value=value))
        if i == 9:
            expected_values.append(None)
            ids.append(None)
            continue
        ids.append(schema_id)
        # read as V3 (the highest id): Avro's resolution, by fastavro
        expected_values.append(normalize(V3, read_fastavro(writer, write_fastavro(writer, v), V3)))
    return records, expected_values, ids


SCHEMAS = {11: V1, 12: V2, 13: V3, 20: KEY}


@pytest.mark.parametrize("views", [False, True])
def test_decode_evolving_values_and_keys(views, monkeypatch):
    install_schema_source(monkeypatch)
    records, expected_values, ids = evolving_records()
    data = kcodec.encode(records, base_offset=1000)
    table = kcodec.decode(data, value_format="avro", key_format="avro", schemas=SCHEMAS,
                          views=views)
    assert table.schema.names[:4] == ["key", "keySchemaId", "value", "valueSchemaId"]
    assert table.schema.field("value").type == arrow_type(V3)
    assert table.schema.field("key").type == arrow_type(KEY)
    assert table.column("valueSchemaId").to_pylist() == ids
    assert table.column("keySchemaId").to_pylist() == [None if i == 4 else 20 for i in range(30)]
    assert_rows(table.column("value").to_pylist(), expected_values)
    assert table.column("key").to_pylist() == [None if i == 4 else {"id": i} for i in range(30)]
    assert table.column("offset").to_pylist() == list(range(1000, 1030))
    # the id-2 row's V3 defaults and V2's absent tags; V1's long from int
    assert expected_values[0] == {"id": 0, "name": "n0", "score": None, "kind": "A",
                                  "tags": ["t"]}
    for name in ("value", "key"):
        validate(table.column(name))


def test_value_schema_given_is_the_reader(monkeypatch):
    install_schema_source(monkeypatch)
    records, _, ids = evolving_records()
    # V2 as the reader, its Kind given an enum default: V3's "C" reads as "A"
    reader = json.loads(json.dumps(V2))
    reader["fields"][3]["type"]["default"] = "A"
    table = kcodec.decode(kcodec.encode(records), value_format="avro", schemas=SCHEMAS,
                          value_schema=reader)
    assert table.schema.field("value").type == arrow_type(reader)
    writers = {11: V1, 12: V2, 13: V3}
    for i, (row, schema_id) in enumerate(zip(table.column("value").to_pylist(), ids)):
        if schema_id is None:
            assert row is None
            continue
        make = {11: _v1, 12: _v2, 13: _v3}[schema_id]
        datum = write_fastavro(writers[schema_id], make(i))
        assert row == normalize(reader, read_fastavro(writers[schema_id], datum, reader)), i
    kinds = {row["kind"] for row in table.column("value").to_pylist() if row}
    assert kinds == {"A", "B"}


def test_unframed_values_with_value_schema():
    values = [write_fastavro(V2, _v2(i)) for i in range(10)] + [None]
    table = kcodec.decode(kcodec.encode([kcodec.Record(value=v) for v in values]),
                          value_format="avro", value_schema=V2)
    assert table.column("valueSchemaId").null_count == 11
    assert table.column("value").to_pylist() == [normalize(V2, _v2(i)) for i in range(10)] + [None]
    assert table.column("key").type == pa.binary()          # raw keys untouched
    # with neither schemas nor value_schema there is nothing to read them with
    with pytest.raises(ValueError, match="need schemas= .* or a value_schema"):
        kcodec.decode(kcodec.encode([kcodec.Record(value=v) for v in values]),
                      value_format="avro")
    # framed with schemas, these unframed values fail their magic byte
    with pytest.raises(ValueDecodeError, match="magic byte") as caught:
        kcodec.decode(kcodec.encode([kcodec.Record(value=v) for v in values], base_offset=40),
                      value_format="avro", schemas={1: V2})
    assert caught.value.offset == 40 and caught.value.position == 0


def test_only_tombstones_and_empty_input(monkeypatch):
    install_schema_source(monkeypatch)
    table = kcodec.decode(kcodec.encode([kcodec.Record(value=None)] * 3), value_format="avro",
                          schemas={1: V2})
    assert table.column("value").to_pylist() == [None] * 3
    assert table.column("valueSchemaId").to_pylist() == [None] * 3
    table = kcodec.decode(kcodec.encode([kcodec.Record(value=None)] * 3), value_format="avro",
                          schemas={1: V2}, value_schema=V2)
    assert table.column("value").type == arrow_type(V2)
    assert table.column("value").to_pylist() == [None] * 3
    empty = kcodec.decode(b"", value_format="avro", value_schema=V2)
    assert empty.num_rows == 0 and empty.column("value").type == arrow_type(V2)


def test_decode_compressed_batches_match_uncompressed(monkeypatch):
    install_schema_source(monkeypatch)
    records, expected_values, _ = evolving_records()
    for codec in ("gzip", "zstd", "lz4", "snappy"):
        table = kcodec.decode(kcodec.encode(records, compression=codec, max_batch_bytes=300),
                              value_format="avro", schemas=SCHEMAS)
        assert_rows(table.column("value").to_pylist(), expected_values)


def test_decode_column_facade_accepts_chunked_arrays():
    from kcodec.values import decode_column
    chunks = pa.chunked_array([[write_fastavro(V2, _v2(i)) for i in range(3)],
                               [write_fastavro(V2, _v2(i)) for i in range(3, 5)]], pa.binary())
    decoded = decode_column(chunks, format="avro", reader_schema=V2)
    assert decoded.values.to_pylist() == [normalize(V2, _v2(i)) for i in range(5)]
    source = MappingSource({12: V2})
    framed = pa.array([frame(12, write_fastavro(V2, _v2(i))) for i in range(4)], pa.binary())
    direct = decode_avro(framed, framed=True, source=source)
    assert direct.values.to_pylist() == [normalize(V2, _v2(i)) for i in range(4)]
    assert source.asked == [12]         # each id looked up once per column


# ------------------------------------------------------------------ hypothesis

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
LOGICAL = [
    {"type": "int", "logicalType": "date"},
    {"type": "int", "logicalType": "time-millis"},
    {"type": "long", "logicalType": "time-micros"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "long", "logicalType": "local-timestamp-millis"},
    {"type": "long", "logicalType": "local-timestamp-micros"},
    {"type": "string", "logicalType": "uuid"},
    {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
    {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 5},
]


class SchemaBuilder:
    """Random schemas: every type, nesting, named types defined once and
    reused by name, unions of every shape. `named` collects the named types
    defined so far (full name -> definition)."""

    def __init__(self, draw):
        self.draw = draw
        self.named = {}
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def schema(self, depth):
        draw = self.draw
        choices = ["primitive", "logical", "enum", "fixed", "reuse"]
        if depth < 4:
            choices += ["record", "record", "array", "map", "union", "union"]
        kind = draw(st.sampled_from(choices))
        if kind == "reuse":
            if not self.named:
                kind = "primitive"
            else:
                return draw(st.sampled_from(sorted(self.named)))
        if kind == "primitive":
            return draw(st.sampled_from(["null", "boolean", "int", "long", "float", "double",
                                         "bytes", "string"]))
        if kind == "logical":
            return dict(draw(st.sampled_from(LOGICAL)))
        if kind == "enum":
            symbols = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
            node = {"type": "enum", "name": self.name("E"), "symbols": symbols}
        elif kind == "fixed":
            size = draw(st.integers(0, 20))
            node = {"type": "fixed", "name": self.name("F"), "size": size}
            if size >= 1 and draw(st.booleans()):
                node.update(logicalType="decimal", precision=min(38, max(1, int(
                    (8 * size - 1) * 0.30103))), scale=draw(st.integers(0, 1)))
        elif kind == "record":
            name = self.name("R")
            names = draw(st.lists(NAMES, max_size=5, unique=True))
            fields = [{"name": n, "type": self.schema(depth + 1)} for n in names]
            node = {"type": "record", "name": name, "fields": fields}
        elif kind == "array":
            return {"type": "array", "items": self.schema(depth + 1)}
        elif kind == "map":
            return {"type": "map", "values": self.schema(depth + 1)}
        else:
            return self.union(depth)
        self.named[node["name"]] = node
        return node

    def union(self, depth):
        branches, seen = [], set()
        for _ in range(self.draw(st.integers(1, 5))):
            before = set(self.named)
            b = self.schema(depth + 1)
            if isinstance(b, list):                     # no union in a union
                for name in set(self.named) - before:
                    del self.named[name]
                b = self.draw(st.sampled_from(["int", "string", "null"]))
            key = _type(b, self.named) if _type(b, self.named) not in (
                "record", "enum", "fixed") else (b if isinstance(b, str) else b["name"])
            if key in seen or isinstance(b, str) and b in self.named \
                    and _type(b, self.named) in ("int", "long"):
                key = None
            if key is None or key in seen:
                for name in set(self.named) - before:   # names it defined go with it
                    del self.named[name]
                continue
            seen.add(key)
            branches.append(b)
        # Values are told apart by the first branch they fit (as writers pick
        # them): int before long and float before double, unless the pair alone.
        kinds = [_type(b, self.named) for b in branches]
        non_null = [k for k in kinds if k != "null"]
        pair = sorted(non_null) in (["int", "long"], ["double", "float"])
        if not pair:
            for first, second in (("int", "long"), ("float", "double")):
                if first in kinds and second in kinds and kinds.index(second) < kinds.index(first):
                    i, j = kinds.index(second), kinds.index(first)
                    branches[i], branches[j] = branches[j], branches[i]
                    kinds[i], kinds[j] = kinds[j], kinds[i]
        return branches


def _type(schema, named):
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return named[schema]["type"] if schema in named else schema
    return schema["type"]


def _plain_type(schema, named):
    """The type a value of `schema` is told apart by among union branches
    (named types resolved; logical types kept)."""
    if isinstance(schema, str) and schema in named:
        return named[schema]
    return schema if isinstance(schema, dict) else {"type": schema}


F32 = st.floats(width=32, allow_nan=False)
WIDE = decimal.Context(prec=80)


def values_of(schema, named, in_union=False):
    """A strategy for the Python values (fastavro's) of `schema`."""
    if isinstance(schema, list):
        return _union_values(schema, named)
    s = _plain_type(schema, named)
    t, logical = s["type"], s.get("logicalType")
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "int":
        if logical == "date":
            return st.dates()
        if logical == "time-millis":
            return st.integers(0, 86_400_000 - 1)
        return st.integers(-2**31, 2**31 - 1)
    if t == "long":
        if logical and "timestamp" in logical:
            unit = 1000 if logical.endswith("millis") else 1
            base = EPOCH.replace(tzinfo=None) if logical.startswith("local-") else EPOCH
            return st.integers(-62_135_596_800_000_000 // unit + 1,
                               253_402_300_799_999_999 // unit).map(
                lambda v, unit=unit, base=base: base + datetime.timedelta(microseconds=v * unit))
        if logical == "time-micros":
            return st.integers(0, 86_400_000_000 - 1)
        return st.integers(-2**63, 2**63 - 1)
    if t == "float":
        return F32 | st.just(float("nan"))
    if t == "double":
        return st.floats()
    if t == "bytes":
        if logical == "decimal":
            p, scale = s["precision"], s["scale"]
            return st.integers(-(10**p - 1), 10**p - 1).map(
                lambda v, scale=scale: decimal.Decimal(v).scaleb(-scale, WIDE))
        return st.binary(max_size=20)
    if t == "string":
        if logical == "uuid":
            return st.uuids().map(str)
        return st.text(max_size=20)
    if t == "enum":
        return st.sampled_from(s["symbols"])
    if t == "fixed":
        if logical == "decimal":
            p, scale = s["precision"], s["scale"]
            return st.integers(-(10**p - 1), 10**p - 1).map(
                lambda v, scale=scale: decimal.Decimal(v).scaleb(-scale, WIDE))
        return st.binary(min_size=s["size"], max_size=s["size"])
    if t == "array":
        return st.lists(values_of(s["items"], named), max_size=4)
    if t == "map":
        return st.dictionaries(st.text(max_size=5), values_of(s["values"], named), max_size=4)
    return st.fixed_dictionaries({f["name"]: values_of(f["type"], named) for f in s["fields"]})


def _union_values(branches, named):
    """(tagged, untagged) pairs: tagged (fastavro's tuple notation) so the
    writer puts the value in its branch."""
    options = []
    for b in branches:
        s = _plain_type(b, named)
        t = s["type"]
        tag = s["name"] if t in ("record", "enum", "fixed") else t
        base = values_of(b, named)
        if t == "long" and "int" in [_type(x, named) for x in branches] and not _widen(
                branches, named):
            base = base.filter(lambda v: not (isinstance(v, int) and -2**31 <= v < 2**31))
        if t == "double" and "float" in [_type(x, named) for x in branches] and not _widen(
                branches, named):
            base = st.floats(allow_nan=False).filter(
                lambda v: struct.unpack("<f", struct.pack("<f", v))[0] != v
                if math.isfinite(v) and abs(v) < 3e38 else False)
        options.append(base.map(lambda v, tag=tag: (tag, v)))
    return st.one_of(options)


def _widen(branches, named):
    non_null = sorted(_type(b, named) for b in branches if _type(b, named) != "null")
    return non_null in (["int", "long"], ["double", "float"])


def _untag(schema, value, named):
    """The value without fastavro's union tuples, for normalize's first-match."""
    if isinstance(schema, list):
        tag, inner = value
        branch = next(b for b in schema if (_plain_type(b, named).get("name") or
                                            _plain_type(b, named)["type"]) == tag)
        plain = _untag(branch, inner, named)
        t = _plain_type(branch, named)["type"]
        return (tag, plain) if t in ("record", "enum", "fixed") else plain
    s = _plain_type(schema, named)
    t = s["type"]
    if value is None:
        return None
    if t == "array":
        return [_untag(s["items"], v, named) for v in value]
    if t == "map":
        return {k: _untag(s["values"], v, named) for k, v in value.items()}
    if t == "record":
        return {f["name"]: _untag(f["type"], value[f["name"]], named) for f in s["fields"]}
    return value


def _has_schema_problem(schema, named):
    """Types kcodec refuses by design: none, but a fixed decimal's precision
    must fit its size, which the builder ensures."""
    return False


@st.composite
def schemas_and_values(draw):
    builder = SchemaBuilder(draw)
    if draw(st.booleans()):
        # a record at the top, as registries hold them
        names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
        schema = {"type": "record", "name": "Top",
                  "fields": [{"name": n, "type": builder.schema(1)} for n in names]}
        builder.named["Top"] = schema
    else:
        schema = builder.schema(0)
    values = draw(st.lists(values_of(schema, builder.named), min_size=1, max_size=6))
    return schema, builder.named, values


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(schemas_and_values())
def test_hypothesis_schemas_decode_as_fastavro_reads_them(case):
    schema, named, values = case
    datums = [write_fastavro(schema, v) for v in values]
    decoded = decode_unframed(datums, schema)
    assert decoded.values.type == arrow_type(kschema(schema))
    peers = [normalize(schema, read_fastavro(schema, d)) for d in datums]
    assert_rows(decoded.values.to_pylist(), peers)
    # the generated values, untagged and normalized, are what fastavro read
    assert_rows(peers, [normalize(schema, _untag(schema, v, named)) for v in values])
    # the same datums framed, through a schema source
    framed = decode_avro(pa.array([frame(7, d) for d in datums], pa.binary()), framed=True,
                         source=MappingSource({7: kschema(schema)}))
    assert_rows(framed.values.to_pylist(), peers)
    assert framed.schema_ids.to_pylist() == [7] * len(datums)
