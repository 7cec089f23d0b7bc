"""JSON values to typed columns (kcodec/values/json.py): values written by
confluent-kafka's JSONSerializer (through its own in-process mock registry)
and plain JSON, decoded equal to confluent's JSONDeserializer and json.loads,
record for record; the schema mapping; errors, with on_error="fail" and "null";
hypothesis-generated documents."""
import datetime
import json
import math
import struct
from typing import NamedTuple

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcodec.errors import SchemaError, SchemaNotFoundError, UnknownSchemaError, ValueDecodeError
from kcodec.values import DecodedColumn
from kcodec.values.json import decode_json, json_arrow_type
from needs import require_module

UTC = datetime.timezone.utc


class Registered(NamedTuple):
    """What a schema source gives for an id (the facade's RegisteredSchema)."""
    schema_type: str
    text: str


def frame(schema_id, text):
    if isinstance(text, str):
        text = text.encode("utf-8")
    return b"\x00" + struct.pack(">i", schema_id) + text


def source(mapping):
    def schema_for_id(schema_id):
        try:
            schema_type, text = mapping[schema_id]
        except KeyError:
            raise SchemaNotFoundError(f"no schema with id {schema_id}",
                                      schema_id=schema_id) from None
        return Registered(schema_type, text if isinstance(text, str) else json.dumps(text))
    return schema_for_id


# ---------------------------------------------------------------- normalizing

def expected(value, kind):
    """A json.loads value as the Arrow type `kind` gives it in to_pylist, with
    maps as dicts (see as_plain)."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        return {f.name: expected(value.get(f.name), f.type) for f in kind}
    if pa.types.is_map(kind):
        return {k: expected(v, kind.item_type) for k, v in value.items() if v is not None}
    if pa.types.is_list(kind):
        return [expected(v, kind.value_type) for v in value]
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_timestamp(kind):
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    if pa.types.is_date(kind):
        return datetime.date.fromisoformat(value)
    return value


def as_plain(value, kind):
    """A to_pylist value with maps as dicts and timestamps in UTC."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        return {f.name: as_plain(value[f.name], f.type) for f in kind}
    if pa.types.is_map(kind):
        return {k: as_plain(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind):
        return [as_plain(v, kind.value_type) for v in value]
    if pa.types.is_timestamp(kind):
        return value.astimezone(UTC)
    return value


def rows_of(decoded):
    kind = decoded.values.type
    return [as_plain(v, kind) for v in decoded.values.to_pylist()]


def plain(texts):
    return pa.array([t if t is None or isinstance(t, bytes) else t.encode("utf-8")
                     for t in texts], pa.binary())


# ---------------------------------------------------------------- peers

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "amount": {"type": "number"},
        "paid": {"type": "boolean"},
        "note": {"oneOf": [{"type": "null", "title": "Not included"}, {"type": "string"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"$ref": "#/definitions/Address"},
        "attributes": {"type": "object", "additionalProperties": {"type": "integer"}},
        "created": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "lines": {"type": "array", "items": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            "required": ["sku"]}},
        "big": {"type": ["null", "integer"]},
    },
    "required": ["id", "customer"],
    "definitions": {
        "Address": {"type": "object", "properties": {
            "street": {"type": "string"}, "zip": {"type": ["string", "null"]}}},
    },
}


def order(i):
    doc = {"id": i, "customer": f"customer-{i} \u00e9\u2603\U0001f600", "amount": i * 1.25,
           "paid": i % 2 == 0, "tags": [f"t{j}" for j in range(i % 4)],
           "address": {"street": f"{i} Main St", "zip": None if i % 3 else f"{i:05d}"},
           "attributes": {f"k{j}": j * i for j in range(i % 3)},
           "created": f"2024-03-{1 + i % 28:02d}T12:34:56.{i % 1000000:06d}Z",
           "day": f"2024-02-{1 + i % 28:02d}",
           "lines": [{"sku": f"s{j}", "qty": j} for j in range(i % 3)],
           "big": (2**63 - 1 - i) if i % 5 == 0 else -(2**62) + i}
    if i % 4 == 1:
        doc["note"] = "fragile"
    elif i % 4 == 2:
        doc["note"] = None
    if i % 7 == 3:
        del doc["amount"], doc["tags"]             # missing fields
    if i % 6 == 5:
        doc["extra"] = {"not": ["in", "schema"]}   # extra field
    return doc


@pytest.fixture(scope="module")
def confluent():
    require_module("jsonschema")
    json_schema = require_module("confluent_kafka.schema_registry.json_schema")
    mock = require_module("confluent_kafka.schema_registry._sync.mock_schema_registry_client")
    serialization = require_module("confluent_kafka.serialization")
    client = mock.MockSchemaRegistryClient({"url": "mock://kcodec"})
    ctx = serialization.SerializationContext("orders", serialization.MessageField.VALUE)
    return json_schema, client, ctx


def test_json_serializer_values_decode_as_confluents_deserializer(confluent):
    json_schema, client, ctx = confluent
    serializer = json_schema.JSONSerializer(json.dumps(ORDER), client)
    docs = [order(i) for i in range(60)]
    values = [serializer(d, ctx) for d in docs] + [None]
    schema_id = client.get_latest_version("orders-value").schema_id
    # the wire format, as the serializer's source says: magic 0, the id, the JSON text
    for doc, value in zip(docs, values):
        assert value[:5] == frame(schema_id, b"")
        assert json.loads(value[5:]) == doc
    registered = client.get_schema(schema_id)
    schema_for_id = source({schema_id: (registered.schema_type, registered.schema_str)})
    decoded = decode_json(pa.array(values, pa.binary()), framed=True, schema_for_id=schema_for_id)
    assert isinstance(decoded, DecodedColumn)
    assert decoded.errors is None
    assert decoded.schema_ids.type == pa.int32()
    assert decoded.schema_ids.to_pylist() == [schema_id] * len(docs) + [None]
    kind = decoded.values.type
    assert kind == json_arrow_type(ORDER)
    deserializer = json_schema.JSONDeserializer(json.dumps(ORDER))
    peers = [deserializer(v, ctx) for v in values]
    assert peers[:-1] == docs and peers[-1] is None
    assert rows_of(decoded) == [expected(p, kind) for p in peers]
    # the same with the type given, and as the registry's text
    given = decode_json(pa.array(values, pa.binary()), framed=True, arrow_type=ORDER)
    assert given.values.equals(decoded.values)
    text = decode_json(pa.array(values, pa.large_binary()), framed=True,
                       arrow_type=json.dumps(ORDER))
    assert text.values.equals(decoded.values)


def test_latest_schema_id_is_the_reader(confluent):
    json_schema, client, ctx = confluent
    v1 = {"type": "object", "properties": {"a": {"type": "integer"}}}
    v2 = {"type": "object", "properties": {"a": {"type": "integer"},
                                           "b": {"type": ["string", "null"]}}}
    s1 = json_schema.JSONSerializer(json.dumps(v1), client)
    s2 = json_schema.JSONSerializer(json.dumps(v2), client)
    ctx2 = type(ctx)("evolving", ctx.field)
    values = [s1({"a": 1}, ctx2), s2({"a": 2, "b": "x"}, ctx2), s1({"a": 3}, ctx2)]
    ids = [int.from_bytes(v[1:5], "big") for v in values]
    assert ids[0] < ids[1]
    mapping = {i: ("JSON", client.get_schema(i).schema_str) for i in set(ids)}
    decoded = decode_json(pa.array(values), framed=True, schema_for_id=source(mapping))
    assert decoded.values.type == pa.struct([("a", pa.int64()), ("b", pa.string())])
    assert decoded.values.to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "x"},
                                          {"a": 3, "b": None}]
    assert decoded.schema_ids.to_pylist() == ids


# ---------------------------------------------------------------- plain JSON

def test_plain_pretty_printed_nested_unicode_nulls():
    kind = json_arrow_type(ORDER)
    docs = [order(i) for i in range(40)]
    texts = []
    for i, d in enumerate(docs):
        if i % 3 == 0:
            texts.append(json.dumps(d, indent=2))                      # raw newlines
        elif i % 3 == 1:
            texts.append(json.dumps(d, indent="\t").replace("\n", "\r\n") + "\r\n")
        else:
            texts.append(json.dumps(d, ensure_ascii=i % 2 == 0))       # \\u escapes or raw
    texts[5] = None
    decoded = decode_json(plain(texts), framed=False, arrow_type=ORDER)
    assert decoded.schema_ids.to_pylist() == [None] * len(docs)
    assert decoded.values.null_count == 1
    assert rows_of(decoded) == [None if t is None else expected(json.loads(t), kind)
                                for t in texts]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary(), pa.binary_view(), pa.string()])
def test_binary_like_columns_and_slices(kind):
    texts = ['{"a": 1}', None, '{"a": 2, "b": [1]}', '  {"a": 3}  ', '{}']
    column = pa.array([t if t is None else t.encode() for t in texts], pa.binary()).cast(kind)
    schema = pa.schema([("a", pa.int64())])
    decoded = decode_json(column, framed=False, arrow_type=schema)
    assert decoded.values.to_pylist() == [{"a": 1}, None, {"a": 2}, {"a": 3}, {"a": None}]
    sliced = decode_json(column.slice(2, 2), framed=False, arrow_type=schema)
    assert sliced.values.to_pylist() == [{"a": 2}, {"a": 3}]
    chunked = decode_json(pa.chunked_array([column.slice(0, 2), column.slice(2)]),
                          framed=False, arrow_type=schema)
    assert chunked.values.to_pylist() == decoded.values.to_pylist()


def test_large_ints_floats_and_strings():
    schema = {"type": "object", "properties": {
        "i": {"type": "integer"}, "f": {"type": "number"}, "s": {"type": "string"}}}
    docs = [{"i": 2**63 - 1, "f": 1e308, "s": "\u0000\u001f\"\\/\ud7ff\ue000\U0010ffff"},
            {"i": -2**63, "f": -0.0, "s": ""},
            {"i": 0, "f": 5, "s": "x" * 100000},
            {"i": None, "f": 5e-324, "s": None}]
    decoded = decode_json(plain([json.dumps(d) for d in docs]), framed=False, arrow_type=schema)
    kind = decoded.values.type
    assert rows_of(decoded) == [expected(d, kind) for d in docs]
    assert math.copysign(1, decoded.values.field("f")[1].as_py()) == -1


def test_maps_nested_and_empty():
    schema = {"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "mm": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "number"}}},
        "lm": {"type": "array", "items": {"type": "object",
                                          "additionalProperties": {"type": "integer"}}},
        "s": {"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "boolean"}}}}}}
    docs = [{"m": {"a": "1", "b": "2"}, "mm": {"x": {"p": 1, "q": 2.5}}, "lm": [{"k": 1}, {}],
             "s": {"m": {"t": True}}},
            {"m": {}, "mm": {}, "lm": [], "s": {}},
            {"m": {"b": "3", "z": "4"}, "mm": {"y": {}}, "lm": [{"j": 2, "k": 3}],
             "s": {"m": {"f": False, "t": True}}},
            {},
            {"m": None, "mm": None, "lm": None, "s": None},
            {"m": {"a": None, "c": "5"}}]                          # a null entry is left out
    decoded = decode_json(plain([json.dumps(d) for d in docs]), framed=False, arrow_type=schema)
    kind = decoded.values.type
    assert pa.types.is_map(kind.field("m").type)
    assert rows_of(decoded) == [expected(d, kind) for d in docs]
    # a map's entries keep the order of their keys in the document
    assert [k for k, _ in decoded.values.to_pylist()[2]["m"]] == ["b", "z"]


def test_inferred_without_a_schema():
    docs = [{"a": 1, "b": {"c": "x"}}, {"a": 2, "d": [1.5]}]
    decoded = decode_json(plain([json.dumps(d) for d in docs] + [None]), framed=False)
    assert decoded.values.type == pa.struct([("a", pa.int64()),
                                             ("b", pa.struct([("c", pa.string())])),
                                             ("d", pa.list_(pa.float64()))])
    assert decoded.values.to_pylist() == [{"a": 1, "b": {"c": "x"}, "d": None},
                                          {"a": 2, "b": None, "d": [1.5]}, None]
    # framed with no schema source: inferred too, the ids kept
    framed = decode_json(pa.array([frame(3, json.dumps(d)) for d in docs]), framed=True)
    assert framed.values.to_pylist()[:2] == decoded.values.to_pylist()[:2]
    assert framed.schema_ids.to_pylist() == [3, 3]


def test_empty_and_all_null_columns():
    schema = pa.struct([("a", pa.int64())])
    empty = decode_json(pa.array([], pa.binary()), framed=True, arrow_type=schema)
    assert empty.values.type == schema and len(empty.values) == 0
    assert len(empty.schema_ids) == 0
    nulls = decode_json(pa.array([None, None], pa.binary()), framed=True, arrow_type=schema,
                        on_error="null")
    assert nulls.values.to_pylist() == [None, None]
    assert nulls.errors.to_pylist() == [None, None]


# ---------------------------------------------------------------- schema mapping

def test_json_arrow_type_mapping():
    kind = json_arrow_type(ORDER)
    assert kind == pa.struct([
        ("id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()),
        ("paid", pa.bool_()), ("note", pa.string()), ("tags", pa.list_(pa.string())),
        ("address", pa.struct([("street", pa.string()), ("zip", pa.string())])),
        ("attributes", pa.map_(pa.string(), pa.int64())),
        ("created", pa.timestamp("us", tz="UTC")), ("day", pa.date32()),
        ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int64())]))),
        ("big", pa.int64())])
    assert all(f.nullable for f in kind)
    assert json_arrow_type(json.dumps(ORDER)) == kind
    assert json_arrow_type(pa.schema([("a", pa.int32())])) == pa.struct([("a", pa.int32())])
    assert json_arrow_type(kind) == kind
    defs = {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"},
                                             "n": {"anyOf": [{"$ref": "#/$defs/X"},
                                                             {"type": "null"}]}},
            "$defs": {"X": {"type": "integer", "connect.type": "int32"}}}
    assert json_arrow_type(defs) == pa.struct([("x", pa.int32()), ("n", pa.int32())])
    assert json_arrow_type({"type": "object", "properties": {"e": {"enum": ["a", "b", None]}}}) \
        == pa.struct([("e", pa.string())])


@pytest.mark.parametrize("schema, where", [
    ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "#/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "object"}}}, "#/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "#/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}},
     "#/properties/a/items"),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"},
                                                       {"type": "integer"}]}}},
     "#/properties/a/anyOf"),
    ({"type": "object", "properties": {"a": {"$ref": "other.json#/X"}}}, "#/properties/a"),
    ({"type": "object", "properties": {"a": {"$ref": "#/definitions/Missing"}}},
     "#/properties/a"),
    ({"type": "object", "properties": {"a": {}}}, "#/properties/a"),
    ({"type": "string"}, "#"),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "null"}}}}}, "#/properties/a/properties/b"),
])
def test_untypable_schemas_name_the_path(schema, where):
    with pytest.raises(SchemaError) as info:
        json_arrow_type(schema)
    assert where in str(info.value)


def test_recursive_ref_is_a_schema_error():
    node = {"type": "object", "properties": {"v": {"type": "integer"},
                                             "next": {"$ref": "#/definitions/Node"}}}
    schema = {"type": "object", "properties": {"head": {"$ref": "#/definitions/Node"}},
              "definitions": {"Node": node}}
    with pytest.raises(SchemaError, match="recursive"):
        json_arrow_type(schema)
    with pytest.raises(SchemaError):
        json_arrow_type("{not json")


def test_registry_schema_that_does_not_type_names_its_id():
    values = pa.array([frame(9, '{"a": 1}')])
    bad = {"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}
    with pytest.raises(SchemaError) as info:
        decode_json(values, framed=True, schema_for_id=source({9: ("JSON", bad)}))
    assert info.value.schema_id == 9


# ---------------------------------------------------------------- errors

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"},
                                           "s": {"type": "string"}}}
GOOD = frame(1, '{"a": 1, "s": "x"}')
CASES = [
    # (value, error class, what the message says, position)
    (b"\x00\x00\x00", ValueDecodeError, "shorter than its 5-byte header", 0),
    (b"", ValueDecodeError, "shorter than its 5-byte header", 0),
    (b"\x01\x00\x00\x00\x01{}", ValueDecodeError, "magic byte", 0),
    (frame(77, "{}"), UnknownSchemaError, "unknown schema id 77", None),
    (frame(2, "{}"), ValueDecodeError, "AVRO schema, not JSON", None),
    (frame(1, '{"a": 1,'), ValueDecodeError, "not JSON", None),
    (frame(1, '{"a": 1 "s": "x"}'), ValueDecodeError, "not JSON", 13),
    (frame(1, "5"), ValueDecodeError, "not a JSON object but integer", None),
    (frame(1, "null"), ValueDecodeError, "not a JSON object but null", None),
    (frame(1, '"text"'), ValueDecodeError, "not a JSON object but string", None),
    (frame(1, "[1, 2]"), ValueDecodeError, "not a JSON object but list", None),
    (frame(1, "   "), ValueDecodeError, "empty JSON value", None),
    (frame(1, ""), ValueDecodeError, "empty JSON value", None),
    (frame(1, '{"a": 1}{"a": 2}'), ValueDecodeError, "not JSON: Extra data", 13),
    (frame(1, '{"a": 1} null {"a": 2}'), ValueDecodeError, "not JSON: Extra data", 14),
    (frame(1, '{"a": "one"}'), ValueDecodeError, "does not fit the schema", None),
    (frame(1, '{"a": 99999999999999999999}'), ValueDecodeError, "does not fit the schema", None),
    (frame(1, '{"a": 1.5}'), ValueDecodeError, "does not fit the schema", None),
    (frame(1, '{"s": {"x": 1}}'), ValueDecodeError, "does not fit the schema", None),
    (frame(1, b'{"s": "\xff"}'), ValueDecodeError, "not UTF-8", 12),
    (frame(1, '{"a": 1, "a": 2}'), ValueDecodeError, "does not fit the schema", None),
]
REGISTRY = source({1: ("JSON", SCHEMA), 2: ("AVRO", '"string"')})


@pytest.mark.parametrize("value, cls, says, position", CASES)
def test_fail_names_the_first_bad_row(value, cls, says, position):
    column = pa.array([GOOD, None, value, GOOD, value], pa.binary())
    with pytest.raises(cls) as info:
        decode_json(column, framed=True, schema_for_id=REGISTRY, offsets=[10, 11, 12, 13, 14])
    err = info.value
    assert type(err) is cls
    assert says in err.message
    assert (err.row, err.offset, err.column) == (2, 12, "value")
    if position is not None:
        assert err.position == position
    if value[:1] == b"\x00" and len(value) >= 5:
        assert err.schema_id == int.from_bytes(value[1:5], "big")
    # without offsets the row is named; a key column names itself
    with pytest.raises(cls) as info:
        decode_json(column, framed=True, schema_for_id=REGISTRY, column="key")
    assert info.value.row == 2 and info.value.offset is None
    assert "row 2" in str(info.value) and "of the key" in str(info.value) \
        or info.value.position is None


@pytest.mark.parametrize("value, cls, says, position", CASES)
def test_null_makes_exactly_the_bad_rows_null(value, cls, says, position):
    column = pa.array([GOOD, None, value, GOOD, value], pa.binary())
    decoded = decode_json(column, framed=True, schema_for_id=REGISTRY, on_error="null")
    good = {"a": 1, "s": "x"}
    assert decoded.values.to_pylist() == [good, None, None, good, None]
    errors = decoded.errors.to_pylist()
    assert errors[0] is None and errors[1] is None and errors[3] is None
    assert says in errors[2] and says in errors[4]
    assert decoded.errors.type == pa.string()


def test_unknown_ids_are_unknown_schema_errors_even_with_a_type():
    column = pa.array([GOOD, frame(5, "{}")])
    with pytest.raises(UnknownSchemaError) as info:
        decode_json(column, framed=True, arrow_type=SCHEMA, schema_for_id=REGISTRY)
    assert info.value.schema_id == 5 and info.value.row == 1
    # without a source, ids are only read
    decoded = decode_json(column, framed=True, arrow_type=SCHEMA)
    assert decoded.schema_ids.to_pylist() == [1, 5]


def test_null_keeps_good_rows_among_many():
    docs = [{"a": i, "s": str(i)} for i in range(5000)]
    texts = [json.dumps(d) for d in docs]
    bad = {17: "{", 2500: '{"a": "x"}', 4999: "[]", 3000: '{"a": 1}{}'}
    for row, text in bad.items():
        texts[row] = text
    decoded = decode_json(plain(texts), framed=False, arrow_type=SCHEMA, on_error="null")
    assert decoded.values.to_pylist() == [None if i in bad else d for i, d in enumerate(docs)]
    errors = decoded.errors.to_pylist()
    assert [i for i, e in enumerate(errors) if e is not None] == sorted(bad)
    with pytest.raises(ValueDecodeError) as info:
        decode_json(plain(texts), framed=False, arrow_type=SCHEMA, offsets=range(1000, 6000))
    assert info.value.offset == 1017


def test_inference_errors():
    texts = ['{"a": 1}', '{"a": "x"}']
    with pytest.raises(ValueDecodeError, match="give a schema"):
        decode_json(plain(texts), framed=False)
    decoded = decode_json(plain(['{"a": 1}', "{", '{"a": 2}']), framed=False, on_error="null")
    assert decoded.values.to_pylist() == [{"a": 1}, None, {"a": 2}]
    assert decoded.errors.to_pylist()[1].startswith("not JSON")


def test_bad_options():
    with pytest.raises(ValueError):
        decode_json(plain(["{}"]), framed=False, on_error="skip")
    with pytest.raises(TypeError):
        decode_json(pa.array([1]), framed=False)
    with pytest.raises(SchemaError):
        decode_json(plain(["{}"]), framed=False, arrow_type=pa.int64())


# ---------------------------------------------------------------- hypothesis

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
ints = st.integers(-2**63, 2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
strings = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)

scalars = st.sampled_from([("integer", ints), ("number", floats), ("boolean", st.booleans()),
                           ("string", strings)])


def schema_and_values(depth):
    """(JSON Schema, strategy of values) for a type up to `depth` deep."""
    leaf = scalars.map(lambda pair: ({"type": pair[0]}, pair[1]))
    if depth == 0:
        return leaf

    def array(inner):
        schema, values = inner
        return {"type": "array", "items": schema}, st.lists(values, max_size=4)

    def mapping(inner):
        schema, values = inner
        return ({"type": "object", "additionalProperties": schema},
                st.dictionaries(names, values, max_size=4))

    def nullable(inner):
        schema, values = inner
        return {"anyOf": [{"type": "null"}, schema]}, st.none() | values

    sub = schema_and_values(depth - 1)
    return st.one_of(leaf, sub.map(array), sub.map(mapping), sub.map(nullable),
                     obj(depth - 1))


def obj(depth):
    def build(fields):
        schema = {"type": "object", "properties": {n: s for n, (s, _) in fields.items()}}
        parts = {n: v for n, (_, v) in fields.items()}

        @st.composite
        def values(draw):
            doc = {}
            for name, strategy in parts.items():
                if draw(st.integers(0, 4)) == 0:
                    continue                                         # missing
                doc[name] = draw(strategy)
            if draw(st.booleans()):
                doc["\u00a7extra"] = draw(st.one_of(ints, strings, st.lists(ints)))
            return doc
        return schema, values()
    return st.dictionaries(names.filter(lambda n: n != "\u00a7extra"),
                           schema_and_values(depth), min_size=1, max_size=4).map(build)


@st.composite
def documents(draw):
    schema, values = draw(obj(2))
    docs = draw(st.lists(st.none() | values, max_size=12))
    indent = draw(st.sampled_from([None, 1, "\t"]))
    ascii_only = draw(st.booleans())
    texts = [None if d is None else json.dumps(d, indent=indent, ensure_ascii=ascii_only)
             for d in docs]
    return schema, texts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.booleans())
def test_generated_documents_decode_as_json_loads(case, framed):
    schema, texts = case
    kind = json_arrow_type(schema)
    if framed:
        column = pa.array([None if t is None else frame(4, t) for t in texts], pa.binary())
        decoded = decode_json(column, framed=True, schema_for_id=source({4: ("JSON", schema)}))
    else:
        decoded = decode_json(plain(texts), framed=False, arrow_type=schema)
    if framed and all(t is None for t in texts):
        kind = pa.struct([])            # no id: no schema, and nothing to infer from
    assert decoded.values.type == kind
    assert rows_of(decoded) == [None if t is None else expected(json.loads(t), kind)
                                for t in texts]
    assert decoded.schema_ids.to_pylist() == [4 if framed and t is not None else None
                                              for t in texts]


def test_maps_beside_extra_fields_of_conflicting_types():
    """A map is read as an object of its keys (pyarrow infers it), and so are
    fields the schema does not have: their conflicting types do not fail."""
    schema = {"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "l": {"type": "array", "items": {"type": "object",
                                         "properties": {"a": {"type": "integer"}}}}}}
    docs = [{"m": {"x": 1}, "extra": 1, "l": [{"a": 1, "e": 0}, {"a": 2, "e": ""}]},
            {"m": {"y": 2}, "extra": "one"},
            {"m": {"x": 3}, "extra": [1, {"b": 2}]}]
    decoded = decode_json(plain([json.dumps(d) for d in docs]), framed=False, arrow_type=schema,
                          on_error="null")
    kind = decoded.values.type
    assert rows_of(decoded) == [expected(d, kind) for d in docs]
    assert decoded.errors.null_count == len(docs)
    bad = decode_json(plain(['{"m": {"x": "one"}}', '{"m": 5}']), framed=False,
                      arrow_type=schema, on_error="null")
    assert bad.values.to_pylist() == [None, None]
    assert all("does not fit the schema" in e for e in bad.errors.to_pylist())


def test_timestamps_and_dates():
    schema = {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"},
                                               "d": {"type": "string", "format": "date"}}}
    texts = ['{"t": "2024-01-02T03:04:05Z", "d": "2024-01-02"}',
             '{"t": "2024-01-02T03:04:05.5+02:00", "d": "1969-12-31"}',
             '{"t": "2024-01-02T03:04:05.123456", "d": null}',
             '{"t": "yesterday"}', '{"d": "2024-13-45"}']
    decoded = decode_json(plain(texts), framed=False, arrow_type=schema, on_error="null")
    kind = decoded.values.type
    assert kind == pa.struct([("t", pa.timestamp("us", tz="UTC")), ("d", pa.date32())])
    assert rows_of(decoded)[:3] == [expected(json.loads(t), kind) for t in texts[:3]]
    assert rows_of(decoded)[1]["t"] == datetime.datetime(2024, 1, 2, 1, 4, 5, 500000, tzinfo=UTC)
    assert decoded.values.to_pylist()[3:] == [None, None]
    assert decoded.errors.to_pylist()[:3] == [None] * 3


def test_fail_names_the_first_bad_row_whatever_its_kind():
    bad_type, not_object = frame(1, '{"a": "x"}'), frame(1, "7")
    bad_magic = b"\x01\x00\x00\x00\x01{}"
    unknown = frame(9, "{}")
    for column, first in [([GOOD, bad_type, bad_magic], 1), ([GOOD, bad_magic, bad_type], 1),
                          ([bad_type, not_object], 0), ([not_object, unknown], 0),
                          ([GOOD, unknown, bad_type], 1), ([GOOD, GOOD, bad_type, unknown], 2)]:
        with pytest.raises(ValueDecodeError) as info:
            decode_json(pa.array(column), framed=True, schema_for_id=REGISTRY)
        assert info.value.row == first, column


@pytest.mark.parametrize("depth", [600, 100000])
def test_deep_nesting_is_an_error_not_a_crash(depth):
    deep_array = '{"a": ' + "[" * depth + "]" * depth + "}"
    deep_object = '{"b": ' + '{"c": ' * depth + "1" + "}" * depth + "}"
    brackets_in_a_string = '{"s": "' + "{[" * 300 + '"}'
    texts = [deep_array, '{"a": 1}', deep_object, brackets_in_a_string]
    if depth > 1000:                                  # as many long rows: counted at once
        texts = texts + [brackets_in_a_string] * 300
    with_map = {"type": "object", "properties": {
        "s": {"type": "string"},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}}}}
    for schema in (None, with_map):                   # pyarrow infers: depth is bounded
        decoded = decode_json(plain(texts), framed=False, arrow_type=schema, on_error="null")
        assert decoded.values.to_pylist()[1] is not None
        assert decoded.values.to_pylist()[3]["s"] == "{[" * 300
        errors = decoded.errors.to_pylist()
        assert [e is not None for e in errors] == [True, False, True] + [False] * (len(texts) - 3)
        assert "nested deeper than" in errors[0] or "not JSON" in errors[0]
    typed = decode_json(plain(texts), framed=False, arrow_type=SCHEMA, on_error="null")
    assert typed.values.to_pylist()[1:4] == [{"a": 1, "s": None}, {"a": None, "s": None},
                                             {"a": None, "s": "{[" * 300}]
    assert "does not fit" in typed.errors.to_pylist()[0] or "not JSON" in typed.errors[0].as_py()


def test_framed_auto_detects_each_row():
    column = pa.array([frame(1, '{"a": 1}'), b'{"a": 2}', None, b"\x00\x00", frame(1, '{"a": 3}'),
                       b'\n{"a": 4}'])
    decoded = decode_json(column, framed="auto", arrow_type=SCHEMA, on_error="null")
    assert decoded.values.to_pylist() == [{"a": 1, "s": None}, {"a": 2, "s": None}, None, None,
                                          {"a": 3, "s": None}, {"a": 4, "s": None}]
    assert decoded.schema_ids.to_pylist() == [1, None, None, None, 1, None]
    assert [e is not None for e in decoded.errors.to_pylist()] == [False] * 3 + [True, False, False]
    every = decode_json(pa.array([frame(1, '{"a": 1}')]), framed="auto", schema_for_id=REGISTRY)
    assert every.values.to_pylist() == [{"a": 1, "s": None}]
    none = decode_json(pa.array([b'{"a": 1}']), framed="auto", arrow_type=SCHEMA)
    assert none.values.to_pylist() == [{"a": 1, "s": None}]


@given(st.lists(st.binary(max_size=40), max_size=30), st.data())
@settings(max_examples=300, deadline=None)
def test_the_line_buffer_holds_the_chosen_datums_one_per_line(datums, data):
    """The core's join_lines (the buffer pyarrow's JSON reader parses): each
    chosen datum, its newlines and carriage returns made spaces, then a
    newline; the bounds it gives are those lines."""
    import numpy as np
    from kcodec._core.framing import join_lines
    blob = b"".join(datums)
    ends = np.cumsum([len(d) for d in datums], dtype=np.int64)
    starts = ends - np.array([len(d) for d in datums], np.int64)
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, max(len(datums) - 1, 0))))
                           if datums else []), np.int64)
    lines, lo, hi = join_lines(np.frombuffer(blob, np.uint8), starts, ends, rows)
    expected = [datums[r].replace(b"\n", b" ").replace(b"\r", b" ") + b"\n" for r in rows]
    assert lines.tobytes() == b"".join(expected)
    assert [lines[a:b].tobytes() for a, b in zip(lo, hi)] == expected


def test_the_line_buffer_refuses_bounds_outside_the_data():
    import numpy as np
    from kcodec._core.framing import join_lines
    data = np.frombuffer(b"{}{}", np.uint8)
    with pytest.raises(ValueError, match="outside the data"):
        join_lines(data, np.array([0, 2], np.int64), np.array([2, 5], np.int64),
                   np.array([1], np.int64))
    with pytest.raises(ValueError, match="outside the 2 rows"):
        join_lines(data, np.array([0, 2], np.int64), np.array([2, 4], np.int64),
                   np.array([2], np.int64))


def test_auto_framing_takes_a_row_as_framed_when_it_begins_with_the_magic_byte():
    """framed="auto" (JSON without a registry): per row, in the core's one
    pass over the column."""
    from kcodec.values.framing import FrameStatus, frames
    column = pa.array([b"\x00\x00\x00\x00\x07{}", b'{"a": 1}', b"\x00\x00", b"", None],
                      pa.binary())
    fr = frames(column, "auto")
    assert fr.status.tolist() == [FrameStatus.DATUM, FrameStatus.DATUM, FrameStatus.SHORT,
                                  FrameStatus.DATUM, FrameStatus.NULL]
    assert fr.ids.tolist()[:2] == [7, -1]
    assert fr.starts.tolist()[:2] == [5, 7]
    assert frames(column, False).status.tolist()[:3] == [FrameStatus.DATUM] * 3
    assert frames(column, True).status.tolist()[:2] == [FrameStatus.DATUM, FrameStatus.BAD_MAGIC]
