"""Record sets to Arrow and back: decode() builds the columns of Spark's Kafka
source in the compiled core (kcodec/_core/columns.pyx) without a Python object
per record; encode() of a table reads its columns here (table_encoding) and
the core builds the batches straight from their buffers."""
import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._core.build import batch_starts, rows_from_arrow
from ._core.columns import decode_columns, decode_parts, decode_record_set, record_schema
from .compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from .errors import integer_option
from .values import check_format, check_on_error, decode_column, with_decoded
from .records import (
    _BATCH_COLUMNS, _RUN_TYPES, INT32_MAX, NO_TIMESTAMP, BatchReader, _check_numbering,
    _fixed_attributes, _runs, check_isolation, consumer_batches, offset_bounds, read_batches,
)

TOPIC_FIELD = pa.field("topic", pa.string())
PARTITION_FIELD = pa.field("partition", pa.int32())


@functools.lru_cache(maxsize=None)
def schema(*, topic=False, partition=False, batch_columns=False, views=False):
    """The schema decode() returns: the core's record batch, with topic and
    partition after value when given."""
    fields = list(record_schema(views, batch_columns))
    extra = ([TOPIC_FIELD] if topic else []) + ([PARTITION_FIELD] if partition else [])
    return pa.schema(fields[:2] + extra + fields[2:])


def decode(data, *, verify_crc=True, include_control=False, isolation="read_uncommitted",
           aborted=None, topic=None, partition=None, batch_columns=False,
           max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES, partial="stop", views=False,
           start_offset=None, end_offset=None, value_format=None, key_format=None, schemas=None,
           value_schema=None, key_schema=None, on_value_error="fail"):
    """Decode a record set into a ``pyarrow.Table``, row for row what
    :func:`read_records` gives, with no Python object per record.

    The columns are named as Spark's Kafka source names them: ``key``,
    ``value`` (binary), then ``topic`` and ``partition`` only when given,
    ``offset``, ``timestamp`` (ms, UTC; null for magic 0), ``timestampType``
    (-1 none, 0 CreateTime, 1 LogAppendTime) and ``headers``
    (list<struct<key: string, value: binary>>, null when a record has none).

    Args:
        data: The record set (any buffer, see :func:`read_batches`).
        verify_crc: Check CRCs.
        include_control: Also return control records (transaction markers).
        isolation: ``"read_uncommitted"`` or ``"read_committed"`` (see
            :func:`read_records`).
        aborted: For ``read_committed``: a Fetch response's
            ``(producer_id, first_offset)`` pairs; None: found from the
            ABORT markers in ``data``.
        topic: Add a ``topic`` string column with this value.
        partition: Add a ``partition`` int32 column with this value.
        batch_columns: Add ``producerId``, ``producerEpoch``, ``sequence``,
            ``isTransactional`` and ``leaderEpoch`` columns.
        max_decompressed_bytes: The most bytes one batch may decompress to.
        partial: ``"stop"`` or ``"error"``, as in :func:`read_batches`.
        views: Make ``key`` and ``value`` ``binary_view`` columns that point
            into ``data`` and the decompressed batches instead of copying
            them. The table keeps those buffers (and so all of ``data``)
            alive, and a mutable ``data`` must not change while it is in use.
        start_offset: The first offset returned (inclusive).
        end_offset: The offset to stop before (exclusive). Batches wholly
            outside the bounds are not decompressed.
        value_format: ``None`` or ``"raw"``: ``value`` is binary. ``"avro"``:
            Avro datums in the Confluent wire format (a magic byte 0, the
            schema id, the datum), or unframed datums when ``value_schema``
            is given and ``schemas`` is not. ``"json"``: JSON values, framed
            (JSON Schema) when ``schemas`` is given, plain otherwise. ``value``
            becomes a struct column (the reader schema's type, as Spark's
            ``from_avro`` types it; see the guide's "Typed values"), followed
            by ``valueSchemaId`` (int32, null when unframed).
        key_format: The same for ``key`` (``keySchemaId``).
        schemas: Where framed schema ids resolve: a mapping ``{id: schema}``
            (Avro JSON text or its decoded JSON), a registry URL (Confluent's
            REST API), a :class:`kcodec.SchemaRegistry`, or the path of a
            registry's ``_schemas`` partition directory, read offline.
        value_schema: The reader schema for values (Avro JSON; for JSON, a
            JSON Schema or an Arrow type). None: the writer schema with the
            highest id in the data (JSON without schemas: inferred).
        key_schema: The same for keys.
        on_value_error: ``"fail"``: a key or value that does not decode
            raises :class:`kcodec.errors.ValueDecodeError`, naming its
            offset and the byte in it. ``"null"``: it is null, and a
            ``valueError`` (``keyError``) string column says why.

    Returns:
        pyarrow.Table: One row per record.

    Raises:
        KafkaFormatError: For input that breaks Kafka's format.
        ValueDecodeError: For a key or value that does not decode, with
            ``on_value_error="fail"`` (:class:`UnknownSchemaError` for a
            schema id the source does not have).
        SchemaError: For a schema kcodec cannot read with.
        SchemaRegistryError: When the registry fails.
    """
    value_format = check_format("value_format", value_format)
    key_format = check_format("key_format", key_format)
    check_on_error(on_value_error)
    options = dict(verify_crc=verify_crc, partial=partial,
                   max_decompressed_bytes=max_decompressed_bytes)
    topic, partition = _checked_topic_and_partition(topic, partition)
    start_offset, end_offset = offset_bounds(start_offset, end_offset)
    if check_isolation(isolation) == "read_uncommitted":
        table = decode_record_set(read_batches(data, **options), include_control,
                                  batch_columns, views, start_offset, end_offset)
    else:
        batches = consumer_batches(data, isolation, aborted, start_offset, end_offset,
                                   **options)
        table = decode_columns(batches, include_control, batch_columns, views)
    table = _with_topic_and_partition(table, topic, partition)
    if start_offset is not None or end_offset is not None:
        table = _offsets_within(table, start_offset, end_offset)
    return typed_values(table, value_format=value_format, key_format=key_format,
                        schemas=schemas, value_schema=value_schema, key_schema=key_schema,
                        on_value_error=on_value_error)


def typed_values(table, *, value_format="raw", key_format="raw", schemas=None,
                 value_schema=None, key_schema=None, on_value_error="fail"):
    """`table` (decode()'s columns) with its value and key columns decoded
    as value_format and key_format ask (see :func:`decode`)."""
    offsets = None
    for name, fmt, reader in (("value", value_format, value_schema),
                              ("key", key_format, key_schema)):
        if fmt == "raw":
            continue
        if offsets is None:
            offsets = table.column("offset").to_numpy()
        decoded = decode_column(table.column(name), format=fmt, schemas=schemas,
                                reader_schema=reader, on_error=on_value_error,
                                offsets=offsets, column=name)
        table = with_decoded(table, name, decoded)
    return table


def decode_many(record_sets, *, verify_crc=True, include_control=False,
                isolation="read_uncommitted", topic=None, partition=None, batch_columns=False,
                max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES, partial="stop",
                views=False, first_index=0, value_format=None, key_format=None, schemas=None,
                value_schema=None, key_schema=None, on_value_error="fail"):
    """:func:`decode` of each of many record sets, into one table.

    One call into the core builds one table for all of them: many small
    record sets (a Spark column of fetched payloads, say) pay :func:`decode`'s
    fixed cost (about 8-20 µs, building a table) once. ``read_committed``
    finds each record set's aborted transactions from its own ABORT markers.

    Args:
        record_sets: An iterable of record sets (buffers); None stands for a
            record set with no rows.
        verify_crc: As in :func:`decode`.
        include_control: As in :func:`decode`.
        isolation: As in :func:`decode` (there is no ``aborted`` list).
        topic: As in :func:`decode`.
        partition: As in :func:`decode`.
        batch_columns: As in :func:`decode`.
        max_decompressed_bytes: As in :func:`decode`.
        partial: As in :func:`decode`.
        views: As in :func:`decode`; each record set is a data buffer of
            the views of its own.
        first_index: The number of the first record set in errors (a list
            that goes on from another).
        value_format: As in :func:`decode`.
        key_format: As in :func:`decode`.
        schemas: As in :func:`decode`.
        value_schema: As in :func:`decode`.
        key_schema: As in :func:`decode`.
        on_value_error: As in :func:`decode`.

    Returns:
        tuple[pyarrow.Table, numpy.ndarray]: The rows of every record set,
        each after those of the one before, and how many rows each record
        set gave (int64).

    Raises:
        KafkaFormatError: Naming the record set (``.source`` is
            ``"record set 3"``) and the byte in it.
        TypeError: When given one record set instead of an iterable of them.
    """
    if isinstance(record_sets, (bytes, bytearray, memoryview, pa.Buffer)):
        raise TypeError("decode_many takes an iterable of record sets; decode() takes one")
    typed = dict(value_format=check_format("value_format", value_format),
                 key_format=check_format("key_format", key_format), schemas=schemas,
                 value_schema=value_schema, key_schema=key_schema,
                 on_value_error=check_on_error(on_value_error))
    options = dict(verify_crc=verify_crc, partial=partial,
                   max_decompressed_bytes=max_decompressed_bytes)
    topic, partition = _checked_topic_and_partition(topic, partition)
    # BatchReader itself: read_batches' call would cost as much again per record set.
    reader = functools.partial(BatchReader, **options)
    reader(b"")                                     # the options checked, whatever comes
    committed = check_isolation(isolation) == "read_committed"
    parts = []
    for data in record_sets:
        if data is None:
            parts.append(None)
            continue
        try:
            part = reader(data)
        except TypeError as exc:
            raise TypeError(f"record set {first_index + len(parts)}: {exc}") from None
        parts.append(_committed_batches(data, isolation, options) if committed else part)
    table, rows = decode_parts(parts, include_control, batch_columns, views, first_index)
    return (typed_values(_with_topic_and_partition(table, topic, partition), **typed),
            np.array(rows, dtype=np.int64))


def _committed_batches(data, isolation, options):
    """consumer_batches, begun when first iterated: finding the aborted
    transactions reads the record set, and its errors are then the core's to
    name (decode_parts)."""
    yield from consumer_batches(data, isolation, None, **options)


def _checked_topic_and_partition(topic, partition):
    if topic is not None and not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")
    if partition is not None:
        partition = integer_option("partition", partition)
        if not -(1 << 31) <= partition < 1 << 31:
            raise ValueError(f"partition {partition} does not fit Kafka's int32 partitions")
    return topic, partition


def _with_topic_and_partition(table, topic, partition):
    if topic is not None:
        table = table.add_column(2, TOPIC_FIELD, _repeated_string(topic, len(table)))
    if partition is not None:
        values = pa.py_buffer(np.full(len(table), partition, np.int32))
        table = table.add_column(2 + (topic is not None), PARTITION_FIELD,
                                 pa.Array.from_buffers(pa.int32(), len(table), [None, values]))
    return table


def _repeated_string(value, count):
    """`value` `count` times, as string chunks whose 32-bit offsets fit.
    Built from buffers: pa.array and pa.scalar import pandas (to check for
    its types), most of a second in every fresh Spark worker."""
    data = value.encode()
    per_chunk = max(1, INT32_MAX // max(1, len(data)))
    chunks = []
    for start in range(0, count, per_chunk):
        n = min(per_chunk, count - start)
        offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * np.int32(len(data)))
        chunks.append(pa.Array.from_buffers(pa.string(), n, [None, offsets,
                                                             pa.py_buffer(data * n)]))
    return pa.chunked_array(chunks, pa.string())


def _offsets_within(table, start, end):
    offsets = table.column("offset")
    keep = None
    for bound in ((pc.greater_equal(offsets, start) if start is not None else None),
                  (pc.less(offsets, end) if end is not None else None)):
        if bound is not None:
            keep = bound if keep is None else pc.and_(keep, bound)
    if pc.all(keep).as_py() is not False:
        return table
    rows = pc.indices_nonzero(keep)
    if len(rows) == 0 or rows[-1].as_py() - rows[0].as_py() + 1 == len(rows):
        # Offsets grow along a log, so the rows kept are one run: a slice,
        # which binary_view columns allow (Arrow cannot filter them) and
        # which copies nothing.
        return table.slice(rows[0].as_py() if len(rows) else 0, len(rows))
    views = [i for i, field in enumerate(table.schema) if field.type == pa.binary_view()]
    for i in views:
        table = table.set_column(i, table.field(i).with_type(pa.large_binary()),
                                 table.column(i).cast(pa.large_binary()))
    table = table.filter(keep)
    for i in views:
        table = table.set_column(i, table.schema.field(i).with_type(pa.binary_view()),
                                 table.column(i).cast(pa.binary_view()))
    return table


# Encoding from Arrow: kcodec.encode(table) reads a table's columns here.

def _column_array(column, name, dtype):
    """The column as a numpy array of dtype; a value it cannot hold raises
    (Arrow's checked cast), rather than wrapping."""
    if column.null_count:
        raise ValueError(f"column {name!r} may not hold nulls")
    target = pa.from_numpy_dtype(dtype)
    if column.type != target:              # a cast to its own type is no check, and costs
        try:
            column = column.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"column {name!r}: {exc}") from None
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype)


def _timestamps(ts, types, now, n):
    """int64 ms from the timestamp column (None: absent). A null stays
    "no timestamp" (-1) for a record whose timestampType says it has none,
    as a broker up-converting magic 0 writes it; other nulls take `now`, as a
    producer stamps a record without one."""

    if ts is None:
        timestamps = np.full(n, now, np.int64)
        valid = np.zeros(n, bool)
    else:
        if pa.types.is_timestamp(ts.type):
            if ts.type.unit != "ms":
                ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz))
            ts = ts.view(pa.int64())
        elif ts.type != pa.int64():
            ts = ts.cast(pa.int64())
        if not ts.null_count:
            return np.ascontiguousarray(ts.to_numpy(zero_copy_only=False), np.int64)
        valid = np.asarray(ts.is_valid().to_numpy(zero_copy_only=False), bool)
        timestamps = np.array(ts.fill_null(now).to_numpy(zero_copy_only=False), np.int64)
    if types is not None:
        timestamps[~valid & (types == -1)] = NO_TIMESTAMP
    return timestamps


_TABLE_COLUMNS = ("key", "value", "timestamp", "timestampType", "headers", "offset", "sequence",
                  *_BATCH_COLUMNS)


def _table_columns(table):
    """The columns of a Table or RecordBatch that encode reads, by name, each
    as one Arrow array. Only these: wrapping each column of a table in a
    Python object costs more than encoding a few rows."""
    index = {name: i for i, name in enumerate(table.schema.names)}
    return {name: _one_array(table.column(index[name]))
            for name in _TABLE_COLUMNS if name in index}


def _one_array(chunks):
    """A column's chunks as one array. Chunks of more than 2 GiB together
    have their binary and string data (headers' too) widened to
    large_binary/large_string: int32 offsets cannot hold it."""
    if not hasattr(chunks, "num_chunks"):   # a RecordBatch's column
        return chunks
    if chunks.num_chunks <= 1:              # none: an empty array of the column's type
        return chunks.chunk(0) if chunks.num_chunks else chunks.combine_chunks()
    if chunks.nbytes > INT32_MAX:
        large = _with_large_offsets(chunks.type)
        if large != chunks.type:
            chunks = chunks.cast(large)
    return pa.concat_arrays(chunks.chunks)


def _with_large_offsets(arrow_type):
    """arrow_type with binary and string, alone or as the fields of a list of
    structs (headers), made large_binary and large_string."""
    large = {pa.binary(): pa.large_binary(), pa.string(): pa.large_string()}
    if pa.types.is_list(arrow_type) and pa.types.is_struct(arrow_type.value_type):
        structs = arrow_type.value_field
        fields = [field.with_type(large.get(field.type, field.type)) for field in structs.type]
        return pa.list_(structs.with_type(pa.struct(fields)))
    return large.get(arrow_type, arrow_type)


def table_encoding(table, magic, given, now):
    """Rows straight from a pyarrow.Table's buffers (decode()'s column names;
    only value is required), and the runs of rows that one set of batch
    attributes covers, as records._runs gives them. Runs break where offsets do not
    increase and where the columns that say a batch's attributes change
    (timestampType, and with magic 2 the producer, sequence, transaction and
    leader epoch columns). A keyword in `given` overrides its column."""

    column = _table_columns(table)
    if "value" not in column:
        raise ValueError("a table to encode needs a 'value' column")
    n = table.num_rows
    types = None
    if "timestampType" in column:
        types = _column_array(column["timestampType"], "timestampType", np.int32)
    timestamps = _timestamps(column.get("timestamp"), types, now, n)
    offsets = None
    if "base_offset" not in given and "offset" in column:
        offsets = _column_array(column["offset"], "offset", np.int64)
    else:
        _check_numbering(given.get("base_offset", 0), n)
    rows = rows_from_arrow(column.get("key"), column["value"], timestamps,
                           column.get("headers"), n, offsets, given.get("base_offset", 0))

    per_row = {}
    if magic == 2:
        for name, keyword in _BATCH_COLUMNS.items():
            if name in column and keyword not in given:
                per_row[keyword] = _column_array(column[name], name, _RUN_TYPES[keyword][0]
                                                 ).astype(np.int64, copy=False)
    if magic == 2 and "sequence" in column and "base_sequence" not in given:
        per_row["base_sequence"] = _column_array(column["sequence"], "sequence", np.int32)
        least = _RUN_TYPES["base_sequence"][1]
        below = np.flatnonzero(per_row["base_sequence"] < least)
        if len(below):
            raise ValueError(f"sequence {per_row['base_sequence'][below[0]]} is below {least}, "
                             f"Kafka's 'no sequence' (row {below[0]})")
    if magic == 0 or "timestamp_type" in given:
        types = None
    if types is not None:
        per_row["timestamp_type"] = types
    # Client-built record sets may start each batch at offset 0 again.
    starts = batch_starts(n, offsets, timestamps, types, per_row.get("base_sequence"),
                          [per_row[k] for k in _BATCH_COLUMNS.values() if k in per_row])
    return rows, _runs(starts, _fixed_attributes(given), per_row)
