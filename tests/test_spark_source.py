"""The "kafka-log" data source in a local SparkSession: schema, rows,
options, splits and corrupt data, checked against what was appended to the
logs (log_helpers' scripted histories) and against kcodec.log."""
import json
import os
import pkgutil
import struct
import threading

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
    TimestampType,
)

import kcodec
import kcodec.spark
from kcodec.log import PartitionLog, open_logs, write_log
from kcodec.spark import parse_options, plan, read_skip_reports, read_split
from kcodec.spark.files import partition_dirs
from log_helpers import entry_bounds, scripted_history, table_rows, write_history
from spark_session import SESSION_TIME_ZONE, spark, spark_rows, without_headers  # noqa: F401

SEGMENT_BYTES = 6000
INTERVAL = 1024
TOPICS = {"orders-eu": 0, "payments": 3}
LISTINGS_DURING_CHECKPOINTS = 3000


@pytest.fixture(scope="module")
def histories():
    return {name: scripted_history(seed=10 + i) for i, name in enumerate(TOPICS)}


@pytest.fixture(scope="module")
def root(tmp_path_factory, histories):
    """A log.dirs root: orders-eu-0 and payments-3, plus a directory being
    deleted that must not be read."""
    base = tmp_path_factory.mktemp("kafka-logs")
    for name, partition in TOPICS.items():
        write_history(str(base / f"{name}-{partition}"), histories[name], SEGMENT_BYTES, INTERVAL)
    write_history(str(base / "orders-eu-0.0123456789abcdef0123456789abcdef-delete"),
                  histories["orders-eu"], SEGMENT_BYTES, INTERVAL)
    return base


@pytest.fixture(scope="module")
def orders(root):
    return str(root / "orders-eu-0")


def read(spark, path, **options):
    reader = spark.read.format("kafka-log")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(path)


def records_between(history, start=0, end=None, committed_only=False):
    return [r for r in history.data_records(committed_only)
            if r[0] >= start and (end is None or r[0] < end)]


# ------------------------------------------------------------------ schema

def expected_kafka_schema(include_headers):
    """Spark's Kafka source schema, from its documentation."""
    fields = [StructField("key", BinaryType(), True), StructField("value", BinaryType(), True),
              StructField("topic", StringType(), True),
              StructField("partition", IntegerType(), True),
              StructField("offset", LongType(), True),
              StructField("timestamp", TimestampType(), True),
              StructField("timestampType", IntegerType(), True)]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType(), True),
            StructField("value", BinaryType(), True)]), True), True))
    return StructType(fields)


@pytest.mark.parametrize("include_headers", [False, True])
def test_schema_is_the_kafka_sources(spark, orders, include_headers):
    df = read(spark, orders, includeHeaders=str(include_headers).lower())
    assert df.schema == expected_kafka_schema(include_headers)
    assert kcodec.spark.kafka_schema(include_headers) == expected_kafka_schema(include_headers)


def test_found_by_spark_as_pyspark_kcodec_default_source():
    found = {m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")}
    assert "pyspark_kcodec" in found
    import pyspark_kcodec
    assert pyspark_kcodec.DefaultSource.name() == "kafka-log"


def test_register_makes_the_format_available(spark, orders, histories):
    kcodec.spark.register(spark)
    assert read(spark, orders).count() == len(histories["orders-eu"].data_records())


# -------------------------------------------------------------------- rows

def test_rows_are_what_was_appended(spark, orders, histories):
    df = read(spark, orders, includeHeaders="true")
    assert spark_rows(df) == histories["orders-eu"].data_records()
    topics = df.select("topic", "partition", "timestampType").distinct().collect()
    assert [tuple(r) for r in topics] == [("orders-eu", 0, 0)]


def test_rows_equal_partition_log_decode(spark, orders):
    expected = sorted(table_rows(PartitionLog(orders).decode()))
    assert spark_rows(read(spark, orders, includeHeaders="true")) == expected


def test_without_headers_the_rest_is_equal(spark, orders, histories):
    df = read(spark, orders)
    assert "headers" not in df.columns
    assert spark_rows(df) == without_headers(histories["orders-eu"].data_records())


def test_timestamps_are_instants_whatever_the_session_time_zone(spark, orders, histories):
    first = histories["orders-eu"].data_records()[0]
    row = read(spark, orders).where("offset = 0").select(
        F.date_format("timestamp", "yyyy-MM-dd HH:mm:ss.SSS").alias("shown")).first()
    from datetime import datetime, timezone
    from zoneinfo import ZoneInfo
    local = datetime.fromtimestamp(first[1] / 1000, timezone.utc).astimezone(
        ZoneInfo(SESSION_TIME_ZONE))
    assert row["shown"] == local.strftime("%Y-%m-%d %H:%M:%S.") + f"{first[1] % 1000:03d}"


def test_a_log_dirs_root_reads_every_live_partition(spark, root, histories):
    df = read(spark, str(root))
    counts = {(r["topic"], r["partition"]): r["count"]
              for r in df.groupBy("topic", "partition").count().collect()}
    assert counts == {(name, p): len(histories[name].data_records())
                      for name, p in TOPICS.items()}


def test_several_paths_globs_and_file_uris(spark, root, histories):
    expected = len(histories["orders-eu"].data_records()) + len(
        histories["payments"].data_records())
    assert spark.read.format("kafka-log").load(
        [str(root / "orders-eu-0"), str(root / "payments-3")]).count() == expected
    assert read(spark, str(root / "*-[03]")).count() == expected
    assert read(spark, "file://" + str(root / "pay*")).count() == len(
        histories["payments"].data_records())


def test_subscribe_and_assign_filter_partitions(spark, root, histories):
    n_pay = len(histories["payments"].data_records())
    assert read(spark, str(root), subscribe="payments").count() == n_pay
    assert read(spark, str(root), subscribePattern="pay.*").count() == n_pay
    assert read(spark, str(root), assign=json.dumps({"payments": [3]})).count() == n_pay
    assert read(spark, str(root), assign=json.dumps({"payments": [1]})).count() == 0


def test_missing_path_and_unknown_option_fail(spark, root):
    with pytest.raises(Exception, match="no such directory"):
        read(spark, str(root / "nope-0")).count()
    with pytest.raises(Exception, match="unknown option"):
        read(spark, str(root), startingOffset="earliest").count()


# ------------------------------------------------------------ isolation

@pytest.mark.parametrize("option", ["kafka.isolation.level", "isolation.level"])
def test_read_committed_drops_aborted_transactions(spark, orders, histories, option):
    history = histories["orders-eu"]
    assert history.aborted_txns
    df = read(spark, orders, includeHeaders="true", **{option: "read_committed"})
    assert spark_rows(df) == history.data_records(committed_only=True)
    uncommitted = read(spark, orders, **{option: "read_uncommitted"})
    assert uncommitted.count() == len(history.data_records())


def test_read_committed_stops_at_a_transaction_still_open(spark, tmp_path):
    plain = kcodec.encode([(b"a", b"1", 1_700_000_000_000, [])] * 5)
    open_txn = kcodec.encode([(b"t", b"2", 1_700_000_000_100, [])] * 3, base_offset=5,
                             producer_id=9, producer_epoch=0, base_sequence=0,
                             transactional=True)
    after = kcodec.encode([(b"b", b"3", 1_700_000_000_200, [])] * 4, base_offset=8)
    directory = str(tmp_path / "open-0")
    write_log(directory, [plain, open_txn, after])
    committed = read(spark, directory, **{"kafka.isolation.level": "read_committed"})
    assert [r["offset"] for r in committed.collect()] == [0, 1, 2, 3, 4]
    assert read(spark, directory).count() == 12


# -------------------------------------------------------- offset bounds

def test_numeric_offsets_bound_every_partition(spark, orders, histories):
    df = read(spark, orders, startingOffsets="100", endingOffsets="700", includeHeaders="true")
    assert spark_rows(df) == records_between(histories["orders-eu"], 100, 700)


def test_json_offsets_per_partition_with_earliest_and_latest(spark, root, histories):
    starting = json.dumps({"orders-eu": {"0": 250}, "payments": {"3": -2}})
    ending = json.dumps({"orders-eu": {"0": -1}, "payments": {"3": 400}})
    df = read(spark, str(root), startingOffsets=starting, endingOffsets=ending)
    got = {name: spark_rows(df.where(F.col("topic") == name)) for name in TOPICS}
    assert got["orders-eu"] == without_headers(records_between(histories["orders-eu"], 250))
    assert got["payments"] == without_headers(records_between(histories["payments"], 0, 400))


def test_bounds_with_read_committed(spark, orders, histories):
    df = read(spark, orders, startingOffsets="333", endingOffsets="1111",
              **{"kafka.isolation.level": "read_committed"})
    assert spark_rows(df) == without_headers(
        records_between(histories["orders-eu"], 333, 1111, committed_only=True))


def test_latest_start_and_earliest_end_are_refused_as_in_spark(spark, orders):
    for options in ({"startingOffsets": "latest"}, {"endingOffsets": "earliest"},
                    {"startingOffsets": json.dumps({"orders-eu": {"0": -1}})}):
        with pytest.raises(Exception, match="not allowed for a batch read"):
            read(spark, orders, **options).count()


def test_fail_on_data_loss(spark, orders, histories):
    end = histories["orders-eu"].end_offset
    with pytest.raises(Exception, match="past the log end offset"):
        read(spark, orders, endingOffsets=str(end + 50)).count()
    clamped = read(spark, orders, startingOffsets="900", endingOffsets=str(end + 50),
                   failOnDataLoss="false")
    assert spark_rows(clamped) == without_headers(records_between(histories["orders-eu"], 900))


def test_offsets_below_the_log_start_are_data_loss(spark, tmp_path, histories):
    """A log whose first segments were deleted by retention."""
    directory = tmp_path / "orders-eu-0"
    write_history(str(directory), histories["orders-eu"], SEGMENT_BYTES, INTERVAL)
    logs = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    for name in logs[:2]:
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            path = directory / (name[:-4] + suffix)
            if path.exists():
                path.unlink()
    log_start = int(logs[2][:-4])
    with pytest.raises(Exception, match="before the log start offset"):
        read(spark, str(directory), startingOffsets="0").count()
    df = read(spark, str(directory), startingOffsets="0", failOnDataLoss="false")
    assert spark_rows(df) == without_headers(records_between(histories["orders-eu"], log_start))


# ----------------------------------------------------------- timestamps

def first_offset_at_or_after(history, timestamp):
    """What a broker's ListOffsets answers: the first offset, data or
    marker, whose record timestamp reaches `timestamp`."""
    stamped = [(r[0], r[1]) for a in history.appends for r in a.records]
    stamped += [(a.base_offset, struct.unpack_from(">q", a.data, 35)[0])
                for a in history.appends if a.kind in ("COMMIT", "ABORT")]
    return min((o for o, ts in stamped if ts >= timestamp), default=None)


def test_starting_and_ending_timestamps(spark, orders, histories):
    history = histories["orders-eu"]
    stamps = sorted(r[1] for r in history.data_records())
    t1, t2 = stamps[len(stamps) // 5], stamps[3 * len(stamps) // 4]
    start, end = first_offset_at_or_after(history, t1), first_offset_at_or_after(history, t2)
    df = read(spark, orders, startingTimestamp=str(t1), endingTimestamp=str(t2))
    assert spark_rows(df) == without_headers(records_between(history, start, end))
    expected = table_rows(PartitionLog(orders).decode(start_timestamp=t1, end_timestamp=t2))
    assert spark_rows(df) == without_headers(sorted(expected))


def test_offsets_by_timestamp_json_and_the_no_match_strategy(spark, root, histories):
    history = histories["payments"]
    late = max(r[1] for r in history.data_records()) + 10_000
    mid = sorted(r[1] for r in history.data_records())[len(history.data_records()) // 2]
    by_ts = json.dumps({"payments": {"3": mid}})
    df = read(spark, str(root / "payments-3"), startingOffsetsByTimestamp=by_ts)
    assert df.count() == len(records_between(history, first_offset_at_or_after(history, mid)))
    with pytest.raises(Exception, match="no record has a timestamp"):
        read(spark, str(root / "payments-3"), startingTimestamp=str(late)).count()
    empty = read(spark, str(root / "payments-3"), startingTimestamp=str(late),
                 startingOffsetsByTimestampStrategy="latest")
    assert empty.count() == 0
    everything = read(spark, str(root / "payments-3"), endingTimestamp=str(late))
    assert everything.count() == len(history.data_records())


# --------------------------------------------------------------- splits

def per_partition_counts(df):
    return [r["n"] for r in df.groupBy(F.spark_partition_id().alias("p"))
            .agg(F.count("*").alias("n")).collect()]


def segment_count(directory):
    return sum(1 for n in os.listdir(directory) if n.endswith(".log"))


def test_one_input_partition_per_segment(spark, orders):
    df = read(spark, orders)
    assert df.rdd.getNumPartitions() == segment_count(orders)


def test_large_segments_split_at_index_positions(spark, tmp_path, histories):
    history = histories["orders-eu"]
    directory = str(tmp_path / "orders-eu-0")
    write_history(directory, history, segment_bytes=1 << 20, index_interval_bytes=512)
    assert segment_count(directory) == 1
    df = read(spark, directory, maxBytesPerPartition="4096", includeHeaders="true")
    assert df.rdd.getNumPartitions() > 10
    assert spark_rows(df) == history.data_records()
    bounds = entry_bounds(history.record_set())
    splits, _ = plan([directory], parse_options({"maxBytesPerPartition": "4096"}))
    starts = {start for start, *_ in bounds}
    assert all(s.start in starts for s in splits)     # every cut at a batch start
    committed = read(spark, directory, maxBytesPerPartition="4096",
                     **{"kafka.isolation.level": "read_committed"})
    assert spark_rows(committed) == without_headers(history.data_records(committed_only=True))


def test_min_partitions_and_max_records_per_partition(spark, tmp_path, histories):
    history = histories["payments"]
    directory = str(tmp_path / "payments-3")
    write_history(directory, history, segment_bytes=1 << 20, index_interval_bytes=256)
    df = read(spark, directory, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    assert spark_rows(df) == without_headers(history.data_records())
    # Cuts happen only where the index has entries: a split holds at most
    # max records, or one index interval's worth where an interval holds more.
    largest_batch = max(len(a.records) for a in history.appends)
    df = read(spark, directory, maxRecordsPerPartition="150")
    assert df.rdd.getNumPartitions() >= history.end_offset // (150 + 2 * largest_batch)
    assert max(per_partition_counts(df)) <= 150 + 2 * largest_batch
    assert spark_rows(df) == without_headers(history.data_records())


def test_globs_and_roots_skip_copies_being_deleted_or_moved(tmp_path):
    for name, value in (("orders-0", b"live"), ("orders-0." + "a" * 32 + "-delete", b"deleted"),
                        ("orders-0." + "b" * 32 + "-future", b"moving"),
                        ("orders-1." + "c" * 32 + "-stray", b"stray")):
        write_log(str(tmp_path / name), [kcodec.encode([(b"k", value)])])
    live = [str(tmp_path / "orders-0")]
    for given in (str(tmp_path), str(tmp_path / "orders-*"), str(tmp_path / "*")):
        assert [d for _, d in partition_dirs([given])] == live, given
    assert [log.directory for log in open_logs([str(tmp_path)])] == live
    # Named explicitly, a copy is still read.
    deleted = str(tmp_path / ("orders-0." + "a" * 32 + "-delete"))
    assert [d for _, d in partition_dirs([deleted])] == [deleted]


def test_files_a_live_broker_replaces_while_listed_are_passed_over(tmp_path):
    """A broker rewrites its checkpoints in log.dirs (a .tmp file, renamed
    over the old one) every second: a root is listed while they come and
    go."""
    write_log(str(tmp_path / "orders-0"), [kcodec.encode([(b"k", b"v")])])
    done = threading.Event()

    def checkpoint():
        while not done.is_set():
            for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
                (tmp_path / f"{name}.tmp").write_text("0\n0\n")
                os.replace(tmp_path / f"{name}.tmp", tmp_path / name)

    writer = threading.Thread(target=checkpoint, daemon=True)
    writer.start()
    try:
        for _ in range(LISTINGS_DURING_CHECKPOINTS):
            assert [d for _, d in partition_dirs([str(tmp_path)])] == [str(tmp_path / "orders-0")]
    finally:
        done.set()
        writer.join()


def test_min_partitions_halves_pieces_of_equal_size(tmp_path):
    # Identical batches make halves of the same size: the planner orders them
    # without comparing the pieces themselves.
    directory = str(tmp_path / "t-0")
    write_log(directory, [kcodec.encode([(b"k", b"v")], base_offset=i) for i in range(8)],
              index_interval_bytes=0)
    for wanted in range(1, 10):
        splits, _ = plan([directory], parse_options({"minPartitions": str(wanted)}))
        assert len(splits) == min(wanted, 8)
        assert [(s.start, s.end) for s in splits] == sorted((s.start, s.end) for s in splits)
        assert sum(s.end - s.start for s in splits) == os.path.getsize(
            os.path.join(directory, "00000000000000000000.log"))


def test_splits_with_offset_bounds_read_each_row_once(spark, tmp_path, histories):
    history = histories["orders-eu"]
    directory = str(tmp_path / "orders-eu-0")
    write_history(directory, history, segment_bytes=1 << 20, index_interval_bytes=300)
    df = read(spark, directory, maxBytesPerPartition="2000", startingOffsets="123",
              endingOffsets="1234", includeHeaders="true")
    assert spark_rows(df) == records_between(history, 123, 1234)


# --------------------------------------------------------- corrupt data

def corrupt_one_batch(directory):
    """Flip a byte inside the records of a batch in the middle of the second
    segment; (segment path, batch start, batch end, first offset, last offset)."""
    segment = sorted(n for n in os.listdir(directory) if n.endswith(".log"))[1]
    path = os.path.join(directory, segment)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    start, end, first, last = entry_bounds(bytes(data))[1]
    data[start + 70] ^= 0x40
    with open(path, "wb") as f:
        f.write(data)
    return path, start, end, first, last


@pytest.fixture
def corrupted(tmp_path, histories):
    directory = str(tmp_path / "orders-eu-0")
    write_history(directory, histories["orders-eu"], SEGMENT_BYTES, INTERVAL)
    return directory, corrupt_one_batch(directory)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_corrupt_data_fails_naming_file_and_byte(spark, corrupted, isolation):
    directory, (path, start, *_) = corrupted
    with pytest.raises(Exception) as failure:
        read(spark, directory, **{"kafka.isolation.level": isolation}).count()
    assert f"{path}" in str(failure.value) and f"byte {start}" in str(failure.value)


def test_an_error_other_than_corrupt_data_is_not_replaced_by_the_chunk_release(
        corrupted, monkeypatch):
    """A task's chunk view is released as the error leaves read_split: an
    export of it still held by the error's frames must not turn the error
    into BufferError."""
    import kcodec.spark.read as split_reader
    directory, _ = corrupted

    def decode_out_of_memory(view, **options):
        held = pa.py_buffer(view)        # an export of the view, as the core takes one
        raise MemoryError(f"{held.size} bytes")
    monkeypatch.setattr(split_reader, "decode", decode_out_of_memory)
    options = parse_options({"path": directory})
    split = plan([directory], options)[0][0]
    with pytest.raises(MemoryError):
        list(read_split(split, options))


def test_corrupt_data_skipped_and_counted(spark, corrupted, histories, tmp_path):
    directory, (path, start, end, first, last) = corrupted
    report = str(tmp_path / "skipped")
    df = read(spark, directory, onCorruptData="skip", corruptDataReport=report)
    expected = [r for r in histories["orders-eu"].data_records() if not first <= r[0] <= last]
    assert spark_rows(df) == without_headers(expected)
    skipped = read_skip_reports(report)
    assert [(f, s, e) for f, s, e, _ in skipped] == [(path, start, end)]
    assert "CRC" in skipped[0][3]


def test_verify_crc_false_reads_what_the_bytes_say(spark, tmp_path):
    rows = [(b"k%d" % i, b"value-%03d" % i, 1_700_000_000_000 + i, []) for i in range(30)]
    directory = str(tmp_path / "plain-0")
    write_log(directory, kcodec.encode(rows, max_batch_bytes=300))
    path = os.path.join(directory, "00000000000000000000.log")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    where = data.index(b"value-017")
    data[where:where + 9] = b"VALUE-017"
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(Exception, match="CRC"):
        read(spark, directory).count()
    values = [bytes(r["value"]) for r in
              read(spark, directory, verifyCrc="false").orderBy("offset").collect()]
    assert values == [b"VALUE-017" if i == 17 else b"value-%03d" % i for i in range(30)]


# ------------------------------------------- other filesystems (pyarrow)

def test_remote_filesystem_reads_through_pyarrow(root, histories, orders):
    """A filesystem that is not the local disk: side files copied for
    planning, segment byte ranges read through pyarrow by each split."""
    fs = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
    for isolation in ("read_uncommitted", "read_committed"):
        options = parse_options({"maxBytesPerPartition": "3000", "isolation.level": isolation,
                                 "startingOffsets": "40"})
        splits, _ = plan([(fs, "orders-eu-0")], options)
        assert splits and all(s.filesystem is not None for s in splits)
        local, _ = plan([orders], options)
        assert [(s.start, s.end, s.chunks) for s in splits] == \
            [(s.start, s.end, s.chunks) for s in local]
        rows = sorted(r for s in splits for t in read_split(s, options) for r in table_rows(t))
        assert rows == records_between(histories["orders-eu"], 40,
                                       committed_only=isolation == "read_committed")


def test_remote_logs_read_the_producer_snapshots(tmp_path):
    """A log whose first segment, where a still open transaction began, is
    deleted: only the producer snapshot at the log start says the
    transaction is open, so read_committed stops at the log start, on a
    remote filesystem as on the local disk."""
    from kcodec.spark.files import open_partition

    directory = tmp_path / "t-0"
    txn = kcodec.encode([(b"t", b"x", 1_700_000_000_000, [])], producer_id=7, producer_epoch=0,
                        base_sequence=0, transactional=True)
    plain = [kcodec.encode([(b"k", b"v" * 400, 1_700_000_000_000, [])] * 5,
                           base_offset=1 + 5 * i) for i in range(4)]
    write_log(str(directory), [txn] + plain, segment_bytes=3000)
    first = PartitionLog(directory).segments[0]
    for path in (first.log_path, first.index_path, first.time_index_path):
        os.remove(path)
    local = PartitionLog(directory)
    assert 0 < local.start_offset < local.end_offset
    assert local.last_stable_offset() == local.start_offset
    remote = open_partition(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "t-0")
    assert remote.last_stable_offset() == local.start_offset
    assert list(remote.read_records(isolation="read_committed")) == []


def _cut_first_segment(directory):
    """A 4-segment log of 5-record batches whose first .log misses its last
    100 bytes: (path, where its last batch starts, the offsets still readable)."""
    write_log(directory, [kcodec.encode([(b"k", b"v" * 300)] * 5, base_offset=5 * i)
                          for i in range(8)], segment_bytes=4000)
    path = PartitionLog(directory).segments[0].log_path
    batches = entry_bounds(open(path, "rb").read())
    os.truncate(path, os.path.getsize(path) - 100)
    lost = range(5 * (len(batches) - 1), 5 * len(batches))
    return path, batches[-1][0], [o for o in range(40) if o not in lost]


def test_a_partial_entry_in_a_closed_segment_fails_or_is_skipped(tmp_path):
    directories = [str(tmp_path / "t-0"), str(tmp_path / "t-1")]
    cuts = [_cut_first_segment(d) for d in directories]
    options = parse_options({"path": directories[0]})
    with pytest.raises(kcodec.CorruptRecordError) as raised:
        [t for s in plan([directories[0]], options)[0] for t in read_split(s, options)]
    assert raised.value.source == cuts[0][0]
    # Skipped and reported, for each partition: reports do not overwrite each other.
    report = str(tmp_path / "skipped")
    options = parse_options({"onCorruptData": "skip", "corruptDataReport": report})
    splits, _ = plan([str(tmp_path)], options)
    rows = [row for s in splits for table in read_split(s, options)
            for row in zip(table["partition"].to_pylist(), table["offset"].to_pylist())]
    assert sorted(rows) == [(p, o) for p, (_, _, kept) in enumerate(cuts) for o in kept]
    skipped = read_skip_reports(report)
    assert sorted((f, s) for f, s, _, _ in skipped) == sorted((path, at) for path, at, _ in cuts)
