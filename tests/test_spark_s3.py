"""kafka-log and spark-convert on object storage: partition directories and
whole log.dirs roots uploaded to a real S3-compatible server (S3Proxy,
tests/s3_server.py) as a backup tool lays them, read with the endpoint and
credentials given as options, in the URI, or by the AWS environment and
profile files; reads that fetch byte ranges, counted at the server; and
clear, quick errors for what users get wrong."""
import os
import subprocess
import sys

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

import kcodec
import kcodec.spark
from kcodec.cli import main
from kcodec.errors import ObjectNotFoundError, ObjectStoreError
from kcodec.log import write_log
from kcodec.spark import parse_options, plan, read_split
from kcodec.spark import convert as convert_module
from kcodec.spark.convert import SUCCESS, convert
from kcodec.spark.storage import resolve_s3_settings
from converted_output import committed_output
from log_helpers import scripted_history, table_rows, write_history
from s3_server import ACCESS_KEY, SECRET_KEY, free_port, s3  # noqa: F401
from spark_session import spark, spark_rows  # noqa: F401

# A bucket per use: S3Proxy's filesystem backend lists a whole bucket to
# list a prefix of it, so a bucket holding everything slows every listing.
BUCKET = "kcodec-logs"
# A few segments per partition: S3Proxy answers each request in tens of ms.
SEGMENT_BYTES = 20000
TOPICS = {"orders-eu": 0, "payments": 3}
# What a broker keeps at the top of a log.dirs root.
ROOT_FILES = {"recovery-point-offset-checkpoint": "0\n2\norders-eu 0 100\npayments 3 100\n",
              "replication-offset-checkpoint": "0\n2\norders-eu 0 100\npayments 3 100\n",
              "log-start-offset-checkpoint": "0\n0\n",
              "cleaner-offset-checkpoint": "0\n0\n",
              "meta.properties": "version=1\nnode.id=1\ncluster.id=abc\n"}


@pytest.fixture(scope="module")
def histories():
    return {name: scripted_history(seed=30 + i) for i, name in enumerate(TOPICS)}


@pytest.fixture(scope="module")
def root(tmp_path_factory, histories):
    """A log.dirs root on disk: two partitions, a copy being deleted, the
    broker's checkpoint files."""
    base = tmp_path_factory.mktemp("s3-kafka-logs")
    for name, partition in TOPICS.items():
        write_history(str(base / f"{name}-{partition}"), histories[name], SEGMENT_BYTES, 1024)
    write_history(str(base / "orders-eu-0.0123456789abcdef0123456789abcdef-delete"),
                  histories["orders-eu"], SEGMENT_BYTES, 1024)
    for name, text in ROOT_FILES.items():
        (base / name).write_text(text)
    return base


@pytest.fixture(scope="module")
def uploaded(s3, root):
    """s3://kcodec/backups/kafka-logs: the root, uploaded."""
    s3.upload(str(root), f"{BUCKET}/backups/kafka-logs")
    return f"s3://{BUCKET}/backups/kafka-logs"


LARGE_BATCHES = 2048
LARGE_RECORDS = 8


@pytest.fixture(scope="module")
def large(s3, tmp_path_factory):
    """One 16 MiB segment of 2048 batches (8 records of 1 KiB each), on
    disk and uploaded: (local directory, URI, segment size)."""
    directory = tmp_path_factory.mktemp("s3-large") / "big-0"
    batches = [kcodec.encode([(b"k%d" % (i * LARGE_RECORDS + j), os.urandom(1024),
                               1_700_000_000_000 + i, []) for j in range(LARGE_RECORDS)],
                             base_offset=i * LARGE_RECORDS) for i in range(LARGE_BATCHES)]
    write_log(str(directory), batches, index_interval_bytes=4096)
    s3.upload(str(directory), "kcodec-large/big-0")
    size = os.path.getsize(directory / "00000000000000000000.log")
    assert size > 16 << 20
    return str(directory), "s3://kcodec-large/big-0", size


def read(spark, path, **options):
    kcodec.spark.register(spark)        # found without it once installed (not in editable mode)
    reader = spark.read.format("kafka-log")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(path)


def local_rows(spark, path, **options):
    return spark_rows(read(spark, path, **options))


def parquet_rows(filesystem, path):
    """Rows of a converted output, read with pyarrow (Spark's JVM has no
    S3 filesystem here): (topic, partition, offset, key, value)."""
    # Listed by hand: S3Proxy's filesystem backend also lists its
    # directories as objects, which pyarrow's discovery would open.
    files = [i.path for i in filesystem.get_file_info(pafs.FileSelector(path, recursive=True))
             if i.type == pafs.FileType.File and i.path.endswith(".parquet")]
    table = ds.dataset(files, filesystem=filesystem, format="parquet", partitioning="hive",
                       partition_base_dir=path).to_table()
    return sorted(zip(table["topic"].to_pylist(), table["partition"].to_pylist(),
                      table["offset"].to_pylist(), table["key"].to_pylist(),
                      table["value"].to_pylist()))


# ------------------------------------------------------------ reading

@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_log_dirs_root_reads_as_on_disk(spark, s3, root, uploaded, isolation):
    remote = read(spark, uploaded, includeHeaders="true", **{
        "kafka.isolation.level": isolation, **s3.options()})
    for name, partition in TOPICS.items():
        expected = local_rows(spark, str(root), includeHeaders="true",
                              **{"kafka.isolation.level": isolation, "subscribe": name})
        got = spark_rows(remote.where(remote.topic == name))
        assert got == expected and got
    assert remote.select("partition").distinct().count() == len(TOPICS)


def test_the_endpoint_in_the_uri_query_and_globs(s3, root, uploaded):
    """The query of an s3:// URI (pyarrow's names) is not a glob's `?`: the
    reported bug, where it was cut off and the endpoint lost."""
    query = (f"?endpoint_override={s3.endpoint.replace(':', '%3A').replace('/', '%2F')}"
             f"&access_key={ACCESS_KEY}&secret_key={SECRET_KEY}")
    options = parse_options({})
    for given in (uploaded + "/orders-eu-0" + query, uploaded + "/orders-eu-?" + query,
                  uploaded + "/*-[0-9]" + query):
        splits, partitions = plan([given], options)
        assert [p.topic for p in partitions][:1] == ["orders-eu"], given
        assert all(s.source.startswith(f"s3://{BUCKET}/backups/kafka-logs/") for s in splits)
    local = sorted(r for s in plan([str(root / "orders-eu-0")], options)[0]
                   for t in read_split(s, options) for r in table_rows(t))
    splits, _ = plan([uploaded + "/orders-eu-0" + query], options)
    assert sorted(r for s in splits for t in read_split(s, options)
                  for r in table_rows(t)) == local


def test_the_aws_profile_files(s3, root, uploaded, tmp_path, monkeypatch):
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    config.write_text(f"[profile backups]\nregion = eu-west-3\ns3 =\n  endpoint_url = "
                      f"{s3.endpoint}\n")
    credentials.write_text(f"[backups]\naws_access_key_id = {ACCESS_KEY}\n"
                           f"aws_secret_access_key = {SECRET_KEY}\n")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "backups")
    settings = resolve_s3_settings(BUCKET)
    assert (settings.endpoint, settings.region, settings.access_key) == \
        (s3.endpoint, "eu-west-3", ACCESS_KEY)
    assert settings.origin("credentials") == f"profile backups in {credentials}"
    options = parse_options({})
    splits, _ = plan([uploaded + "/payments-3"], options)
    local, _ = plan([str(root / "payments-3")], options)
    assert sorted(r for s in splits for t in read_split(s, options) for r in table_rows(t)) == \
        sorted(r for s in local for t in read_split(s, options) for r in table_rows(t))
    # The environment comes before the profile, options and the URI before both.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_REGION", "ap-south-2")
    assert resolve_s3_settings(BUCKET).endpoint == "http://127.0.0.1:1"
    assert resolve_s3_settings(BUCKET).region == "ap-south-2"
    assert resolve_s3_settings(BUCKET, {}, (("s3.endpoint", s3.endpoint),)).endpoint \
        == s3.endpoint
    assert resolve_s3_settings(BUCKET, {"endpoint_override": "127.0.0.1:2", "scheme": "http"},
                               (("s3.endpoint", s3.endpoint),)).endpoint == "http://127.0.0.1:2"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:3")
    assert resolve_s3_settings(BUCKET).endpoint == "http://127.0.0.1:3"


def test_the_settings_travel_with_the_plan_not_the_executors_environment(
        spark, s3, root, uploaded, tmp_path, monkeypatch):
    """The endpoint and credentials only in the driver's environment, set
    after Spark's JVM and Python workers started (they never see them): the
    tasks reading and writing on S3 still reach the server."""
    spark.range(1).count()      # the JVM and its workers run before the variables are set
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    s3.filesystem().create_dir("kcodec-from-env")
    out = "s3://kcodec-from-env/converted"
    options = parse_options({"includeHeaders": "true", "maxBytesPerPartition": "8000"})
    result = convert(spark, [uploaded + "/payments-3"], out, options)
    local = convert(spark, [str(root / "payments-3")], str(tmp_path / "local"), options)
    assert result.rows == local.rows > 0 and result.tasks == local.tasks
    fs = s3.filesystem()
    assert parquet_rows(fs, "kcodec-from-env/converted") == \
        parquet_rows(pafs.LocalFileSystem(), str(tmp_path / "local"))
    assert fs.get_file_info(f"kcodec-from-env/converted/{SUCCESS}").type == pafs.FileType.File


def test_spark_convert_from_s3_to_s3_on_the_command_line(spark, s3, root, uploaded, tmp_path,
                                                        capsys):
    """The reported command: paths and --out with the endpoint in their query."""
    query = (f"?endpoint_override={s3.endpoint.replace(':', '%3A').replace('/', '%2F')}"
             f"&access_key={ACCESS_KEY}&secret_key={SECRET_KEY}")
    s3.filesystem().create_dir("kcodec-cli")
    assert main(["spark-convert", uploaded + "/orders-eu-0" + query,
                 "--out", f"s3://kcodec-cli/converted{query}"]) == 0
    assert "rows from 1 partition(s)" in capsys.readouterr().out
    assert main(["spark-convert", str(root / "orders-eu-0"), "--out",
                 str(tmp_path / "local")]) == 0
    assert parquet_rows(s3.filesystem(), "kcodec-cli/converted") == \
        parquet_rows(pafs.LocalFileSystem(), str(tmp_path / "local"))


def test_spark_convert_with_the_aws_environment_in_a_process_of_its_own(s3, uploaded):
    """As a user runs it: AWS_ENDPOINT_URL and the keys in the environment
    (which pyarrow alone does not read), nothing else."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    s3.filesystem().create_dir("kcodec-env-process")
    done = subprocess.run(
        [sys.executable, "-m", "kcodec.cli", "spark-convert", uploaded + "/payments-3",
         "--out", "s3://kcodec-env-process/converted", "--master", "local[1]"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows from 1 partition(s)" in done.stdout
    rows = parquet_rows(s3.filesystem(), "kcodec-env-process/converted")
    assert rows and {r[:2] for r in rows} == {("payments", 3)}


def test_a_rerun_with_overwrite_leaves_nothing_of_the_earlier_run_on_s3(spark, s3, uploaded):
    """Each file under its final key, the manifest, then _SUCCESS: the
    second run's output holds its own files only."""
    fs = s3.filesystem()
    fs.create_dir("kcodec-rerun")
    out = "kcodec-rerun/converted"
    options = parse_options({"includeHeaders": "true", **s3.options()})
    first = convert(spark, [uploaded], f"s3://{out}", options)
    earlier, _ = committed_output(out, fs)
    second = convert(spark, [uploaded], f"s3://{out}", parse_options(
        {"includeHeaders": "true", "maxBytesPerPartition": "15000", **s3.options()}),
        mode="overwrite")
    later, table = committed_output(out, fs)
    assert earlier["job"] != later["job"] and first.rows == second.rows == table.num_rows
    assert len(later["files"]) > len(earlier["files"])


# ------------------------------------------------------- ranged reads

def test_a_bounded_read_fetches_a_small_part_of_a_large_segment(spark, s3, large):
    """Counted at the server (every byte it sent, to the planning worker and
    to the executors): a read of 100 records in the middle of a 16 MiB
    segment fetches its byte range, the side files and the few windows
    planning scans, not the segment."""
    directory, uri, size = large
    options = s3.options(s3.counted_endpoint)
    start = LARGE_BATCHES * LARGE_RECORDS // 2
    s3.relay.reset()
    rows = read(spark, uri, startingOffsets=str(start), endingOffsets=str(start + 100),
                **options).select("offset").collect()
    fetched = s3.relay.received
    assert sorted(r["offset"] for r in rows) == list(range(start, start + 100))
    assert fetched < size / 8, f"{fetched:,} bytes fetched of a {size:,}-byte segment"
    # The count sees whole reads too.
    s3.relay.reset()
    assert read(spark, uri, **options).count() == LARGE_BATCHES * LARGE_RECORDS
    assert s3.relay.received > size


# ------------------------------------------------------------- errors

def timed(call):
    """The error `call` raises. How fast it comes is the S3 options'
    business (few attempts, short timeouts), not a timed assertion here."""
    with pytest.raises(Exception) as raised:
        call()
    return raised


def test_nothing_listening_at_the_endpoint(spark, s3, uploaded):
    endpoint = f"http://127.0.0.1:{free_port()}"
    options = {**s3.options(endpoint), "s3.maxAttempts": "2"}
    raised = timed(lambda: read(spark, uploaded, **options).count())
    assert f"cannot reach the object store at endpoint {endpoint}" in str(raised.value)
    raised = timed(lambda: plan([uploaded], parse_options(options)))
    assert raised.type is ObjectStoreError
    assert str(raised.value).startswith(
        f"cannot reach the object store at endpoint {endpoint} (from option s3.endpoint), "
        f"looking up {uploaded}: ")


def test_wrong_credentials(spark, s3, uploaded):
    options = {**s3.options(), "s3.secretKey": "not-the-secret"}
    raised = timed(lambda: read(spark, uploaded, **options).count())
    assert f"credentials refused by endpoint {s3.endpoint}" in str(raised.value)
    raised = timed(lambda: plan([uploaded], parse_options(options)))
    assert raised.type is ObjectStoreError
    assert "(access key kcod... from option s3.accessKey)" in str(raised.value)
    assert f"looking up {uploaded}" in str(raised.value)


def test_a_missing_bucket_and_an_empty_prefix(spark, s3, uploaded, capsys):
    raised = timed(lambda: plan(["s3://no-such-bucket/logs"], parse_options(s3.options())))
    assert raised.type is ObjectNotFoundError
    assert str(raised.value) == (f"no such bucket 'no-such-bucket' at endpoint {s3.endpoint} "
                                 "(from option s3.endpoint)")
    raised = timed(lambda: read(spark, f"s3://{BUCKET}/nothing/here", **s3.options()).count())
    assert (f"nothing under s3://{BUCKET}/nothing/here (endpoint {s3.endpoint} (from option "
            "s3.endpoint)): no object has that prefix") in str(raised.value)
    # A prefix with objects but no partition directories: the command line
    # says so in one line.
    s3.upload(os.path.dirname(__file__) + "/peers", "kcodec-not-logs/prefix")
    assert main(["spark-convert", "s3://kcodec-not-logs/prefix",
                 "--out", "s3://kcodec-not-logs/x",
                 "--s3-endpoint", s3.endpoint, "--option", f"s3.accessKey={ACCESS_KEY}",
                 "--option", f"s3.secretKey={SECRET_KEY}"]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == ("kcodec: spark-convert: FileNotFoundError: no partition directories "
                    f"(<topic>-<partition>) under s3://kcodec-not-logs/prefix (endpoint "
                    f"{s3.endpoint} (from option s3.endpoint))")


def test_a_segment_deleted_from_the_bucket_mid_job(spark, s3, root, monkeypatch, capsys):
    """Deleted after the plan, before the tasks read it: the job fails
    naming the object, and commits nothing."""
    s3.upload(str(root / "payments-3"), "kcodec-deleted/payments-3")
    planned = convert_module.plan
    victim = {}

    def plan_then_delete(paths, options):
        splits, partitions = planned(paths, options)
        victim["path"] = splits[len(splits) // 2].path
        s3.filesystem().delete_file(victim["path"])
        return splits, partitions

    monkeypatch.setattr(convert_module, "plan", plan_then_delete)
    assert main(["spark-convert", "s3://kcodec-deleted/payments-3", "--out",
                 "s3://kcodec-deleted/out", "--s3-endpoint", s3.endpoint,
                 "--option", f"s3.accessKey={ACCESS_KEY}",
                 "--option", f"s3.secretKey={SECRET_KEY}"]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"kcodec: spark-convert: ObjectNotFoundError: no such object "
                           f"s3://{victim['path']} (endpoint {s3.endpoint} (from option "
                           "s3.endpoint)), opening it: deleted or moved since the read was "
                           "planned?"), line
    fs = s3.filesystem()
    assert fs.get_file_info(f"kcodec-deleted/out/{SUCCESS}").type == pafs.FileType.NotFound
    # The files of the tasks that had finished are gone too.
    listed = fs.get_file_info(pafs.FileSelector("kcodec-deleted/out", recursive=True))
    left = [i.path for i in listed
            if i.type == pafs.FileType.File and i.path.endswith(".parquet")]
    assert left == []


def test_corrupt_data_on_s3_names_the_object_and_byte(s3, root, tmp_path):
    directory = tmp_path / "orders-eu-0"
    write_history(str(directory), scripted_history(seed=30), SEGMENT_BYTES, 1024)
    path = directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[200] ^= 0x01
    path.write_bytes(bytes(data))
    s3.upload(str(directory), "kcodec-corrupt/orders-eu-0")
    options = parse_options(s3.options())
    splits, _ = plan(["s3://kcodec-corrupt/orders-eu-0"], options)
    with pytest.raises(kcodec.errors.KafkaFormatError) as raised:
        [t for s in splits for t in read_split(s, options)]
    assert raised.value.source == "s3://kcodec-corrupt/orders-eu-0/00000000000000000000.log"
    assert raised.value.position is not None and raised.value.position <= 200
