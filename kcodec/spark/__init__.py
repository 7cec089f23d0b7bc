"""kcodec on Spark: Kafka partition directories as DataFrames (the
"kafka-log" data source), record sets decoded inside Spark's partition
functions, and the spark-convert job.

Everything here decodes with the compiled core into Arrow columns; no
Python object is made per record. Needs the spark extra:
pip install 'kcodec[spark]'."""
from .._extras import require

require("pyspark", "kcodec.spark")

from .functions import (  # noqa: E402
    decode_record_sets, decode_udf, explode_records, make_decode_udf, record_set_decoder,
    records_type,
)
from .options import ReadOptions, parse_options  # noqa: E402
from .plan import DataLossError, Split, plan  # noqa: E402
from .read import SplitReport, read_skip_reports, read_split  # noqa: E402
from .schema import arrow_schema, kafka_schema, record_schema, to_spark_arrow  # noqa: E402
from .session import enable_filter_pushdown  # noqa: E402
from .source import KafkaLogDataSource  # noqa: E402
from .stream import KafkaLogStreamReader  # noqa: E402
from .values import decode_values  # noqa: E402


def register(spark):
    """Make ``spark.read.format("kafka-log")`` available in a session.

    Spark also finds the source without this call, as the module
    ``pyspark_kcodec.DefaultSource``, when kcodec is installed on the workers.
    This call also turns on filter pushdown to Python data sources
    (``spark.sql.python.filterPushdown.enabled``) unless the session sets
    it already: filters on topic, partition, offset and timestamp then
    narrow what reads with ``filterPushdown=true`` read.

    Args:
        spark: A ``SparkSession`` (PySpark 4.0 or later: Python Data Sources).

    Returns:
        The same session.
    """
    spark.dataSource.register(KafkaLogDataSource)
    return enable_filter_pushdown(spark)


__all__ = [
    "register", "KafkaLogDataSource", "KafkaLogStreamReader", "kafka_schema", "record_schema", "arrow_schema",
    "to_spark_arrow", "ReadOptions", "parse_options", "plan", "Split", "DataLossError",
    "read_split", "SplitReport", "read_skip_reports", "decode_record_sets", "explode_records",
    "record_set_decoder", "decode_udf", "make_decode_udf", "records_type", "decode_values",
]
