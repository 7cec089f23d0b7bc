"""Typed keys and values on Spark: Avro and JSON datums (Confluent-framed or
not) decoded by kcodec's core (:func:`kcodec.values.decode_column`) inside
Spark's Python workers, one Arrow batch at a time.

Two ways in:

- the ``kafka-log`` source's ``valueFormat`` / ``keyFormat`` options, which
  decode in the source's own batches (:func:`typed_table`);
- :func:`decode_values`, for any DataFrame with a binary column (Spark's own
  Kafka source included), through ``mapInArrow``.

Spark needs a DataFrame's schema when it plans, before any value is read: the
reader schema is fixed on the driver (given, or the registry subject's
latest version) and its text travels to every task, so every partition
decodes to the same type. The decoded column's Spark type is the Arrow type
of the reader schema (:func:`kcodec.values.avro.arrow_type`, Spark
``from_avro``'s types) converted by PySpark's own ``from_arrow_type``.

Schema ids resolve through one registry client per Python worker process
(:func:`worker_source`), which fetches each id once and keeps it for every
batch and task the process runs.
"""
import functools
import json
from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from ..values import check_format, check_on_error, decode_column, with_decoded
from .schema import arrow_schema, to_spark_arrow

# The value (key) field's metadata: the reader schema's text, which the
# executors decode with (the same as the planner typed the column by).
FORMAT_METADATA = "kcodec.format"
READER_SCHEMA_METADATA = "kcodec.readerSchema"


# ------------------------------------------------------------------ types

def reader_arrow_type(format, reader_schema):
    """The Arrow struct type a column decodes to with this reader schema.

    Args:
        format: ``"avro"`` or ``"json"``.
        reader_schema: Avro schema JSON (text or decoded); for JSON, a JSON
            Schema (text or decoded) or an Arrow struct type.
    """
    if format == "avro":
        from ..values.avro import arrow_type
        return arrow_type(reader_schema)
    if format == "json":
        from ..values.json import json_arrow_type
        return json_arrow_type(reader_schema)
    raise ValueError(f"format must be 'avro' or 'json', not {format!r}")


def spark_type(arrow_type):
    """The Spark type of an Arrow type, by PySpark's own conversion
    (timestamps with a zone are ``timestamp``, without ``timestamp_ntz``)."""
    from pyspark.sql.pandas.types import from_arrow_type
    return from_arrow_type(arrow_type, prefer_timestamp_ntz=True)


def decoded_fields(name, format, reader_schema, on_error, metadata=None):
    """The Spark fields a decoded column ``name`` becomes: the struct, then
    ``<name>SchemaId`` (int), then ``<name>Error`` (string) with
    ``on_error="null"``."""
    fields = [StructField(name, spark_type(reader_arrow_type(format, reader_schema)), True,
                          metadata or {}),
              StructField(f"{name}SchemaId", IntegerType(), True)]
    if on_error == "null":
        fields.append(StructField(f"{name}Error", StringType(), True))
    return fields


def with_decoded_fields(schema, decoded):
    """`schema` (a StructType) with each column of ``decoded`` ({name:
    fields}) replaced by its fields."""
    fields = []
    for field in schema.fields:
        fields.extend(decoded.get(field.name, [field]))
    return StructType(fields)


def spark_arrow(array, target):
    """A decoded column cast to the Arrow type Spark exchanges (`target`:
    µs timestamps, list children named ``element``), nested fields and all.

    Structs, lists and maps are rebuilt from their children, cast one by
    one, with their own validity kept: Arrow's own cast of a struct refuses
    a null in a child field the target says is not nullable, which a column
    built elsewhere (a JSON struct's inferred fields) may hold under a null
    row."""
    if array.type.equals(target):
        return array
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([spark_arrow(chunk, target) for chunk in array.chunks], target)
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = [spark_arrow(array.field(i), target.field(i).type)
                    for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(array.type):
        return pa.MapArray.from_arrays(
            array.offsets, spark_arrow(array.keys, target.key_type),
            spark_arrow(array.items, target.item_type), type=target, mask=mask)
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and (
            pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        offsets = array.offsets
        kind = pa.ListArray if pa.types.is_list(target) else pa.LargeListArray
        offsets = offsets.cast(pa.int32() if kind is pa.ListArray else pa.int64())
        return kind.from_arrays(offsets, spark_arrow(array.values, target.value_type),
                                type=target, mask=mask)
    # Spark keeps µs: a nanosecond timestamp is truncated, not refused.
    return array.cast(target, safe=not pa.types.is_timestamp(target))


def _cast_columns(table, target, names):
    """`table` with its columns `names` cast to their types in `target`."""
    for name in names:
        at = table.schema.get_field_index(name)
        wanted = target.field(name).type
        if at >= 0 and not table.column(at).type.equals(wanted):
            table = table.set_column(at, pa.field(name, wanted),
                                     spark_arrow(table.column(at), wanted))
    return table


def _schema_text(schema):
    if isinstance(schema, (bytes, bytearray)):
        return bytes(schema).decode()
    return schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)


# ---------------------------------------------------------- schema sources

@functools.lru_cache(maxsize=32)
def worker_source(url, registry_options=()):
    """The schema source of a registry URL (or ``_schemas`` directory) and
    its ``schemaRegistry.*`` options: one per Python process, so each schema
    id is fetched once per process and kept for all its batches and tasks."""
    from ..values.registry import registry_from_options
    return registry_from_options(url, dict(registry_options))


def _registry_spec(schemas):
    """What `schemas` (as decode_values takes it) travels to the workers as:
    a mapping as it is; a URL or a path as ``(url, ())``; a SchemaRegistry
    as ``(url, its options)`` when it says them (``spark_options()``), else
    itself (pickled)."""
    if schemas is None or isinstance(schemas, Mapping):
        return schemas
    if isinstance(schemas, (str, bytes)) or hasattr(schemas, "__fspath__"):
        import os
        return ("registry", os.fsdecode(schemas), ())
    options = getattr(schemas, "spark_options", None)
    if callable(options):
        return ("registry", schemas.url, tuple(sorted(dict(options()).items())))
    return schemas


def _spec_source(spec):
    if isinstance(spec, tuple) and len(spec) == 3 and spec[0] == "registry":
        return worker_source(spec[1], spec[2])
    return spec


# ------------------------------------------------------------- kafka-log

def _single_topic(options, paths, what):
    """The one topic a kafka-log read covers (for TopicNameStrategy
    subjects), or a ValueError asking for the reader schema."""
    topics = set()
    if options.topics is not None:
        topics = set(options.topics)
    elif options.assign is not None and options.topic_pattern is None:
        topics = {topic for topic, _ in options.assign}
    if len(topics) != 1 and paths is not None:
        from ..log.partition import parse_partition_dir
        from .files import partition_dirs
        found = set()
        for _, directory in partition_dirs(paths, options.storage):
            topic, partition = parse_partition_dir(directory)
            if options.wants(topic, partition):
                found.add(topic)
        topics = found
    if len(topics) == 1:
        return next(iter(topics))
    listed = ", ".join(sorted(topics)[:5]) + (", ..." if len(topics) > 5 else "")
    covers = f"covers {len(topics)} topics ({listed})" if topics else "finds no topic"
    name = "key" if what.startswith("key") else "value"
    raise ValueError(
        f"kafka-log: {what} needs a reader schema, and this read {covers}: the registry's "
        f"subject <topic>-{name} names one topic. Give the reader schema with the "
        f"{name}Schema option (or read one topic)")


def log_reader_schemas(options, paths):
    """The reader schema text of each typed column of a kafka-log read
    (``{"value": text, "key": text}``): ``valueSchema`` / ``keySchema``, else
    the latest version of the registry subject ``<topic>-value``
    (``<topic>-key``) of the one topic the read covers.

    Raises:
        ValueError: When there is no way to a reader schema.
    """
    readers = {}
    for name, fmt, given in (("value", options.value_format, options.value_schema),
                             ("key", options.key_format, options.key_schema)):
        if fmt == "raw":
            continue
        option = f"{name}Format={fmt}"
        if given is not None:
            readers[name] = given
            continue
        if options.schema_registry_url is None:
            raise ValueError(
                f"kafka-log: {option} needs a reader schema before Spark plans the read: give "
                f"the {name}Schema option (the schema's JSON), or schemaRegistryUrl to read "
                f"the latest version of the topic's subject <topic>-{name}")
        topic = _single_topic(options, paths, option)
        subject = f"{topic}-{name}"
        registry = worker_source(options.schema_registry_url, options.registry_options)
        try:
            latest = registry.latest(subject)
        except LookupError as exc:
            raise ValueError(f"kafka-log: {option}: the registry has no subject {subject!r} "
                             f"({exc}); give the {name}Schema option") from exc
        kind = (getattr(latest, "schema_type", None) or "AVRO").upper()
        if kind != fmt.upper():
            raise ValueError(f"kafka-log: {option}: the latest {subject} schema (id "
                             f"{latest.id}) is {kind}, not {fmt.upper()}")
        readers[name] = latest.text
    return readers


def log_schema(base, options, paths):
    """The schema of a kafka-log read: `base` (Spark's Kafka source columns)
    with the typed columns decoded. Each decoded column's metadata carries
    its reader schema's text (:data:`READER_SCHEMA_METADATA`)."""
    if not options.typed:
        return base
    readers = log_reader_schemas(options, paths)
    decoded = {}
    for name, fmt in (("value", options.value_format), ("key", options.key_format)):
        if name in readers:
            metadata = {FORMAT_METADATA: fmt, READER_SCHEMA_METADATA: readers[name]}
            decoded[name] = decoded_fields(name, fmt, readers[name], options.on_value_error,
                                           metadata)
    return with_decoded_fields(base, decoded)


def schema_readers(options, schema, paths):
    """The reader schema texts a kafka-log read decodes with: those the
    planner put in `schema`'s metadata (:func:`log_schema`), else found
    again (a schema given by the user)."""
    if not options.typed:
        return {}
    readers = {}
    for name in ("value", "key"):
        if name in schema.names:
            text = (schema[name].metadata or {}).get(READER_SCHEMA_METADATA)
            if text is not None:
                readers[name] = text
    wanted = {name for name, fmt in (("value", options.value_format),
                                     ("key", options.key_format)) if fmt != "raw"}
    if wanted - set(readers):
        readers = {**log_reader_schemas(options, paths), **readers}
    return readers


def typed_table(table, options, readers, target):
    """A kafka-log table (read_split's) with its keys and values decoded as
    the options say, with the reader schemas the planner chose, the decoded
    columns in `target`'s types (the Arrow schema Spark expects)."""
    from ..arrow import typed_values
    source = None
    if options.schema_registry_url is not None:
        source = worker_source(options.schema_registry_url, options.registry_options)
    table = typed_values(table, value_format=options.value_format,
                         key_format=options.key_format, schemas=source,
                         value_schema=readers.get("value"), key_schema=readers.get("key"),
                         on_value_error=options.on_value_error)
    return _cast_columns(table, target, [name for name, fmt in (
        ("value", options.value_format), ("key", options.key_format)) if fmt != "raw"])


# ---------------------------------------------------------- decode_values

def decode_values(df, column="value", format="avro", schemas=None, value_schema=None,
                  subject=None, on_error="fail"):
    """A DataFrame's binary column of Avro or JSON datums decoded into a
    struct column, by kcodec's core in ``mapInArrow``.

    Works on any DataFrame with a binary column, ``spark.read.format("kafka")``
    included. Confluent-framed datums (a magic byte, the schema id, the
    datum) resolve their writer schemas through ``schemas``; each is read
    with one reader schema (Avro's resolution rules), so every row has the
    same type.

    Args:
        df: A DataFrame.
        column: The binary column to decode (``"value"`` or ``"key"`` of a
            Kafka DataFrame, or any other).
        format: ``"avro"`` or ``"json"``.
        schemas: Where the frames' schema ids resolve: a mapping ``{id:
            schema}``, a registry URL, a :class:`kcodec.SchemaRegistry`, or
            the path of a registry's ``_schemas`` partition directory (see
            :func:`kcodec.decode`). None: the datums are not framed
            (``value_schema`` reads them).
        value_schema: The reader schema (Avro JSON text or its decoded JSON;
            for JSON, a JSON Schema or an Arrow struct type).
        subject: Without ``value_schema``: read with the latest version of
            this registry subject (e.g. ``"orders-value"``).
        on_error: ``"fail"``: a datum that does not decode fails the task
            with a :class:`kcodec.errors.ValueDecodeError` naming its offset
            (when ``df`` has an ``offset`` column) and the byte in it.
            ``"null"``: the value is null and ``<column>Error`` says why.

    Returns:
        pyspark.sql.DataFrame: ``df`` with ``column`` replaced by the struct
        column, then ``<column>SchemaId`` (int, null when unframed) and, with
        ``on_error="null"``, ``<column>Error`` (string).

    Raises:
        ValueError: When ``column`` is missing or not binary, or there is no
            reader schema: with neither ``value_schema`` nor ``subject``,
            ``schemas`` must be a mapping (its highest id's schema reads).
    """
    from pyspark.sql.types import BinaryType
    format = check_format("format", format)
    if format == "raw":
        raise ValueError("decode_values decodes format='avro' or 'json'; 'raw' is the "
                         "column as it is")
    check_on_error(on_error)
    if column not in df.columns:
        raise ValueError(f"no column {column!r} in {df.columns}")
    if not isinstance(df.schema[column].dataType, BinaryType):
        raise ValueError(f"column {column!r} is {df.schema[column].dataType.simpleString()}, "
                         "not binary")
    extra = {f"{column}SchemaId"} | ({f"{column}Error"} if on_error == "null" else set())
    clash = sorted(extra & set(df.columns))
    if clash:
        raise ValueError(f"columns {clash} of the DataFrame clash with the decoded columns; "
                         "rename them first")
    reader = _reader_schema(format, schemas, value_schema, subject)
    if not isinstance(reader, pa.DataType):
        reader = _schema_text(reader)
    output = with_decoded_fields(df.schema, {column: decoded_fields(column, format, reader,
                                                                    on_error)})
    function = functools.partial(
        _decode_batches, column=column, format=format, spec=_registry_spec(schemas),
        reader=reader, on_error=on_error, output=output.json(),
        has_offsets="offset" in df.columns)
    return df.mapInArrow(function, output)


def _reader_schema(format, schemas, value_schema, subject):
    if value_schema is not None:
        return value_schema
    if subject is not None:
        if schemas is None:
            raise ValueError(f"subject={subject!r} needs schemas= (a registry URL, a "
                             "kcodec.SchemaRegistry or a _schemas directory) to look it up in")
        from ..values.registry import schema_source
        found = schema_source(_spec_source(_registry_spec(schemas))).latest(subject)
        if found.schema_type.upper() != format.upper():
            raise ValueError(f"subject {subject!r}: its latest schema (id {found.id}) is "
                             f"{found.schema_type}, not {format.upper()}")
        return found.text
    if isinstance(schemas, Mapping) and schemas:
        highest = max(schemas, key=int)
        found = schemas[highest]
        return getattr(found, "text", found)
    raise ValueError(
        f"decode_values(format={format!r}) needs a reader schema, which Spark needs before "
        "it reads a row: give value_schema= (the schema's JSON), or subject= with a registry "
        "in schemas= (its latest version reads), or schemas= as a mapping {id: schema} (its "
        "highest id reads)")


def _decode_batches(batches, column, format, spec, reader, on_error, output, has_offsets):
    """mapInArrow's function: each batch's column decoded by the core."""
    from pyspark.sql.types import _parse_datatype_json_string
    target = arrow_schema(_parse_datatype_json_string(output))
    source = _spec_source(spec)
    for batch in batches:
        table = pa.Table.from_batches([batch])
        offsets = None
        if has_offsets:
            offsets = table.column("offset").to_numpy(zero_copy_only=False)
        decoded = decode_column(table.column(column), format=format, schemas=source,
                                reader_schema=reader, on_error=on_error, offsets=offsets,
                                column=column)
        table = _cast_columns(with_decoded(table, column, decoded), target, [column])
        yield from to_spark_arrow(table, target).to_batches()
