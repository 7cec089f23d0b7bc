"""Spark benchmarks on one small log in one session: kafka-log read vs the
transport ceiling (a Python Data Source yielding the same ready-made Arrow
batches) vs Spark's Parquet scan, and spark-convert vs kafka-log's
DataFrame .write.parquet. CI runs each once (--benchmark-disable);
`python benchmarks/spark_bench.py --rows 6000000` gives the real figures."""
import os
import sys

import pytest

from kcodec.spark.bench import SparkBench, write_bench_log

ROWS = 40_000


@pytest.fixture(scope="module")
def spark_bench(tmp_path_factory):
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    ours = SparkSession.getActiveSession() is None
    spark = (SparkSession.builder.master("local[2]").appName("kcodec-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    work = tmp_path_factory.mktemp("spark-bench")
    paths = write_bench_log(str(work / "logs"), ROWS, compression="lz4",
                            segment_bytes=1 << 20)
    yield SparkBench(spark, paths, str(work))
    if ours:
        spark.stop()


@pytest.mark.parametrize("operation", [
    "read_kafka_log", "read_ceiling", "read_parquet", "dataframe_write", "spark_convert"])
def test_bench_spark(benchmark, spark_bench, operation):
    benchmark.group = "spark"
    benchmark.extra_info["rows"] = spark_bench.rows
    benchmark.pedantic(getattr(spark_bench, operation), rounds=3, iterations=1)
    assert spark_bench.rows == ROWS


def test_both_conversions_hold_the_same_rows(spark_bench):
    spark_bench.dataframe_write()
    spark_bench.spark_convert()
    assert spark_bench.outputs_equal()
