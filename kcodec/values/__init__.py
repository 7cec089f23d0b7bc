"""Typed keys and values: a binary column of Avro or JSON datums (framed in
the Confluent wire format or not) decoded into one Arrow struct column.

Avro goes through the compiled core (kcodec/_core/avro.pyx) with programs
compiled from the schemas here (avro.py); JSON through pyarrow's JSON reader
(json.py); schema ids resolve through a source (registry.py)."""
from typing import NamedTuple, Optional

import pyarrow as pa

FORMATS = ("raw", "avro", "json")
ON_ERROR = ("fail", "null")


class DecodedColumn(NamedTuple):
    """A decoded key or value column.

    Attributes:
        values: The struct column (``pyarrow.Array`` or ``ChunkedArray``),
            typed by the reader schema; null where the input was null or,
            with ``on_error="null"``, did not decode.
        schema_ids: The frames' schema ids (int32; null where unframed).
        errors: With ``on_error="null"``, why each null-by-error row did not
            decode (string, null elsewhere); None with ``on_error="fail"``.
    """
    values: pa.Array
    schema_ids: pa.Array
    errors: Optional[pa.Array]


def check_format(name, value):
    """The format option `name` as one of FORMATS (None is "raw")."""
    value = "raw" if value is None else value
    if value not in FORMATS:
        raise ValueError(f"{name} must be one of {', '.join(FORMATS)}, not {value!r}")
    return value


def check_on_error(value):
    if value not in ON_ERROR:
        raise ValueError(f"on_value_error must be 'fail' or 'null', not {value!r}")
    return value


def decode_column(array, *, format, schemas=None, reader_schema=None, on_error="fail",
                  offsets=None, column="value"):
    """A binary column of keys or values decoded into typed columns.

    Args:
        array: The keys or values: a binary, large_binary or binary_view
            ``pyarrow.Array`` or ``ChunkedArray``; nulls stay null.
        format: ``"avro"`` or ``"json"``.
        schemas: Where framed schema ids resolve (see :func:`kcodec.decode`).
        reader_schema: The schema to read with (Avro: JSON text or its
            decoded JSON; JSON: a JSON Schema or an Arrow type).
        on_error: ``"fail"`` or ``"null"``.
        offsets: Each row's Kafka offset, named in errors.
        column: ``"value"`` or ``"key"``, named in errors.

    Returns:
        DecodedColumn
    """
    check_on_error(on_error)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    source = None
    if schemas is not None:
        from .registry import schema_source
        source = schema_source(schemas)
    if format == "avro":
        from .avro import decode_avro
        if source is None and reader_schema is None:
            raise ValueError(f"Avro {column}s need schemas= (framed in the Confluent wire "
                             f"format) or a {column}_schema (unframed datums)")
        framed = source is not None or reader_schema is None
        return decode_avro(array, framed=framed, source=source, reader_schema=reader_schema,
                           on_error=on_error, offsets=offsets, column=column)
    if format == "json":
        from .json import decode_json
        # JSON text never begins with a zero byte: without a source, each row says.
        return decode_json(array, framed=True if source is not None else "auto",
                           arrow_type=_json_type(reader_schema),
                           on_error=on_error, offsets=offsets, column=column,
                           schema_for_id=None if source is None else source.schema)
    raise ValueError(f"format must be 'avro' or 'json', not {format!r}")


def _json_type(reader_schema):
    if reader_schema is None or isinstance(reader_schema, (pa.DataType, pa.Schema)):
        return pa.struct(list(reader_schema)) if isinstance(reader_schema, pa.Schema) \
            else reader_schema
    from .json import json_arrow_type
    return json_arrow_type(reader_schema)


def with_decoded(table, name, decoded):
    """`table` with its column `name` replaced by the decoded column, and
    ``<name>SchemaId`` (and ``<name>Error``) after it."""
    at = table.schema.get_field_index(name)
    table = table.set_column(at, pa.field(name, decoded.values.type), decoded.values)
    table = table.add_column(at + 1, pa.field(f"{name}SchemaId", pa.int32()), decoded.schema_ids)
    if decoded.errors is not None:
        table = table.add_column(at + 2, pa.field(f"{name}Error", pa.string()), decoded.errors)
    return table
