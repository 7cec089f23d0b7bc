"""The columns of Spark's Kafka source, as Spark types and as the Arrow types
Spark's Python workers exchange with the JVM."""
import functools

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
    TimestampType,
)


HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))
RECORD_FIELDS = ("key", "value", "offset", "timestamp", "timestampType", "headers")


def kafka_schema(include_headers=False):
    """The schema of ``spark.read.format("kafka")``.

    Args:
        include_headers: Add the ``headers`` column (last), as
            ``includeHeaders=true`` does.

    Returns:
        pyspark.sql.types.StructType: ``key, value, topic, partition, offset,
        timestamp, timestampType[, headers]``, every column nullable.
    """
    fields = [
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def record_schema(include_headers=True):
    """The per-record columns a record set alone carries (no topic or
    partition).

    Args:
        include_headers: Add the ``headers`` column.

    Returns:
        pyspark.sql.types.StructType: The schema.
    """
    return StructType([f for f in kafka_schema(include_headers).fields
                       if f.name not in ("topic", "partition")])


@functools.lru_cache(maxsize=None)
def _arrow_schema_cached(spark_json):
    from pyspark.sql.types import _parse_datatype_json_string
    # Spark's workers check batches against the schema converted with UTC: a
    # timestamp is an instant, the session time zone only shapes how it prints.
    return to_arrow_schema(_parse_datatype_json_string(spark_json), timezone="UTC")


def arrow_schema(spark_schema):
    """The Arrow schema Spark expects of batches of a Spark schema.

    Args:
        spark_schema: A ``StructType``.

    Returns:
        pyarrow.Schema: Timestamps in µs (UTC), list children named
        ``element``.
    """
    return _arrow_schema_cached(spark_schema.json())


def to_spark_arrow(table, target):
    """A table from :func:`kcodec.decode` cast to the Arrow types Spark
    expects.

    Args:
        table: A ``pyarrow.Table`` from ``kcodec.decode`` (timestamps in ms,
            headers' list child named ``item``).
        target: The Arrow schema to produce (see :func:`arrow_schema`):
            timestamps in µs, list child ``element``, Spark's column order and
            nullability.

    Returns:
        pyarrow.Table: The table as ``target``; columns of ``table`` not in
        ``target`` are dropped.
    """
    columns = []
    for field in target:
        column = table.column(field.name)
        if not column.type.equals(field.type):
            column = column.cast(field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


