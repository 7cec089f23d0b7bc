"""spark.readStream.format("kafka-log") against Spark's own Kafka source
(spark.readStream.format("kafka"), the spark-sql-kafka-0-10 jars of the
installed pyspark) on the same topic of a real broker, in one process and
one Spark session: kafka-log reads the broker's log.dirs, the Kafka source
fetches from the broker. Three modes:

throughput: a backlog is produced first, then each source runs
Trigger.AvailableNow from the earliest offsets into the same sink (Parquet
with a checkpoint of its own, or noop), interleaved, --repeats times after
a warm-up run each; rows/s from the medians, and both Parquet sinks must
hold the same rows (count and per-column checksums).

    bash ci/kafka-broker.sh     # the broker's and the connector's jars, once
    python benchmarks/stream_bench.py throughput --rows 2000000 --repeats 3 --work DIR

latency: a producer writes --rate records/s for --seconds (CreateTime =
the time of produce()), while one source at a time (or both at once with
--together) runs a processingTime trigger into a foreachBatch sink that
notes, per micro-batch, the wall-clock time its batch finished writing. A
record's latency is that time minus its timestamp; the first --warmup
seconds of each run are left out, and each source reads a few seconds of
records once before (the session's first micro-batch of each is slow).

    python benchmarks/stream_bench.py latency --rate 2000 --seconds 60 --trigger 1

memory: one long kafka-log stream of --batches micro-batches (default 600:
ten minutes at --trigger 1; --batches 3600 is an hour) while a producer
appends; the resident memory of the driver JVM, the Python streaming-source
runner and the Python workers (all descendants of this process) is sampled
every --sample-seconds; start, end, max and the slope in MiB per 1000
micro-batches per kind of process, and the driver JVM's live heap after a
full GC early on and at the end (RSS alone also grows as the heap expands).

    python benchmarks/stream_bench.py memory --batches 3600 --trigger 1

Without --bootstrap each mode starts its own broker (tests/kafka_broker.py)
and stops it at the end. Each mode prints a markdown table, writes it with
the command line and the machine's load to
benchmarks/results/spark/<git head>-stream-<mode>.md (and .json; --no-save
leaves them out) and prints the figures as JSON last with --json.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(HERE))

from kafka_broker import (  # noqa: E402
    CLIENT_TIMEOUT, KafkaBroker, confluent_producer, spark_kafka_jars,
)
from spark_kafka_bench import SEGMENT_BYTES, VALUE_BYTES, produce  # noqa: E402

RESULTS = HERE / "results" / "spark"
SOURCES = ("kafka-log", "spark-kafka")
THROUGHPUT_TARGET = 3.0
MIB = 1 << 20
MS_PER_S = 1000
# The rate producer wakes this often and sends what the rate owes by then.
PRODUCE_TICK_SECONDS = 0.01
PRODUCER_LINGER_MS = 5
# Checks of a running query's progress (not a timing: only how often to look).
POLL_SECONDS = 0.5
# After the producer stops, how long a stream may take to read the rest
# before the run is stopped anyway (reported as not caught up).
CATCH_UP_SECONDS = 120.0
# latency: records produced for the untimed first run of each source.
WARM_UP_SECONDS = 5.0
# --warmup: untimed runs (throughput), seconds of records left out (latency).
DEFAULT_WARMUP = {"throughput": 1, "latency": 10.0}
PERCENTILES = (50, 99)
# memory: the first part of a run (JIT, caches filling) is left out of the slope.
SLOPE_SKIP_FRACTION = 0.1
PER_THOUSAND = 1000
SECONDS_PER_MINUTE = 60
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "2g",
}


# --------------------------------------------------------------- the machine
def git_head():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def load_average():
    return [round(x, 2) for x in os.getloadavg()]


def machine_note(started_load, ended_load):
    import pyarrow
    import pyspark
    return (f"{os.cpu_count()} cores (a shared VM: other jobs may be running), "
            f"Python {sys.version.split()[0]}, pyspark {pyspark.__version__}, "
            f"pyarrow {pyarrow.__version__}; load average (1, 5, 15 min) "
            f"{started_load} at the start, {ended_load} at the end")


# --------------------------------------------------------------- producing
class RateProducer(threading.Thread):
    """`rate` records a second round-robin over the partitions until
    `seconds` have passed or it is told to finish; each record's timestamp
    (CreateTime) is the wall-clock time it was handed to the producer."""

    def __init__(self, broker, topic, partitions, rate, seconds, codec):
        super().__init__(daemon=True)
        self.broker, self.topic, self.partitions = broker, topic, partitions
        self.rate, self.seconds, self.codec = rate, seconds, codec
        self.sent, self.error, self.started_at = 0, None, None
        self.finish = threading.Event()

    def run(self):
        try:
            self._produce()
        except BaseException as exc:        # reported by the caller
            self.error = exc

    def _produce(self):
        producer = confluent_producer(self.broker, compression_type=self.codec,
                                      linger_ms=PRODUCER_LINGER_MS, acks=1)
        value = b"v" * VALUE_BYTES
        errors = []

        def delivered(error, _message):
            if error is not None:
                errors.append(error)

        self.started_at = time.time()
        while not self.finish.is_set():
            elapsed = time.time() - self.started_at
            if self.seconds is not None and elapsed >= self.seconds:
                break
            owed = int(elapsed * self.rate) - self.sent
            for _ in range(owed):
                now_ms = int(time.time() * MS_PER_S)
                producer.produce(self.topic, value=value, key=b"key-%010d" % self.sent,
                                 partition=self.sent % self.partitions, timestamp=now_ms,
                                 on_delivery=delivered)
                self.sent += 1
            producer.poll(0)
            time.sleep(PRODUCE_TICK_SECONDS)
        left = producer.flush(CLIENT_TIMEOUT)
        if left or errors:
            raise RuntimeError(f"{left} records not delivered; errors: {errors[:3]}")


def end_offsets(broker, topic, partitions):
    """Spark's Kafka-source offset JSON of the topic's high watermarks now."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kcodec-stream-bench",
                         "log_level": 0})
    try:
        return {topic: {str(p): consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=CLIENT_TIMEOUT, cached=False)[1]
            for p in range(partitions)}}
    finally:
        consumer.close()


# ------------------------------------------------------------------ Spark
def session(master):
    from kcodec.spark import register
    from kcodec.spark.session import local_session
    spark = local_session(master, app_name="kcodec stream bench",
                          **{"spark.jars": spark_kafka_jars(), **SPARK_CONF})
    register(spark)
    return spark


def stream(spark, name, broker, topic, starting, options=()):
    """The streaming DataFrame of one source: startingOffsets `starting`
    (earliest, latest or offset JSON), headers included."""
    if isinstance(starting, dict):
        starting = json.dumps(starting)
    if name == "spark-kafka":
        reader = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", broker.bootstrap))
    else:
        reader = spark.readStream.format("kafka-log")
    reader = (reader.option("subscribe", topic).option("startingOffsets", starting)
              .option("includeHeaders", "true"))
    for key, value in options:
        reader = reader.option(key, value)
    return reader.load() if name == "spark-kafka" else reader.load(str(broker.log_dirs))


def progress_list(query, seen):
    """The query's progress reports after `seen`, the (trigger time, batch
    id) of the last one taken (("", -1) at first), and the new `seen`.
    recentProgress (a py4j copy of up to 100 reports) is fetched only when
    batches were missed; idle triggers between two polls may be left out."""
    last = query.lastProgress
    if last is None or last["timestamp"] <= seen[0]:
        return [], seen
    new = [last]
    if last["batchId"] > seen[1] + 1:
        new = [p for p in query.recentProgress if p["timestamp"] > seen[0]]
    return new, (new[-1]["timestamp"], new[-1]["batchId"])


def end_total(progress):
    """The sum of a progress report's end offsets over its partitions."""
    end = progress["sources"][0]["endOffset"]
    if isinstance(end, str):
        end = json.loads(end)
    return sum(int(v) for partitions in (end or {}).values() for v in partitions.values())


def durations(progresses):
    """Median milliseconds of each phase of the micro-batches that read rows."""
    rows = [p for p in progresses if p["numInputRows"]]
    keys = sorted({k for p in rows for k in p["durationMs"]})
    return {k: statistics.median(p["durationMs"].get(k, 0) for p in rows) for k in keys}


# ------------------------------------------------------------- throughput
def run_throughput(args, broker, work):
    from kcodec.spark.bench import parquet_digest
    topic = args.topic or "stream-bench-backlog"
    broker.create_topic(topic, partitions=args.partitions,
                        internal_segment_bytes=str(SEGMENT_BYTES))
    produced = time.perf_counter()
    produce(broker, topic, args.rows, args.partitions, args.codec)
    produce_seconds = time.perf_counter() - produced
    spark = session(args.master)
    outputs = {name: work / "throughput" / name for name in SOURCES}

    def once(name):
        out = outputs[name]
        shutil.rmtree(out, ignore_errors=True)
        writer = (stream(spark, name, broker, topic, "earliest").writeStream
                  .option("checkpointLocation", str(out / "checkpoint"))
                  .trigger(availableNow=True))
        started = time.perf_counter()
        if args.sink == "parquet":
            query = writer.format("parquet").start(str(out / "data"))
        else:
            query = writer.format("noop").start()
        query.awaitTermination()
        seconds = time.perf_counter() - started
        if query.exception() is not None:
            raise RuntimeError(f"{name}: {query.exception()}")
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        return seconds, rows, len([p for p in query.recentProgress if p["numInputRows"]])

    try:
        for _ in range(args.warmup):
            for name in SOURCES:
                once(name)
        seconds = {name: [] for name in SOURCES}
        rows, batches = {}, {}
        for _ in range(args.repeats):              # interleaved: both see the same machine
            for name in SOURCES:
                took, rows[name], batches[name] = once(name)
                seconds[name].append(took)
        digests = ({name: list(parquet_digest(spark, str(out / "data")))
                    for name, out in outputs.items()} if args.sink == "parquet" else {})
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    log_bytes = sum(f.stat().st_size for p in range(args.partitions)
                    for f in broker.partition_dir(topic, p).glob("*.log"))
    median = {name: statistics.median(times) for name, times in seconds.items()}
    counts_ok = all(n == args.rows for n in rows.values())
    equal = counts_ok and (not digests or (len({tuple(d) for d in digests.values()}) == 1
                                           and digests["kafka-log"][0] == args.rows))
    paired = sorted(kafka / ours for kafka, ours in zip(seconds["spark-kafka"],
                                                       seconds["kafka-log"]))
    return {"mode": "throughput", "rows": args.rows, "codec": args.codec,
            "partitions": args.partitions, "sink": args.sink, "master": args.master,
            "cores": cores, "log_bytes": log_bytes, "produce_seconds": produce_seconds,
            "seconds": seconds, "input_rows": rows, "batches": batches,
            "rows_per_s": {name: args.rows / s for name, s in median.items()},
            "ratio": median["spark-kafka"] / median["kafka-log"], "paired_ratios": paired,
            "target": THROUGHPUT_TARGET, "equal": equal, "digests": digests}


def report_throughput(r):
    lines = [f"master {r['master']} ({r['cores']} cores); {r['rows']:,} rows in "
             f"{r['partitions']} partitions, values {VALUE_BYTES} B, {r['codec']}, "
             f"{r['log_bytes'] / 1e6:.1f} MB of log; Trigger.AvailableNow from earliest into "
             f"the {r['sink']} sink; medians of {len(r['seconds']['kafka-log'])}", "",
             "| source | median s | rows/s | runs (s) | micro-batches |",
             "|---|---:|---:|---|---:|"]
    for name in SOURCES:
        runs = ", ".join(f"{s:.2f}" for s in r["seconds"][name])
        lines.append(f"| {name} | {statistics.median(r['seconds'][name]):.2f} | "
                     f"{r['rows_per_s'][name]:,.0f} | {runs} | {r['batches'][name]} |")
    met = "met" if r["ratio"] >= r["target"] else "not met"
    lines += ["", f"kafka-log / Spark's Kafka source: {r['ratio']:.2f}x (goal >= "
                  f"{r['target']}x: {met}); per repeat: "
              + ", ".join(f"{x:.2f}x" for x in r["paired_ratios"]),
              f"same rows (counts{' and Parquet checksums' if r['digests'] else ''}): "
              f"{r['equal']}"]
    return "\n".join(lines)


# ----------------------------------------------------------------- latency
class BatchTimes:
    """A foreachBatch sink: appends (batch id, record timestamp) of each
    micro-batch to Parquet under `out` and notes when that write finished."""

    def __init__(self, out):
        self.out, self.finished = str(out), {}

    def __call__(self, df, batch_id):
        from pyspark.sql import functions as F
        (df.select(F.lit(batch_id).alias("batch"), F.unix_millis("timestamp").alias("ts"))
         .write.mode("append").parquet(self.out))
        self.finished[batch_id] = time.time() * MS_PER_S


def latencies(sink, since_ms):
    """Milliseconds from each record's timestamp (at or after `since_ms`) to
    the end of its micro-batch's write, and how many records the sink holds."""
    import numpy as np
    import pyarrow.parquet as pq
    if not os.path.exists(sink.out):
        return np.array([]), 0
    table = pq.read_table(sink.out, columns=["batch", "ts"])
    batch = table.column("batch").to_numpy()
    ts = table.column("ts").to_numpy()
    finished = np.array([sink.finished.get(int(b), np.nan) for b in range(batch.max() + 1)])
    keep = ts >= since_ms
    return finished[batch[keep]] - ts[keep], len(ts)


def warm_up(args, spark, broker, topic, work):
    """A few seconds of records, then each source reads them into its
    foreachBatch sink once (Trigger.AvailableNow): the session's first
    micro-batch of each (Python workers starting, JIT) is not measured."""
    producer = RateProducer(broker, topic, args.partitions, args.rate, WARM_UP_SECONDS,
                            args.codec)
    producer.run()
    if producer.error is not None:
        raise producer.error
    for name in SOURCES:
        out = work / "warm-up" / name
        (stream(spark, name, broker, topic, "earliest").writeStream
         .foreachBatch(BatchTimes(out / "data"))
         .option("checkpointLocation", str(out / "checkpoint"))
         .trigger(availableNow=True).start().awaitTermination())


def run_latency(args, broker, work):
    import numpy as np
    topic = args.topic or "stream-bench-rate"
    broker.create_topic(topic, partitions=args.partitions,
                        internal_segment_bytes=str(SEGMENT_BYTES))
    spark = session(args.master)
    phases = [list(SOURCES)] if args.together else [[name] for name in SOURCES]
    results = {}
    try:
        warm_up(args, spark, broker, topic, work)
        for names in phases:
            starting = end_offsets(broker, topic, args.partitions)
            producer = RateProducer(broker, topic, args.partitions, args.rate, args.seconds,
                                    args.codec)
            producer.start()
            queries, sinks = {}, {}
            for name in names:
                sinks[name] = BatchTimes(work / "latency" / name / "data")
                queries[name] = (stream(spark, name, broker, topic, starting).writeStream
                                 .foreachBatch(sinks[name])
                                 .option("checkpointLocation",
                                         str(work / "latency" / name / "checkpoint"))
                                 .trigger(processingTime=f"{args.trigger} seconds").start())
            progress = {name: [] for name in names}
            seen = dict.fromkeys(names, ("", -1))
            caught_up = dict.fromkeys(names, False)
            final, deadline = None, None

            def look():
                for name, query in queries.items():
                    new, seen[name] = progress_list(query, seen[name])
                    progress[name] += new
                    if query.exception() is not None:
                        raise RuntimeError(f"{name}: {query.exception()}")
                    if final is not None:
                        caught_up[name] = any(end_total(p) >= final for p in progress[name])

            while producer.is_alive():          # progress kept as it comes: Spark keeps 100
                look()
                time.sleep(POLL_SECONDS)
            if producer.error is not None:
                raise producer.error
            final = sum(end_offsets(broker, topic, args.partitions)[topic].values())
            deadline = time.monotonic() + CATCH_UP_SECONDS
            while time.monotonic() < deadline and not all(caught_up.values()):
                look()
                time.sleep(POLL_SECONDS)
            for name, query in queries.items():
                query.stop()
                new, seen[name] = progress_list(query, seen[name])
                progress[name] += new
                since = (producer.started_at + args.warmup) * MS_PER_S
                lat, read = latencies(sinks[name], since)
                results[name] = {
                    "produced": producer.sent, "read": read, "measured": int(lat.size),
                    "caught_up": caught_up[name],
                    "batches": len([p for p in progress[name] if p["numInputRows"]]),
                    "p50_ms": float(_percentile(lat, PERCENTILES[0])),
                    "p99_ms": float(_percentile(lat, PERCENTILES[1])),
                    "max_ms": float(np.nanmax(lat)) if lat.size else None,
                    "duration_ms": durations(progress[name])}
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    ratio = results["spark-kafka"]["p99_ms"] / results["kafka-log"]["p99_ms"]
    return {"mode": "latency", "rate": args.rate, "seconds": args.seconds,
            "warmup": args.warmup, "trigger": args.trigger, "partitions": args.partitions,
            "codec": args.codec, "master": args.master, "cores": cores,
            "together": args.together, "sources": results, "p99_ratio": ratio}


def _percentile(values, q):
    import numpy as np
    return np.nanpercentile(values, q) if values.size else float("nan")


def report_latency(r):
    how = ("both streams at once" if r["together"] else
           "one stream after the other, each with its own producer run")
    lines = [f"master {r['master']} ({r['cores']} cores); {r['rate']:,} records/s for "
             f"{r['seconds']} s ({VALUE_BYTES} B values, {r['codec']}, {r['partitions']} "
             f"partitions), processingTime {r['trigger']} s, foreachBatch into Parquet; "
             f"{how}; the first {r['warmup']} s of records left out", "",
             "| source | p50 ms | p99 ms | max ms | records read / produced (measured) | "
             "micro-batches | caught up | median ms per batch: trigger / addBatch / "
             "latestOffset |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    for name in SOURCES:
        s = r["sources"][name]
        d = s["duration_ms"]
        lines.append(f"| {name} | {s['p50_ms']:,.0f} | {s['p99_ms']:,.0f} | "
                     f"{s['max_ms'] or float('nan'):,.0f} | {s['read']:,} / "
                     f"{s['produced']:,} ({s['measured']:,}) | {s['batches']} | "
                     f"{s['caught_up']} | {d.get('triggerExecution', 0):,.0f} / "
                     f"{d.get('addBatch', 0):,.0f} / {d.get('latestOffset', 0):,.0f} |")
    verdict = "no worse" if r["p99_ratio"] >= 1 else "worse"
    lines += ["", f"p99 of Spark's Kafka source / p99 of kafka-log: {r['p99_ratio']:.2f} "
                  f"(kafka-log's p99 is {verdict})"]
    return "\n".join(lines)


# ------------------------------------------------------------------ memory
def _processes():
    """{pid: (parent pid, argv)} of every process now."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:             # gone meanwhile
            continue
        out[int(entry)] = (parent, [a.decode(errors="replace") for a in argv if a])
    return out


def process_kind(argv):
    text = " ".join(argv)
    if argv and os.path.basename(argv[0]) == "java":
        return "driver JVM" if "org.apache.spark.deploy.SparkSubmit" in argv else "Kafka broker"
    if "python_streaming_source_runner" in text:
        return "Python stream source runner"
    if "pyspark.daemon" in text and "pyspark.sql.worker" not in text:
        return "Python workers"
    if "python" in text:
        return "other Python (planner workers)"
    return None


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_BYTES
    except OSError:
        return 0


def sample_memory():
    """{kind: (RSS bytes summed, processes)} of this process's descendants,
    and this process as "driver Python"."""
    table = _processes()
    children = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    kinds = {"driver Python": [rss_bytes(os.getpid()), 1]}
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        kind = process_kind(table[pid][1])
        if kind is not None:
            entry = kinds.setdefault(kind, [0, 0])
            entry[0] += rss_bytes(pid)
            entry[1] += 1
    return {kind: tuple(v) for kind, v in kinds.items()}


def jvm_heap(spark, collect=False):
    """(used, committed) bytes of the driver JVM's heap, after a full
    collection (System.gc()) when `collect`: what is live then."""
    jvm = spark.sparkContext._jvm
    if collect:
        jvm.java.lang.System.gc()
    usage = jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage()
    return usage.getUsed(), usage.getCommitted()


def slope_per_thousand(points):
    """Least-squares slope of (batch, MiB) points, in MiB per 1000 batches."""
    if len(points) < 2:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return float("nan")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx * PER_THOUSAND


def run_memory(args, broker, work):
    topic = args.topic or "stream-bench-memory"
    broker.create_topic(topic, partitions=args.partitions,
                        internal_segment_bytes=str(SEGMENT_BYTES))
    spark = session(args.master)
    samples, progress, seen, batch = [], [], ("", -1), -1
    out = work / "memory"
    shutil.rmtree(out, ignore_errors=True)
    started = time.time()
    try:
        starting = end_offsets(broker, topic, args.partitions)
        producer = RateProducer(broker, topic, args.partitions, args.memory_rate, None,
                                args.codec)
        producer.start()
        writer = (stream(spark, "kafka-log", broker, topic, starting).writeStream
                  .option("checkpointLocation", str(out / "checkpoint"))
                  .trigger(processingTime=f"{args.trigger} seconds"))
        if args.sink == "parquet":
            query = writer.format("parquet").start(str(out / "data"))
        else:
            query = writer.format("noop").start()
        next_sample = time.monotonic()
        live = {}           # batch: driver JVM heap bytes live after a full GC
        try:
            while batch < args.batches - 1:
                if query.exception() is not None or not query.isActive:
                    raise RuntimeError(f"the query ended: {query.exception()}")
                if producer.error is not None:
                    raise producer.error
                new, seen = progress_list(query, seen)
                batch = max([batch] + [p["batchId"] for p in new if p["numInputRows"]])
                progress += [{"batchId": p["batchId"], "numInputRows": p["numInputRows"],
                              "durationMs": p["durationMs"]} for p in new]
                if time.monotonic() >= next_sample:
                    samples.append({"t": time.time() - started, "batch": batch,
                                    "kinds": sample_memory(), "heap": jvm_heap(spark)})
                    next_sample += args.sample_seconds
                if not live and batch >= args.batches * SLOPE_SKIP_FRACTION:
                    live[batch] = jvm_heap(spark, collect=True)[0]
                time.sleep(POLL_SECONDS)
            live[batch] = jvm_heap(spark, collect=True)[0]
            samples.append({"t": time.time() - started, "batch": batch, "kinds": sample_memory(),
                            "heap": jvm_heap(spark)})
        finally:
            query.stop()
            producer.finish.set()
            producer.join()
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    skip = args.batches * SLOPE_SKIP_FRACTION
    kinds = {}
    for kind in sorted({k for s in samples for k in s["kinds"]}):
        series = [(s["batch"], s["kinds"][kind][0] / MIB) for s in samples if kind in s["kinds"]]
        counts = [s["kinds"][kind][1] for s in samples if kind in s["kinds"]]
        kinds[kind] = {"start_mib": series[0][1], "end_mib": series[-1][1],
                       "max_mib": max(y for _, y in series),
                       "processes": [min(counts), max(counts)],
                       "slope_mib_per_1000": slope_per_thousand(
                           [p for p in series if p[0] >= skip])}
    rows = sum(p["numInputRows"] for p in progress)
    heap = [(s["batch"], s["heap"][0] / MIB, s["heap"][1] / MIB) for s in samples]
    heap_summary = {
        "used_max_mib": max(h[1] for h in heap), "committed_start_mib": heap[0][2],
        "committed_end_mib": heap[-1][2],
        "live_after_gc_mib": {str(b): v / MIB for b, v in live.items()},
        "live_slope_mib_per_1000": slope_per_thousand([(b, v / MIB) for b, v in live.items()])}
    return {"mode": "memory", "heap": heap_summary, "batches": batch + 1, "trigger": args.trigger,
            "rate": args.memory_rate, "partitions": args.partitions, "codec": args.codec,
            "sink": args.sink, "master": args.master, "cores": cores,
            "seconds": time.time() - started, "rows": rows, "sample_seconds": args.sample_seconds,
            "slope_skip_batches": skip, "kinds": kinds, "duration_ms": durations(progress),
            "samples": samples}


def report_memory(r):
    minutes = r["seconds"] / SECONDS_PER_MINUTE
    lines = [f"master {r['master']} ({r['cores']} cores); kafka-log, {r['batches']:,} "
             f"micro-batches (processingTime {r['trigger']} s) in {minutes:.1f} min "
             f"into the {r['sink']} sink, a producer appending {r['rate']:,} records/s "
             f"({VALUE_BYTES} B, {r['codec']}, {r['partitions']} partitions; {r['rows']:,} "
             f"rows read); RSS sampled every {r['sample_seconds']} s; slope by least squares "
             f"over batches >= {r['slope_skip_batches']:.0f}", "",
             "| process | count | start MiB | end MiB | max MiB | slope MiB / 1000 batches |",
             "|---|---:|---:|---:|---:|---:|"]
    for kind, k in r["kinds"].items():
        low, high = k["processes"]
        count = str(low) if low == high else f"{low}-{high}"
        lines.append(f"| {kind} | {count} | {k['start_mib']:,.0f} | {k['end_mib']:,.0f} | "
                     f"{k['max_mib']:,.0f} | {k['slope_mib_per_1000']:+,.1f} |")
    h = r["heap"]
    live = ", ".join(f"{v:,.0f} MiB after batch {b}" for b, v in h["live_after_gc_mib"].items())
    lines += ["", f"driver JVM heap: committed {h['committed_start_mib']:,.0f} -> "
                  f"{h['committed_end_mib']:,.0f} MiB, used at most {h['used_max_mib']:,.0f} MiB; "
                  f"live after a full GC: {live} ({h['live_slope_mib_per_1000']:+,.1f} MiB / "
                  "1000 batches)"]
    d = r["duration_ms"]
    lines += ["", "median ms per micro-batch: " + ", ".join(
        f"{k} {v:,.0f}" for k, v in d.items())]
    return "\n".join(lines)


# -------------------------------------------------------------------- main
MODES = {"throughput": (run_throughput, report_throughput),
         "latency": (run_latency, report_latency),
         "memory": (run_memory, report_memory)}


def save(mode, text, result, command, note):
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"{git_head()}-stream-{mode}"
    body = (f"# kafka-log stream against Spark's Kafka source: {mode}\n\n"
            f"Command (from the repository root):\n\n```bash\n{command}\n```\n\n"
            f"Machine: {note}\n\n## Output\n\n{text}\n")
    stem.with_suffix(".md").write_text(body)
    stem.with_suffix(".json").write_text(json.dumps(
        {"command": command, "machine": note, **result}, indent=1) + "\n")
    return stem


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--rows", type=int, default=2_000_000,
                        help="throughput: records of the backlog (default 2,000,000)")
    parser.add_argument("--codec", default="lz4",
                        choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        help="the producer's compression (default lz4)")
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions")
    parser.add_argument("--repeats", type=int, default=3,
                        help="throughput: timed runs of each source (medians reported)")
    parser.add_argument("--warmup", type=float, default=None,
                        help="throughput: untimed runs of each source first (default 1); "
                             "latency: seconds of records left out at the start (default 10)")
    parser.add_argument("--sink", choices=["parquet", "noop"], default=None,
                        help="throughput (default parquet) and memory (default noop)")
    parser.add_argument("--rate", type=int, default=2000,
                        help="latency: records produced a second (default 2000)")
    parser.add_argument("--memory-rate", type=int, default=1000,
                        help="memory: records produced a second (default 1000)")
    parser.add_argument("--seconds", type=float, default=60,
                        help="latency: how long each producer run lasts (default 60)")
    parser.add_argument("--trigger", type=float, default=1.0,
                        help="latency and memory: processingTime trigger, seconds")
    parser.add_argument("--together", action="store_true",
                        help="latency: both streams at once on one producer run (default: "
                             "one after the other, a producer run each)")
    parser.add_argument("--batches", type=int, default=600,
                        help="memory: micro-batches to run (default 600; 3600 at --trigger 1 "
                             "is an hour)")
    parser.add_argument("--sample-seconds", type=float, default=5.0,
                        help="memory: seconds between RSS samples")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", help="a running broker (with --log-dirs) instead of "
                                            "starting one")
    parser.add_argument("--log-dirs", help="that broker's log.dirs")
    parser.add_argument("--topic", help="topic name (default: stream-bench-<mode>; a fresh "
                                        "one is best)")
    parser.add_argument("--work", help="checkpoints, sinks and the broker's files "
                                       "(default: a temporary directory)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--no-save", action="store_true",
                        help="do not write benchmarks/results/spark/<head>-stream-<mode>.*")
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = DEFAULT_WARMUP.get(args.mode, 0)
    args.warmup = int(args.warmup) if args.mode == "throughput" else args.warmup
    if args.sink is None:
        args.sink = "noop" if args.mode == "memory" else "parquet"
    command = "python " + " ".join(shlex.quote(a) for a in
                                   ["benchmarks/stream_bench.py", *(argv or sys.argv[1:])])
    run, report = MODES[args.mode]
    started_load = load_average()
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kcodec-stream-bench-", dir=args.work))
    try:
        if args.bootstrap:
            if not args.log_dirs:
                parser.error("--bootstrap needs --log-dirs")
            result = run(args, KafkaBroker.attach(args.bootstrap, args.log_dirs), work)
        else:
            with KafkaBroker(work / "broker") as broker:
                result = run(args, broker, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    note = machine_note(started_load, load_average())
    text = report(result)
    print(text)
    print(f"\nMachine: {note}")
    if not args.no_save:
        print(f"written to {save(args.mode, text, result, command, note)}.md/.json")
    if args.json:
        print(json.dumps(result))
    return 0 if result.get("equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
