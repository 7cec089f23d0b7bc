"""spark.readStream.format("kafka-log") over logs that grow between
triggers (log_helpers' scripted histories written a prefix at a time):
offsets, starting points, admission control, triggers, new partitions and
topics, data loss, read_committed and the partial batch at the tail."""
import json
import os
import shutil

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kcodec.log import PartitionLog
from kcodec.spark.plan import DataLossError
from kcodec.spark.read import read_split
from kcodec.spark.schema import kafka_schema
from kcodec.spark.stream import KafkaLogStreamReader, duration_seconds, parse_offsets
from log_helpers import History, scripted_history, write_history
from spark_session import spark, spark_rows  # noqa: F401

SEGMENT_BYTES = 6000
TOPIC = "orders"
AVAILABLE_NOW = {"availableNow": True}
ONCE = {"once": True}


@pytest.fixture(scope="module")
def history():
    return scripted_history(seed=47, rounds=8)


def grow(directory, history, appends):
    """Make `directory` hold the log of the first `appends` appends, as a
    broker appending them would leave it (earlier segments unchanged)."""
    scratch = f"{directory}.scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    write_history(scratch, History(history.appends[:appends], history.aborted_txns),
                  segment_bytes=SEGMENT_BYTES)
    os.makedirs(directory, exist_ok=True)
    for name in sorted(os.listdir(scratch)):
        os.replace(os.path.join(scratch, name), os.path.join(directory, name))
    os.rmdir(scratch)


def appended(history, appends, committed_only=False):
    """The data records of the first `appends` appends."""
    return History(history.appends[:appends], history.aborted_txns).data_records(committed_only)


class Stream:
    """One query, run trigger by trigger into a Parquet sink with a
    checkpoint, reading `root`."""

    def __init__(self, spark, root, work, **options):
        self.spark, self.root = spark, str(root)
        self.out, self.checkpoint = str(work / "sink"), str(work / "checkpoint")
        self.options = {"startingOffsets": "earliest", "includeHeaders": "true", **options}

    def run(self, trigger=AVAILABLE_NOW, **more):
        """Run the query to its end with a trigger that ends (availableNow or
        once); the progress of each micro-batch."""
        reader = self.spark.readStream.format("kafka-log")
        for name, value in {**self.options, **more}.items():
            reader = reader.option(name, str(value))
        query = (reader.load(self.root).writeStream.format("parquet")
                 .option("checkpointLocation", self.checkpoint).trigger(**trigger)
                 .start(self.out))
        query.awaitTermination()
        assert query.exception() is None, query.exception()
        return [p for p in query.recentProgress if p["sources"]]

    def rows(self):
        return spark_rows(self.spark.read.parquet(self.out))

    def offsets(self):
        """The end offsets the checkpoint's offset log holds per batch."""
        directory = os.path.join(self.checkpoint, "offsets")
        logged = []
        for name in sorted(os.listdir(directory), key=lambda n: int(n) if n.isdigit() else -1):
            if name.isdigit():
                with open(os.path.join(directory, name)) as f:
                    logged.append(json.loads(f.read().splitlines()[-1]))
        return logged


def test_available_now_reads_each_record_once_as_the_log_grows(spark, tmp_path, history):
    log_dir = tmp_path / "logs" / f"{TOPIC}-0"
    stream = Stream(spark, tmp_path / "logs", tmp_path)
    steps = [len(history.appends) // 3, 2 * len(history.appends) // 3, len(history.appends)]
    for appends in steps:
        grow(str(log_dir), history, appends)
        stream.run()
        assert stream.rows() == appended(history, appends)
    assert len(PartitionLog(str(log_dir)).segments) > len(steps)
    # The checkpoint holds Spark's Kafka-source offsets: the next offset to read.
    assert stream.offsets()[-1] == {TOPIC: {"0": history.end_offset}}


def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, tmp_path, history):
    grow(str(tmp_path / "logs" / f"{TOPIC}-0"), history, len(history.appends))
    stream = Stream(spark, tmp_path / "logs", tmp_path, maxOffsetsPerTrigger=150)
    progress = stream.run()
    ends = [parse_offsets(p["sources"][0]["endOffset"])[(TOPIC, 0)] for p in progress]
    starts = [0] + ends[:-1]
    assert all(0 < end - start <= 150 for start, end in zip(starts, ends))
    assert ends[-1] == history.end_offset and len(progress) >= history.end_offset // 150
    assert stream.rows() == history.data_records()


def test_trigger_once_ignores_max_offsets_per_trigger(spark, tmp_path, history):
    grow(str(tmp_path / "logs" / f"{TOPIC}-0"), history, len(history.appends))
    stream = Stream(spark, tmp_path / "logs", tmp_path, maxOffsetsPerTrigger=150)
    progress = stream.run(ONCE)
    assert len(progress) == 1
    assert stream.rows() == history.data_records()


def test_read_committed_holds_rows_back_while_a_transaction_is_open(spark, tmp_path, history):
    log_dir = str(tmp_path / "logs" / f"{TOPIC}-0")
    kinds = [a.kind for a in history.appends]
    # Stop just after producer 8's first transactional batch: the two
    # transactions, and all after the first one's first offset, are undecided.
    open_at = kinds.index("txn", kinds.index("txn") + 1) + 1
    first_open = history.appends[kinds.index("txn")].base_offset
    stream = Stream(spark, tmp_path / "logs", tmp_path, **{"kafka.isolation.level":
                                                            "read_committed"})
    grow(log_dir, history, open_at + 2)
    stream.run()
    held = stream.rows()
    assert held and max(r[0] for r in held) < first_open
    assert stream.offsets()[-1] == {TOPIC: {"0": first_open}}
    grow(log_dir, history, len(history.appends))
    stream.run()
    assert stream.rows() == history.data_records(committed_only=True)


def test_a_batch_being_appended_is_not_read_in_part(spark, tmp_path, history):
    log_dir = tmp_path / "logs" / f"{TOPIC}-0"
    grow(str(log_dir), history, len(history.appends))
    log = PartitionLog(str(log_dir))
    active = log.segments[-1]
    last_batch = history.appends[-1]
    full = active.size
    with open(active.log_path, "r+b") as f:
        f.truncate(full - len(last_batch.data) // 2)
    stream = Stream(spark, tmp_path / "logs", tmp_path)
    stream.run()
    assert stream.rows() == appended(history, len(history.appends) - 1)
    grow(str(log_dir), history, len(history.appends))
    stream.run()
    assert stream.rows() == history.data_records()


def test_new_partitions_and_topics_are_picked_up(spark, tmp_path, history):
    root = tmp_path / "logs"
    grow(str(root / f"{TOPIC}-0"), history, len(history.appends))
    stream = Stream(spark, root, tmp_path)
    stream.run()
    other = scripted_history(seed=48, rounds=2)
    grow(str(root / f"{TOPIC}-1"), other, len(other.appends))
    grow(str(root / "payments-0"), other, len(other.appends))
    stream.run()
    rows = stream.spark.read.parquet(stream.out)
    by_partition = {(r["topic"], r["partition"]): r["count"]
                    for r in rows.groupBy("topic", "partition").count().collect()}
    assert by_partition == {(TOPIC, 0): len(history.data_records()),
                            (TOPIC, 1): len(other.data_records()),
                            ("payments", 0): len(other.data_records())}
    assert stream.offsets()[-1] == {TOPIC: {"0": history.end_offset, "1": other.end_offset},
                                    "payments": {"0": other.end_offset}}


def test_subscribe_takes_only_its_topics(spark, tmp_path, history):
    root = tmp_path / "logs"
    grow(str(root / f"{TOPIC}-0"), history, len(history.appends))
    grow(str(root / "payments-0"), history, len(history.appends))
    stream = Stream(spark, root, tmp_path, subscribe="payments")
    stream.run()
    assert stream.offsets()[-1] == {"payments": {"0": history.end_offset}}
    assert stream.rows() == history.data_records()


def test_starting_offsets_latest_reads_only_what_comes_after(spark, tmp_path, history):
    log_dir = str(tmp_path / "logs" / f"{TOPIC}-0")
    half = len(history.appends) // 2
    grow(log_dir, history, half)
    stream = Stream(spark, tmp_path / "logs", tmp_path, startingOffsets="latest")
    stream.run()
    grow(log_dir, history, len(history.appends))
    stream.run()
    start = history.appends[half].base_offset
    assert stream.rows() == [r for r in history.data_records() if r[0] >= start]


def test_starting_timestamp_starts_where_the_time_index_says(spark, tmp_path, history):
    log_dir = str(tmp_path / "logs" / f"{TOPIC}-0")
    grow(log_dir, history, len(history.appends))
    records = history.data_records()
    timestamp = records[len(records) // 2][1]
    start = PartitionLog(log_dir).offset_for_timestamp(timestamp)
    stream = Stream(spark, tmp_path / "logs", tmp_path)
    stream.options.pop("startingOffsets")
    stream.run(startingTimestamp=timestamp)
    assert stream.rows() == [r for r in records if r[0] >= start]


def delete_oldest_segment(log_dir):
    segment = PartitionLog(log_dir).segments[0]
    stem = segment.log_path[:-len(".log")]
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        if os.path.exists(stem + suffix):
            os.remove(stem + suffix)


def test_data_loss_fails_naming_the_partition_and_the_gap(spark, tmp_path, history):
    log_dir = str(tmp_path / "logs" / f"{TOPIC}-0")
    grow(log_dir, history, len(history.appends) // 2)
    stream = Stream(spark, tmp_path / "logs", tmp_path)
    stream.run()
    before = stream.rows()
    grow(log_dir, history, len(history.appends))
    read_up_to = stream.offsets()[-1][TOPIC]["0"]
    while PartitionLog(log_dir).start_offset <= read_up_to:     # retention, past the reader
        delete_oldest_segment(log_dir)
    log_start = PartitionLog(log_dir).start_offset
    with pytest.raises(Exception) as failed:
        stream.run()
    assert f"{TOPIC}-0: offsets {read_up_to}..{log_start - 1} were deleted" in str(failed.value)
    assert "DataLossError" in str(failed.value)
    stream.run(failOnDataLoss="false")
    assert stream.rows() == before + [r for r in history.data_records() if r[0] >= log_start]


def test_a_restarted_query_replays_a_planned_batch_exactly(spark, tmp_path, history):
    """A batch logged in offsets/ but never committed (the driver died) is
    planned again from the same offsets: the same rows, not more."""
    log_dir = str(tmp_path / "logs" / f"{TOPIC}-0")
    grow(log_dir, history, len(history.appends) // 2)
    stream = Stream(spark, tmp_path / "logs", tmp_path)
    stream.run()
    grow(log_dir, history, len(history.appends))
    stream.run()
    last = max(int(n) for n in os.listdir(os.path.join(stream.checkpoint, "commits"))
               if n.isdigit())
    for name in (str(last), f".{last}.crc"):       # the commit and Hadoop's checksum of it
        os.remove(os.path.join(stream.checkpoint, "commits", name))
    stream.run()
    assert stream.rows() == history.data_records()


# ----------------------------------------------------- the reader on its own

def reader(root, **options):
    options = {"path": str(root), **{k: str(v) for k, v in options.items()}}
    return KafkaLogStreamReader([str(root)], options, kafka_schema(False))


def test_micro_batches_seek_and_read_no_older_segment(tmp_path, history):
    log_dir = str(tmp_path / f"{TOPIC}-0")
    grow(log_dir, history, len(history.appends))
    log = PartitionLog(log_dir)
    segments = log.segments
    batches = [batch for _, batch in segments[-2].batches()]
    start = batches[len(batches) // 2].base_offset + 1
    splits = reader(tmp_path).partitions({TOPIC: {"0": start}},
                                         {TOPIC: {"0": history.end_offset}})
    assert {s.path for s in splits} == {segments[-2].log_path, segments[-1].log_path}
    first = min(splits, key=lambda s: (s.path, s.start))
    assert first.start == segments[-2].position_for(start) > 0


def test_max_offsets_are_shared_by_backlog(tmp_path, history):
    other = scripted_history(seed=49, rounds=2)
    grow(str(tmp_path / f"{TOPIC}-0"), history, len(history.appends))
    grow(str(tmp_path / f"{TOPIC}-1"), other, len(other.appends))
    stream = reader(tmp_path, maxOffsetsPerTrigger=100)
    start = {TOPIC: {"0": 0, "1": 0}}
    assert stream.getDefaultReadLimit() == ReadMaxRows(100)
    end = parse_offsets(stream.latestOffset(start, ReadMaxRows(100)))
    backlog = history.end_offset + other.end_offset
    assert sum(end.values()) <= 100
    assert end[(TOPIC, 0)] == 100 * history.end_offset // backlog
    everything = parse_offsets(stream.latestOffset(start, ReadAllAvailable()))
    assert everything == {(TOPIC, 0): history.end_offset, (TOPIC, 1): other.end_offset}


def test_min_offsets_per_trigger_waits_at_most_max_trigger_delay(tmp_path, history):
    grow(str(tmp_path / f"{TOPIC}-0"), history, len(history.appends))
    start = {TOPIC: {"0": history.end_offset - 5}}
    patient = reader(tmp_path, minOffsetsPerTrigger=10, maxTriggerDelay="1h")
    assert patient.getDefaultReadLimit() == ReadMinRows(10)
    assert patient.latestOffset(start, ReadMinRows(10)) == start
    hurried = reader(tmp_path, minOffsetsPerTrigger=10, maxTriggerDelay="0s")
    assert hurried.latestOffset(start, ReadMinRows(10)) == {TOPIC: {"0": history.end_offset}}
    enough = reader(tmp_path, minOffsetsPerTrigger=5, maxTriggerDelay="1h")
    assert enough.latestOffset(start, ReadMinRows(5)) == {TOPIC: {"0": history.end_offset}}


def test_available_now_stops_at_what_was_there(tmp_path, history):
    log_dir = str(tmp_path / f"{TOPIC}-0")
    half = len(history.appends) // 2
    grow(log_dir, history, half)
    stream = reader(tmp_path)
    stream.prepareForTriggerAvailableNow()
    grow(log_dir, history, len(history.appends))
    grow(str(tmp_path / f"{TOPIC}-1"), history, len(history.appends))
    start = {TOPIC: {"0": 0}}
    target = history.appends[half].base_offset
    assert stream.latestOffset(start, ReadAllAvailable()) == {TOPIC: {"0": target}}


@pytest.mark.parametrize("option, value, message", [
    ("endingOffsets", "latest", "are for batch reads"),
    ("maxOffsetsPerTrigger", "0", "must be positive"),
    ("maxTriggerDelay", "soon", "must be a duration"),
])
def test_bad_stream_options_are_refused(tmp_path, history, option, value, message):
    grow(str(tmp_path / f"{TOPIC}-0"), history, 4)
    with pytest.raises(ValueError, match=message):
        reader(tmp_path, **{option: value})


def test_durations_read_as_spark_reads_them():
    assert duration_seconds("d", "15m") == 900
    assert duration_seconds("d", "500ms") == 0.5
    assert duration_seconds("d", "250") == 0.25
    assert duration_seconds("d", "2h") == 7200


def test_a_missing_partition_keeps_its_offset(tmp_path, history):
    grow(str(tmp_path / f"{TOPIC}-0"), history, 4)
    start = {TOPIC: {"0": 3}, "gone": {"0": 17}}
    end = reader(tmp_path).latestOffset(start, ReadAllAvailable())
    assert end["gone"] == {"0": 17}


def test_data_loss_is_raised_by_latest_offset(tmp_path, history):
    log_dir = str(tmp_path / f"{TOPIC}-0")
    grow(log_dir, history, len(history.appends))
    delete_oldest_segment(log_dir)
    log_start = PartitionLog(log_dir).start_offset
    with pytest.raises(DataLossError, match=f"offsets 0..{log_start - 1} were deleted"):
        reader(tmp_path).latestOffset({TOPIC: {"0": 0}}, ReadAllAvailable())
    lenient = reader(tmp_path, failOnDataLoss="false")
    end = lenient.latestOffset({TOPIC: {"0": 0}}, ReadAllAvailable())
    assert end == {TOPIC: {"0": history.end_offset}}


def test_a_segment_retention_removes_after_planning_is_read_or_reported(tmp_path, history):
    """Retention renames a segment to .deleted, then removes it: a split
    planned before reads it under that name, and one planned before the
    removal fails naming it (or reads nothing with failOnDataLoss=false)."""
    grow(str(tmp_path / f"{TOPIC}-0"), history, len(history.appends))
    stream = reader(tmp_path)
    splits = stream.partitions({TOPIC: {"0": 0}}, {TOPIC: {"0": history.end_offset}})
    first = min(splits, key=lambda s: (s.path, s.start))
    rows = sum(table.num_rows for table in read_split(first, stream.options))
    os.rename(first.path, first.path + ".deleted")
    assert sum(table.num_rows for table in read_split(first, stream.options)) == rows > 0
    os.remove(first.path + ".deleted")
    with pytest.raises(DataLossError, match=f"{first.path}: the segment was deleted"):
        list(read_split(first, stream.options))
    lenient = reader(tmp_path, failOnDataLoss="false")
    assert list(read_split(first, lenient.options)) == []
