"""One local SparkSession for all Spark tests (imported by each
tests/test_spark_*.py), and row helpers that read results through Spark's
own functions rather than through kcodec."""
import os
import sys

import pytest

from pyspark.sql import SparkSession, functions as F

# A zone with a 45-minute offset and no DST: timestamps must stay instants.
SESSION_TIME_ZONE = "Asia/Kathmandu"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # local[2,2]: two cores, and a failed task is tried once more (as on a
    # cluster), which the conversion job's commit protocol is tested with.
    session = (SparkSession.builder.master("local[2,2]").appName("kcodec-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", SESSION_TIME_ZONE)
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def spark_rows(df):
    """(offset, timestamp ms, key, value, headers) of a DataFrame with the
    Kafka source's columns, timestamps as epoch ms computed by Spark."""
    columns = [F.col("offset"), F.unix_millis("timestamp").alias("ts"), F.col("key"),
               F.col("value")]
    has_headers = "headers" in df.columns
    if has_headers:
        columns.append(F.col("headers"))
    out = []
    for row in df.select(*columns).collect():
        headers = ()
        if has_headers and row["headers"] is not None:
            headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                            for h in row["headers"])
        out.append((row["offset"], row["ts"], _bytes(row["key"]), _bytes(row["value"]), headers))
    return sorted(out)


def _bytes(value):
    return None if value is None else bytes(value)


def without_headers(rows):
    return [r[:4] + ((),) for r in rows]
