"""Record sets decoded inside Spark's partition functions: rdd.mapPartitions,
df.mapInArrow (explode_records) and the Arrow UDF, checked against what was
appended (log_helpers' scripted history)."""
import functools

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from kcodec.errors import KafkaFormatError
from kcodec.spark.functions import _spark_record_schema
from kcodec.spark import (
    decode_record_sets, decode_udf, explode_records, make_decode_udf, record_set_decoder,
    records_type,
)
from log_helpers import scripted_history, write_history
from spark_session import spark, spark_rows, without_headers  # noqa: F401


@pytest.fixture(scope="module")
def history():
    return scripted_history(seed=31, rounds=4)


@pytest.fixture(scope="module")
def record_sets(history):
    """Each append as a record set of its own: (id, bytes)."""
    return [(i, a.data) for i, a in enumerate(history.appends)]


def arrow_rows(batches):
    table = pa.Table.from_batches(batches)
    out = []
    for row in table.to_pylist():
        headers = tuple((h["key"], h["value"]) for h in row["headers"] or ())
        millis = None if row["timestamp"] is None else round(row["timestamp"].timestamp() * 1000)
        out.append((row["offset"], millis, row["key"], row["value"], headers))
    return sorted(out)


def test_decode_record_sets_in_rdd_map_partitions(spark, history, record_sets):
    rdd = spark.sparkContext.parallelize([data for _, data in record_sets] + [None], 3)
    batches = rdd.mapPartitions(decode_record_sets).collect()
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert arrow_rows(batches) == history.data_records()
    assert batches[0].schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batches[0].schema.field("headers").type.value_field.name == "element"


def test_read_committed_on_a_whole_record_set(spark, history):
    rdd = spark.sparkContext.parallelize([history.record_set()], 1)
    decode = functools.partial(decode_record_sets, isolation="read_committed",
                               topic="orders", partition=7)
    batches = rdd.mapPartitions(decode).collect()
    assert arrow_rows(batches) == history.data_records(committed_only=True)
    table = pa.Table.from_batches(batches)
    assert set(table.column("topic").to_pylist()) == {"orders"}
    assert set(table.column("partition").to_pylist()) == {7}


def test_explode_records_keeps_the_other_columns(spark, history, record_sets):
    df = spark.createDataFrame(record_sets + [(len(record_sets), None)], "id int, payload binary")
    exploded = explode_records(df, "payload")
    assert exploded.columns == ["id", "key", "value", "offset", "timestamp", "timestampType",
                                "headers"]
    assert spark_rows(exploded) == history.data_records()
    # Each record sits beside the id of the record set it came from.
    owner = {r[0]: i for i, a in enumerate(history.appends) for r in a.records}
    got = {r["offset"]: r["id"] for r in exploded.select("offset", "id").collect()}
    assert got == {o: owner[o] for o in got} and len(got) == len(history.data_records())


def test_explode_records_from_binary_files(spark, history, tmp_path):
    directory = write_history(str(tmp_path / "orders-0"), history, segment_bytes=4000)
    files = spark.read.format("binaryFile").option("pathGlobFilter", "*.log").load(directory)
    exploded = explode_records(files, "content", topic="orders", partition=0,
                               include_headers=False)
    assert exploded.columns[:3] == ["path", "modificationTime", "length"]
    assert spark_rows(exploded) == without_headers(history.data_records())
    assert {tuple(r) for r in exploded.select("topic", "partition").distinct().collect()} == {
        ("orders", 0)}


def test_record_set_decoder_is_a_map_in_arrow_function(spark, history, record_sets):
    df = spark.createDataFrame(record_sets, "id int, payload binary")
    output = explode_records(df, "payload").schema
    decoded = df.mapInArrow(record_set_decoder("payload", output), output)
    assert spark_rows(decoded) == history.data_records()


def test_explode_records_refuses_clashing_columns(spark, record_sets):
    df = spark.createDataFrame(record_sets, "offset int, payload binary")
    with pytest.raises(ValueError, match="clash"):
        explode_records(df, "payload")


def test_decode_udf_returns_an_array_of_records(spark, history, record_sets):
    df = spark.createDataFrame(record_sets + [(99, None)], "id int, payload binary")
    with_records = df.select("id", decode_udf("payload").alias("records"))
    assert with_records.schema["records"].dataType == records_type(True)
    nulls = with_records.where(F.col("records").isNull()).select("id").collect()
    assert [r["id"] for r in nulls] == [99]
    sizes = {r["id"]: r["n"] for r in with_records.select(
        "id", F.size("records").alias("n")).where("id != 99").collect()}
    assert sizes == {i: len(a.records) if a.kind in ("plain", "txn") else 0
                     for i, a in enumerate(history.appends)}
    flat = with_records.select(F.explode("records").alias("r")).select("r.*")
    assert spark_rows(flat) == history.data_records()


def test_decode_udf_without_headers(spark, history, record_sets):
    udf = make_decode_udf(include_headers=False)
    df = spark.createDataFrame(record_sets, "id int, payload binary")
    flat = df.select(F.explode(udf("payload")).alias("r")).select("r.*")
    assert "headers" not in flat.columns
    assert spark_rows(flat) == without_headers(history.data_records())


@pytest.mark.invalid_input
def test_decode_record_sets_decodes_a_group_at_a_time(monkeypatch, history):
    from kcodec.spark import functions
    monkeypatch.setattr(functions, "GROUP_RECORD_SETS", 2)
    sets = [a.data for a in history.appends]
    assert len(sets) > 4
    grouped = list(decode_record_sets(sets[:3] + [None] + sets[3:]))
    assert arrow_rows(grouped) == history.data_records()
    damaged = bytearray(sets[4])
    damaged[-1] ^= 0xFF                  # the CRC of its last batch no longer holds
    with pytest.raises(KafkaFormatError) as raised:
        list(decode_record_sets(sets[:4] + [bytes(damaged)]))
    assert raised.value.source == "record set 4"          # counted across the groups


@pytest.mark.invalid_input
def test_decode_udf_numbers_record_sets_across_arrow_batches(history):
    from kcodec.spark.functions import _decode_to_lists
    sets = [a.data for a in history.appends][:5]
    damaged = bytearray(sets[1])
    damaged[-1] ^= 0xFF
    columns = [pa.array(sets[:3], pa.binary()), pa.array([sets[3], bytes(damaged)], pa.binary())]
    lists = _decode_to_lists(iter(columns), True, {})
    assert len(next(lists)) == 3
    with pytest.raises(KafkaFormatError) as raised:
        next(lists)
    assert raised.value.source == "record set 4"          # the partition's fifth


@pytest.mark.invalid_input
def test_explode_numbers_record_sets_across_arrow_batches(history):
    sets = [a.data for a in history.appends][:5]
    damaged = bytearray(sets[1])
    damaged[-1] ^= 0xFF
    batches = [pa.record_batch([pa.array(sets[:3], pa.binary())], names=["payload"]),
               pa.record_batch([pa.array([sets[3], bytes(damaged)], pa.binary())],
                               names=["payload"])]
    output = _spark_record_schema(True, None, None)
    with pytest.raises(KafkaFormatError) as raised:
        list(record_set_decoder("payload", output)(iter(batches)))
    assert raised.value.source == "record set 4"          # the partition's fifth
