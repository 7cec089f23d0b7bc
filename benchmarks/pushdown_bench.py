"""Filter pushdown of the kafka-log source: an hour of a day's log, counted
and summed with Spark's filter on `timestamp` pushed down to the read, and
not (the same session; the read option filterPushdown=false).

    python benchmarks/pushdown_bench.py --records 3000000 --partitions 4

Writes a day of lz4 batches of small records (CreateTime a little out of
order, as producers' clocks are, and some batches from a producer far
behind) with kcodec.log.write_log, then for each hour asked for times
`df.where(timestamp BETWEEN hour start AND hour end)` aggregated, median of
--repeats runs after a warm-up, with and without pushdown taking turns.
Bytes are measured by the reader Spark's pushdown planner gets, run in this
process on the filters that BETWEEN pushes (>= and <=): log bytes read
(SplitReport.log_bytes) and decoded (SplitReport.decoded_bytes), against
the same reader without filters.
Only the lower bound prunes (upper bounds are not sound on CreateTime), so
a late hour prunes more than an early one: the middle hour is the honest
figure. Prints a markdown table; --json FILE saves the figures.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOUR_MS = 3_600_000
DAY_HOURS = 24
DAY_START_MS = 1_700_006_400_000            # 2023-11-15 00:00 UTC
RECORDS_PER_BATCH = 500
VALUE_BYTES = 60
JITTER_MS = 5_000                           # producers' clocks disagree by this much
LATE_EVERY = 50                             # one batch in 50 from a producer far behind
LATE_MS = 10 * 60_000
SEGMENT_BYTES = 32 << 20
HOURS = {"first hour (00-01)": 0, "middle hour (12-13)": 12, "last hour (23-24)": 23}
RESULTS = Path(__file__).resolve().parent / "results" / "spark"


def write_day(root, records, partitions, seed=7):
    """`records` spread over `partitions` and a day, in lz4 batches."""
    import numpy as np
    import pyarrow as pa
    from kcodec.log import write_log
    rng = np.random.default_rng(seed)
    per_partition = records // partitions
    for p in range(partitions):
        clock = np.linspace(DAY_START_MS, DAY_START_MS + DAY_HOURS * HOUR_MS, per_partition,
                            endpoint=False).astype(np.int64)
        ts = clock + rng.integers(-JITTER_MS, JITTER_MS, per_partition)
        tables = []
        for k, start in enumerate(range(0, per_partition, RECORDS_PER_BATCH)):
            end = min(start + RECORDS_PER_BATCH, per_partition)
            late = LATE_MS if k % LATE_EVERY == LATE_EVERY - 1 else 0
            n = end - start
            values = rng.integers(32, 127, size=(n, VALUE_BYTES), dtype=np.uint8)
            tables.append(pa.table({
                "key": pa.array([b"user-%d" % (i % 997) for i in range(start, end)]),
                "value": pa.array(list(map(bytes, values))),
                "timestamp": pa.array(ts[start:end] - late)}))
        write_log(os.path.join(root, f"events-{p}"), tables, segment_bytes=SEGMENT_BYTES,
                  compression="lz4")


def hour_bounds(hour):
    """(start, end) of an hour as the aware UTC datetimes Spark pushes."""
    start = datetime.datetime.fromtimestamp(DAY_START_MS / 1000, datetime.timezone.utc)
    start += datetime.timedelta(hours=hour)
    return start, start + datetime.timedelta(hours=1)


def measured_bytes(root, filters):
    """(log bytes, decoded bytes, rows) the pushdown reader reads for
    `filters`, run as Spark runs it."""
    from kcodec.spark import SplitReport, kafka_schema, parse_options, read_split
    from kcodec.spark.source import KafkaLogPushdownReader
    reader = KafkaLogPushdownReader([root], parse_options({}), kafka_schema(False))
    reader.pushFilters(filters)
    log_bytes = decoded = rows = 0
    for split in reader.partitions():
        report = SplitReport(split.name)
        for _ in read_split(split, reader.options, report):
            pass
        log_bytes, decoded, rows = (log_bytes + report.log_bytes,
                                    decoded + report.decoded_bytes, rows + report.rows)
    return log_bytes, decoded, rows


def timed(queries, repeats):
    """Each query's results and seconds of `repeats` runs after a warm-up,
    the queries taking turns (which goes first alternating), so that neither
    gets all of a warming or busier machine's runs."""
    results = [query() for query in queries]
    times = [[] for _ in queries]
    for r in range(repeats):
        order = range(len(queries)) if r % 2 == 0 else reversed(range(len(queries)))
        for i in order:
            start = time.perf_counter()
            results[i] = queries[i]()
            times[i].append(time.perf_counter() - start)
    return results, times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", help="directory for the log, kept (default: a temporary "
                        "one, removed)")
    parser.add_argument("--json", help="file for the figures (default: "
                        "benchmarks/results/spark/<commit>-pushdown.json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import kcodec
    import kcodec.spark
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThanOrEqual
    from kcodec.spark.session import local_session

    work = tempfile.mkdtemp(prefix="kcodec-pushdown-", dir=args.work)
    root = os.path.join(work, "logs")
    started = time.perf_counter()
    write_day(root, args.records, args.partitions)
    log_size = sum(f.stat().st_size for f in Path(root).rglob("*.log"))
    segments = sum(1 for _ in Path(root).rglob("*.log"))
    print(f"wrote {args.records:,} records, {log_size / 1e6:.0f} MB in {segments} segments "
          f"of {args.partitions} partitions in {time.perf_counter() - started:.0f} s")
    all_bytes = measured_bytes(root, [])
    spark = kcodec.spark.register(local_session(args.master, "kcodec-pushdown-bench"))
    rows, figures = [], {}
    try:
        # A cold JVM would slow the first hour's runs down: warm it on the whole log.
        spark.read.format("kafka-log").load(root).agg(F.sum(F.length("value"))).collect()
        for label, hour in HOURS.items():
            start, end = hour_bounds(hour)

            def query(pushdown):
                df = (spark.read.format("kafka-log").option("filterPushdown", pushdown)
                      .load(root).where(F.col("timestamp").between(start, end)))
                row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b"))
                return tuple(row.collect()[0])

            (on_result, off_result), (on_times, off_times) = timed(
                [lambda: query("true"), lambda: query("false")], args.repeats)
            on, off = statistics.median(on_times), statistics.median(off_times)
            if on_result != off_result:
                raise SystemExit(f"{label}: {on_result} with pushdown, {off_result} without")
            read, decoded, _ = measured_bytes(
                root, [GreaterThanOrEqual(("timestamp",), start),
                       LessThanOrEqual(("timestamp",), end)])
            figures[label] = {
                "hour": hour, "rows": on_result[0], "log_bytes": read, "decoded_bytes": decoded,
                "log_bytes_without": all_bytes[0], "seconds": on, "seconds_without": off,
                "samples": on_times, "samples_without": off_times}
            rows.append(f"| {label} | {on_result[0]:,} | {read / all_bytes[0]:.3f} | "
                        f"{decoded / all_bytes[0]:.3f} | {off:.2f} | {on:.2f} | {off / on:.1f}x |")
    finally:
        spark.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nkcodec {kcodec.__version__}, {args.master}, {os.cpu_count()} CPUs, "
          f"{args.records:,} records over 24 h in {args.partitions} partitions, "
          f"median of {args.repeats}:\n")
    print("| hour filtered | rows | log bytes read (pushdown / without) | bytes decoded "
          "(pushdown / without) | s without | s with | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip() or "unknown"
    target = Path(args.json) if args.json else RESULTS / f"{commit}-pushdown.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({
        "commit": commit, "kcodec": kcodec.__version__, "python": platform.python_version(),
        "master": args.master, "cpus": os.cpu_count(), "records": args.records,
        "partitions": args.partitions, "log_bytes": log_size, "segments": segments,
        "repeats": args.repeats, "hours": figures}, indent=1))
    print(f"\nsaved {target}")


if __name__ == "__main__":
    main()
