"""Shared helpers for the Avro value tests: datums written (and read) by each
peer (fastavro, the Apache ``avro`` package), the Confluent wire format, a
schema source for kcodec without a registry, and the normalization of a
peer's Python value into the shape kcodec's Arrow column gives in
``to_pylist()`` (Spark's ``from_avro`` shapes: see normalize)."""
import datetime
import decimal
import importlib
import io
import json
import math
import struct
import sys
import types
import uuid
from typing import NamedTuple

import pyarrow as pa

from needs import require_module

fastavro = require_module("fastavro")
avro_schema = require_module("avro.schema")
avro_io = require_module("avro.io")

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
NAMED = ("record", "error", "enum", "fixed")
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


# ------------------------------------------------------------------ framing

def frame(schema_id, datum):
    """The Confluent wire format: magic 0, the big-endian schema id, the datum."""
    return b"\x00" + struct.pack(">i", schema_id) + datum


class Registered(NamedTuple):
    schema_type: str
    text: str


class MappingSource:
    """A schema source without a registry: ``.schema(id)`` gives the
    registered schema, LookupError when unknown (what decode_avro asks of
    kcodec.values.registry's sources)."""

    def __init__(self, mapping):
        self.mapping = {k: v if isinstance(v, str) else json.dumps(v)
                        for k, v in mapping.items()}
        self.asked = []

    def schema(self, schema_id):
        self.asked.append(schema_id)
        try:
            return Registered("AVRO", self.mapping[schema_id])
        except KeyError:
            raise LookupError(f"no schema with id {schema_id}") from None


def install_schema_source(monkeypatch):
    """Make ``kcodec.decode(..., schemas={id: schema})`` work: the real
    kcodec.values.registry when it has landed, else a stand-in module with
    its ``schema_source(mapping)`` (test-only, through monkeypatch)."""
    try:
        importlib.import_module("kcodec.values.registry")
        return
    except ImportError:
        pass
    module = types.ModuleType("kcodec.values.registry")

    def schema_source(schemas):
        if isinstance(schemas, MappingSource):
            return schemas
        return MappingSource(schemas)

    module.schema_source = schema_source
    monkeypatch.setitem(sys.modules, "kcodec.values.registry", module)
    import kcodec.values
    monkeypatch.setattr(kcodec.values, "registry", module, raising=False)


# ------------------------------------------------------------------ peers

def parsed_fastavro(schema):
    return fastavro.parse_schema(json.loads(json.dumps(schema)), _write_hint=False,
                                 _force=True)


def write_fastavro(schema, value):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed_fastavro(schema), value)
    return buf.getvalue()


def read_fastavro(writer, data, reader=None, named=True):
    """fastavro's value; with `named`, named types in unions come as
    (name, value) tuples, so normalize can tell which branch was written."""
    return fastavro.schemaless_reader(
        io.BytesIO(data), parsed_fastavro(writer),
        None if reader is None else parsed_fastavro(reader), return_named_type=named)


def apache(schema):
    return avro_schema.parse(json.dumps(schema))


def write_apache(schema, value):
    buf = io.BytesIO()
    avro_io.DatumWriter(apache(schema)).write(value, avro_io.BinaryEncoder(buf))
    return buf.getvalue()


def read_apache(writer, data, reader=None):
    return avro_io.DatumReader(apache(writer), apache(reader if reader is not None else writer)) \
        .read(avro_io.BinaryDecoder(io.BytesIO(data)))


# ------------------------------------------------------------------ normalizing

def _resolve(schema, names, namespace=None):
    """`schema` with named references replaced by their definitions (names:
    full name -> definition, filled as definitions are seen)."""
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return {"type": schema}
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        return names.get(full) or names[schema]
    if isinstance(schema, list):
        return schema
    kind = schema["type"]
    if isinstance(kind, (dict, list)) or (kind not in PRIMITIVES + NAMED + ("array", "map")):
        return _resolve(kind, names, namespace)
    return schema


def _full_name(schema, namespace):
    name = schema["name"]
    ns = schema.get("namespace", namespace)
    return name if "." in name or not ns else f"{ns}.{name}"


def _register(schema, names, namespace):
    """Record named types in `names` as they are met (once)."""
    if isinstance(schema, dict) and schema.get("type") in NAMED and "name" in schema:
        full = _full_name(schema, namespace)
        names.setdefault(full, schema)
        names.setdefault(schema["name"].rsplit(".", 1)[-1], schema)
        return full.rsplit(".", 1)[0] if "." in full else namespace
    return namespace


def collect_names(schema, names, namespace=None):
    """Every named type defined in `schema`, into `names` (a named type may be
    defined where no value reaches, as in an empty array, and used later)."""
    if isinstance(schema, list):
        for b in schema:
            collect_names(b, names, namespace)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if isinstance(kind, (dict, list)):
            collect_names(kind, names, namespace)
            return
        inner = _register(schema, names, namespace)
        if kind in ("record", "error"):
            for f in schema.get("fields", ()):
                collect_names(f["type"], names, inner)
        elif kind == "array":
            collect_names(schema["items"], names, namespace)
        elif kind == "map":
            collect_names(schema["values"], names, namespace)
    return names


def _int_like(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _branch_matches(branch, value, names, namespace):
    """Whether a peer's untagged `value` is of union `branch` (the first
    such branch is the one a writer picks for it)."""
    b = _resolve(branch, names, namespace) if not isinstance(branch, list) else branch
    t = b["type"] if isinstance(b, dict) else b
    logical = b.get("logicalType") if isinstance(b, dict) else None
    if t == "null":
        return value is None
    if value is None:
        return False
    if t == "boolean":
        return isinstance(value, bool)
    if t == "int":
        if logical == "date":
            return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
        if logical == "time-millis":
            return isinstance(value, datetime.time) or (_int_like(value)
                                                        and -2**31 <= value < 2**31)
        return _int_like(value) and -2**31 <= value < 2**31
    if t == "long":
        if logical in TIMESTAMP_UNITS:
            return isinstance(value, datetime.datetime) and (
                (value.tzinfo is None) == logical.startswith("local-"))
        if logical == "time-micros":
            return isinstance(value, datetime.time) or _int_like(value)
        return _int_like(value) and -2**63 <= value < 2**63
    if t == "float":
        return isinstance(value, float) and _float32(value)
    if t == "double":
        return isinstance(value, float)
    if t == "string":
        return isinstance(value, (str, uuid.UUID))
    if t == "bytes":
        if logical == "decimal":
            return isinstance(value, decimal.Decimal)
        return isinstance(value, bytes)
    if t in NAMED:
        # untagged named values: the type of value decides
        if t == "enum":
            return isinstance(value, str)
        if t == "fixed":
            if b.get("logicalType") == "decimal":
                return isinstance(value, decimal.Decimal)
            return isinstance(value, bytes) and len(value) == b["size"]
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "map":
        return isinstance(value, dict)
    return False


def _fits_float32(value):
    return math.isfinite(value) and abs(value) < 3.4028235677973366e38


def _float32(value):
    """Whether a float is a float32's value (which a float branch holds)."""
    if math.isnan(value) or math.isinf(value):
        return True
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0] == value
    except OverflowError:
        return False


TIMESTAMP_UNITS = {
    "timestamp-millis": 1000, "timestamp-micros": 1, "local-timestamp-millis": 1000,
    "local-timestamp-micros": 1,
}


def union_shape(branches, names, namespace=None):
    members = [b for b in branches if _type_of(b, names, namespace) != "null"]
    if not members:
        return "null", members
    if len(members) == 1:
        return "single", members
    kinds = {_type_of(m, names, namespace) for m in members}
    if len(members) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
        return "widen", members
    return "members", members


def _type_of(schema, names, namespace=None):
    if isinstance(schema, list):
        return "union"
    r = _resolve(schema, names, namespace)
    return r["type"]


def normalize(schema, value, names=None, namespace=None):
    """A peer's Python value (fastavro's with return_named_type, or Apache
    avro's) of `schema` in the shape kcodec's column gives it in
    ``to_pylist()``: unions that are not nullable-single or int/long,
    float/double pairs as {"member0": ...} (index among non-null branches),
    maps as lists of (key, value) tuples, enums as strings, fixed/bytes as
    bytes, date as datetime.date, timestamps as datetimes (aware UTC, naive
    for local-), decimals as Decimal, uuid as str, time-millis / time-micros
    as ints."""
    if names is None:
        names = {}
        collect_names(schema, names)
    if isinstance(schema, list):
        shape, members = union_shape(schema, names, namespace)
        for b in schema:
            if isinstance(b, dict):
                _register(b, names, namespace)
        if value is None:
            return None
        tag = None
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            tag, value = value
        if tag is not None:
            chosen = next(m for m in members if _tag_of(m, names, namespace) in
                          (tag, tag.rsplit(".", 1)[-1]))
        else:
            # named types come tagged from fastavro: an untagged value is of a
            # branch that is not named when one fits (Apache avro tags none)
            plain = [m for m in members if _type_of(m, names, namespace) not in NAMED]
            chosen = next((m for m in plain + members
                           if _branch_matches(m, value, names, namespace)), None)
            if chosen is None:
                raise AssertionError(f"value {value!r:.80} matches no branch of {schema}")
        if shape == "widen":
            # Spark types [int, long] as a long (and [float, double] as a
            # double) whatever logical types the branches have: their numbers
            return _number(normalize(chosen, value, names, namespace),
                           _resolve(chosen, names, namespace).get("logicalType"))
        if shape == "single":
            return normalize(chosen, value, names, namespace)
        k = members.index(chosen)
        return {f"member{i}": normalize(chosen, value, names, namespace) if i == k else None
                for i in range(len(members))}
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return normalize(schema["type"], value, names, namespace)
    if isinstance(schema, dict):
        _register(schema, names, namespace)
    s = _resolve(schema, names, namespace)
    t = s["type"]
    if value is None:
        return None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) \
            and t in NAMED:
        value = value[1]         # fastavro's return_named_type outside a union
    logical = s.get("logicalType")
    if t == "record" or t == "error":
        full = _full_name(s, namespace)
        ns = full.rsplit(".", 1)[0] if "." in full else None
        return {f["name"]: normalize(f["type"], value.get(f["name"]), names, ns)
                for f in s["fields"]}
    if t == "array":
        return [normalize(s["items"], v, names, namespace) for v in value]
    if t == "map":
        return [(k, normalize(s["values"], v, names, namespace)) for k, v in value.items()]
    if t == "enum":
        return value
    if t == "fixed" or t == "bytes":
        if logical == "decimal":
            return _decimal(value, s)
        return bytes(value)
    if t == "string":
        return str(value)
    if t == "int":
        if logical == "date":
            if isinstance(value, int):
                return datetime.date(1970, 1, 1) + datetime.timedelta(days=value)
            return value
        if logical == "time-millis" and isinstance(value, datetime.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
                + value.microsecond // 1000
        if _int_like(value) and not -2**31 <= value < 2**31:
            # fastavro reads an int's varint as a long; Java's readInt (and
            # kcodec) keep its low 32 bits (only corrupt data differs)
            raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFF
            value = (raw >> 1) ^ -(raw & 1)
        return value
    if t == "long":
        if logical in TIMESTAMP_UNITS:
            if isinstance(value, int):
                unit = datetime.timedelta(microseconds=TIMESTAMP_UNITS[logical])
                base = EPOCH if not logical.startswith("local-") else EPOCH.replace(tzinfo=None)
                return base + value * unit
            if logical.startswith("local-"):
                return value.replace(tzinfo=None) if value.tzinfo else value
            return value.astimezone(UTC)
        if logical == "time-micros" and isinstance(value, datetime.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 \
                + value.microsecond
        return value
    if t == "float":
        # a float column holds float32s (a long or int promoted is rounded)
        value = float(value)
        if _fits_float32(value):
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        return value
    if t == "double":
        return float(value)
    return value


def _number(value, logical):
    """The number a normalized logical value stands for."""
    if isinstance(value, datetime.datetime):
        base = EPOCH if value.tzinfo else EPOCH.replace(tzinfo=None)
        return (value - base) // datetime.timedelta(microseconds=TIMESTAMP_UNITS[logical])
    if isinstance(value, datetime.date):
        return (value - datetime.date(1970, 1, 1)).days
    return value


def _decimal(value, s):
    if isinstance(value, decimal.Decimal):
        return value
    scale = s.get("scale", 0)
    unscaled = int.from_bytes(value, "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-scale, decimal.Context(prec=80))


def _tag_of(branch, names, namespace):
    r = _resolve(branch, names, namespace) if not isinstance(branch, list) else None
    if r is None:
        return "union"
    if r["type"] in NAMED:
        return _full_name(r, namespace)
    return r["type"]


# ------------------------------------------------------------------ comparing

def same(a, b):
    """Deep equality with NaN equal to NaN, and Decimals / datetimes by value."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, datetime.datetime) and isinstance(b, datetime.datetime):
        return (a.tzinfo is None) == (b.tzinfo is None) and a == b
    return type(a) is type(b) and a == b if not (
        isinstance(a, (int, float)) and isinstance(b, (int, float))) else (
        isinstance(a, bool) == isinstance(b, bool) and a == b)


def assert_rows(actual, expected):
    assert len(actual) == len(expected), (len(actual), len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert same(a, e), f"row {i}:\n kcodec {a!r}\n peer   {e!r}"


def column_rows(decoded):
    """A DecodedColumn's (or array's) values as Python rows."""
    values = getattr(decoded, "values", decoded)
    return values.to_pylist()


def validate(values):
    """pa.Array.validate(full=True), for arrays and chunked arrays."""
    if isinstance(values, pa.ChunkedArray):
        for chunk in values.chunks:
            chunk.validate(full=True)
    else:
        values.validate(full=True)
