"""Filter pushdown of the "kafka-log" source: predicates on topic, partition,
offset and timestamp read fewer bytes and give the rows the same query gives
without pushdown, on logs whose CreateTime timestamps are out of order."""
import datetime
import operator
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan, LessThanOrEqual, Not,
)

import kcodec
import kcodec.spark
from kcodec.log import write_log
from kcodec.spark import kafka_schema, parse_options, read_split, SplitReport
from kcodec.spark.filters import push_filters, pushdown_planning
from kcodec.spark.session import FILTER_PUSHDOWN_CONF, enable_filter_pushdown
from kcodec.spark.source import KafkaLogPushdownReader, KafkaLogReader
from log_helpers import scripted_history, write_history
from spark_session import spark  # noqa: F401

BASE_TS = 1_700_000_000_000
TOPICS = {"clicks": (0, 1), "views": (0, 2)}
BATCHES = 60
RECORDS_PER_BATCH = (5, 40)
STEP_MS = 1_000                 # how far each batch's clock moves on
JITTER_MS = 3_000               # producers' clocks disagree by this much
LATE_EVERY = 7                  # every 7th batch comes from a producer far behind
LATE_MS = 40_000
SEGMENT_BYTES = 16_000
INDEX_INTERVAL = 1024
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
SPAN_MS = BATCHES * STEP_MS


def records_of(seed):
    """(offset, timestamp ms, key, value) of each record, batch by batch:
    timestamps move on with the batches but jitter, and some batches are
    late by far more than the rest: CreateTime out of offset order."""
    rng = random.Random(seed)
    batches, offset = [], 0
    for b in range(BATCHES):
        clock = BASE_TS + b * STEP_MS - (LATE_MS if b % LATE_EVERY == LATE_EVERY - 1 else 0)
        batch = []
        for _ in range(rng.randrange(*RECORDS_PER_BATCH)):
            ts = clock + rng.randrange(-JITTER_MS, JITTER_MS)
            batch.append((offset, ts, b"k%d" % offset, rng.randbytes(rng.randrange(20, 120))))
            offset += 1
        batches.append(batch)
    return batches


def encoded(batches):
    return [kcodec.encode([(k, v, ts, []) for _, ts, k, v in batch], compression="lz4",
                          base_offset=batch[0][0]) for batch in batches]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """A log.dirs root of clicks-0, clicks-1, views-0, views-2, and every
    record as (topic, partition, offset, timestamp ms, key, value)."""
    root = tmp_path_factory.mktemp("pushdown-logs")
    rows = []
    for seed, (topic, partition) in enumerate(
            (t, p) for t, partitions in TOPICS.items() for p in partitions):
        batches = records_of(seed)
        write_log(str(root / f"{topic}-{partition}"), encoded(batches),
                  segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL)
        rows += [(topic, partition, *r) for batch in batches for r in batch]
    return str(root), sorted(rows)


def at(ms, micros=0):
    """A timestamp literal as Spark pushes it: an aware UTC datetime."""
    return EPOCH + datetime.timedelta(milliseconds=ms, microseconds=micros)


# --------------------------------------------------------- reader level

COLUMN = {("topic",): 0, ("partition",): 1, ("offset",): 2}
TESTS = {EqualTo: operator.eq, GreaterThan: operator.gt, GreaterThanOrEqual: operator.ge,
         LessThan: operator.lt, LessThanOrEqual: operator.le,
         In: lambda value, values: value in values}


def passes(row, f):
    """Spark's meaning of one filter on a (topic, partition, offset, ts ms,
    ...) row, timestamps compared in microseconds."""
    if f.attribute == ("timestamp",):
        value = row[3] * 1000
        operand = ([_micros(v) for v in f.value] if isinstance(f, In) else _micros(f.value))
    else:
        value, operand = row[COLUMN[f.attribute]], f.value
    return TESTS[type(f)](value, operand)


def _micros(dt):
    return (dt - EPOCH) // datetime.timedelta(microseconds=1)


def reader_read(root, filters, **options):
    """Rows and (log bytes, decoded bytes) of a read by the reader Spark's
    pushdown planner gets, as Spark drives it: pushFilters, partitions, then
    each split, the filters it returns applied to the rows."""
    given = {str(k): str(v) for k, v in options.items()}
    reader = KafkaLogPushdownReader([root], parse_options(given), kafka_schema(False))
    remaining = list(reader.pushFilters(list(filters)))
    assert all(any(r is f for f in filters) for r in remaining)
    rows, log_bytes, decoded = [], 0, 0
    for split in reader.partitions():
        report = SplitReport(split.name)
        for table in read_split(split, reader.options, report):
            ts = table.column("timestamp").cast("int64").to_pylist()
            for t, p, o, s, k, v in zip(*(table.column(c).to_pylist() for c in (
                    "topic", "partition", "offset")), ts, table.column("key").to_pylist(),
                    table.column("value").to_pylist()):
                rows.append((t, p, o, s, k, v))
        log_bytes += report.log_bytes
        decoded += report.decoded_bytes
    rows = sorted(r for r in rows if all(passes(r, f) for f in remaining))
    return rows, log_bytes, decoded


def expected(all_rows, filters):
    return [r for r in all_rows if all(passes(r, f) for f in filters)]


def test_without_filters_everything_is_read(logs):
    root, all_rows = logs
    rows, log_bytes, decoded = reader_read(root, [])
    assert rows == all_rows
    assert decoded == log_bytes > 0


def test_exact_filters_are_kept_and_timestamp_ones_returned():
    exact = [EqualTo(("topic",), "clicks"), In(("partition",), [0, 2]),
             GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 20)]
    returned = [GreaterThan(("timestamp",), at(BASE_TS)), LessThan(("timestamp",), at(BASE_TS)),
                In(("offset",), [3, 9]), EqualTo(("key",), b"k"),
                IsNotNull(("timestamp",)), Not(EqualTo(("topic",), "clicks")),
                EqualTo(("offset",), "3"), EqualTo(("partition",), True)]
    pushdown, remaining = push_filters(exact + [IsNotNull(("offset",))] + returned)
    assert [id(f) for f in remaining] == [id(f) for f in returned]
    assert (pushdown.start_offset, pushdown.end_offset) == (10, 10)
    assert pushdown.min_timestamp == BASE_TS
    assert pushdown.wants("clicks", 2) and not pushdown.wants("clicks", 1)
    assert not pushdown.wants("views", 0)


@pytest.mark.parametrize("micros, floor", [(0, BASE_TS), (1, BASE_TS), (999, BASE_TS)])
def test_a_timestamp_bound_between_milliseconds_rounds_down(micros, floor):
    pushdown, _ = push_filters([GreaterThan(("timestamp",), at(BASE_TS, micros))])
    assert pushdown.min_timestamp == floor


def test_topic_and_partition_filters_leave_partitions_unopened(logs):
    root, all_rows = logs
    filters = [EqualTo(("topic",), "views"), GreaterThan(("partition",), 0)]
    rows, log_bytes, _ = reader_read(root, filters)
    _, all_bytes, _ = reader_read(root, [])
    assert rows == expected(all_rows, filters) and rows
    assert {(r[0], r[1]) for r in rows} == {("views", 2)}
    assert 0 < log_bytes < all_bytes / 2


def test_offset_bounds_narrow_each_partition(logs):
    root, all_rows = logs
    filters = [GreaterThanOrEqual(("offset",), 300), LessThanOrEqual(("offset",), 340)]
    rows, log_bytes, _ = reader_read(root, filters)
    _, all_bytes, _ = reader_read(root, [])
    assert rows == expected(all_rows, filters) and rows
    assert log_bytes < all_bytes / 4


def test_a_timestamp_lower_bound_seeks_and_skips_old_batches(logs):
    root, all_rows = logs
    filters = [GreaterThanOrEqual(("timestamp",), at(BASE_TS + SPAN_MS * 3 // 4))]
    rows, log_bytes, decoded = reader_read(root, filters)
    _, all_bytes, _ = reader_read(root, [])
    assert rows == expected(all_rows, filters) and rows
    assert log_bytes < all_bytes / 2
    # The late batches past the seek point are read but not decoded.
    assert decoded < log_bytes


def test_a_timestamp_upper_bound_prunes_nothing(logs):
    root, all_rows = logs
    filters = [LessThan(("timestamp",), at(BASE_TS + SPAN_MS // 4))]
    rows, log_bytes, decoded = reader_read(root, filters)
    _, all_bytes, _ = reader_read(root, [])
    assert rows == expected(all_rows, filters) and rows
    assert decoded == log_bytes == all_bytes


def test_a_timestamp_past_every_record_reads_nothing(logs):
    root, _ = logs
    filters = [GreaterThan(("timestamp",), at(BASE_TS + 2 * SPAN_MS))]
    assert reader_read(root, filters)[:2] == ([], 0)


def test_filters_that_contradict_read_nothing(logs):
    root, _ = logs
    filters = [GreaterThan(("offset",), 50), LessThan(("offset",), 40)]
    assert reader_read(root, filters)[:2] == ([], 0)


TIMES = st.integers(BASE_TS - LATE_MS - JITTER_MS, BASE_TS + SPAN_MS + JITTER_MS)
FILTER = st.one_of(
    st.builds(lambda c, v: c(("topic",), v), st.sampled_from(list(TESTS)[:-1]),
              st.sampled_from(["clicks", "views", "c", "w"])),
    st.builds(lambda v: In(("topic",), v), st.lists(st.sampled_from(["clicks", "views"]),
                                                    min_size=1, max_size=2)),
    st.builds(lambda c, v: c(("partition",), v), st.sampled_from(list(TESTS)[:-1]),
              st.integers(-1, 3)),
    st.builds(lambda v: In(("partition",), v), st.lists(st.integers(0, 3), min_size=1)),
    st.builds(lambda c, v: c(("offset",), v), st.sampled_from(list(TESTS)[:-1]),
              st.integers(-5, 1500)),
    st.builds(lambda v: In(("offset",), v), st.lists(st.integers(0, 1500), min_size=1,
                                                     max_size=4)),
    st.builds(lambda c, v, u: c(("timestamp",), at(v, u)), st.sampled_from(list(TESTS)[:-1]),
              TIMES, st.sampled_from([0, 1, 500, 999])),
    st.builds(lambda v: In(("timestamp",), [at(t) for t in v]),
              st.lists(TIMES, min_size=1, max_size=3)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters=st.lists(FILTER, max_size=4))
def test_pushed_down_rows_are_the_rows_that_pass(logs, filters):
    root, all_rows = logs
    rows, log_bytes, decoded = reader_read(root, filters)
    assert rows == expected(all_rows, filters)
    assert decoded <= log_bytes


@pytest.fixture(scope="module")
def transactional(tmp_path_factory):
    """A partition whose producers' transactions interleave, some aborted."""
    history = scripted_history(seed=5)
    directory = tmp_path_factory.mktemp("pushdown-txn") / "orders-0"
    write_history(str(directory), history, segment_bytes=6000, index_interval_bytes=1024)
    return str(directory), history


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("at_ms", [0, 200, 900, 1500, 2500])
def test_transactions_with_a_timestamp_bound(transactional, isolation, at_ms):
    directory, history = transactional
    filters = [GreaterThanOrEqual(("timestamp",), at(BASE_TS + at_ms))]
    rows, log_bytes, _ = reader_read(directory, filters, **{"kafka.isolation.level": isolation})
    committed = history.data_records(committed_only=isolation == "read_committed")
    assert [(o, ts, k, v) for _, _, o, ts, k, v in rows] == [
        (o, ts, k, v) for o, ts, k, v, _ in committed if ts >= BASE_TS + at_ms]


# ----------------------------------------------------------- Spark level

def kafka_log(spark, root, **options):
    reader = spark.read.format("kafka-log")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(root)


def collected(df):
    return sorted((r["topic"], r["partition"], r["offset"], r["ms"], bytes(r["key"]))
                  for r in df.select("topic", "partition", "offset",
                                     F.unix_millis("timestamp").alias("ms"), "key").collect())


@pytest.fixture
def pushdown_conf(spark):
    """Sets the pushdown conf for a test, and puts back what was there."""
    before = spark.conf.get(FILTER_PUSHDOWN_CONF, None)

    def set_to(value):
        spark.conf.set(FILTER_PUSHDOWN_CONF, value)
    yield set_to
    if before is None:
        spark.conf.unset(FILTER_PUSHDOWN_CONF)
    else:
        spark.conf.set(FILTER_PUSHDOWN_CONF, before)


def ts_literal(ms):
    return f"timestamp_millis({ms})"


WHERE = [
    "topic = 'views'",
    "topic IN ('clicks', 'nope') AND partition = 1",
    "partition >= 1 AND partition < 2",
    "offset = 123",
    "offset > 400 AND offset <= 450 AND topic > 'a'",
    "offset IN (5, 77, 600)",
    f"timestamp >= {ts_literal(BASE_TS + SPAN_MS // 2)}",
    f"timestamp > {ts_literal(BASE_TS + SPAN_MS // 2)} AND partition = 0",
    f"timestamp = {ts_literal(BASE_TS + SPAN_MS // 2)}",
    f"timestamp < {ts_literal(BASE_TS + SPAN_MS // 3)}",
    f"timestamp BETWEEN {ts_literal(BASE_TS + SPAN_MS // 3)} AND "
    f"{ts_literal(BASE_TS + SPAN_MS // 2)}",
    f"timestamp IN ({ts_literal(BASE_TS + 9_000)}, {ts_literal(BASE_TS + 30_000)})",
    f"timestamp >= {ts_literal(BASE_TS + SPAN_MS // 2)} OR offset < 10",
    f"timestamp >= {ts_literal(BASE_TS + SPAN_MS // 2)} AND key = 'k7'",
]


@pytest.mark.parametrize("where", WHERE)
def test_spark_rows_equal_those_without_pushdown(spark, logs, pushdown_conf, where):
    root, all_rows = logs
    kcodec.spark.register(spark)
    pushdown_conf("true")
    pushed = collected(kafka_log(spark, root, filterPushdown="true").where(where))
    unpushed = collected(kafka_log(spark, root).where(where))
    assert pushed == unpushed
    pushdown_conf("false")
    assert collected(kafka_log(spark, root, filterPushdown="true").where(where)) == unpushed


def test_spark_drops_the_filters_the_read_made_exact(spark, logs, pushdown_conf):
    root, _ = logs
    pushdown_conf("true")
    where = "offset >= 3 AND topic = 'views'"
    pushed = kafka_log(spark, root, filterPushdown="true").where(where)
    plan = pushed._jdf.queryExecution().executedPlan().toString()
    unpushed = kafka_log(spark, root).where(where)
    assert "offset" in unpushed._jdf.queryExecution().executedPlan().toString()
    assert "Filter (" not in plan
    assert pushed.count() == unpushed.count() > 0


def test_reads_work_with_the_conf_off(spark, logs, pushdown_conf):
    root, all_rows = logs
    pushdown_conf("false")
    df = kafka_log(spark, root, filterPushdown="true").where("offset < 10 AND topic = 'clicks'")
    assert collected(df) == [(t, p, o, ts, k) for t, p, o, ts, k, _ in all_rows
                             if o < 10 and t == "clicks"]


def test_only_the_pushdown_planner_gets_a_reader_with_push_filters(logs):
    root, _ = logs
    source = kcodec.spark.KafkaLogDataSource({"path": root})
    assert not pushdown_planning()
    assert type(source.reader(kafka_schema(False))) is KafkaLogReader
    assert "pushFilters" not in vars(KafkaLogReader)


def test_register_turns_pushdown_on_unless_the_session_says(spark, pushdown_conf):
    spark.conf.unset(FILTER_PUSHDOWN_CONF)
    kcodec.spark.register(spark)
    assert spark.conf.get(FILTER_PUSHDOWN_CONF) == "true"
    pushdown_conf("false")
    assert enable_filter_pushdown(spark).conf.get(FILTER_PUSHDOWN_CONF) == "false"


def test_by_default_a_dataframe_filtered_once_still_reads_everything(spark, logs, pushdown_conf):
    """Spark 4.2 keeps the read planned for a query whose filters were
    pushed and reuses it for a later query of the same DataFrame that has
    none: pushdown is off unless a read asks for it, so a default read
    never carries one query's filters into another."""
    root, all_rows = logs
    pushdown_conf("true")
    df = kafka_log(spark, root)
    assert df.where("topic = 'clicks' AND offset < 10").count() == len(
        [r for r in all_rows if r[0] == "clicks" and r[2] < 10])
    assert df.count() == len(all_rows)
    assert df.select("topic").distinct().count() == len({r[0] for r in all_rows})
