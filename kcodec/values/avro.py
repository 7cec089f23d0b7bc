"""Avro schemas for the compiled decoder (kcodec/_core/avro.pyx): parsed,
typed as Spark's ``from_avro`` types them (SchemaConverters), and compiled,
one (writer, reader) pair at a time, into the programs the core runs.

A program follows the writer's bytes and puts each value where the reader
schema wants it, by Avro's resolution rules: promotions, fields the writer
lacks (the reader's default, encoded once here and decoded like a datum),
fields the reader lacks (skipped), enum defaults and union branches. What
the rules leave to the data (a writer union branch the reader has no match
for, an enum symbol with no default) fails only the datums that use it."""
import functools
import json
import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .._core import avro as core
from .._core.avro import Fault, Kind, Op
from ..errors import SchemaError, UnknownSchemaError, ValueDecodeError
from . import DecodedColumn, check_on_error
from .framing import FrameStatus, NO_SCHEMA_ID, frame_error, frames

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")
# Deeper schemas are refused: the core recurses once per level.
MAX_DEPTH = 64
# Spark's DecimalType holds at most 38 digits; so does decimal128.
MAX_DECIMAL_PRECISION = 38
# The input decoded into one chunk of each column: its strings and bytes
# then fit the int32 offsets Spark's Arrow columns use.
CHUNK_BYTES = 1 << 30
NO_DEFAULT = object()

TIMESTAMPS = {
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
}
PROMOTIONS = {"int": ("long", "float", "double"), "long": ("float", "double"),
              "float": ("double",), "string": ("bytes",), "bytes": ("string",)}
FIXED_WIDTH = {Kind.KIND_INT32: 4, Kind.KIND_INT64: 8, Kind.KIND_FLOAT: 4, Kind.KIND_DOUBLE: 8,
               Kind.KIND_DECIMAL: 16}
READS = {"null": Op.OP_NULL, "boolean": Op.OP_BOOLEAN, "int": Op.OP_INT,
         "long": Op.OP_LONG, "float": Op.OP_FLOAT, "double": Op.OP_DOUBLE,
         "bytes": Op.OP_BYTES, "string": Op.OP_STRING}
# The fewest bytes a value of each primitive takes.
LEAST_BYTES = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8,
               "bytes": 1, "string": 1, "enum": 1, "union": 1, "array": 1, "map": 1}


class Schema:
    """One Avro type, parsed. Named types are shared where referenced."""
    __slots__ = ("type", "name", "aliases", "fields", "symbols", "enum_default", "items",
                 "values", "branches", "size", "logical", "precision", "scale")

    def __init__(self, type_, **attributes):
        self.type = type_
        self.name = self.logical = None
        self.aliases = frozenset()
        self.fields = self.symbols = self.branches = ()
        self.enum_default = self.items = self.values = None
        self.size = self.precision = self.scale = 0
        for key, value in attributes.items():
            setattr(self, key, value)

    @property
    def short_name(self):
        return self.name.rsplit(".", 1)[-1] if self.name else None

    def __repr__(self):
        return f"Schema({self.name or self.type})"


class Field(NamedTuple):
    name: str
    schema: Schema
    default: object
    aliases: frozenset


def parse(schema, schema_id=None):
    """A Schema from Avro schema JSON (text or the decoded JSON); a bare
    primitive's name (``long``) is taken for its JSON (``"long"``)."""
    if isinstance(schema, bytes):
        schema = schema.decode("utf-8", "replace")
    if isinstance(schema, str):
        if schema.strip() in PRIMITIVES:
            return Schema(schema.strip())
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"schema is not JSON: {exc}", schema_id=schema_id) from None
    return _Parser(schema_id).parse(schema, None, "", 0)


class _Parser:
    def __init__(self, schema_id):
        self.schema_id = schema_id
        self.named = {}
        self.defining = set()

    def fail(self, message, path):
        raise SchemaError(f"{message} at {path or 'the top'}", schema_id=self.schema_id)

    def full_name(self, name, namespace):
        if not isinstance(name, str) or not name:
            return None
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def parse(self, value, namespace, path, depth):
        if depth > MAX_DEPTH:
            self.fail(f"schema nested deeper than {MAX_DEPTH} levels", path)
        if isinstance(value, str):
            return self.reference(value, namespace, path)
        if isinstance(value, list):
            branches = tuple(self.parse(b, namespace, f"{path}[{i}]", depth + 1)
                             for i, b in enumerate(value))
            seen = set()
            for b in branches:
                key = b.name or b.type
                if b.type == "union" or key in seen:
                    self.fail(f"union holds {key} twice or a union in a union", path)
                seen.add(key)
            return Schema("union", branches=branches)
        if not isinstance(value, dict) or "type" not in value:
            self.fail(f"not an Avro schema: {value!r:.60}", path)
        kind = value["type"]
        if isinstance(kind, (dict, list)) or kind not in PRIMITIVES + NAMED + ("array", "map"):
            if isinstance(kind, (str, dict, list)) and not value.keys() - {"type"}:
                return self.parse(kind, namespace, path, depth + 1)
            if isinstance(kind, str):
                return self.reference(kind, namespace, path)
            self.fail(f"not an Avro schema: {value!r:.60}", path)
        if kind in PRIMITIVES:
            return self.logical(Schema(kind), value)
        if kind == "array":
            return Schema("array", items=self.parse(value.get("items"), namespace,
                                                    f"{path}.items", depth + 1))
        if kind == "map":
            return Schema("map", values=self.parse(value.get("values"), namespace,
                                                   f"{path}.values", depth + 1))
        name = self.full_name(value.get("name"), value.get("namespace", namespace))
        if name is None:
            self.fail(f"{kind} without a name", path)
        inner = name.rsplit(".", 1)[0] if "." in name else ""
        aliases = frozenset(self.full_name(a, inner) for a in value.get("aliases", ()))
        if name in self.named:
            self.fail(f"{name} defined twice", path)
        if kind == "fixed":
            size = value.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                self.fail(f"fixed {name} has no size", path)
            node = self.logical(Schema("fixed", name=name, aliases=aliases, size=size), value)
        elif kind == "enum":
            symbols = value.get("symbols")
            if (not isinstance(symbols, list) or len(set(symbols)) != len(symbols)
                    or not all(isinstance(s, str) for s in symbols)):
                self.fail(f"enum {name} needs distinct string symbols", path)
            default = value.get("default")
            if default is not None and default not in symbols:
                self.fail(f"enum {name}'s default {default!r} is not a symbol", path)
            node = Schema("enum", name=name, aliases=aliases, symbols=tuple(symbols),
                          enum_default=default)
        else:
            node = Schema("record", name=name, aliases=aliases)
            self.defining.add(name)
            self.named[name] = node
            fields, names = [], set()
            for i, field in enumerate(value.get("fields", ())):
                if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                    self.fail(f"record {name}'s field {i} has no name", path)
                if field["name"] in names:
                    self.fail(f"record {name} has two fields {field['name']!r}", path)
                names.add(field["name"])
                schema = self.parse(field.get("type"), inner, f"{path}.{field['name']}",
                                    depth + 1)
                fields.append(Field(field["name"], schema, field.get("default", NO_DEFAULT),
                                    frozenset(field.get("aliases", ()))))
            node.fields = tuple(fields)
            self.defining.discard(name)
            return node
        self.named[name] = node
        return node

    def reference(self, name, namespace, path):
        if name in PRIMITIVES:
            return Schema(name)
        for candidate in (self.full_name(name, namespace), name):
            if candidate in self.defining:
                raise SchemaError(f"recursive type {candidate} at {path or 'the top'}: Spark "
                                  "cannot type it, and kcodec does not", schema_id=self.schema_id)
            if candidate in self.named:
                return self.named[candidate]
        self.fail(f"unknown type {name!r}", path)

    def logical(self, node, value):
        """The logical type, where valid for the base type; an invalid one is
        ignored, as the Avro specification asks."""
        logical = value.get("logicalType")
        base = node.type
        if logical == "decimal" and base in ("bytes", "fixed"):
            precision, scale = value.get("precision"), value.get("scale", 0)
            if (isinstance(precision, int) and isinstance(scale, int) and 0 < precision
                    and 0 <= scale <= precision
                    and (base == "bytes" or precision <= _fixed_precision(node.size))):
                node.logical, node.precision, node.scale = logical, precision, scale
        elif (logical == "date" and base == "int") or (logical == "uuid" and base == "string") \
                or (logical in TIMESTAMPS and base == "long") \
                or (logical == "time-millis" and base == "int") \
                or (logical == "time-micros" and base == "long"):
            node.logical = logical
        return node


def _fixed_precision(size):
    """The most decimal digits a signed fixed of `size` bytes holds."""
    return int(np.floor(np.log10(2.0) * (8 * size - 1))) if size else 0


# -- Arrow types and columns (the reader's side) -----------------------------

class Slot:
    """Where a reader schema's value goes: its column, and the slots of its
    parts (fields, items, map values, union members)."""
    __slots__ = ("schema", "column", "kind", "arrow", "parts", "union")

    def __init__(self, schema, column, kind, arrow, parts=(), union=None):
        self.schema, self.column, self.kind, self.arrow = schema, column, kind, arrow
        self.parts, self.union = parts, union


class Layout:
    """The columns of one reader schema, preorder: what the core fills, and
    which of them may hold nulls (Spark's nullability: the others get an
    empty value under a null struct, as Arrow's casts and Spark want)."""

    def __init__(self, schema):
        self.kinds, self.widths, self.children, self.nullable = [], [], [], []
        self.root = self.slot(schema, "", nullable=True)

    def new_column(self, kind, nullable):
        self.kinds.append(kind)
        self.widths.append(FIXED_WIDTH.get(kind, 0))
        self.children.append([])
        self.nullable.append(nullable or kind == Kind.KIND_NULL)
        return len(self.kinds) - 1

    def slot(self, schema, path, column=None, nullable=False):
        """The slot of `schema`; into `column` when given (the one column of
        a union's non-null branches)."""
        kind, arrow = _arrow_of(schema, path)
        if schema.type == "union":
            return self.union_slot(schema, path, nullable)
        if column is None:
            column = self.new_column(kind, nullable)
        if schema.type == "record":
            parts = []
            for field in schema.fields:
                part = self.slot(field.schema, f"{path}.{field.name}")
                self.children[column].append(part.column)
                parts.append(part)
            return Slot(schema, column, kind, arrow, tuple(parts))
        if schema.type == "array":
            item = self.slot(schema.items, f"{path}[]")
            self.children[column].append(item.column)
            return Slot(schema, column, kind, arrow, (item,))
        if schema.type == "map":
            key = Slot(Schema("string"), self.new_column(Kind.KIND_STRING, False),
                       Kind.KIND_STRING, pa.string())
            value = self.slot(schema.values, f"{path}{{}}")
            self.children[column] += [key.column, value.column]
            return Slot(schema, column, kind, arrow, (key, value))
        return Slot(schema, column, kind, arrow)

    def union_slot(self, schema, path, nullable):
        kind, arrow = _arrow_of(schema, path)
        members = [b for b in schema.branches if b.type != "null"]
        shape = _union_shape(schema)
        nullable = nullable or _nullable(schema)
        if shape == "null":
            return Slot(schema, self.new_column(Kind.KIND_NULL, True), Kind.KIND_NULL, arrow,
                        union="null")
        if shape == "single":
            part = self.slot(members[0], path, nullable=nullable)
            return Slot(schema, part.column, part.kind, part.arrow, (part,), union=shape)
        if shape == "widen":
            column = self.new_column(kind, nullable)
            parts = tuple(self.slot(m, path, column) for m in members)
            return Slot(schema, column, kind, arrow, parts, union=shape)
        column = self.new_column(Kind.KIND_STRUCT, nullable)
        parts = []
        for i, member in enumerate(members):
            part = self.slot(member, f"{path}.member{i}", nullable=True)
            self.children[column].append(part.column)
            parts.append(part)
        return Slot(schema, column, Kind.KIND_STRUCT, arrow, tuple(parts), union="members")


def _union_shape(schema):
    members = [b for b in schema.branches if b.type != "null"]
    if not members:
        return "null"
    if len(members) == 1:
        return "single"
    types = {m.type for m in members}
    if len(members) == 2 and types in ({"int", "long"}, {"float", "double"}):
        return "widen"
    return "members"


def _arrow_of(schema, path):
    """(Kind, Arrow type) of a reader schema, as Spark's SchemaConverters
    types it."""
    t, logical = schema.type, schema.logical
    if t == "null":
        return Kind.KIND_NULL, pa.null()
    if t == "boolean":
        return Kind.KIND_BOOLEAN, pa.bool_()
    if t == "int":
        return Kind.KIND_INT32, pa.date32() if logical == "date" else pa.int32()
    if t == "long":
        return Kind.KIND_INT64, TIMESTAMPS.get(logical, pa.int64())
    if t == "float":
        return Kind.KIND_FLOAT, pa.float32()
    if t == "double":
        return Kind.KIND_DOUBLE, pa.float64()
    if logical == "decimal":
        if schema.precision > MAX_DECIMAL_PRECISION:
            raise SchemaError(f"decimal at {path or 'the top'} has precision {schema.precision}: "
                              f"Spark and decimal128 hold at most {MAX_DECIMAL_PRECISION} digits")
        return Kind.KIND_DECIMAL, pa.decimal128(schema.precision, schema.scale)
    if t in ("bytes", "fixed"):
        return Kind.KIND_BINARY, pa.binary()
    if t in ("string", "enum"):
        return Kind.KIND_STRING, pa.string()
    if t == "record":
        return Kind.KIND_STRUCT, pa.struct([
            pa.field(f.name, _arrow_of(f.schema, f"{path}.{f.name}")[1], _nullable(f.schema))
            for f in schema.fields])
    if t == "array":
        items = schema.items
        return Kind.KIND_LIST, pa.list_(pa.field("element", _arrow_of(items, path)[1],
                                                 _nullable(items)))
    if t == "map":
        values = schema.values
        return Kind.KIND_MAP, pa.map_(pa.string(), pa.field("value", _arrow_of(values, path)[1],
                                                            _nullable(values)))
    shape = _union_shape(schema)
    members = [b for b in schema.branches if b.type != "null"]
    if shape == "null":
        return Kind.KIND_NULL, pa.null()
    if shape == "single":
        return _arrow_of(members[0], path)
    if shape == "widen":
        return ((Kind.KIND_INT64, pa.int64()) if "long" in {m.type for m in members}
                else (Kind.KIND_DOUBLE, pa.float64()))
    return Kind.KIND_STRUCT, pa.struct([
        pa.field(f"member{i}", _arrow_of(m, f"{path}.member{i}")[1], True)
        for i, m in enumerate(members)])


def _nullable(schema):
    return schema.type == "null" or (schema.type == "union" and any(
        b.type == "null" for b in schema.branches))


def arrow_type(schema):
    """The Arrow type a column of `schema` (Avro JSON text, its decoded JSON,
    or a Schema) decodes to: Spark ``from_avro``'s type for it."""
    if not isinstance(schema, Schema):
        schema = parse(schema)
    return _arrow_of(schema, "")[1]


# -- defaults: encoded once, decoded by the reader's own program -------------

def _zigzag(value):
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_default(schema, value, path):
    """The Avro encoding of a field's JSON default."""
    t = schema.type
    bad = SchemaError(f"default {value!r:.60} at {path} does not fit its type {t}")
    if t == "null":
        if value is not None:
            raise bad
        return b""
    if t == "boolean":
        if not isinstance(value, bool):
            raise bad
        return b"\x01" if value else b"\x00"
    if t in ("int", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad
        bits = 32 if t == "int" else 64
        if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
            raise bad
        return _zigzag(value)
    if t in ("float", "double"):
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            value = float(value.replace("Infinity", "inf"))
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise bad
        return struct.pack("<f" if t == "float" else "<d", value)
    if t in ("bytes", "fixed", "string"):
        if not isinstance(value, str):
            raise bad
        try:
            data = value.encode("utf-8" if t == "string" else "latin-1")
        except UnicodeEncodeError:
            raise bad from None
        if t == "fixed":
            if len(data) != schema.size:
                raise bad
            return data
        return _zigzag(len(data)) + data
    if t == "enum":
        if value not in schema.symbols:
            raise bad
        return _zigzag(schema.symbols.index(value))
    if t == "array":
        if not isinstance(value, list):
            raise bad
        items = b"".join(encode_default(schema.items, v, f"{path}[]") for v in value)
        return (_zigzag(len(value)) + items if value else b"") + b"\x00"
    if t == "map":
        if not isinstance(value, dict):
            raise bad
        entries = b"".join(encode_default(Schema("string"), k, path)
                           + encode_default(schema.values, v, f"{path}{{}}")
                           for k, v in value.items())
        return (_zigzag(len(value)) + entries if value else b"") + b"\x00"
    if t == "record":
        if not isinstance(value, dict):
            raise bad
        out = []
        for field in schema.fields:
            given = value.get(field.name, field.default)
            if given is NO_DEFAULT:
                raise bad
            out.append(encode_default(field.schema, given, f"{path}.{field.name}"))
        return b"".join(out)
    # A union's default is of its first branch (the specification); later
    # Avro versions take any branch that fits, and so does this.
    for i, branch in enumerate(schema.branches):
        try:
            return _zigzag(i) + encode_default(branch, value, path)
        except SchemaError:
            continue
    raise bad


# -- programs ------------------------------------------------------------------

def _same_name(writer, reader):
    return (writer.name == reader.name or writer.short_name == reader.short_name
            or writer.name in reader.aliases)


def _matches(writer, reader):
    """Whether a writer's value may be read as the reader's (to choose a
    union branch): the same type, a promotion, or the same named type."""
    if writer.type in NAMED or reader.type in NAMED:
        return (writer.type == reader.type and _same_name(writer, reader)
                and (writer.type != "fixed" or writer.size == reader.size))
    return writer.type == reader.type or reader.type in PROMOTIONS.get(writer.type, ())


def _least_bytes(schema):
    if schema.type == "record":
        return sum(_least_bytes(f.schema) for f in schema.fields)
    if schema.type == "fixed":
        return schema.size
    return LEAST_BYTES[schema.type]


class Program:
    """One writer schema's program against a reader's layout."""

    def __init__(self, writer, layout, schema_id=None):
        self.schema_id = schema_id
        self.nodes, self.ints, self.consts, self.messages = [], [], bytearray(), []
        self.limits = {}
        self.emit(writer, layout.root, "")
        self.arrays = (np.array(self.nodes, np.int32).reshape(-1),
                       np.array(self.ints or [0], np.int32), np.frombuffer(
                           bytes(self.consts) or b"\x00", np.uint8))

    def node(self, op, column=-1, a=0, b=0):
        self.nodes.append([op, column, a, b, 0, 1])
        return len(self.nodes) - 1

    def close(self, at, children):
        self.nodes[at][4] = children
        self.nodes[at][5] = len(self.nodes) - at

    def const(self, data):
        at = len(self.consts)
        self.consts += data
        return at

    def fail(self, message):
        self.messages.append(message)
        return self.node(Op.OP_FAIL, -1, len(self.messages) - 1)

    def limit(self, precision):
        if precision not in self.limits:
            self.limits[precision] = self.const((10 ** precision).to_bytes(16, "little"))
        return self.limits[precision]

    def emit(self, writer, slot, path):
        """The nodes that read a `writer` value into `slot` (None: skip it)."""
        if writer.type == "union":
            at = self.node(Op.OP_UNION)
            for i, branch in enumerate(writer.branches):
                if slot is None:
                    self.emit(branch, None, path)
                elif slot.schema.type == "union":
                    self.emit_into_union(branch, slot, path, must=False)
                elif _matches(branch, slot.schema):
                    self.emit(branch, slot, path)
                else:
                    self.fail(f"writer union branch {i} ({branch.name or branch.type}) at "
                              f"{path or 'the top'} has no match in the reader schema")
            self.close(at, len(writer.branches))
            return
        if slot is not None and slot.schema.type == "union":
            self.emit_into_union(writer, slot, path, must=True)
            return
        column = -1 if slot is None else slot.column
        reader = None if slot is None else slot.schema
        if reader is not None and not _matches(writer, reader):
            raise SchemaError(f"writer's {writer.name or writer.type} at {path or 'the top'} "
                              f"cannot be read as the reader's {reader.name or reader.type}",
                              schema_id=self.schema_id)
        t = writer.type
        if t == "record":
            self.emit_record(writer, slot, path)
        elif t == "array":
            at = self.node(Op.OP_ARRAY, column, _least_bytes(writer.items))
            self.emit(writer.items, slot.parts[0] if slot else None, f"{path}[]")
            self.close(at, 1)
        elif t == "map":
            at = self.node(Op.OP_MAP, column, _least_bytes(writer.values),
                           slot.parts[0].column if slot else -1)
            self.emit(writer.values, slot.parts[1] if slot else None, f"{path}{{}}")
            self.close(at, 1)
        elif t == "enum":
            self.emit_enum(writer, slot, path)
        elif slot is not None and slot.kind == Kind.KIND_DECIMAL:
            limit = self.limit(reader.precision)
            if t == "fixed":
                self.node(Op.OP_DECIMAL_FIXED, column, writer.size, limit)
            else:
                self.node(Op.OP_DECIMAL_BYTES, column, limit)
        elif t == "fixed":
            self.node(Op.OP_FIXED, column, writer.size)
        else:
            self.node(READS[t], column)

    def emit_into_union(self, writer, slot, path, must):
        """A writer value (not a union) into a reader union's slot: the first
        reader branch it matches."""
        branches = slot.schema.branches
        chosen = next((b for b in branches if b.type == writer.type and _matches(writer, b)),
                      None) or next((b for b in branches if _matches(writer, b)), None)
        if chosen is None:
            message = (f"writer's {writer.name or writer.type} at {path or 'the top'} matches "
                       "no branch of the reader's union")
            if must:
                raise SchemaError(message, schema_id=self.schema_id)
            self.fail(message)
            return
        if chosen.type == "null" or slot.union == "null":
            self.node(Op.OP_APPEND_NULL, slot.column)
            if writer.type != "null":
                raise SchemaError(f"writer's {writer.type} at {path} read as null",
                                  schema_id=self.schema_id)
            return
        members = [b for b in branches if b.type != "null"]
        k = members.index(chosen)
        if slot.union in ("single", "widen"):
            self.emit(writer, slot.parts[k], path)
            return
        at = self.node(Op.OP_SEQUENCE)
        self.node(Op.OP_STRUCT_VALID, slot.column)
        for i, part in enumerate(slot.parts):
            if i != k:
                self.node(Op.OP_APPEND_NULL, part.column)
        self.emit(writer, slot.parts[k], f"{path}.member{k}")
        self.close(at, len(slot.parts) + 1)

    def emit_record(self, writer, slot, path):
        at = self.node(Op.OP_RECORD, -1 if slot is None else slot.column)
        children = 0
        reader_fields = {} if slot is None else {
            f.name: (f, part) for f, part in zip(slot.schema.fields, slot.parts)}
        by_alias = {alias: name for name, (f, _) in reader_fields.items() for alias in f.aliases}
        matched = set()
        for field in writer.fields:
            name = field.name if field.name in reader_fields else by_alias.get(field.name)
            target = None
            if name is not None and name not in matched:
                matched.add(name)
                target = reader_fields[name][1]
            self.emit(field.schema, target, f"{path}.{field.name}")
            children += 1
        for name, (field, part) in reader_fields.items():
            if name in matched:
                continue
            if field.default is NO_DEFAULT:
                raise SchemaError(f"reader field {path}.{name} has no default and the writer "
                                  "has no such field", schema_id=self.schema_id)
            data = encode_default(field.schema, field.default, f"{path}.{name}")
            default = self.node(Op.OP_DEFAULT, -1, self.const(data), len(data))
            self.emit(field.schema, part, f"{path}.{name}")
            self.close(default, 1)
            children += 1
        self.close(at, children)

    def emit_enum(self, writer, slot, path):
        if slot is None:
            self.node(Op.OP_ENUM, -1, 0, len(writer.symbols))
            return
        reader = slot.schema
        table = len(self.ints)
        for symbol in writer.symbols:
            chosen = symbol if symbol in reader.symbols else reader.enum_default
            if chosen is None:
                self.messages.append(f"enum symbol {symbol!r} at {path or 'the top'} is not in "
                                     f"the reader's {reader.name} and it has no default")
                self.ints += [-1, len(self.messages) - 1]
            else:
                data = chosen.encode()
                self.ints += [self.const(data), len(data)]
        self.node(Op.OP_ENUM, slot.column, table, len(writer.symbols))


# -- decoding a column ---------------------------------------------------------

FAULTS = {
    Fault.FAULT_TRUNCATED: "avro datum ends early",
    Fault.FAULT_VARINT: "varint longer than Avro allows",
    Fault.FAULT_NEGATIVE_LENGTH: "negative length",
    Fault.FAULT_LENGTH: "length runs past the end of the datum",
    Fault.FAULT_COUNT: "block count larger than the bytes that remain could hold",
    Fault.FAULT_UNION_BRANCH: "union branch index out of range",
    Fault.FAULT_ENUM_SYMBOL: "enum symbol index out of range",
    Fault.FAULT_UTF8: "string is not valid UTF-8",
    Fault.FAULT_DECIMAL: "decimal does not fit its precision",
    Fault.FAULT_TOO_BIG: "decoded strings or lists of one column exceed 2 GiB",
}
UNKNOWN_ID = 2          # frame fault details past FrameStatus's: see _frame_fault
NOT_AVRO = 3


@functools.lru_cache(maxsize=256)
def _parsed(text, schema_id):
    return parse(text, schema_id)


@functools.lru_cache(maxsize=256)
def _layout(reader_text):
    return Layout(_parsed(reader_text, None))


@functools.lru_cache(maxsize=1024)
def _program(writer_text, writer_id, reader_text):
    return Program(_parsed(writer_text, writer_id), _layout(reader_text), writer_id)


def _schema_text(schema):
    if isinstance(schema, Schema):
        raise TypeError("give a schema as Avro JSON text or its decoded JSON")
    return schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)


def decode_avro(array, *, framed, source=None, reader_schema=None, on_error="fail",
                offsets=None, column="value"):
    """Avro datums (a binary-like Arrow array) decoded into one column.

    Args:
        array: The keys or values (binary, large_binary or binary_view).
        framed: Whether each is in the Confluent wire format.
        source: Resolves framed schema ids (``.schema(id)``, see
            kcodec.values.registry); needed when framed.
        reader_schema: The reader schema (Avro JSON); None: the writer schema
            with the highest id among the frames (``framed`` only).
        on_error: ``"fail"`` or ``"null"``.
        offsets: Each row's Kafka offset, for errors (None: rows are named).
        column: ``"value"`` or ``"key"``, for errors.

    Returns:
        DecodedColumn
    """
    check_on_error(on_error)
    f = frames(array, framed)
    writers, unknown = {}, {}
    if framed:
        ids = np.unique(f.ids[f.status == FrameStatus.DATUM])
        if len(ids) and source is None:
            raise ValueError("framed values need schemas= to find their schema ids in")
        for schema_id in ids.tolist():
            try:
                found = source.schema(schema_id)
            except LookupError as exc:
                unknown[schema_id] = (UNKNOWN_ID, str(exc))
                continue
            if found.schema_type != "AVRO":
                unknown[schema_id] = (NOT_AVRO, f"schema id {schema_id} is a "
                                                f"{found.schema_type} schema, not Avro")
                continue
            writers[schema_id] = found.text
    if reader_schema is not None:
        reader_text = _schema_text(reader_schema)
    elif writers:
        reader_text = writers[max(writers)]
    elif not framed:
        raise ValueError("unframed Avro needs a value_schema (or key_schema) to read it with")
    else:
        reader_text = None
    if reader_text is None:
        layout = None
    else:
        layout = _layout(reader_text)
    programs, program_of_id = [], {}
    if layout is not None:
        if framed:
            for schema_id, text in sorted(writers.items()):
                program_of_id[schema_id] = len(programs)
                programs.append(_program(text, schema_id, reader_text))
        else:
            programs.append(_program(reader_text, None, reader_text))
    program_of_row = np.where(f.status == FrameStatus.NULL, -1,
                              -2 - f.status.astype(np.int32) + FrameStatus.SHORT).astype(np.int32)
    datum = f.status == FrameStatus.DATUM
    if framed:
        lookup = {i: program_of_id.get(i, -2 - unknown.get(i, (UNKNOWN_ID,))[0])
                  for i in ids.tolist()}
        if lookup:
            keys = np.array(list(lookup), np.int32)
            values = np.array(list(lookup.values()), np.int32)
            order = np.argsort(keys)
            at = np.searchsorted(keys[order], f.ids[datum])
            program_of_row[datum] = values[order][at]
    elif datum.any():
        program_of_row[datum] = 0
    if layout is None:
        if (program_of_row >= -1).all():
            return _all_null(len(f), f, column, on_error)
        layout = Layout(Schema("null"))      # every row failed its frame
    return _run(layout, programs, f, program_of_row, on_error, offsets, column, unknown)


def _all_null(n, f, column, on_error):
    return DecodedColumn(pa.nulls(n), _schema_ids(f), pa.nulls(n, pa.string())
                         if on_error == "null" else None)


def _schema_ids(f):
    framed = f.ids != NO_SCHEMA_ID
    framed &= f.status == FrameStatus.DATUM
    return pa.array(f.ids, pa.int32(), mask=~framed)


def _run(layout, programs, f, program_of_row, on_error, offsets, column, unknown):
    chunks, faults = [], []
    rows = len(program_of_row)
    start = 0
    arrays = [p.arrays for p in programs]
    while start < rows or not chunks:
        end = _chunk_end(f, start, rows)
        decoder = core.Decoder(layout.kinds, layout.widths, layout.children, layout.nullable,
                               arrays)
        found = decoder.decode(f.data, f.starts[start:end], f.ends[start:end],
                               f.value_starts[start:end], program_of_row[start:end],
                               on_error == "fail")
        for row, fault, byte, detail in found:
            faults.append((start + row, fault, byte, detail))
        if found and on_error == "fail":
            raise _error(faults[0], programs, program_of_row, f, offsets, column, unknown)
        chunks.append(_arrow_column(decoder, layout.root))
        start = end
    values = chunks[0] if len(chunks) == 1 else pa.chunked_array(chunks)
    errors = None
    if on_error == "null":
        messages = [None] * rows
        for fault in faults:
            messages[fault[0]] = str(_error(fault, programs, program_of_row, f, offsets,
                                            column, unknown))
        errors = pa.array(messages, pa.string())
    return DecodedColumn(values, _schema_ids(f), errors)


def _chunk_end(f, start, rows):
    if rows - start <= 1 or f.ends[-1] - f.starts[0] <= CHUNK_BYTES:
        return rows
    limit = f.value_starts[start] + CHUNK_BYTES
    end = int(np.searchsorted(f.ends[start:], limit, "right")) + start
    return max(end, start + 1)


def _error(fault, programs, program_of_row, f, offsets, column, unknown):
    row, code, byte, detail = fault
    program = int(program_of_row[row])
    schema_id = int(f.ids[row]) if f.ids[row] != NO_SCHEMA_ID else None
    offset = int(offsets[row]) if offsets is not None else None
    cls = ValueDecodeError
    if code == Fault.FAULT_FRAME:
        if detail in (UNKNOWN_ID, NOT_AVRO):
            message = unknown[schema_id][1]
            cls = UnknownSchemaError if detail == UNKNOWN_ID else ValueDecodeError
        else:
            message = frame_error(FrameStatus.SHORT + detail)
            schema_id = None
    elif code == Fault.FAULT_RESOLUTION:
        message = programs[program].messages[detail]
    else:
        message = FAULTS.get(code, f"avro fault {code}")
    return cls(message, column=column, row=row, schema_id=schema_id, offset=offset,
               position=byte)


def _arrow_column(decoder, slot):
    """The Arrow array of `slot`'s column and its parts, taking the buffers
    from the decoder."""
    if slot.union == "single":
        # A nullable union's slot shares its one member's column: its part
        # is that member's slot (a record's, list's or map's own parts).
        return _arrow_column(decoder, slot.parts[0])
    length, valid, values, data = decoder.column(slot.column)
    valid = pa.py_buffer(valid) if valid is not None else None
    kind = slot.kind
    if kind == Kind.KIND_NULL:
        return pa.nulls(length)
    if kind == Kind.KIND_STRUCT:
        children = [_arrow_column(decoder, part) for part in slot.parts]
        return pa.Array.from_buffers(slot.arrow, length, [valid], children=children)
    values = pa.py_buffer(values) if values is not None else None
    if kind in (Kind.KIND_BINARY, Kind.KIND_STRING):
        data = pa.py_buffer(data) if data is not None else pa.py_buffer(b"")
        return pa.Array.from_buffers(slot.arrow, length, [valid, values, data])
    if kind == Kind.KIND_LIST:
        item = _arrow_column(decoder, slot.parts[0])
        return pa.Array.from_buffers(slot.arrow, length, [valid, values], children=[item])
    if kind == Kind.KIND_MAP:
        keys = _arrow_column(decoder, slot.parts[0])
        items = _arrow_column(decoder, slot.parts[1])
        entries = pa.StructArray.from_arrays([keys, items], fields=[
            slot.arrow.key_field, slot.arrow.item_field])
        return pa.Array.from_buffers(slot.arrow, length, [valid, values], children=[entries])
    if values is None:
        values = pa.py_buffer(b"")
    return pa.Array.from_buffers(slot.arrow, length, [valid, values])
