"""spark-convert: Parquet written by the tasks themselves, checked against
what was appended to the logs and against the kafka-log source, with its
commit protocol (final names, a manifest, _SUCCESS last) under failed and
retried tasks."""
import os
import re

import pyarrow.parquet as pq
import pytest

from kcodec.cli import main
from kcodec.spark import kafka_schema, parse_options
from kcodec.spark.convert import MANIFEST, SUCCESS, convert
from converted_output import committed_output
from log_helpers import entry_bounds, scripted_history, write_history
from spark_session import spark, spark_rows, without_headers  # noqa: F401

TOPICS = {"orders-eu": 0, "payments": 3}


@pytest.fixture(scope="module")
def histories():
    return {name: scripted_history(seed=20 + i) for i, name in enumerate(TOPICS)}


@pytest.fixture(scope="module")
def root(tmp_path_factory, histories):
    base = tmp_path_factory.mktemp("kafka-logs")
    for name, partition in TOPICS.items():
        write_history(str(base / f"{name}-{partition}"), histories[name], segment_bytes=40_000,
                      index_interval_bytes=800)
    return base


def all_files(directory):
    return sorted(os.path.relpath(os.path.join(d, n), directory)
                  for d, _, names in os.walk(directory) for n in names)


def rows_by_partition(spark, path):
    df = spark.read.parquet(str(path))
    return {name: spark_rows(df.where(df.topic == name).where(df.partition == p))
            for name, p in TOPICS.items()}


def only_the_job_files(out, result):
    """The Parquet files of the output (all its manifest names, and all it
    holds), as the result counts them."""
    manifest, table = committed_output(out)
    assert len(manifest["files"]) == result.files and table.num_rows == result.rows
    return sorted(f["path"] for f in manifest["files"])


def options(**given):
    return parse_options({"includeHeaders": "true", **given})


def test_converted_rows_are_what_was_appended(spark, root, histories, tmp_path):
    out = tmp_path / "out"
    result = convert(spark, [str(root)], str(out), options(maxBytesPerPartition="15000"))
    assert rows_by_partition(spark, out) == {n: h.data_records() for n, h in histories.items()}
    assert result.rows == sum(len(h.data_records()) for h in histories.values())
    data_files = only_the_job_files(out, result)
    assert os.path.getmtime(out / SUCCESS) >= os.path.getmtime(out / MANIFEST)
    # A split holding only a transaction marker has no rows and writes no file.
    assert len(data_files) == result.files <= result.tasks
    assert result.tasks > sum(n.endswith(".log") for _, _, ns in os.walk(root) for n in ns)
    assert {os.path.dirname(f) for f in data_files} == {
        f"topic={n}/partition={p}" for n, p in TOPICS.items()}
    assert result.log_bytes == sum(os.path.getsize(os.path.join(d, n))
                                   for d, _, ns in os.walk(root) for n in ns if n.endswith(".log"))


def test_reads_back_with_the_kafka_log_schema_and_content(spark, root, tmp_path):
    out = tmp_path / "out"
    opts = {"includeHeaders": "true", "kafka.isolation.level": "read_committed"}
    convert(spark, [str(root)], str(out), parse_options(opts))
    source = spark.read.format("kafka-log").options(**opts).load(str(root))
    back = spark.read.parquet(str(out))
    assert back.schema == source.schema == kafka_schema(True)
    def rows(df):
        return sorted((tuple(r) for r in df.collect()), key=lambda r: (r[2], r[3], r[4]))
    assert rows(back) == rows(source)


def test_offsets_isolation_and_no_headers(spark, root, histories, tmp_path):
    out = tmp_path / "out"
    convert(spark, [str(root / "payments-3")], str(out), parse_options({
        "startingOffsets": "200", "endingOffsets": "900", "kafka.isolation.level":
        "read_committed", "maxRecordsPerPartition": "100"}))
    df = spark.read.parquet(str(out))
    assert df.schema == kafka_schema(False)
    expected = [r for r in histories["payments"].data_records(committed_only=True)
                if 200 <= r[0] < 900]
    assert spark_rows(df) == without_headers(expected)


def test_nothing_to_convert_still_leaves_a_readable_table(spark, root, histories, tmp_path):
    out = tmp_path / "out"
    end = histories["payments"].end_offset
    result = convert(spark, [str(root / "payments-3")], str(out),
                     options(startingOffsets=str(end)))
    assert result.rows == 0
    df = spark.read.parquet(str(out))
    assert df.count() == 0 and df.schema == kafka_schema(True)


def test_an_existing_output_is_refused_unless_overwritten(spark, root, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "someone-elses.txt").write_text("x")
    with pytest.raises(FileExistsError):
        convert(spark, [str(root / "payments-3")], str(out), options())
    result = convert(spark, [str(root / "payments-3")], str(out), options(), mode="overwrite")
    assert "someone-elses.txt" not in all_files(out)
    only_the_job_files(out, result)


def test_a_rerun_with_overwrite_leaves_nothing_of_the_earlier_run(spark, root, histories,
                                                                  tmp_path):
    out = tmp_path / "out"
    first = convert(spark, [str(root)], str(out), options(maxBytesPerPartition="15000"))
    earlier = only_the_job_files(out, first)
    second = convert(spark, [str(root)], str(out), options(), mode="overwrite")
    later = only_the_job_files(out, second)
    assert not set(earlier) & set(later) and len(later) < len(earlier)
    assert rows_by_partition(spark, out) == {n: h.data_records() for n, h in histories.items()}


# ----------------------------------------------------- the commit protocol

def fail_first_attempt(stage_to_fail, split_ids):
    """A task hook (pickled by value to the executors) that fails the first
    attempt of the given splits at one stage of the commit."""
    def hook(split, attempt, stage):
        if stage == stage_to_fail and split.id in split_ids and attempt == 0:
            raise RuntimeError(f"simulated failure of split {split.id} once {stage}")
    return hook


def kill_first_attempt(split_ids, marks):
    """A task hook that kills its own Python worker (SIGKILL) in the first
    attempt of the given splits, once their file is written but not yet in
    place (what an executor killed mid-task leaves), leaving a mark in the
    directory `marks` first."""
    def hook(split, attempt, stage):
        if stage == "written" and split.id in split_ids and attempt == 0:
            import signal
            open(os.path.join(marks, f"killed-{split.id}"), "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    return hook


@pytest.mark.parametrize("stage", ["written", "committed"])
def test_a_retried_task_leaves_no_duplicates(spark, root, histories, tmp_path, stage):
    """Failing after the file is written (not yet in place) or after it was
    renamed into place (as a speculative duplicate would): the retry
    replaces the same file."""
    out = tmp_path / "out"
    result = convert(spark, [str(root)], str(out), options(), _before_commit=fail_first_attempt(
        stage, {0, 3}))
    assert rows_by_partition(spark, out) == {n: h.data_records() for n, h in histories.items()}
    only_the_job_files(out, result)


def test_a_killed_python_worker_leaves_no_duplicates_and_no_partial_file(
        spark, root, histories, tmp_path):
    out, marks = tmp_path / "out", tmp_path / "marks"
    marks.mkdir()
    result = convert(spark, [str(root)], str(out), options(),
                     _before_commit=kill_first_attempt({0, 2}, str(marks)))
    assert sorted(os.listdir(marks)) == ["killed-0", "killed-2"]
    assert rows_by_partition(spark, out) == {n: h.data_records() for n, h in histories.items()}
    # The killed attempts' in-progress files were removed by their retries.
    only_the_job_files(out, result)


def test_a_failed_job_leaves_nothing(spark, root, tmp_path):
    out = tmp_path / "out"

    def always(split, attempt, stage):
        if stage == "written" and split.id == 1:
            raise RuntimeError("simulated failure on every attempt")

    with pytest.raises(Exception, match="simulated failure on every attempt"):
        convert(spark, [str(root)], str(out), options(), _before_commit=always)
    # The other tasks were cancelled and waited for before the job's files
    # were removed.
    assert all_files(out) == []


# --------------------------------------------------------- corrupt data

def test_corrupt_batches_skipped_and_counted(spark, tmp_path, histories):
    directory = tmp_path / "logs" / "payments-3"
    write_history(str(directory), histories["payments"], segment_bytes=5000)
    segment = sorted(n for n in os.listdir(directory) if n.endswith(".log"))[2]
    path = directory / segment
    data = bytearray(path.read_bytes())
    start, end, first, last = entry_bounds(bytes(data))[0]
    data[start + 80] ^= 0x01
    path.write_bytes(bytes(data))
    out = tmp_path / "out"
    with pytest.raises(Exception, match=f"{segment}.*byte {start}"):
        convert(spark, [str(directory)], str(out), options())
    result = convert(spark, [str(directory)], str(out), options(onCorruptData="skip"),
                     mode="overwrite")
    assert [(f, s, e) for f, s, e, _ in result.skipped] == [(str(path), start, end)]
    expected = [r for r in histories["payments"].data_records() if not first <= r[0] <= last]
    assert spark_rows(spark.read.parquet(str(out))) == expected
    assert "skipped 1 corrupt range(s)" in result.summary()


def test_skipped_ranges_name_bytes_of_the_file(spark, tmp_path, histories):
    """Splits cut the segment: a skip inside one names the file's byte."""
    directory = tmp_path / "logs" / "payments-3"
    write_history(str(directory), histories["payments"], segment_bytes=5000)
    path = directory / sorted(n for n in os.listdir(directory) if n.endswith(".log"))[2]
    data = bytearray(path.read_bytes())
    start, end, _, _ = entry_bounds(bytes(data))[-1]
    data[start + 80] ^= 0x01
    path.write_bytes(bytes(data))
    result = convert(spark, [str(directory)], str(tmp_path / "out"),
                     options(onCorruptData="skip", maxBytesPerPartition="1500"))
    [(file, skip_start, skip_end, message)] = result.skipped
    assert (file, skip_start, skip_end) == (str(path), start, end)
    at = int(re.search(r"at byte (\d+)", message).group(1))
    assert start <= at < end, message


def test_the_command_line_job_names_corrupt_data_in_one_line(spark, tmp_path, histories,
                                                             capsys):
    directory = tmp_path / "logs" / "payments-3"
    write_history(str(directory), histories["payments"], segment_bytes=5000)
    path = directory / sorted(n for n in os.listdir(directory) if n.endswith(".log"))[1]
    data = bytearray(path.read_bytes())
    start, _, first, _ = entry_bounds(bytes(data))[1]
    data[start + 80] ^= 0x01
    path.write_bytes(bytes(data))
    assert main(["spark-convert", str(directory), "--out", str(tmp_path / "out")]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("kcodec: spark-convert: CrcMismatchError: record batch CRC-32C ")
    assert line.endswith(f"(at {path}, byte {start}, offset {first})")


# ------------------------------------------------------------------ CLI

def test_the_command_line_job(spark, root, histories, tmp_path, capsys):
    out = tmp_path / "out"
    status = main(["spark-convert", str(root / "orders-eu-*"), "--out", str(out),
                   "--isolation", "read_committed", "--starting-offsets", "100",
                   "--max-bytes-per-partition", "4000", "--compression", "zstd"])
    assert status == 0
    printed = capsys.readouterr().out
    expected = [r for r in histories["orders-eu"].data_records(committed_only=True)
                if r[0] >= 100]
    assert f"{len(expected):,} rows from 1 partition(s)" in printed
    assert "rows/s" in printed and "bytes" in printed
    assert spark_rows(spark.read.parquet(str(out))) == expected
    some_file = next(os.path.join(d, n) for d, _, ns in os.walk(out) for n in ns
                     if n.endswith(".parquet"))
    assert pq.ParquetFile(some_file).metadata.row_group(0).column(0).compression == "ZSTD"
    assert spark.sparkContext._jsc is not None      # the shared session was not stopped
