"""spark-convert: Kafka logs to Parquet at the speed of the codec.

Spark only schedules: one task per split (a segment, or a piece of a large
one). Each task decodes its split with the compiled core and writes Parquet
with pyarrow straight into PATH/topic=T/partition=P/, so no row crosses
Spark's Python-to-JVM transport.

Commit protocol (Hadoop's FileOutputCommitter, algorithm 1): a task writes
PATH/_temporary/<job>/<split>-<attempt>/ and, once its file is complete,
commits it by renaming it to PATH/_temporary/<job>/committed/, under a name
fixed by the job and the split — a retried or speculative attempt replaces
the same file, so rows never appear twice. When every task has committed,
the driver renames the committed files into PATH/topic=T/partition=P/,
writes PATH/_SUCCESS and removes _temporary; tasks of a failed job (which
Spark may leave running) can only ever write below _temporary. Renames are
atomic on local disks and HDFS; object stores (s3://) copy instead.
"""
import logging
import re
import time
import uuid
from dataclasses import dataclass, field

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .files import filesystem_of
from .storage import Store
from .plan import plan
from .read import SplitReport, read_split
from .schema import arrow_schema, kafka_schema, to_spark_arrow
from .session import local_session  # noqa: F401  (spark-convert's session, importable here)

SUCCESS = "_SUCCESS"
# Keys, values and offsets rarely repeat: dictionary pages and min/max
# statistics for them cost a third of the write time and buy nothing, so
# those go to the columns that repeat or that readers prune on.
DICTIONARY_COLUMNS = ["topic", "partition", "timestampType", "headers"]
STATISTICS_COLUMNS = ["topic", "partition", "offset", "timestamp", "timestampType"]
TEMPORARY = "_temporary"


@dataclass
class ConvertResult:
    out: str
    rows: int
    log_bytes: int
    parquet_bytes: int
    files: int
    tasks: int
    partitions: int
    elapsed: float
    skipped: list = field(default_factory=list)

    @property
    def rows_per_second(self):
        return self.rows / self.elapsed if self.elapsed > 0 else float("inf")

    def summary(self):
        text = (f"{self.rows:,} rows from {self.partitions} partition(s) in {self.tasks} task(s), "
                f"{self.log_bytes:,} log bytes -> {self.files} Parquet file(s), "
                f"{self.parquet_bytes:,} bytes, {self.elapsed:.2f} s, "
                f"{self.rows_per_second:,.0f} rows/s -> {self.out}")
        if self.skipped:
            text += (f"\nskipped {len(self.skipped)} corrupt range(s), "
                     f"{sum(e - s for _, s, e, _ in self.skipped):,} bytes")
        return text


@dataclass
class _Task:
    """What a task needs besides its split (pickled with the function)."""
    filesystem: object              # a kcodec.spark.storage Store
    out: str
    job: str
    options: object
    compression: str
    before_commit: object = None    # a test's fault injection: f(split, attempt, stage)

    def _path(self, *parts):
        return "/".join((self.out.rstrip("/"),) + parts)

    def __call__(self, split):
        from pyspark import TaskContext
        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        name = part_name(split, self.job, self.compression)
        scratch = self._path(TEMPORARY, self.job, f"{split.id}-{attempt}")
        committed = self._path(TEMPORARY, self.job, "committed")
        store = self.filesystem
        with store.errors(scratch, "writing"):
            return self._convert(split, attempt, name, scratch, committed, store.fs)

    def _convert(self, split, attempt, name, scratch, committed, fs):
        fs.create_dir(scratch)
        target = arrow_schema(kafka_schema(self.options.include_headers))
        report = SplitReport(split.name)
        writer = stream = None
        try:
            for table in read_split(split, self.options, report):
                if not table.num_rows:
                    continue
                if writer is None:
                    stream = fs.open_output_stream(f"{scratch}/{name}")
                    writer = pq.ParquetWriter(
                        stream, target, compression=self.compression,
                        use_dictionary=DICTIONARY_COLUMNS, write_statistics=STATISTICS_COLUMNS)
                writer.write_table(to_spark_arrow(table, target))
        finally:
            if writer is not None:
                writer.close()
            if stream is not None:
                # An object store's file exists once its stream is closed
                # (the writer leaves a stream it was given open).
                stream.close()
        size = 0
        if writer is not None:
            size = fs.get_file_info(f"{scratch}/{name}").size
            self._hook(split, attempt, "written")
            fs.create_dir(committed)
            fs.move(f"{scratch}/{name}", f"{committed}/{name}")
            self._hook(split, attempt, "committed")
        _remove(fs, scratch)     # object stores may have dropped an empty "directory"
        return dict(split=split.id, topic=split.topic, partition=split.partition,
                    file=name if writer is not None else None, rows=report.rows,
                    log_bytes=report.log_bytes, parquet_bytes=size, skipped=report.skipped)

    def _hook(self, split, attempt, stage):
        if self.before_commit is not None:
            self.before_commit(split, attempt, stage)


def part_name(split, job, compression):
    return f"part-{split.id:05d}-{job}.{compression}.parquet"


def _commit_job(fs, out, job, results):
    """Move the committed files into place; False when there were none."""
    committed = f"{out}/{TEMPORARY}/{job}/committed"
    for result in results:
        if result["file"] is None:
            continue
        final_dir = f"{out}/topic={result['topic']}/partition={result['partition']}"
        fs.create_dir(final_dir)
        fs.move(f"{committed}/{result['file']}", f"{final_dir}/{result['file']}")
    return any(r["file"] for r in results)


def _prepare(fs, out, mode):
    info = fs.get_file_info(out)
    if info.type == pafs.FileType.File:
        raise FileExistsError(f"{out} is a file")
    if info.type == pafs.FileType.Directory:
        if fs.get_file_info(pafs.FileSelector(out)):
            if mode == "error":
                raise FileExistsError(f"{out} exists and is not empty "
                                      "(--mode overwrite replaces it)")
            fs.delete_dir_contents(out)
    fs.create_dir(out)


def convert(spark, paths, out, options, *, compression="snappy", mode="error",
            _before_commit=None):
    """Convert the partition directories `paths` (kafka-log's paths and
    ReadOptions) to Parquet under `out`; returns a ConvertResult."""
    started = time.perf_counter()
    store, out_path = filesystem_of(out, options.storage)
    store = store or Store(pafs.LocalFileSystem())
    splits, partitions = plan(paths, options)
    with store.errors(out_path, "preparing the output"):
        _prepare(store.fs, out_path, mode)
    job = uuid.uuid4().hex[:12]
    task = _Task(store, out_path, job, options, compression, _before_commit)
    results = []
    fs = store.fs
    failed = True
    try:
        if splits:
            # Largest first, so that the last tasks to start are short.
            ordered = sorted(splits, key=lambda s: -s.size)
            rdd = spark.sparkContext.parallelize(ordered, len(ordered))
            results = rdd.map(task).collect()
        with store.errors(out_path, "committing the output"):
            committed = _commit_job(fs, out_path, job, results)
        if not committed:
            # No rows: one empty file keeps the schema readable.
            target = arrow_schema(kafka_schema(options.include_headers))
            with fs.open_output_stream(f"{out_path}/part-empty-{job}.parquet") as stream:
                pq.write_table(target.empty_table(), stream)
        with fs.open_output_stream(f"{out_path}/{SUCCESS}"):
            pass
        failed = False
    finally:
        try:
            with store.errors(f"{out_path}/{TEMPORARY}", "removing"):
                _remove(fs, f"{out_path}/{TEMPORARY}")
        except OSError:
            if not failed:
                raise
            # The job's own error is the one to report, not the cleanup's.
            logging.getLogger("kcodec.spark").warning(
                "spark-convert: could not remove %s/%s after the job failed", out, TEMPORARY,
                exc_info=True)
    return ConvertResult(
        out=out, rows=sum(r["rows"] for r in results),
        log_bytes=sum(r["log_bytes"] for r in results),
        parquet_bytes=sum(r["parquet_bytes"] for r in results),
        files=sum(r["file"] is not None for r in results), tasks=len(splits), partitions=len(partitions),
        elapsed=time.perf_counter() - started,
        skipped=[s for r in results for s in r["skipped"]])


_WORKER_ERROR = re.compile(r"^kcodec\.errors\.(\w+): (.+)$", re.M)


def kcodec_error_in(exc):
    """"Type: message" of the kcodec error that failed a Spark job in a Python
    worker (the job's exception carries the worker's traceback as text), or
    None when a kcodec error did not fail it."""
    found = _WORKER_ERROR.findall(str(exc))
    return f"{found[-1][0]}: {found[-1][1]}" if found else None


def _remove(fs, directory):
    try:
        fs.delete_dir(directory)
    except FileNotFoundError:
        pass
