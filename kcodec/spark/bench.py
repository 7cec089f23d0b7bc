"""Measuring kcodec on Spark against the limits Spark sets, in one session on
the same rows (benchmarks/spark_bench.py prints the figures,
benchmarks/test_bench_spark.py runs each once in CI):

- "kafka-log" read to Spark's noop sink, against the transport ceiling: a
  Python Data Source whose read() only yields ready-made Arrow batches — the
  same batches kafka-log produces, kept in Arrow IPC files, one per split —
  and against Spark's own Parquet scan of the same rows;
- spark-convert against the DataFrame path,
  spark.read.format("kafka-log").load(...).write.parquet(...).
"""
import json
import os
import shutil
import statistics
import time

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .. import encode
from ..log import write_log
from .convert import convert, peak_memory
from .options import parse_options
from .plan import plan
from .read import read_split
from .schema import arrow_schema, kafka_schema, to_spark_arrow

CEILING = "kcodec-arrow-ceiling"


class ArrowFilesDataSource(DataSource):
    """The transport ceiling: one input partition per Arrow IPC file, whose
    batches read() yields as they are (memory-mapped, nothing decoded)."""

    @classmethod
    def name(cls):
        return CEILING

    def schema(self):
        return kafka_schema(self.options.get("includeHeaders", "false") == "true")

    def reader(self, schema):
        return _ArrowFilesReader(json.loads(self.options["files"]))


class _ArrowFilesReader(DataSourceReader):
    def __init__(self, files):
        self.files = files

    def partitions(self):
        return [InputPartition(path) for path in self.files]

    def read(self, partition):
        with pa.memory_map(partition.value) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


def write_bench_log(root, rows, *, compression="none", value_bytes=100, batch_records=500,
                    segment_bytes=256 << 20, partitions=2):
    """Partition directories bench-0.. under `root` holding `rows` records in
    all (keys of ~12 bytes, values of `value_bytes`), written by write_log."""
    import numpy as np
    rng = np.random.default_rng(1)
    per_partition = rows // partitions
    for p in range(partitions):
        directory = os.path.join(root, f"bench-{p}")
        sets, offset = [], 0
        while offset < per_partition:
            n = min(batch_records, per_partition - offset)
            keys = [b"key-%08d" % (offset + i) for i in range(n)]
            payload = rng.integers(32, 127, size=(n, value_bytes), dtype=np.uint8)
            values = [bytes(row) for row in payload]
            table = pa.table({"key": pa.array(keys, pa.binary()),
                              "value": pa.array(values, pa.binary()),
                              "timestamp": pa.array(
                                  np.arange(offset, offset + n) + 1_700_000_000_000,
                                  pa.timestamp("ms", tz="UTC"))})
            sets.append(encode(table, compression=compression, base_offset=offset))
            offset += n
        write_log(directory, sets, segment_bytes=segment_bytes)
    return [os.path.join(root, f"bench-{p}") for p in range(partitions)]


def write_ceiling_files(paths, options, directory):
    """The batches kafka-log yields for each split, as Arrow IPC files."""
    os.makedirs(directory, exist_ok=True)
    target = arrow_schema(kafka_schema(options.include_headers))
    splits, _ = plan(paths, options)
    files = []
    for split in splits:
        path = os.path.join(directory, f"split-{split.id:05d}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, target) as writer:
            for table in read_split(split, options):
                for batch in to_spark_arrow(table, target).to_batches():
                    writer.write_batch(batch)
        files.append(path)
    return files


def _noop(df):
    df.write.format("noop").mode("overwrite").save()


def _timed(function):
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


class SparkBench:
    """The measured operations on one log, in one session."""

    def __init__(self, spark, paths, work, *, include_headers=True):
        from . import register
        register(spark)
        spark.dataSource.register(ArrowFilesDataSource)
        self.spark, self.paths, self.work = spark, paths, work
        self.options = {"includeHeaders": str(include_headers).lower()}
        parsed = parse_options(self.options)
        self.files = write_ceiling_files(paths, parsed, os.path.join(work, "ceiling"))
        self.rows = self.kafka_log().count()
        self.parquet = os.path.join(work, "parquet-converted")
        convert(spark, paths, self.parquet, parsed, mode="overwrite")

    def kafka_log(self):
        return self.spark.read.format("kafka-log").options(**self.options).load(self.paths)

    def ceiling(self):
        return self.spark.read.format(CEILING).options(
            files=json.dumps(self.files), **self.options).load()

    # Each returns its elapsed seconds.
    def read_kafka_log(self):
        return _timed(lambda: _noop(self.kafka_log()))

    def read_ceiling(self):
        return _timed(lambda: _noop(self.ceiling()))

    def read_parquet(self):
        return _timed(lambda: _noop(self.spark.read.parquet(self.parquet)))

    def dataframe_write(self):
        out = os.path.join(self.work, "parquet-dataframe")
        shutil.rmtree(out, ignore_errors=True)
        return _timed(lambda: self.kafka_log().write.mode("overwrite").parquet(out))

    def spark_convert(self):
        out = os.path.join(self.work, "parquet-spark-convert")
        parsed = parse_options(self.options)
        return _timed(lambda: convert(self.spark, self.paths, out, parsed, mode="overwrite"))

    def outputs_equal(self):
        """Both conversions hold the same rows: counts and per-column checksums."""
        def digest(path):
            df = self.spark.read.parquet(path)
            return df.agg(F.count("*"), F.sum("offset"), F.sum(F.crc32("value")),
                          F.sum(F.crc32("key")), F.sum(F.unix_millis("timestamp") - 1_700_000_000_000),
                          F.countDistinct("topic", "partition", "offset")).first()
        a = digest(os.path.join(self.work, "parquet-dataframe"))
        b = digest(os.path.join(self.work, "parquet-spark-convert"))
        same_schema = (self.spark.read.parquet(os.path.join(self.work, "parquet-dataframe")).schema
                       == self.spark.read.parquet(os.path.join(
                           self.work, "parquet-spark-convert")).schema)
        return tuple(a) == tuple(b) and a[0] == self.rows and same_schema

    def run(self, repeats=3, out=None):
        """Median seconds of each operation over interleaved repeats."""
        operations = {"kafka-log read": self.read_kafka_log,
                      "transport ceiling read": self.read_ceiling,
                      "Spark Parquet scan": self.read_parquet,
                      "kafka-log .write.parquet": self.dataframe_write,
                      "spark-convert": self.spark_convert}
        times = {name: [] for name in operations}
        for name, operation in operations.items():      # warm up (JIT, workers)
            operation()
        for r in range(repeats):
            for name, operation in operations.items():
                times[name].append(operation())
                if out is not None:
                    out.write(f"  repeat {r + 1}: {name}: {times[name][-1]:.2f} s\n")
                    out.flush()
        return {name: statistics.median(t) for name, t in times.items()}


def report(rows, seconds, log_bytes, equal):
    rate = {name: rows / s for name, s in seconds.items()}
    lines = ["| operation | median s | rows/s |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds[name]:.2f} | {rate[name]:,.0f} |" for name in seconds]
    read_ratio = rate["kafka-log read"] / rate["transport ceiling read"]
    convert_ratio = rate["spark-convert"] / rate["kafka-log .write.parquet"]
    lines += [
        "",
        f"kafka-log / transport ceiling: {read_ratio:.2f}x (target >= 0.8x)",
        f"transport ceiling / Spark Parquet scan: "
        f"{rate['transport ceiling read'] / rate['Spark Parquet scan']:.2f}x",
        f"spark-convert / kafka-log .write.parquet: {convert_ratio:.2f}x (target >= 5x); "
        f"outputs equal: {equal}",
        f"{rows:,} rows, {log_bytes:,} log bytes",
    ]
    return "\n".join(lines), read_ratio, convert_ratio


# write_bench_log's bytes of log per record with 100-byte values (measured:
# 122.9), to size a log in GiB.
BENCH_LOG_BYTES_PER_ROW = 123
GIB = 1 << 30
_LOG_DONE = "bench-log-rows"


def rows_for_gib(gib, value_bytes=100):
    return int(gib * GIB / (BENCH_LOG_BYTES_PER_ROW + value_bytes - 100))


def rows_written(rows, partitions=2):
    """How many records write_bench_log writes when asked for `rows`: the
    same number in each partition."""
    return rows // partitions * partitions


def cached_bench_log(root, rows, **options):
    """write_bench_log's partition directories under `root`, written only
    if `root` does not already hold a complete log of `rows` records (a
    marker file is written last), so large logs are kept between runs."""
    marker = os.path.join(root, _LOG_DONE)
    wanted = json.dumps({"rows": rows, **options}, sort_keys=True)
    if os.path.exists(marker):
        with open(marker) as f:
            if f.read() == wanted:
                partitions = options.get("partitions", 2)
                return [os.path.join(root, f"bench-{p}") for p in range(partitions)]
    shutil.rmtree(root, ignore_errors=True)
    paths = write_bench_log(root, rows, **options)
    with open(marker, "w") as f:
        f.write(wanted)
    return paths


def log_bytes_of(paths):
    return sum(os.path.getsize(os.path.join(p, n)) for p in paths
               for n in os.listdir(p) if n.endswith(".log"))


def convert_in_process(paths, options, out):
    """The limit spark-convert is measured against: every split converted
    one after the other in this process (one core) exactly as a task
    converts it — read_split, to_spark_arrow, a ParquetWriter with
    spark-convert's options — without Spark. Returns (rows, seconds)."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    started = time.perf_counter()
    rows = _convert_share((paths, options, out, 0, 1))
    return rows, time.perf_counter() - started


def parquet_digest(spark, path):
    """Row count and per-column checksums of the Parquet files under `path`:
    two outputs with equal digests hold the same rows."""
    df = spark.read.parquet(path)
    sums = [F.count("*"), F.sum("offset"), F.sum(F.crc32("value")), F.sum(F.crc32("key")),
            F.sum(F.unix_millis("timestamp") % 1_000_000_007), F.sum("timestampType"),
            F.countDistinct("topic", "partition", "offset")]
    if "headers" in df.columns:
        sums += [F.count("headers"), F.sum(F.size("headers")),
                 F.sum(F.crc32(F.to_json("headers").cast("binary")))]
    return tuple(df.agg(*sums).first())


class WorkerMemoryPoller:
    """The peak resident memory (VmHWM) of the Python workers that descend
    from this process, polled from outside in a thread. With
    spark.python.worker.reuse=false each task runs in a fresh worker, so the
    largest VmHWM of a worker is the largest peak of a task."""

    POLL_SECONDS = 0.05
    WORKER_MODULE = b"pyspark.daemon"

    def __init__(self):
        import threading
        self.peaks = {}         # pid -> VmHWM bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True,
                                        name="kcodec-worker-memory")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def peak(self):
        return max(self.peaks.values(), default=0)

    @property
    def workers(self):
        return len(self.peaks)

    def _poll(self):
        root = os.getpid()
        while not self._stop.is_set():
            for pid in _pids():
                if pid not in self.peaks and not self._is_worker(pid, root):
                    continue
                peak = peak_memory(pid)
                if peak:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), peak)
            self._stop.wait(self.POLL_SECONDS)

    def _is_worker(self, pid, root):
        """A process forked by a pyspark daemon (not the daemon itself) below `root`."""
        parent = _ppid(pid)
        if not parent or self.WORKER_MODULE not in _cmdline(pid) \
                or self.WORKER_MODULE not in _cmdline(parent):
            return False
        while parent and parent != 1:
            if parent == root:
                return True
            parent = _ppid(parent)
        return False


def _pids():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return b"" if "b" in mode else ""


def _cmdline(pid):
    return _read(f"/proc/{pid}/cmdline", "rb")


def _ppid(pid):
    stat = _read(f"/proc/{pid}/stat")
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses
    return int(stat.rsplit(")", 1)[1].split()[1]) if stat else 0


def _convert_share(args):
    """Convert every `processes`-th split from the `share`-th on with
    spark-convert's own task, outside Spark; returns the rows."""
    import pyarrow.fs as pafs
    from .convert import _Task
    from .storage import Store
    paths, options, out, share, processes = args
    task = _Task(Store(pafs.LocalFileSystem()), out, "limit", options, "snappy")
    splits, _ = plan(paths, options)
    return sum(task(split)["rows"] for split in splits[share::processes])


class ParallelLimit:
    """The limit on `processes` cores as this machine gives them now: the
    splits shared among that many forked processes converting at once, as
    convert_in_process does. The processes are started (and import
    everything) before the first timed run."""

    def __init__(self, processes):
        import multiprocessing
        self.processes = processes
        self.pool = multiprocessing.get_context("fork").Pool(processes)
        self.pool.map(abs, range(processes))

    def run(self, paths, options, out):
        """(rows, seconds) of one conversion of every split."""
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        started = time.perf_counter()
        rows = self.pool.map(_convert_share, [(paths, options, out, share, self.processes)
                                              for share in range(self.processes)])
        return sum(rows), time.perf_counter() - started

    def close(self):
        self.pool.close()
        self.pool.join()
