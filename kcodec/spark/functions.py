"""Record sets decoded inside Spark's partition functions.

A record set is what a fetch response carries or a .log file holds: bytes
of concatenated batches. Each is handed whole to the compiled core, which
returns Arrow columns; only the per-record-set loop is Python.
"""
import functools
import warnings

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from ..arrow import decode_many
from .schema import arrow_schema, record_schema, to_spark_arrow


def _spark_record_schema(include_headers, topic, partition):
    fields = list(record_schema(include_headers).fields)
    at = 2
    if topic is not None:
        fields.insert(at, StructField("topic", StringType()))
        at += 1
    if partition is not None:
        fields.insert(at, StructField("partition", IntegerType()))
    return StructType(fields)


def _decode_options(topic, partition, isolation, verify_crc):
    return dict(topic=topic, partition=partition, isolation=isolation, verify_crc=verify_crc)


def decode_record_sets(record_sets, *, include_headers=True, topic=None, partition=None,
                       isolation="read_uncommitted", verify_crc=True):
    """The records of many record sets, as Arrow record batches typed as
    Spark's Kafka source types them.

    For ``rdd.mapPartitions``: ``rdd.mapPartitions(decode_record_sets)``
    turns an RDD of record sets into an RDD of Arrow batches. Record sets are
    decoded 4,096 (or 16 MiB of them) at a time, each group by one
    :func:`kcodec.decode_many` call.

    Args:
        record_sets: An iterable of record sets (bytes-like; None is skipped).
        include_headers: Add the ``headers`` column.
        topic: Add a ``topic`` column with this value.
        partition: Add a ``partition`` column with this value.
        isolation: ``"read_uncommitted"`` or ``"read_committed"`` (each
            record set's aborted transactions from its own ABORT markers).
        verify_crc: Check CRCs.

    Yields:
        pyarrow.RecordBatch: ``key, value, [topic, partition,] offset,
        timestamp, timestampType[, headers]``, timestamps in µs (UTC) as Spark
        exchanges them.
    """
    target = arrow_schema(_spark_record_schema(include_headers, topic, partition))
    options = _decode_options(topic, partition, isolation, verify_crc)
    first = 0
    for group in _groups(record_sets):
        table, _ = decode_many(group, first_index=first, **options)
        first += len(group)
        if table.num_rows:
            yield from to_spark_arrow(table, target).to_batches()


GROUP_RECORD_SETS = 4096
GROUP_BYTES = 16 << 20           # of input: decode() slows once its columns pass
                                 # kept_memory_limit() (docs/guide/records.md, Memory)


def _groups(record_sets):
    """Lists of consecutive record sets, of at most GROUP_RECORD_SETS or about
    GROUP_BYTES (a record set past that ends its group)."""
    group, size = [], 0
    for data in record_sets:
        group.append(data)
        size += 0 if data is None else memoryview(data).nbytes
        if len(group) >= GROUP_RECORD_SETS or size >= GROUP_BYTES:
            yield group
            group, size = [], 0
    if group:
        yield group


def _buffers(column):
    """Each value of a binary column as a zero-copy pyarrow Buffer (None for nulls)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_large_binary(column.type):
        offsets = np.frombuffer(column.buffers()[1], np.int64)
    elif pa.types.is_binary(column.type):
        offsets = np.frombuffer(column.buffers()[1], np.int32)
    else:
        raise TypeError(f"expected a binary column of record sets, not {column.type}")
    offsets = offsets[column.offset:column.offset + len(column) + 1]
    data = column.buffers()[2]
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    for i in range(len(column)):
        if not valid[i]:
            yield None
        elif data is None:
            yield b""
        else:
            yield data.slice(int(offsets[i]), int(offsets[i + 1] - offsets[i]))


def _explode(batches, column, others, output, include_headers, options):
    target = arrow_schema(output)
    records = arrow_schema(_spark_record_schema(include_headers, options["topic"],
                                                options["partition"]))
    first = 0                   # errors number the record sets of the task's partition
    for batch in batches:
        table, counts = decode_many(_buffers(batch.column(column)), first_index=first,
                                    **options)
        first += batch.num_rows
        if not table.num_rows:
            continue
        decoded = to_spark_arrow(table, records)
        rows = np.repeat(np.arange(len(counts)), counts)
        carried = batch.select(others).take(pa.array(rows)) if others else None
        arrays = []
        for field in target:
            source = decoded if field.name in records.names else carried
            array = source.column(field.name)
            if isinstance(array, pa.ChunkedArray):
                array = array.combine_chunks()
            arrays.append(array if array.type.equals(field.type) else array.cast(field.type))
        yield pa.RecordBatch.from_arrays(arrays, schema=target)


def explode_records(df, column, *, include_headers=True, topic=None, partition=None,
                    isolation="read_uncommitted", verify_crc=True):
    """One row per record of the record sets in a binary column.

    The record sets (e.g. ``spark.read.format("binaryFile")``'s ``content``,
    or captured fetch payloads) are decoded in ``df.mapInArrow`` by the
    compiled core, one :func:`kcodec.decode_many` call per Arrow batch.

    Args:
        df: A DataFrame.
        column: The name of its binary column of record sets.
        include_headers: Add the ``headers`` column.
        topic: Add a constant ``topic`` column.
        partition: Add a constant ``partition`` column.
        isolation: ``"read_uncommitted"`` or ``"read_committed"``.
        verify_crc: Check CRCs.

    Returns:
        pyspark.sql.DataFrame: The other columns of ``df``, repeated on each
        record of their row, then ``key, value, [topic, partition,] offset,
        timestamp, timestampType[, headers]``.

    Raises:
        ValueError: When ``column`` is missing, or another column of ``df``
            has the name of a decoded column.
    """
    if column not in df.columns:
        raise ValueError(f"no column {column!r} in {df.columns}")
    others = [c for c in df.columns if c != column]
    decoded = _spark_record_schema(include_headers, topic, partition)
    clash = sorted(set(others) & set(decoded.names))
    if clash:
        raise ValueError(f"columns {clash} of the DataFrame clash with the decoded records' "
                         "columns; rename them first")
    output = StructType([df.schema[c] for c in others] + list(decoded.fields))
    options = _decode_options(topic, partition, isolation, verify_crc)
    function = functools.partial(_explode, column=column, others=others, output=output,
                                 include_headers=include_headers, options=options)
    return df.mapInArrow(function, output)


def record_set_decoder(column, output, *, include_headers=True, topic=None, partition=None,
                       isolation="read_uncommitted", verify_crc=True):
    """The function :func:`explode_records` hands to ``df.mapInArrow``, for
    use with ``mapInArrow`` directly.

    Args:
        column: The name of the binary column of record sets.
        output: The Spark schema (``StructType``) of the result: the columns
            to carry over, then the decoded ones (as ``explode_records``
            builds it).
        include_headers: As in :func:`explode_records`.
        topic: As in :func:`explode_records`.
        partition: As in :func:`explode_records`.
        isolation: As in :func:`explode_records`.
        verify_crc: As in :func:`explode_records`.

    Returns:
        A function from an iterator of ``pyarrow.RecordBatch`` to an iterator
        of ``pyarrow.RecordBatch``.
    """
    options = _decode_options(topic, partition, isolation, verify_crc)
    others = [f.name for f in output if f.name not in _spark_record_schema(
        include_headers, topic, partition).names]
    return functools.partial(_explode, column=column, others=others, output=output,
                             include_headers=include_headers, options=options)


def records_type(include_headers=True):
    """The Spark type of :data:`decode_udf`'s result.

    Args:
        include_headers: Include the ``headers`` field.

    Returns:
        pyspark.sql.types.ArrayType:
        ``array<struct<key, value, offset, timestamp, timestampType[, headers]>>``.
    """
    return ArrayType(record_schema(include_headers))


def _decode_to_lists(columns, include_headers, options):
    """The UDF: for each Arrow batch's column of record sets, its list of
    records per row; errors count the record sets of the task's partition."""
    element = record_schema(include_headers)
    struct_type = to_arrow_type(element, timezone="UTC")
    list_type = to_arrow_type(ArrayType(element), timezone="UTC")
    target = pa.schema(list(struct_type))
    first = 0
    for column in columns:
        yield _records_lists(column, struct_type, target, list_type, options, first)
        first += len(column)


def _records_lists(column, struct_type, target, list_type, options, first_index):
    """One Arrow batch's column of record sets as lists of record structs."""
    record_sets = list(_buffers(column))
    table, counts = decode_many(record_sets, first_index=first_index, **options)
    values = to_spark_arrow(table, target)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    nulls = [data is None for data in record_sets]
    structs = pa.StructArray.from_arrays(
        [values.column(i).combine_chunks() if isinstance(values.column(i), pa.ChunkedArray)
         else values.column(i) for i in range(values.num_columns)], fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, type=list_type,
                                    mask=pa.array(nulls, pa.bool_()))


def make_decode_udf(*, include_headers=True, isolation="read_uncommitted", verify_crc=True):
    """An Arrow UDF that decodes a binary column of record sets.

    Each row's record set becomes an ``array<struct<key, value, offset,
    timestamp, timestampType, headers>>`` (null for a null record set),
    decoded by the compiled core. Needs PySpark 4.1 or later (Arrow UDFs).

    Args:
        include_headers: Include the ``headers`` field.
        isolation: ``"read_uncommitted"`` or ``"read_committed"``.
        verify_crc: Check CRCs.

    Returns:
        A UDF to apply to a column: ``df.select(udf("payload"))``.
    """
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.functions import ArrowUDFType
    options = _decode_options(None, None, isolation, verify_crc)
    function = functools.partial(_decode_to_lists, include_headers=include_headers,
                                 options=options)
    with warnings.catch_warnings():
        # A partial carries no type hints to infer the UDF kind from; it is given.
        warnings.filterwarnings("ignore", "It is preferred to specify type hints")
        return arrow_udf(function, records_type(include_headers), ArrowUDFType.SCALAR_ITER)


decode_udf = make_decode_udf()
