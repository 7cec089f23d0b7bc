"""spark-convert: Kafka logs to Parquet at the speed of the codec.

Spark only schedules: one task per split (a segment, or a piece of a large
one). Each task decodes its split with the compiled core and writes Parquet
with pyarrow straight into PATH/topic=T/partition=P/, so no row crosses
Spark's Python-to-JVM transport.

Commit protocol, with no rename on object stores (which have none) and
nothing listed or read back:

- A split's file has a final name fixed by the job and the split,
  PATH/topic=T/partition=P/part-<split>-<job>.<codec>.parquet, so a retried
  or speculative attempt writes the same name and replaces the file whole.
- On an object store a task uploads to that key: the object appears when
  its upload completes, whole (a killed task's upload never completes). On
  a disk, where a file is seen while it grows, the attempt writes a hidden
  ``.<name>.<attempt>.inprogress`` beside it and renames it into place
  (atomic); the attempt that succeeds removes what earlier attempts of its
  split left. A task that fails removes what it wrote.
- Once every task has returned, the driver writes PATH/_manifest.json (the
  job, and each file with its split, rows and bytes) and then PATH/_SUCCESS.
  Readers that see _SUCCESS see every file the manifest names.
- A job that fails is cancelled, its tasks are waited for, and the file
  names of all its splits are removed: nothing of it stays, and no
  _SUCCESS. The output directory was empty when the job began (or
  --mode overwrite emptied it), so no earlier run's file survives either.

With spark.speculation on and an object store, a duplicate attempt that
fails after the other succeeded would remove the file: leave it off (Spark's
default) for spark-convert to object stores.
"""
import contextlib
import json
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
MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1
IN_PROGRESS = ".inprogress"
# Keys, values and offsets rarely repeat: dictionary pages and min/max
# statistics for them cost a third of the write time and buy nothing, so
# those go to the columns that repeat or that readers prune on.
DICTIONARY_COLUMNS = ["topic", "partition", "timestampType", "headers"]
STATISTICS_COLUMNS = ["topic", "partition", "offset", "timestamp", "timestampType"]
# How long a failed job's cancelled tasks are waited for before its files
# are removed.
CANCEL_WAIT_SECONDS = 30.0
_POLL_SECONDS = 0.1


@dataclass
class ConvertResult:
    """What a conversion did.

    Attributes:
        out (str): The output, as given.
        rows, log_bytes, parquet_bytes (int): Rows converted, log bytes
            read, Parquet bytes written.
        files, tasks, partitions (int): Parquet files written (a split
            with no rows writes none), Spark tasks, Kafka partitions.
        elapsed (float): Seconds, planning to ``_SUCCESS``.
        skipped (list): ``(file, start, end, message)`` of each corrupt
            range skipped (``onCorruptData=skip``).
        task_peak_memory (int | None): Bytes: the largest peak RSS of a
            Python worker over one task; None where ``/proc`` does not
            tell.
    """
    out: str
    rows: int
    log_bytes: int
    parquet_bytes: int
    files: int
    tasks: int
    partitions: int
    elapsed: float
    skipped: list = field(default_factory=list)
    task_peak_memory: int = None

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


def part_name(split, job, compression):
    return f"part-{split.id:05d}-{job}.{compression}.parquet"


def part_path(out, split, job, compression):
    """Where a split's file goes: its final name, whichever attempt writes it."""
    return (f"{out.rstrip('/')}/topic={split.topic}/partition={split.partition}/"
            f"{part_name(split, job, compression)}")


def in_progress_path(path, attempt):
    """The hidden name an attempt writes on a disk before renaming it to `path`."""
    directory, name = path.rsplit("/", 1)
    return f"{directory}/.{name}.{attempt}{IN_PROGRESS}"


@dataclass
class _Task:
    """What a task needs besides its split (pickled with the function)."""
    store: object                   # a kcodec.spark.storage Store
    out: str
    job: str
    options: object
    compression: str
    before_commit: object = None    # a test's fault injection: f(split, attempt, stage)

    def __call__(self, split):
        from pyspark import TaskContext
        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        reset_peak_memory()
        path = part_path(self.out, split, self.job, self.compression)
        report = SplitReport(split.name)
        with self.store.errors(path, "writing"):
            size = self._write(split, attempt, path, report)
        return dict(split=split.id, topic=split.topic, partition=split.partition,
                    path=path if size is not None else None, rows=report.rows,
                    log_bytes=report.log_bytes, parquet_bytes=size or 0,
                    skipped=report.skipped, peak_memory=peak_memory())

    def _write(self, split, attempt, path, report):
        """Convert the split to the file at `path`; its size, or None when the
        split holds no rows (and no file is written)."""
        fs = self.store.fs
        whole = self.store.writes_appear_whole
        written = path if whole else in_progress_path(path, attempt)
        target = arrow_schema(kafka_schema(self.options.include_headers))
        writer = stream = None
        try:
            for table in read_split(split, self.options, report):
                if not table.num_rows:
                    continue
                if writer is None:
                    if not whole:
                        fs.create_dir(path.rsplit("/", 1)[0])
                    stream = fs.open_output_stream(written)
                    writer = pq.ParquetWriter(
                        stream, target, compression=self.compression,
                        use_dictionary=DICTIONARY_COLUMNS, write_statistics=STATISTICS_COLUMNS)
                writer.write_table(to_spark_arrow(table, target))
            if writer is None:
                return None
            writer.close()
            size = stream.tell()
            self._hook(split, attempt, "written")
            # The writer leaves open a stream it was given; an object
            # appears once it is closed.
            stream.close()
        except BaseException:
            if stream is not None:
                # pyarrow cannot abort an upload: closing completes it, so
                # what it made visible is removed. The task's own error is
                # the one to report.
                with contextlib.suppress(Exception):
                    stream.close()
                    _remove_file(fs, written)
            raise
        if not whole:
            fs.move(written, path)
            for earlier in range(attempt):
                _remove_file(fs, in_progress_path(path, earlier))
        self._hook(split, attempt, "committed")
        return size

    def _hook(self, split, attempt, stage):
        if self.before_commit is not None:
            self.before_commit(split, attempt, stage)


def reset_peak_memory():
    """Start this process's peak RSS afresh (Linux), so that a Python worker
    Spark reuses reports each task's own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def peak_memory(pid="self"):
    """A process's peak RSS in bytes (this one's since reset_peak_memory()),
    or None where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def manifest(job, out, compression, results, options):
    """The manifest's content: the job and each file it wrote, by path
    relative to `out`."""
    prefix = out.rstrip("/") + "/"
    files = [dict(path=r["path"][len(prefix):], topic=r["topic"], partition=r["partition"],
                  split=r["split"], rows=r["rows"], bytes=r["parquet_bytes"],
                  log_bytes=r["log_bytes"])
             for r in sorted(results, key=lambda r: r["split"]) if r["path"] is not None]
    return dict(version=MANIFEST_VERSION, job=job, compression=compression,
                include_headers=options.include_headers,
                rows=sum(f["rows"] for f in files), files=files)


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
    """Convert Kafka partition directories to Parquet, one task per split.

    Args:
        spark: The SparkSession whose cluster runs the tasks.
        paths (list[str]): kafka-log's paths: partition directories, globs
            of them, log.dirs roots; local or ``s3://``.
        out (str): The output directory (path or URI).
        options (ReadOptions): kafka-log's options (parse_options).
        compression (str): The Parquet codec.
        mode (str): ``"error"`` when ``out`` is not empty, or
            ``"overwrite"`` to empty it first.

    Returns:
        ConvertResult: What was converted.
    """
    started = time.perf_counter()
    store, out_path = filesystem_of(out, options.storage)
    store = store or Store(pafs.LocalFileSystem())
    splits, partitions = plan(paths, options)
    with store.errors(out_path, "preparing the output"):
        _prepare(store.fs, out_path, mode)
    job = uuid.uuid4().hex[:12]
    task = _Task(store, out_path, job, options, compression, _before_commit)
    results = []
    try:
        if splits:
            # Largest first, so that the last tasks to start are short.
            ordered = sorted(splits, key=lambda s: -s.size)
            results = _run(spark, job, ordered, task)
        with store.errors(out_path, "committing the output"):
            _commit_job(store.fs, out_path, job, compression, results, options)
    except BaseException:
        _abort_job(store, out_path, job, compression, splits, mode)
        raise
    peaks = [r["peak_memory"] for r in results if r["peak_memory"] is not None]
    return ConvertResult(
        out=out, rows=sum(r["rows"] for r in results),
        log_bytes=sum(r["log_bytes"] for r in results),
        parquet_bytes=sum(r["parquet_bytes"] for r in results),
        files=sum(r["path"] is not None for r in results), tasks=len(splits),
        partitions=len(partitions), elapsed=time.perf_counter() - started,
        skipped=[s for r in results for s in r["skipped"]],
        task_peak_memory=max(peaks) if peaks else None)


def _run(spark, job, splits, task):
    """Run the tasks as one Spark job in a job group of its own; when it
    fails, cancel it and wait (CANCEL_WAIT_SECONDS at most) until none of
    its tasks runs, so that none writes after the job's files are removed."""
    context = spark.sparkContext
    context.setJobGroup(job, "kcodec spark-convert", interruptOnCancel=True)
    try:
        return context.parallelize(splits, len(splits)).map(task).collect()
    except BaseException:
        context.cancelJobGroup(job)
        _wait_for_tasks(context, job)
        raise
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def _wait_for_tasks(context, job):
    tracker = context.statusTracker()
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    while time.monotonic() < deadline:
        stages = [tracker.getStageInfo(stage) for job_id in tracker.getJobIdsForGroup(job)
                  for stage in (getattr(tracker.getJobInfo(job_id), "stageIds", None) or ())]
        if not any(info is not None and info.numActiveTasks > 0 for info in stages):
            return
        time.sleep(_POLL_SECONDS)


def _commit_job(fs, out, job, compression, results, options):
    """The manifest, then _SUCCESS; an output with no rows gets one empty
    file, so that its schema reads."""
    done = manifest(job, out, compression, results, options)
    if not done["files"]:
        target = arrow_schema(kafka_schema(options.include_headers))
        with fs.open_output_stream(f"{out}/part-empty-{job}.parquet") as stream:
            pq.write_table(target.empty_table(), stream)
    with fs.open_output_stream(f"{out}/{MANIFEST}") as stream:
        stream.write(json.dumps(done, indent=1).encode())
    with fs.open_output_stream(f"{out}/{SUCCESS}"):
        pass


def _abort_job(store, out, job, compression, splits, mode):
    """Remove every file name the failed job could have written. Its own
    error is the one to report, not a failure to clean up."""
    fs = store.fs
    try:
        with store.errors(out, "removing the failed job's files"):
            for name in (SUCCESS, MANIFEST, f"part-empty-{job}.parquet"):
                _remove_file(fs, f"{out}/{name}")
            if store.writes_appear_whole:
                for split in splits:
                    _remove_file(fs, part_path(out, split, job, compression))
            else:
                # With the in-progress files of attempts cut short: the
                # output was empty when the job began, these are its own.
                for topic in {split.topic for split in splits}:
                    _remove_dir(fs, f"{out}/topic={topic}")
    except OSError:
        logging.getLogger("kcodec.spark").warning(
            "spark-convert: could not remove the files of failed job %s under %s", job, out,
            exc_info=True)


_WORKER_ERROR = re.compile(r"^kcodec\.errors\.(\w+): (.+)$", re.M)


def kcodec_error_in(exc):
    """"Type: message" of the kcodec error that failed a Spark job in a Python
    worker (the job's exception carries the worker's traceback as text), or
    None when a kcodec error did not fail it."""
    found = _WORKER_ERROR.findall(str(exc))
    return f"{found[-1][0]}: {found[-1][1]}" if found else None


def _remove_file(fs, path):
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def _remove_dir(fs, directory):
    try:
        fs.delete_dir(directory)
    except FileNotFoundError:
        pass
