"""Typed values on Spark (issue 48): the kafka-log source's valueFormat /
keyFormat options and kcodec.spark.decode_values, each equal, row for row, to
what kcodec.decode gives in Python for the same bytes.

- kafka-log over partition logs of Confluent-framed Avro values written by
  kcodec's log writer, their schemas in a ``_schemas`` partition directory
  (the registry's own topic, read offline): two writer schemas (evolution),
  keys, corrupt values with onValueError=null, a stream, JSON values;
- decode_values on a DataFrame read by Spark's own Kafka source
  (spark-sql-kafka) from the real broker, after confluent-kafka's
  AvroSerializer produced the values (in a child process: that session needs
  the connector's jars, which the session of the other Spark tests cannot
  take);
- the errors that say what is missing or does not match.

Run as a script, this file is that child process (``kafka-source``)."""
import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

HERE = Path(__file__).resolve().parent

TOPIC = "orders"
KEY_SCHEMA = {"type": "record", "name": "OrderKey", "namespace": "shop",
              "fields": [{"name": "customer", "type": "string"},
                         {"name": "region", "type": "int"}]}
V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "sku", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "price", "type": "double"},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status",
                                "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "coupon", "type": ["null", "string"], "default": None},
]}
# V2: quantity promoted to long, a field added with a default.
V2 = {**V1, "fields": [
    *[dict(f, type="long") if f["name"] == "quantity" else f for f in V1["fields"]],
    {"name": "channel", "type": "string", "default": "web"},
]}
IDS = {"V1": 1, "V2": 2, "KEY": 3}
ROWS = 120
BASE_MS = 1_767_225_600_000


def frame(schema_id, datum):
    return b"\x00" + struct.pack(">i", schema_id) + datum


def avro_bytes(schema, record):
    import fastavro
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def order(i, version):
    record = {"id": i, "sku": f"SKU-{i % 17:03d}", "quantity": i % 5 + 1,
              "price": round(i * 1.25, 2), "created": BASE_MS + i * 1000,
              "status": ["NEW", "PAID", "SHIPPED"][i % 3],
              "address": {"city": ["Berlin", "Paris", "Lyon"][i % 3], "zip": f"{i:05d}"},
              "tags": ["a", "b", "c"][:i % 4], "coupon": None if i % 2 else f"SAVE{i}"}
    if version == 2:
        record["channel"] = "app" if i % 4 == 0 else "web"
    return record


def write_schemas_dir(path, entries):
    """A registry's _schemas partition: (subject, version, id, schema)."""
    from kcodec.log import write_log
    keys, values = [], []
    for subject, version, schema_id, schema in entries:
        keys.append(json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version,
                                "magic": 1}).encode())
        values.append(json.dumps({"subject": subject, "version": version, "id": schema_id,
                                  "schema": json.dumps(schema), "deleted": False}).encode())
    write_log(str(path), pa.table({"key": pa.array(keys, pa.binary()),
                                   "value": pa.array(values, pa.binary())}))


def orders_log(path):
    """orders-0: framed Avro values, the first half by V1, the rest by V2,
    framed Avro keys, and a tombstone (null value) every 25th record."""
    from kcodec.log import write_log
    keys, values = [], []
    for i in range(ROWS):
        keys.append(frame(IDS["KEY"], avro_bytes(KEY_SCHEMA, {"customer": f"c{i % 9}",
                                                              "region": i % 4})))
        version = 1 if i < ROWS // 2 else 2
        values.append(None if i % 25 == 24 else frame(
            IDS[f"V{version}"], avro_bytes(V1 if version == 1 else V2, order(i, version))))
    write_log(str(path), pa.table({"key": pa.array(keys, pa.binary()),
                                   "value": pa.array(values, pa.binary()),
                                   "timestamp": pa.array([BASE_MS + i for i in range(ROWS)],
                                                         pa.int64())}))


BROKEN = {  # offset: what the value is
    3: "truncated", 5: "unknown id", 7: "bad magic", 9: "short frame",
}


def broken_log(path):
    """broken-0: good V1 values, but for those of BROKEN."""
    from kcodec.log import write_log
    values = []
    for i in range(12):
        good = frame(IDS["V1"], avro_bytes(V1, order(i, 1)))
        kind = BROKEN.get(i)
        values.append({None: good, "truncated": good[:-6], "unknown id": frame(99, good[5:]),
                       "bad magic": b"\x01" + good[1:], "short frame": b"\x00\x00"}[kind])
    write_log(str(path), pa.table({"value": pa.array(values, pa.binary())}))


def nullable(data_type):
    """A Spark type with every nested field nullable: PySpark's toArrow
    cannot convert a null struct whose non-nullable fields (from_avro's
    types) Spark left null under it."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType
    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True)
                           for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, nullable(data_type.valueType), True)
    return data_type


def spark_rows(df, columns):
    """The columns' rows through Spark's own Arrow conversion, by offset."""
    from pyspark.sql import functions as F
    selected = [F.col(c).cast(nullable(df.schema[c].dataType)).alias(c) for c in columns]
    return df.select(*selected).toArrow().sort_by("offset").to_pylist()


# ----------------------------------------------------------------- the child

def kafka_source_main(spec_path):
    """Child process: Spark's Kafka source reads the topic from the broker,
    decode_values decodes it; the result goes to an Arrow IPC file, and the
    messages of the reads that must fail to a JSON file."""
    from pyspark.sql import SparkSession
    from kafka_broker import spark_kafka_jars
    from kcodec.spark import decode_values
    spec = json.loads(Path(spec_path).read_text())
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("kcodec decode_values")
               .config("spark.jars", spark_kafka_jars())
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    df = (session.read.format("kafka").option("kafka.bootstrap.servers", spec["bootstrap"])
          .option("subscribe", spec["topic"]).option("startingOffsets", "earliest")
          .option("endingOffsets", "latest").load())
    schemas = {int(k): v for k, v in spec["schemas"].items()}
    for name, decoded in (
            # the registry's latest of <topic>-value reads; ids resolve there
            ("registry", decode_values(df, schemas=spec["url"], subject=spec["subject"])),
            # a mapping: its highest id reads
            ("mapping", decode_values(df, schemas=schemas))):
        table = pa.Table.from_pylist(spark_rows(decoded, ["offset", "value", "valueSchemaId"]))
        with pa.OSFile(spec[name], "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table)
    failures = {}
    mismatch = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "weight", "type": "double"}]})
    try:
        decode_values(df, schemas=schemas, value_schema=mismatch).select("value").collect()
    except Exception as exc:          # noqa: BLE001 - its message is the check
        failures["mismatch"] = str(exc)
    Path(spec["failures"]).write_text(json.dumps(failures))
    session.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["kafka-source"]:
        kafka_source_main(sys.argv[2])
        sys.exit(0)
    sys.exit(f"usage: {sys.argv[0]} kafka-source SPEC.json")


# ----------------------------------------------------------------- the tests

from kafka_broker import broker  # noqa: E402,F401
from schema_registry_server import schema_registry  # noqa: E402,F401
from needs import require_module, unavailable  # noqa: E402
from spark_session import spark  # noqa: E402,F401

require_module("fastavro")
import kcodec  # noqa: E402
import kcodec.spark  # noqa: E402
from kcodec.spark import decode_values  # noqa: E402
from kcodec.spark.values import spark_type  # noqa: E402
from kcodec.values.avro import arrow_type  # noqa: E402


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("typed-values")
    orders_log(base / "logs" / f"{TOPIC}-0")
    broken_log(base / "broken" / "broken-0")
    write_schemas_dir(base / "registry" / "_schemas-0", [
        (f"{TOPIC}-value", 1, IDS["V1"], V1), (f"{TOPIC}-value", 2, IDS["V2"], V2),
        (f"{TOPIC}-key", 1, IDS["KEY"], KEY_SCHEMA)])
    return base


@pytest.fixture(scope="module")
def registry(dirs):
    return str(dirs / "registry" / "_schemas-0")


def read(spark, path, **options):
    reader = spark.read.format("kafka-log")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(path))


def log_bytes(directory):
    return b"".join(p.read_bytes() for p in sorted(Path(directory).glob("*.log")))


def python_rows(directory, columns, **options):
    """kcodec.decode of a partition's log: the Python result."""
    table = kcodec.decode(log_bytes(directory), **options)
    return table.select(columns).to_pylist()


VALUE_COLUMNS = ["offset", "key", "keySchemaId", "value", "valueSchemaId"]


def test_avro_values_and_keys_equal_python_with_the_subjects_latest(spark, dirs, registry):
    df = read(spark, dirs / "logs", valueFormat="avro", keyFormat="avro",
              schemaRegistryUrl=registry)
    assert df.columns == ["key", "keySchemaId", "value", "valueSchemaId", "topic", "partition",
                          "offset", "timestamp", "timestampType"]
    # The reader schema is the latest of orders-value: V2, as Spark typed it when planning.
    assert df.schema["value"].dataType == spark_type(arrow_type(json.dumps(V2)))
    assert df.schema["key"].dataType == spark_type(arrow_type(json.dumps(KEY_SCHEMA)))
    got = spark_rows(df, VALUE_COLUMNS)
    expected = python_rows(dirs / "logs" / f"{TOPIC}-0", VALUE_COLUMNS, value_format="avro",
                           key_format="avro", schemas=registry, value_schema=json.dumps(V2),
                           key_schema=json.dumps(KEY_SCHEMA))
    assert got == expected
    assert len(got) == ROWS
    # Evolution: both writers' rows read as V2 (defaults filled, int promoted).
    assert {r["valueSchemaId"] for r in got} == {IDS["V1"], IDS["V2"], None}
    first, later = got[0]["value"], got[-1]["value"]
    assert first["channel"] == "web" and first["quantity"] == 1
    assert later["channel"] in ("web", "app")
    assert got[24]["value"] is None and got[24]["valueSchemaId"] is None


def test_value_schema_option_reads_every_writer(spark, dirs, registry):
    reader = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "quantity", "type": "double"},
        {"name": "channel", "type": "string", "default": "unknown"}]}
    text = json.dumps(reader)
    df = read(spark, dirs / "logs", valueFormat="avro", schemaRegistryUrl=registry,
              valueSchema=text)
    columns = ["offset", "value", "valueSchemaId"]
    got = spark_rows(df, columns)
    assert got == python_rows(dirs / "logs" / f"{TOPIC}-0", columns, value_format="avro",
                              schemas=registry, value_schema=text)
    assert got[0]["value"] == {"id": 0, "quantity": 1.0, "channel": "unknown"}


def test_on_value_error_null_names_each_bad_value(spark, dirs, registry):
    df = read(spark, dirs / "broken", valueFormat="avro", schemaRegistryUrl=registry,
              valueSchema=json.dumps(V1), onValueError="null")
    assert df.columns[:4] == ["key", "value", "valueSchemaId", "valueError"]
    columns = ["offset", "value", "valueSchemaId", "valueError"]
    got = spark_rows(df, columns)
    assert got == python_rows(dirs / "broken" / "broken-0", columns, value_format="avro",
                              schemas=registry, value_schema=json.dumps(V1),
                              on_value_error="null")
    bad = {r["offset"] for r in got if r["valueError"] is not None}
    assert bad == set(BROKEN)
    assert all(r["value"] is None for r in got if r["offset"] in BROKEN)
    assert "99" in got[5]["valueError"]                 # the unknown id is named
    assert got[0]["value"]["sku"] == "SKU-000"


def test_on_value_error_fail_names_the_offset(spark, dirs, registry):
    df = read(spark, dirs / "broken", valueFormat="avro", schemaRegistryUrl=registry,
              valueSchema=json.dumps(V1))
    with pytest.raises(Exception) as failed:
        df.select("value").collect()
    message = str(failed.value)
    assert "ValueDecodeError" in message or "UnknownSchemaError" in message, message[-3000:]
    assert "offset 3" in message or "offset 5" in message, message[-3000:]


def test_stream_reads_typed_values(spark, dirs, registry, tmp_path):
    df = (spark.readStream.format("kafka-log").option("valueFormat", "avro")
          .option("schemaRegistryUrl", registry).option("startingOffsets", "earliest")
          .load(str(dirs / "logs")))
    assert df.schema["value"].dataType == spark_type(arrow_type(json.dumps(V2)))
    query = (df.select("offset", "value", "valueSchemaId").writeStream.format("parquet")
             .option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    got = spark_rows(spark.read.parquet(str(tmp_path / "out")),
                     ["offset", "value", "valueSchemaId"])
    assert got == python_rows(dirs / "logs" / f"{TOPIC}-0", ["offset", "value", "valueSchemaId"],
                              value_format="avro", schemas=registry,
                              value_schema=json.dumps(V2))


def test_json_values_with_a_json_schema(spark, tmp_path):
    from kcodec.log import write_log
    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}}}}
    values = [json.dumps({"id": i, "name": f"n{i}", "at": f"2026-01-01T00:00:{i:02d}Z",
                          "tags": ["x"] * (i % 3)}).encode() for i in range(20)]
    write_log(str(tmp_path / "events-0"), pa.table({"value": pa.array(values, pa.binary())}))
    df = read(spark, tmp_path, valueFormat="json", valueSchema=json.dumps(schema))
    columns = ["offset", "value", "valueSchemaId"]
    got = spark_rows(df, columns)
    assert got == python_rows(tmp_path / "events-0", columns, value_format="json",
                              value_schema=json.dumps(schema))
    assert got[3]["value"]["name"] == "n3"


def test_decode_values_on_a_dataframe_with_a_mapping(spark, dirs):
    table = kcodec.decode(log_bytes(dirs / "logs" / f"{TOPIC}-0"))
    df = spark.createDataFrame(table.select(["offset", "value"]).to_pandas())
    mapping = {IDS["V1"]: json.dumps(V1), IDS["V2"]: json.dumps(V2)}
    decoded = decode_values(df, schemas=mapping)         # the highest id (V2) reads
    assert decoded.columns == ["offset", "value", "valueSchemaId"]
    got = spark_rows(decoded, ["offset", "value", "valueSchemaId"])
    expected = kcodec.decode(log_bytes(dirs / "logs" / f"{TOPIC}-0"), value_format="avro",
                             schemas=mapping).select(["offset", "value", "valueSchemaId"])
    assert got == expected.to_pylist()


def test_missing_reader_schema_errors_say_what_to_give(spark, dirs, registry):
    with pytest.raises(Exception, match="valueSchema"):
        read(spark, dirs / "logs", valueFormat="avro").schema
    with pytest.raises(Exception, match="valueSchema"):
        read(spark, dirs / "logs", valueFormat="json").schema
    both = [str(dirs / "logs"), str(dirs / "broken")]
    with pytest.raises(Exception, match=r"covers 2 topics \(broken, orders\).*valueSchema"):
        spark.read.format("kafka-log").option("valueFormat", "avro") \
            .option("schemaRegistryUrl", registry).load(both).schema
    with pytest.raises(Exception, match="no subject 'broken-value'"):
        read(spark, dirs / "broken", valueFormat="avro", schemaRegistryUrl=registry).schema
    with pytest.raises(Exception, match="valueFormat must be one of raw, avro, json"):
        read(spark, dirs / "logs", valueFormat="protobuf").schema
    df = spark.createDataFrame([(b"\x00",)], "value binary")
    with pytest.raises(ValueError, match="needs a reader schema.*value_schema="):
        decode_values(df, schemas=registry)
    with pytest.raises(ValueError, match="needs a reader schema"):
        decode_values(df)
    with pytest.raises(ValueError, match="not binary"):
        decode_values(spark.createDataFrame([("x",)], "value string"), value_schema=V1)


def test_a_reader_schema_that_does_not_match_fails_naming_the_field(spark, dirs, registry):
    mismatch = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "weight", "type": "double"}]}
    df = read(spark, dirs / "logs", valueFormat="avro", schemaRegistryUrl=registry,
              valueSchema=json.dumps(mismatch))
    with pytest.raises(Exception) as failed:
        df.select("value").collect()
    assert "weight" in str(failed.value), str(failed.value)[-3000:]


# --------------------------------------------- Spark's Kafka source, real broker

@pytest.fixture(scope="module")
def kafka_topic(broker, schema_registry):
    """avro-orders on the broker: V1 then V2 values by confluent-kafka's
    AvroSerializer, registered in the real registry (Apicurio's
    Confluent-compatible API), and tombstones."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from kafka_broker import CLIENT_TIMEOUT, Delivery, confluent_producer
    topic = "avro-orders"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(CLIENT_TIMEOUT)
    client = SchemaRegistryClient({"url": schema_registry.url})
    context = SerializationContext(topic, MessageField.VALUE)
    producer, delivery = confluent_producer(broker), Delivery()
    for version, schema, rows in ((1, V1, range(0, 40)), (2, V2, range(40, 90))):
        serializer = AvroSerializer(client, json.dumps(schema))
        for i in rows:
            value = None if i % 30 == 29 else serializer(order(i, version), context)
            producer.produce(topic, value=value, key=str(i).encode(), partition=0,
                             on_delivery=delivery)
            producer.poll(0)
    delivery.check(producer)
    subject = client.get_latest_version(f"{topic}-value")
    ids = [client.get_version(f"{topic}-value", v).schema_id
           for v in client.get_versions(f"{topic}-value")]
    schemas = {schema_id: client.get_schema(schema_id).schema_str for schema_id in ids}
    assert len(schemas) == 2 and subject.schema_id == max(schemas)
    return topic, schemas, schema_registry.url


def test_decode_values_on_sparks_kafka_source_equals_python(broker, kafka_topic, tmp_path):
    from kafka_broker import BrokerUnavailable, spark_kafka_jars
    try:
        spark_kafka_jars()
    except BrokerUnavailable as exc:
        unavailable(str(exc))
    topic, schemas, url = kafka_topic
    spec = {"bootstrap": broker.bootstrap, "topic": topic, "schemas": schemas, "url": url,
            "subject": f"{topic}-value", "registry": str(tmp_path / "registry.arrow"),
            "mapping": str(tmp_path / "mapping.arrow"),
            "failures": str(tmp_path / "failures.json")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    # The tests' helpers only: kcodec is the installed one (the source tree's
    # has no compiled core in CI).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "kafka-source",
                           str(tmp_path / "spec.json")], capture_output=True, text=True,
                          timeout=600, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-6000:]
    directory = Path(broker.log_dirs) / f"{topic}-0"
    expected = python_rows(directory, ["offset", "value", "valueSchemaId"], value_format="avro",
                           schemas=url)
    for name in ("registry", "mapping"):
        got = pa.ipc.open_file(spec[name]).read_all().sort_by("offset")
        assert got.to_pylist() == expected, name
    assert len(expected) == 90
    assert {r["valueSchemaId"] for r in expected} == set(schemas) | {None}
    failures = json.loads((tmp_path / "failures.json").read_text())
    assert "weight" in failures["mismatch"], failures["mismatch"][-3000:]
    assert "SchemaError" in failures["mismatch"], failures["mismatch"][-3000:]


def test_spark_convert_refuses_typed_value_options(tmp_path, capsys):
    from kcodec.cli import main
    status = main(["spark-convert", str(tmp_path / "logs"), "--out", str(tmp_path / "out"),
                   "--option", "valueFormat=avro"])
    assert status == 2
    assert "valueFormat and keyFormat are for kafka-log reads" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
