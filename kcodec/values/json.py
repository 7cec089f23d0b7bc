"""JSON keys and values (Confluent-framed JSON Schema, or plain JSON) decoded
into one Arrow struct column through pyarrow's JSON reader, without a Python
object per record.

How a column is decoded:

1. :func:`~kcodec.values.framing.frames` splits it into datums (and schema
   ids when framed).
2. The core (``join_lines``) copies the datums into one newline-delimited
   buffer: every raw ``\\n`` and ``\\r`` byte inside a datum becomes a space
   (valid JSON has them only as whitespace: inside strings they are
   escaped), so a pretty-printed value stays one line. A row that is null,
   or that already failed (framing, unknown id, not an object), is left out
   and set null afterwards.
3. ``pyarrow.json.read_json`` parses the buffer with an explicit schema (the
   reader type; fields not in it are ignored), in blocks on pyarrow's
   threads. Only when it fails is the buffer bisected, to find the rows
   that fail alone: each half that parses is kept whole, so good rows still
   decode in the vectorized path.

Types (:func:`json_arrow_type`) follow a JSON Schema as Confluent's
``JSONSerializer`` registers it (draft-07), and what Spark's ``from_json``
gives for the matching Spark schema:

- ``object`` with ``properties``: struct, fields in ``properties`` order;
- ``object`` with ``additionalProperties: S`` and no ``properties``:
  ``map<string, S>``;
- ``string``: string; with ``format: date-time``,
  ``timestamp('us', tz='UTC')`` (RFC 3339 text with an offset is converted
  to UTC); with ``format: date``, ``date32``;
- ``integer``: int64 (``connect.type`` int8/16/32 narrow it);
- ``number``: float64 (``connect.type: float32``: float32);
- ``boolean``: bool;
- ``array`` with ``items``: list;
- ``["null", X]``, ``anyOf``/``oneOf`` of null and X: X (every Arrow field
  is nullable, as in Spark);
- ``$ref`` to ``#/definitions/..`` or ``#/$defs/..``: the referenced schema
  (a recursive reference is a SchemaError).

Anything else (free-form objects, unions of several non-null types, tuple
``items``, ``$ref`` to another document) is a :class:`~kcodec.errors.SchemaError`
naming its JSON path.

Limits, each a choice:

- A map's entry whose value is JSON ``null`` is left out of the map (pyarrow
  reads a map as an object of its keys, where a null and a missing key are
  the same).
- An ``integer`` written as ``1.0`` or beyond int64 does not fit and is an
  error for its row.
- Raw control characters inside strings, which strict JSON forbids, are
  accepted (newlines as spaces).
- An object with a key twice is an error for its row (json.loads would keep
  the last value).
- Where pyarrow infers types (no schema, or a schema with maps) a document
  nested deeper than MAX_DEPTH (500) levels is an error for its row: its
  inference recurses once a level, and far deeper input would overflow the
  stack.
- With no schema at all, pyarrow infers the type from the batch: two batches
  (two calls) can get different types, and rows whose values conflict across
  the batch cannot be inferred (a ValueDecodeError asks for a schema).
"""
import json as _json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from kcodec._core.framing import join_lines
from kcodec.errors import SchemaError, SchemaNotFoundError, UnknownSchemaError, ValueDecodeError
from kcodec.values import DecodedColumn, check_on_error
from kcodec.values.framing import NO_SCHEMA_ID, FrameStatus, frame_error, frames

__all__ = ["json_arrow_type", "decode_json"]

_WHITESPACE = (0x20, 0x09, 0x0A, 0x0D)
_MIN_BLOCK = 1 << 20
_MAX_BLOCK = (1 << 31) - 1


# --------------------------------------------------------------------------
# JSON Schema -> Arrow


def json_arrow_type(schema):
    """The Arrow struct type of a JSON Schema.

    Args:
        schema: JSON Schema text (``str``/``bytes``) or an already parsed
            ``dict``; or an Arrow ``pa.Schema`` / struct type, returned as a
            struct type as it is.

    Returns:
        pa.StructType: the reader type (see the module's table).

    Raises:
        SchemaError: not JSON, not an object schema at the top, or a part it
            cannot type (the message names the part's JSON path).
    """
    if isinstance(schema, pa.Schema):
        return pa.struct(list(schema))
    if isinstance(schema, pa.DataType):
        if not pa.types.is_struct(schema):
            raise SchemaError(f"a value's Arrow type is a struct, not {schema}")
        return schema
    if isinstance(schema, (str, bytes, bytearray)):
        try:
            schema = _json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"JSON Schema is not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise SchemaError(f"a JSON Schema is an object, not {type(schema).__name__}")
    kind = _Typer(schema).type_of(schema, "#", ())
    if not pa.types.is_struct(kind):
        raise SchemaError(f"a JSON value's schema at # is an object with properties, not {kind}")
    return kind


class _Typer:
    def __init__(self, root):
        self.root = root

    def resolve(self, ref, path):
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(f"unsupported $ref {ref!r} at {path}: only references "
                              "inside the schema (#/definitions/..., #/$defs/...) resolve")
        node = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} at {path} points at nothing")
        return node

    def type_of(self, node, path, refs):
        if node is True or node == {}:
            raise SchemaError(f"cannot type {path}: it accepts any JSON value")
        if not isinstance(node, dict):
            raise SchemaError(f"cannot type {path}: a schema is an object, not {node!r}")
        if "$ref" in node:
            ref = node["$ref"]
            if ref in refs:
                raise SchemaError(f"recursive $ref {ref!r} at {path}: a recursive type "
                                  "has no Arrow (or Spark) type")
            return self.type_of(self.resolve(ref, path), path, refs + (ref,))
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) != 1:
                raise SchemaError(f"cannot type {path}: a union of types {kind} "
                                  "(only one type besides null has an Arrow type)")
            kind = kinds[0]
        if kind is None:
            for word in ("anyOf", "oneOf"):
                if word in node:
                    branches = [(i, b) for i, b in enumerate(node[word])
                                if not (isinstance(b, dict) and b.get("type") == "null")]
                    if len(branches) != 1:
                        raise SchemaError(f"cannot type {path}/{word}: {len(branches)} branches "
                                          "besides null (only one has an Arrow type)")
                    i, branch = branches[0]
                    return self.type_of(branch, f"{path}/{word}/{i}", refs)
            if "allOf" in node and len(node["allOf"]) == 1:
                return self.type_of(node["allOf"][0], f"{path}/allOf/0", refs)
            values = (node["enum"] if "enum" in node
                      else [node["const"]] if "const" in node else None)
            if values is not None:
                kinds = {_value_kind(v) for v in values} - {"null"}
                if len(kinds) == 1:
                    kind = kinds.pop()
            elif "properties" in node or "additionalProperties" in node:
                kind = "object"
            elif "items" in node:
                kind = "array"
        if kind == "object":
            return self.object_type(node, path, refs)
        if kind == "array":
            items = node.get("items")
            if isinstance(items, list):
                raise SchemaError(f"cannot type {path}/items: tuple items (a list of schemas)")
            if items is None or items is True:
                raise SchemaError(f"cannot type {path}: an array without an items schema")
            return pa.list_(self.type_of(items, f"{path}/items", refs))
        if kind == "string":
            fmt = node.get("format")
            if fmt == "date-time":
                return pa.timestamp("us", tz="UTC")
            if fmt == "date":
                return pa.date32()
            return pa.string()
        if kind == "integer":
            return {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32()}.get(
                node.get("connect.type"), pa.int64())
        if kind == "number":
            return pa.float32() if node.get("connect.type") == "float32" else pa.float64()
        if kind == "boolean":
            return pa.bool_()
        raise SchemaError(f"cannot type {path}: "
                          + (f"type {kind!r}" if kind is not None else "no type"))

    def object_type(self, node, path, refs):
        properties = node.get("properties")
        if properties:
            if not isinstance(properties, dict):
                raise SchemaError(f"cannot type {path}/properties: not an object")
            return pa.struct([pa.field(name, self.type_of(sub, f"{path}/properties/{name}", refs))
                              for name, sub in properties.items()])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return pa.map_(pa.string(), self.type_of(extra, f"{path}/additionalProperties", refs))
        if properties is not None:
            return pa.struct([])
        raise SchemaError(f"cannot type {path}: an object with neither properties nor "
                          "an additionalProperties schema")


def _value_kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


# --------------------------------------------------------------------------
# The type asked of pyarrow.json, and the conversion of what it gives


def _parse_type(kind):
    """What pyarrow.json is asked to parse for the target type `kind`: the
    type itself where it can, a type to convert from otherwise, or None
    (maps: left out, inferred as an object of their keys)."""
    if pa.types.is_map(kind):
        return None
    if pa.types.is_struct(kind):
        fields = []
        for field in kind:
            sub = _parse_type(field.type)
            if sub is not None:
                fields.append(pa.field(field.name, sub))
        return pa.struct(fields)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind) \
            or pa.types.is_large_list_view(kind) or pa.types.is_fixed_size_list(kind):
        sub = _parse_type(kind.value_type)
        if sub is None:                 # a list of maps: the list inferred whole
            return None
        return pa.list_(sub)
    if pa.types.is_dictionary(kind):
        return _parse_type(kind.value_type)
    if pa.types.is_date(kind) or pa.types.is_time(kind):
        return pa.string()
    return kind


def _has_map(kind):
    if pa.types.is_map(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_map(f.type) for f in kind)
    if hasattr(kind, "value_type") and not pa.types.is_dictionary(kind):
        return _has_map(kind.value_type)
    return False


class _Mismatch(ValueError):
    """A parsed column that does not convert to the reader type."""


def _convert(array, kind):
    """`array` (as pyarrow.json parsed it) as the type `kind`."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == kind:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), kind)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_map(kind):
        if not pa.types.is_struct(array.type):
            raise _Mismatch(f"expected an object (a map), not {array.type}")
        return _struct_to_map(array, kind, mask)
    if pa.types.is_struct(kind):
        if not pa.types.is_struct(array.type):
            raise _Mismatch(f"expected an object, not {array.type}")
        names = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children = [_convert(array.field(names[f.name]), f.type) if f.name in names
                    else pa.nulls(len(array), f.type) for f in kind]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            raise _Mismatch(f"expected an array, not {array.type}")
        offsets = array.offsets
        first = offsets[0].as_py()
        values = _convert(array.flatten(), kind.value_type)
        offsets = pc.subtract(offsets, first) if first else offsets
        cls = pa.ListArray if pa.types.is_list(kind) else pa.LargeListArray
        offsets = offsets.cast(pa.int32() if pa.types.is_list(kind) else pa.int64())
        return cls.from_arrays(offsets, values, type=kind, mask=mask)
    try:
        return array.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Mismatch(f"does not convert to {kind}: {exc}") from None


def _struct_to_map(array, kind, mask):
    """A struct (an object read with its keys as fields) as a map: a row's
    entries are its non-null fields, in the fields' order."""
    n, width = len(array), array.type.num_fields
    item_type = kind.item_type
    if width == 0:
        offsets = pa.array(np.zeros(n + 1, np.int32))
        return pa.MapArray.from_arrays(offsets, pa.array([], pa.string()),
                                       pa.array([], item_type), type=kind, mask=mask)
    children = [_convert(array.field(i), item_type) for i in range(width)]
    present = np.stack([np.asarray(c.is_valid()) for c in children], axis=1)   # n x width
    if mask is not None:
        present &= ~np.asarray(mask)[:, None]
    rows, cols = np.nonzero(present)                 # row-major: a row's entries in order
    counts = np.bincount(rows, minlength=n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    items = pa.concat_arrays(children).take(pa.array(cols.astype(np.int64) * n + rows))
    names = pa.array([array.type.field(i).name for i in range(width)], pa.string())
    keys = names.take(pa.array(cols))
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=kind, mask=mask)


# --------------------------------------------------------------------------
# Decoding


def decode_json(array, *, framed, arrow_type=None, on_error="fail", offsets=None,
                column="value", schema_for_id=None):
    """Decode a binary column of JSON objects into one struct column.

    Args:
        array: A ``binary``/``large_binary``/``binary_view`` (or string) Arrow
            array or ChunkedArray of JSON values; null rows stay null.
        framed: True: each value is in the Confluent wire format (magic byte
            0, a 4-byte big-endian schema id, then the JSON text, as
            confluent-kafka's ``JSONSerializer`` writes it). False: plain JSON
            text. ``"auto"``: each row framed when its first byte is 0 (JSON
            text never begins with one), plain otherwise.
        arrow_type: The reader type: an Arrow struct type or schema, or a JSON
            Schema (text or dict). None: the JSON Schema of the highest schema
            id in the column (through `schema_for_id`), or, without one, the
            type pyarrow infers from this column.
        on_error: ``"fail"``: the first row that does not decode raises
            :class:`~kcodec.errors.ValueDecodeError` (an unknown schema id:
            :class:`~kcodec.errors.UnknownSchemaError`). ``"null"``: such rows
            are null and ``errors`` says why.
        offsets: The rows' Kafka offsets (a sequence or int64 array), to name
            in errors; None: errors name the row.
        column: ``"value"`` or ``"key"``, named in errors.
        schema_for_id: ``schema_for_id(id)`` -> a registered schema with
            ``.schema_type`` (``"JSON"``) and ``.text``; raises
            :class:`~kcodec.errors.SchemaNotFoundError` for an unknown id.
            When given, every id in the column must resolve.

    Returns:
        DecodedColumn: ``values`` (struct), ``schema_ids`` (int32, null where
        unframed or null) and ``errors`` (string, with ``on_error="null"``).
    """
    check_on_error(on_error)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    fr = frames(array, framed)
    n = len(fr)
    status = fr.status
    ids = fr.ids
    offsets = None if offsets is None else np.asarray(offsets, np.int64)
    id_mask = (ids == NO_SCHEMA_ID) | (status != FrameStatus.DATUM)
    schema_ids = pa.array(ids, pa.int32(), mask=id_mask)
    reasons = {}                   # row -> (message, position, error class)
    failing = _Failing(on_error, column, offsets, ids, reasons)

    # frames that are not whole
    for row in np.flatnonzero((status == FrameStatus.SHORT) | (status == FrameStatus.BAD_MAGIC)):
        failing.add(int(row), frame_error(status[row]), 0)
        if on_error == "fail":
            break

    todo = status == FrameStatus.DATUM
    reader = None if arrow_type is None else json_arrow_type(arrow_type)

    # schema ids
    if framed and schema_for_id is not None:
        framed_rows = todo & (ids != NO_SCHEMA_ID)
        for sid in sorted(np.unique(ids[framed_rows]).tolist(), reverse=True):
            try:
                registered = schema_for_id(sid)
            except SchemaNotFoundError as exc:
                message, cls = f"unknown schema id {sid}: {exc}", UnknownSchemaError
            else:
                if str(getattr(registered, "schema_type", "JSON") or "JSON").upper() == "JSON":
                    if reader is None:
                        try:
                            reader = json_arrow_type(registered.text)
                        except SchemaError as exc:
                            raise SchemaError(str(exc), schema_id=sid) from None
                    continue
                message = f"schema id {sid} is a {registered.schema_type} schema, not JSON"
                cls = ValueDecodeError
            for row in np.flatnonzero(framed_rows & (ids == sid)):
                failing.add(int(row), message, None, cls)
                if on_error == "fail":
                    break
    for row in reasons:
        todo[row] = False

    # not a JSON object: the first and last non-blank bytes must be { and }
    for row, message, position in _not_objects(fr, todo):
        failing.add(row, message, position)
        todo[row] = False
        if on_error == "fail":
            break
    if on_error == "fail" and reasons:
        # only the rows before the first found bad can fail first
        todo[min(reasons):] = False

    values = _decode_rows(fr, todo, reader, failing)
    failing.raise_first()
    errors = None
    if on_error == "null":
        errors = pa.nulls(n, pa.string())
        if reasons:
            bad = sorted(reasons)
            texts = [reasons[row][0] if reasons[row][1] is None
                     else f"{reasons[row][0]} (byte {reasons[row][1]})" for row in bad]
            at = np.zeros(n, np.int64)
            at[bad] = np.arange(len(bad))
            mask = np.ones(n, bool)
            mask[bad] = False
            errors = pa.array(texts, pa.string()).take(pa.array(at, mask=mask))
    return DecodedColumn(values, schema_ids, errors)


class _Failing:
    """The rows that did not decode, and what to raise for the first."""

    def __init__(self, on_error, column, offsets, ids, reasons):
        self.on_error, self.column, self.offsets, self.ids = on_error, column, offsets, ids
        self.reasons = reasons
        self.decoding_failed = False

    def add(self, row, message, position, cls=ValueDecodeError):
        self.reasons[row] = (message, position, cls)

    def failed_decoding(self, row, message, position):
        self.add(row, message, position)
        self.decoding_failed = True

    @property
    def stop(self):
        """Decoding is to stop: a row failed it, with on_error="fail"."""
        return self.on_error == "fail" and self.decoding_failed

    def raise_first(self):
        if self.on_error != "fail" or not self.reasons:
            return
        row = min(self.reasons)
        message, position, cls = self.reasons[row]
        sid = int(self.ids[row])
        raise cls(message, column=self.column, row=row, position=position,
                  offset=None if self.offsets is None else int(self.offsets[row]),
                  schema_id=None if sid == NO_SCHEMA_ID else sid)


def _not_objects(fr, todo):
    """(row, message) of the rows to decode whose first non-blank byte is not
    ``{`` or last is not ``}``: found with numpy, a byte of blanks at a time."""
    data, starts, ends = fr.data, fr.starts, fr.ends
    rows = np.flatnonzero(todo)
    blank = np.zeros(256, bool)
    blank[list(_WHITESPACE)] = True
    first = starts[rows].copy()
    last = ends[rows] - 1
    for _ in range(64):
        live = first < ends[rows]
        move = np.zeros(len(rows), bool)
        move[live] = blank[data[first[live]]]
        if not move.any():
            break
        first[move] += 1
    for _ in range(64):
        live = last >= first
        move = np.zeros(len(rows), bool)
        move[live] = blank[data[last[live]]]
        if not move.any():
            break
        last[move] -= 1
    empty = last < first
    ok = ~empty
    ok[ok] = (data[first[ok]] == ord("{")) & (data[last[ok]] == ord("}"))
    bad = []
    for i in np.flatnonzero(~ok):
        row = int(rows[i])
        datum = bytes(data[starts[row]:ends[row]]).strip(b" \t\r\n")
        if datum[:1] == b"{" and datum[-1:] == b"}":      # beyond 64 blanks: fine after all
            continue
        if not datum:
            bad.append((row, "empty JSON value", None))
            continue
        message, position, value = _explain(fr, row)
        if message is None:
            message = f"not a JSON object but {_value_kind(value)}"
        bad.append((row, message, position))
    return bad


def _line_buffer(fr, todo):
    """The datums of the rows in `todo` as one buffer of lines (their raw
    newlines made spaces), and where each of these rows' line begins and
    ends in it (rows in order): one copy, in the core."""
    rows = np.flatnonzero(todo)
    buffer, line_lo, line_hi = join_lines(fr.data, fr.starts, fr.ends, rows)
    return buffer, line_lo, line_hi, rows


def _read(buffer, lo, hi, parse_type, infer, longest):
    block = max(_MIN_BLOCK, min(_MAX_BLOCK, longest + 2))
    read = pj.ReadOptions(block_size=block, use_threads=True)
    schema = None if parse_type is None else pa.schema(list(parse_type))
    parse = pj.ParseOptions(explicit_schema=schema,
                            unexpected_field_behavior="infer" if infer else "ignore")
    table = pj.read_json(pa.BufferReader(pa.py_buffer(buffer[lo:hi])), read_options=read,
                         parse_options=parse)
    return table


def _decode_rows(fr, todo, reader, failing):
    """The struct array of every row (rows not in `todo` null), the rows
    that fail recorded in `failing`; None when one fails with on_error="fail"."""
    n = len(fr)
    buffer, line_lo, line_hi, rows = _line_buffer(fr, todo)
    longest = int((line_hi - line_lo).max()) if len(rows) else 0
    infer = reader is None
    parse_type = None if infer else _parse_type(reader)
    infer_rest = infer or _has_map(reader)
    empty = reader if reader is not None else pa.struct([])

    def parse(a, b):
        """The todo rows a..b as a struct array of the reader type; raises on failure."""
        return parse_lines(buffer, int(line_lo[a]), int(line_hi[b - 1]), b - a)

    def parse_lines(buf, lo, hi, count):
        utf8 = pa.Array.from_buffers(pa.large_string(), 1, [None, pa.py_buffer(
            np.array([0, hi - lo], np.int64)), pa.py_buffer(buf[lo:hi])])
        utf8.validate(full=True)
        # Blocks are parsed in parallel; inferring, each block would infer a
        # type of its own, so the lines are read as one block.
        table = _read(buf, lo, hi, parse_type, infer_rest, hi - lo if infer_rest else longest)
        if table.num_rows != count:
            raise _Mismatch("more than one JSON value")
        struct = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in table.columns], fields=list(table.schema)) \
            if table.num_columns else pa.array([{}] * count, pa.struct([]))
        return struct if infer else _convert(struct, reader)

    def parse_cleaned(row):
        """A row of a reader type with maps, read again with only what the
        type has: pyarrow infers a map as an object of its keys, and with
        them the fields the type does not have, whose types may conflict."""
        message, _, value = _explain(fr, row)
        if message is not None or not isinstance(value, dict):
            return None
        line = np.frombuffer(_json.dumps(_clean(value, reader), ensure_ascii=False)
                             .encode("utf-8") + b"\n", np.uint8)
        try:
            return parse_lines(line, 0, len(line), 1)
        except (pa.ArrowInvalid, _Mismatch, pa.ArrowTypeError):
            return None

    def spread(values):
        """`values` (of the todo rows) at their rows, null elsewhere."""
        if len(rows) == n:
            return values
        at = np.zeros(n, np.int64)
        at[rows] = np.arange(len(rows))
        return values.take(pa.array(at, mask=~todo))

    if infer_rest and len(rows):
        deep = _too_deep(fr, buffer, line_lo, line_hi, rows)
        if deep:
            for row in deep:
                failing.failed_decoding(row, f"nested deeper than {MAX_DEPTH} levels", None)
                todo[row] = False
                if failing.stop:
                    return None
            buffer, line_lo, line_hi, rows = _line_buffer(fr, todo)

    m = len(rows)
    if m == 0:
        return pa.nulls(n, empty)
    try:
        return spread(parse(0, m))
    except (pa.ArrowInvalid, _Mismatch, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        if isinstance(exc, pa.ArrowNotImplementedError) and not infer:
            raise SchemaError(f"the reader type {reader} is not one pyarrow's JSON reader "
                              f"can read: {exc}") from None

    chunks = []

    def bisect(a, b):
        if failing.stop:
            return
        try:
            chunks.append(parse(a, b))
            return
        except (pa.ArrowInvalid, _Mismatch, pa.ArrowTypeError) as exc:
            if b - a == 1:
                row = int(rows[a])
                cleaned = parse_cleaned(row) if infer_rest and not infer else None
                if cleaned is not None:
                    chunks.append(cleaned)
                    return
                failing.failed_decoding(row, *_row_error(fr, row, exc))
                chunks.append(pa.nulls(1, empty))
                return
        mid = (a + b) // 2
        bisect(a, mid)
        bisect(mid, b)

    bisect(0, m)
    if failing.stop:
        return None
    if not infer:
        return spread(pa.concat_arrays(chunks))
    # inferred: rows that parse alone may not parse together; infer again
    # without the bad rows
    for row in failing.reasons:
        todo[row] = False
    buffer, line_lo, line_hi, rows = _line_buffer(fr, todo)
    if not len(rows):
        return pa.nulls(n, empty)
    try:
        return spread(parse(0, len(rows)))
    except (pa.ArrowInvalid, _Mismatch, pa.ArrowTypeError) as exc:
        raise ValueDecodeError(f"the {failing.column}s' types conflict, so no type can be "
                               f"inferred ({exc}): give a schema",
                               column=failing.column) from None


MAX_DEPTH = 500
_BRACKETS = np.zeros(256, np.int8)
_BRACKETS[[ord("{"), ord("[")]] = 1
_BRACKETS[[ord("}"), ord("]")]] = -1


def _too_deep(fr, buffer, line_lo, line_hi, rows):
    """The rows nested deeper than MAX_DEPTH (pyarrow's type inference
    recurses once a level: far deeper documents overflow its stack). Only
    rows long enough to nest that deep are looked at: their brackets counted
    with numpy, strings' included; those over the limit are measured again
    with json.loads."""
    long = np.flatnonzero(line_hi - line_lo > 2 * MAX_DEPTH)
    if not len(long):
        return []
    if len(long) < 256:
        deepest = np.array([_bracket_depth(buffer[line_lo[i]:line_hi[i]]) for i in long])
    else:
        step = _BRACKETS[buffer]
        at = np.flatnonzero(step)                # every row has one, its first {
        depth = np.cumsum(step[at], dtype=np.int64)
        first = np.searchsorted(at, line_lo)
        before = np.where(first > 0, depth[np.maximum(first - 1, 0)], 0)
        deepest = (np.maximum.reduceat(depth, first) - before)[long]
    found = []
    for i in long[deepest > MAX_DEPTH]:
        row = int(rows[i])
        message, _, value = _explain(fr, row)
        if message is not None or _depth(value) > MAX_DEPTH:
            found.append(row)
    return found


def _bracket_depth(line):
    step = _BRACKETS[line]
    return int(np.cumsum(step[np.flatnonzero(step)], dtype=np.int64).max(initial=0))


def _depth(value):
    """How deep a json.loads value nests (an object or array is one level)."""
    level, todo = 0, [(value, 1)]
    while todo:
        value, at = todo.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            level = max(level, at)
            todo.extend((v, at + 1) for v in value)
    return level


def _clean(value, kind):
    """A json.loads value with only what the Arrow type `kind` has: no fields
    it does not name, no null map entries."""
    if pa.types.is_struct(kind) and isinstance(value, dict):
        return {f.name: _clean(value[f.name], f.type) for f in kind if f.name in value}
    if pa.types.is_map(kind) and isinstance(value, dict):
        return {k: _clean(v, kind.item_type) for k, v in value.items() if v is not None}
    if hasattr(kind, "value_type") and not pa.types.is_dictionary(kind) \
            and isinstance(value, list):
        return [_clean(v, kind.value_type) for v in value]
    return value


def _explain(fr, row):
    """(message, position, None) of a row that is not UTF-8 JSON text, the
    position counted from the frame's first byte; (None, None, value) of one
    that is."""
    header = int(fr.starts[row] - fr.value_starts[row])
    datum = bytes(fr.data[fr.starts[row]:fr.ends[row]])
    try:
        text = datum.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8: {bad.reason}", header + bad.start, None
    try:
        return None, None, _json.loads(text)
    except _json.JSONDecodeError as bad:
        return f"not JSON: {bad.msg}", header + len(text[:bad.pos].encode("utf-8")), None
    except ValueError as bad:       # e.g. integers too long to read
        return f"not JSON: {bad}", None, None
    except RecursionError:
        return "not JSON: nested too deeply", None, None


def _row_error(fr, row, exc):
    """(message, position) of a row that does not parse alone."""
    message, position, _ = _explain(fr, row)
    if message is not None:
        return message, position
    message = str(exc)
    for tail in (" in row 0",):
        if message.endswith(tail):
            message = message[:-len(tail)]
    return f"does not fit the schema: {message}", None
