"""kafka-log and spark-convert on a real Spark standalone cluster: a master
and two one-core workers, each a JVM of its own started by the installed
pyspark's spark-class (kcodec.spark.cluster.LocalCluster). The driver is a
process of its own (tests/cluster_driver.py, or `kcodec spark-convert
--master spark://...`); the executors run this Python and import the kcodec
installed in it (the wheel, under CI): the "installed on every node" way.

Checked: the cluster gives local mode's rows (read_committed too, over a
real broker's partition directories); an executor's JVM or a Python worker
killed mid-job loses no row and duplicates none, and leaves no file or
object the manifest does not name; corrupt data fails the job in one line
naming the file and the byte."""
import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pytest

import kcodec.spark
from kcodec.spark.cluster import ClusterError, LocalCluster
from converted_output import committed_output
from kafka_broker import broker, broker_topics  # noqa: F401
from log_helpers import entry_bounds, scripted_history, write_history
from needs import unavailable
from s3_server import s3  # noqa: F401
from spark_session import spark  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "cluster_driver.py")
TOPICS = {"orders-eu": 0, "payments": 3}
WORKERS = 2
# Splits of ~15 KB: a few dozen tasks, spread over both workers.
SPLIT_BYTES = "15000"
# Started JVMs and a job on them: minutes at most, even on a loaded machine.
DRIVER_TIMEOUT = 600
BUCKET = "kcodec-cluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("java") is None:
        unavailable("java is not installed (Spark's master and workers need it)")
    try:
        running = LocalCluster(WORKERS, cores=1, memory="2g",
                               directory=tmp_path_factory.mktemp("spark-cluster"))
        running.start()
    except ClusterError as exc:
        pytest.fail(f"the standalone cluster did not start: {exc}")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A log.dirs root of two partitions with transactions, several segments each."""
    base = tmp_path_factory.mktemp("cluster-kafka-logs")
    for i, (name, partition) in enumerate(TOPICS.items()):
        write_history(str(base / f"{name}-{partition}"), scripted_history(seed=60 + i),
                      segment_bytes=40_000, index_interval_bytes=800)
    return base


def drive(cluster, *args):
    """Run tests/cluster_driver.py on the cluster; its JSON report."""
    done = subprocess.run([sys.executable, DRIVER, cluster.url, *args], capture_output=True,
                          text=True, timeout=DRIVER_TIMEOUT, cwd=HERE)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def kcodec_command():
    """The kcodec command installed beside this Python (as a user runs it)."""
    command = os.path.join(os.path.dirname(sys.executable), "kcodec")
    return [command] if os.path.exists(command) else [sys.executable, "-m", "kcodec.cli"]


def rows(table):
    """Sorted (topic, partition, offset, timestamp ms, key, value, headers)."""
    timestamps = table["timestamp"].cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    headers = (table["headers"].to_pylist() if "headers" in table.column_names
               else [None] * table.num_rows)
    return sorted(zip(table["topic"].to_pylist(), table["partition"].to_pylist(),
                      table["offset"].to_pylist(), timestamps.to_pylist(),
                      table["key"].to_pylist(), table["value"].to_pylist(),
                      [None if h is None else tuple((x["key"], x["value"]) for x in h)
                       for h in headers]))


def local_rows(spark, paths, options):
    kcodec.spark.register(spark)
    return rows(spark.read.format("kafka-log").options(**options).load(paths).toArrow())


def output_rows(out, filesystem=None):
    """The rows of the files a converted output's manifest names (checked
    to be all the output holds)."""
    return rows(committed_output(out, filesystem)[1])


def option_args(options):
    return [arg for name, value in options.items() for arg in ("--option", f"{name}={value}")]


# --------------------------------------------------------------- reading

@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_kafka_log_on_the_cluster_gives_the_local_rows(cluster, spark, root, broker,
                                                       broker_topics, isolation, tmp_path):
    paths = [str(root), str(broker.partition_dir("transactions")),
             str(broker.partition_dir("codec-zstd"))]
    options = {"includeHeaders": "true", "kafka.isolation.level": isolation,
               "maxBytesPerPartition": SPLIT_BYTES}
    out = tmp_path / "rows.arrow"
    report = drive(cluster, "read", str(out), *paths, *option_args(options))
    assert report["executors"] == WORKERS
    # The executors run this Python, and import the kcodec installed in it.
    assert report["kcodec_on_executors"] == [os.path.realpath(kcodec.__file__)]
    with pa.memory_map(str(out)) as source:
        on_cluster = rows(pa.ipc.open_file(source).read_all())
    expected = local_rows(spark, paths, options)
    assert on_cluster == expected and report["rows"] == len(expected)
    topics = {r[0] for r in on_cluster}
    assert topics == set(TOPICS) | {"transactions", "codec-zstd"}


def test_spark_convert_on_the_command_line_with_a_cluster_master(cluster, spark, root, broker,
                                                                 broker_topics, tmp_path):
    paths = [str(root), str(broker.partition_dir("transactions"))]
    out = tmp_path / "converted"
    done = subprocess.run(
        kcodec_command() + ["spark-convert", *paths, "--out", str(out), "--master", cluster.url,
                            "--isolation", "read_committed", "--max-bytes-per-partition",
                            SPLIT_BYTES, "--conf", "spark.driver.host=127.0.0.1",
                            "--conf", "spark.executor.memory=1g"],
        capture_output=True, text=True, timeout=DRIVER_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr == ""
    expected = local_rows(spark, paths, {"includeHeaders": "true",
                                         "kafka.isolation.level": "read_committed"})
    assert output_rows(str(out)) == expected
    assert f"{len(expected):,} rows" in done.stdout


def test_corrupt_data_on_the_cluster_fails_in_one_line_naming_file_and_byte(cluster, tmp_path):
    directory = tmp_path / "logs" / "payments-3"
    write_history(str(directory), scripted_history(seed=61), segment_bytes=40_000)
    segment = directory / sorted(n for n in os.listdir(directory) if n.endswith(".log"))[1]
    data = bytearray(segment.read_bytes())
    start, _, first, _ = entry_bounds(bytes(data))[1]
    data[start + 80] ^= 0x01
    segment.write_bytes(bytes(data))
    out = tmp_path / "converted"
    done = subprocess.run(
        kcodec_command() + ["spark-convert", str(directory), "--out", str(out),
                            "--master", cluster.url, "--conf", "spark.driver.host=127.0.0.1"],
        capture_output=True, text=True, timeout=DRIVER_TIMEOUT)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    [line] = lines
    assert line.startswith("kcodec: spark-convert: CrcMismatchError: record batch CRC-32C "), line
    assert line.endswith(f"(at {segment}, byte {start}, offset {first})"), line
    # Nothing of the failed job stays.
    assert not out.exists() or os.listdir(out) == []


@pytest.fixture(scope="module")
def packed_venv(tmp_path_factory):
    """kcodec's wheel (ci/test.sh's, KCODEC_WHEEL) installed in a venv of its
    own, packed by venv-pack as spark.archives takes it: a .tar.gz, which
    Spark unpacks with tar (a plain .tar it unpacks with Java code that
    drops the files' modes)."""
    wheel = os.environ.get("KCODEC_WHEEL")
    if not wheel or not os.path.exists(wheel):
        unavailable("KCODEC_WHEEL names no wheel (ci/test.sh sets it to the wheel it "
                    "installed)")
    venv_pack = os.path.join(os.path.dirname(sys.executable), "venv-pack")
    if not os.path.exists(venv_pack):
        unavailable("venv-pack is not installed (pip install 'kcodec[test]')")
    base = tmp_path_factory.mktemp("packed-venv")
    env, archive = base / "kcodec-env", base / "kcodec-env.tar.gz"
    # --copies: a venv's python is otherwise a symlink out of the archive.
    subprocess.run([sys.executable, "-m", "venv", "--copies", str(env)], check=True)
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", wheel],
                   check=True, timeout=DRIVER_TIMEOUT)
    subprocess.run([venv_pack, "-q", "-p", str(env), "-o", str(archive)], check=True,
                   timeout=DRIVER_TIMEOUT)
    shutil.rmtree(env)              # the executors can only have it from the archive
    return archive


def test_executors_import_kcodec_from_a_venv_shipped_with_spark_archives(
        cluster, spark, root, packed_venv, tmp_path):
    out = tmp_path / "converted"
    options = {"includeHeaders": "true", "maxBytesPerPartition": SPLIT_BYTES}
    report = drive(cluster, "convert", str(out), str(root), *option_args(options),
                   "--conf", f"spark.archives={packed_venv}#kcodec-env",
                   "--conf", "spark.pyspark.python=./kcodec-env/bin/python")
    where = report["kcodec_on_executors"]
    # Not this venv's kcodec: the archive's, unpacked where the executors run.
    assert where and all("/kcodec-env/lib/" in path and
                         not path.startswith(os.path.realpath(sys.prefix)) for path in where), where
    assert output_rows(str(out)) == local_rows(spark, [str(root)], options)


# ----------------------------------------------------------------- faults

def test_an_executor_killed_mid_job_loses_and_duplicates_nothing(cluster, spark, root,
                                                                 tmp_path):
    out, marks = tmp_path / "converted", tmp_path / "marks"
    marks.mkdir()
    options = {"includeHeaders": "true", "maxBytesPerPartition": SPLIT_BYTES}
    report = drive(cluster, "convert", str(out), str(root), *option_args(options),
                   "--kill", "executor", "--split", "2", "--marks", str(marks))
    [mark] = os.listdir(marks)
    assert mark == "killed-executor-2"
    assert output_rows(str(out)) == local_rows(spark, [str(root)], options)
    assert report["files"] <= report["tasks"]


def test_a_python_worker_killed_mid_job_loses_and_duplicates_nothing(cluster, spark, root,
                                                                     tmp_path):
    out, marks = tmp_path / "converted", tmp_path / "marks"
    marks.mkdir()
    options = {"includeHeaders": "true", "maxBytesPerPartition": SPLIT_BYTES}
    drive(cluster, "convert", str(out), str(root), *option_args(options),
          "--kill", "python", "--split", "1", "--marks", str(marks))
    assert os.listdir(marks) == ["killed-python-1"]
    assert output_rows(str(out)) == local_rows(spark, [str(root)], options)


def test_an_executor_killed_mid_job_writing_to_s3(cluster, spark, s3, root, tmp_path):
    """Read from and written to the bucket: every row once, and no object
    the manifest does not name (a killed upload never completes)."""
    s3.upload(str(root), f"{BUCKET}/kafka-logs")
    marks = tmp_path / "marks"
    marks.mkdir()
    options = {"includeHeaders": "true", "maxBytesPerPartition": SPLIT_BYTES, **s3.options()}
    drive(cluster, "convert", f"s3://{BUCKET}/converted", f"s3://{BUCKET}/kafka-logs",
          *option_args(options), "--kill", "executor", "--split", "0", "--marks", str(marks))
    assert os.listdir(marks) == ["killed-executor-0"]
    expected = local_rows(spark, [str(root)], {"includeHeaders": "true"})
    assert output_rows(f"{BUCKET}/converted", s3.filesystem()) == expected
