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

Incremental conversion (``checkpoint=DIR``): runs numbered 0, 1, ... add to
one output, each converting, as Spark's Trigger.AvailableNow does, what lay
between the last run's end offsets and the log end (the last stable offset
for read_committed) as of its planning. A write-ahead log, with no rename on
object stores:

1. DIR/offsets/<n>: the run's job id, start offsets and end offsets (Spark's
   Kafka-source JSON), written before any task starts; PATH/_SUCCESS is
   removed (a run is under way).
2. The tasks write their files as above (final names, job id in each).
3. PATH/_manifests/<n>.json, the run's manifest: the run's commit point.
4. PATH/_manifest.json (every committed run's files) and PATH/_SUCCESS are
   written anew, then DIR/commits/<n>.

A run finding offsets/<n> without commits/<n> finishes run n first: when
_manifests/<n>.json names its job, run n committed and step 4 is redone;
else the files of its job are removed (by name, listed in the directories
of its partitions) and run n is redone with the same job id and offsets.
Names alone cannot be trusted to be replaced: a split's number is its place
in a plan, and the same offsets plan differently once segments roll or index
entries are added. DIR/metadata ties the checkpoint to one output.
"""
import contextlib
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field, replace

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .files import filesystem_of
from .storage import Store
from .options import EARLIEST, LATEST, OffsetSpec, ReadOptions, offsets_json, parse_offsets
from .plan import DataLossError, plan
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
# The checkpoint (Spark's layout: metadata, offsets/<n>, commits/<n>).
CHECKPOINT_METADATA = "metadata"
OFFSETS_LOG = "offsets"
COMMITS_LOG = "commits"
LOG_FORMAT = "v1"
RUN_MANIFESTS = "_manifests"
MAX_RANGES_SHOWN = 8
JOB_ID_CHARS = 12
NO_RUN = -1


class CheckpointError(ValueError):
    """A checkpoint that belongs to another output (or the output lost its
    runs), or options a checkpointed conversion cannot run with."""


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
        runs (list | None): With a checkpoint, a :class:`RunReport` per run
            this conversion did or finished (empty: nothing was new); None
            without one.
        last_run (int | None): With a checkpoint, the number of its last
            committed run.
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
    runs: list = None
    last_run: int = None

    @property
    def rows_per_second(self):
        return self.rows / self.elapsed if self.elapsed > 0 else float("inf")

    def summary(self):
        """The job's report: one line, and a line for each thing to know
        (corrupt ranges skipped; with a checkpoint, what each run found new,
        a run finished after a crash, offsets lost to retention)."""
        if self.runs == []:
            return (f"nothing new since run {self.last_run}: {self.partitions} partition(s) "
                    f"up to date -> {self.out}")
        text = (f"{self.rows:,} rows from {self.partitions} partition(s) in {self.tasks} task(s), "
                f"{self.log_bytes:,} log bytes -> {self.files} Parquet file(s), "
                f"{self.parquet_bytes:,} bytes, {self.elapsed:.2f} s, "
                f"{self.rows_per_second:,.0f} rows/s -> {self.out}")
        if self.runs:
            numbers = [run.number for run in self.runs]
            label = (f"run {numbers[0]}" if len(numbers) == 1
                     else f"runs {numbers[0]}-{numbers[-1]}")
            text = f"{label}: {text}" + "".join(f"\n{line}" for run in self.runs
                                               for line in run.lines())
        if self.skipped:
            text += (f"\nskipped {len(self.skipped)} corrupt range(s), "
                     f"{sum(e - s for _, s, e, _ in self.skipped):,} bytes")
        return text


@dataclass
class RunReport:
    """One run of an incremental conversion.

    Attributes:
        number (int): The run's number in its checkpoint.
        job (str): Its job id (in its files' names).
        ranges (list): ``(topic, partition, start, end)`` of each partition
            with offsets new to the run, ``[start, end)``.
        new_partitions (list): ``(topic, partition)`` first seen in the run.
        data_loss (list): ``(topic, partition, first, resumed_at)``: offsets
            ``[first, resumed_at)`` were gone before they were converted
            (``failOnDataLoss=false``), or the log ends before ``first``
            when ``resumed_at < first``.
        recovered (str | None): ``"committed"``: an earlier invocation
            crashed after the run's commit point and this one finished it;
            ``"redone"``: it crashed before, and the run was done again.
        rows (int): Rows the run converted.
    """
    number: int
    job: str
    ranges: list = field(default_factory=list)
    new_partitions: list = field(default_factory=list)
    data_loss: list = field(default_factory=list)
    recovered: str = None
    rows: int = 0

    def lines(self):
        """What the summary says of the run."""
        out = []
        if self.recovered == "committed":
            out.append(f"run {self.number}: committed now (its files were written and its "
                       "manifest too before the previous invocation stopped)")
        elif self.recovered == "redone":
            out.append(f"run {self.number}: redone with the same offsets (the previous "
                       "invocation stopped before committing it)")
        new = set(self.new_partitions)
        shown = [f"{t}-{p} [{s}, {e})" + (" (new partition)" if (t, p) in new else "")
                 for t, p, s, e in self.ranges[:MAX_RANGES_SHOWN]]
        if len(self.ranges) > MAX_RANGES_SHOWN:
            shown.append(f"and {len(self.ranges) - MAX_RANGES_SHOWN} more")
        offsets = sum(e - s for _, _, s, e in self.ranges)
        out.append(f"run {self.number}: {self.rows:,} rows new, {offsets:,} offsets in "
                   f"{len(self.ranges)} partition(s)" + (": " + ", ".join(shown) if shown else ""))
        empty = sorted(new - {(t, p) for t, p, _, _ in self.ranges})
        if empty:
            out.append(f"run {self.number}: new empty partition(s): "
                       + ", ".join(f"{t}-{p}" for t, p in empty))
        for topic, partition, first, resumed in self.data_loss:
            if resumed > first:
                gone = f"offsets {first}..{resumed - 1} were deleted before they were converted"
            else:
                gone = f"the log ends at {resumed}, before the checkpoint's offset {first}"
            out.append(f"run {self.number}: data loss in {topic}-{partition}: {gone} "
                       "(skipped: failOnDataLoss=false)")
        return out


def new_job_id():
    """A job's id: in its files' names, unique to the job."""
    return uuid.uuid4().hex[:JOB_ID_CHARS]


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
            checkpoint=None, _before_commit=None, _driver_hook=None):
    """Convert Kafka partition directories to Parquet, one task per split.

    Args:
        spark: The SparkSession whose cluster runs the tasks.
        paths (list[str]): kafka-log's paths: partition directories, globs
            of them, log.dirs roots; local or ``s3://``.
        out (str): The output directory (path or URI).
        options (ReadOptions): kafka-log's options (parse_options).
        compression (str): The Parquet codec.
        mode (str): ``"error"`` when ``out`` is not empty, or
            ``"overwrite"`` to empty it first (with a checkpoint: at its
            first run only).
        checkpoint (str | None): A checkpoint directory (path or URI): convert
            only what is new since its last run, adding to ``out`` (see the
            module's description). Starting offsets apply to its first run.

    Returns:
        ConvertResult: What was converted.

    Raises:
        CheckpointError: When the checkpoint belongs to another output, or
            ending offsets are given with it.
        DataLossError: When offsets not yet converted are gone and
            ``failOnDataLoss`` is true.
        FileExistsError: When ``out`` is not empty and ``mode`` is
            ``"error"``.
        ValueError: For typed-value options (``valueFormat``...): the
            Parquet keeps keys and values as they are.
    """
    if options.typed:
        raise ValueError("spark-convert writes keys and values as they are (binary): decode "
                         "them when reading, with kafka-log's valueFormat option or "
                         "kcodec.spark.decode_values")
    if checkpoint is not None:
        return _Incremental(spark, paths, out, options, compression, checkpoint,
                            _before_commit, _driver_hook).run(mode)
    started = time.perf_counter()
    store, out_path = filesystem_of(out, options.storage)
    store = store or Store(pafs.LocalFileSystem())
    splits, partitions = plan(paths, options)
    with store.errors(out_path, "preparing the output"):
        _prepare(store.fs, out_path, mode)
    job = new_job_id()
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


# ------------------------------------------------------ incremental runs

def _store_of(uri, options):
    store, path = filesystem_of(uri, options.storage)
    return store or Store(pafs.LocalFileSystem()), path


def _read_bytes(fs, path):
    """A file's content, or None when there is none."""
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as stream:
        return stream.read()


def _read_json(fs, path):
    data = _read_bytes(fs, path)
    return None if data is None else json.loads(data)


def _write_whole(store, path, data):
    """Write a small file so that readers see it whole or not at all: on an
    object store by one upload, on a disk by a rename."""
    fs = store.fs
    if store.writes_appear_whole:
        with fs.open_output_stream(path) as stream:
            stream.write(data)
        return
    directory, name = path.rsplit("/", 1)
    fs.create_dir(directory)
    hidden = f"{directory}/.{name}{IN_PROGRESS}"
    with fs.open_output_stream(hidden) as stream:
        stream.write(data)
    fs.move(hidden, path)


def _numbers(fs, directory):
    """The numbered files of a checkpoint log, in order."""
    infos = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    names = (info.path.rsplit("/", 1)[-1] for info in infos if info.type == pafs.FileType.File)
    return sorted(int(name) for name in names if name.isdigit())


def _remove_job_files(store, out, job, partitions):
    """Remove what a job wrote (final and in-progress files alike, all named
    with its id) in the directories of its partitions."""
    fs, marker = store.fs, f"-{job}."
    for topic, partition in partitions:
        directory = f"{out}/topic={topic}/partition={partition}"
        for info in fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True)):
            if marker in info.path.rsplit("/", 1)[-1]:
                _remove_file(fs, info.path)
    _remove_file(fs, f"{out}/part-empty-{job}.parquet")


def _abort_run(store, out, job, partitions):
    """Remove a failed run's files; its own error is the one to report."""
    try:
        with store.errors(out, "removing the failed run's files"):
            _remove_job_files(store, out, job, partitions)
    except OSError:
        logging.getLogger("kcodec.spark").warning(
            "spark-convert: could not remove the files of failed job %s under %s (the next "
            "run removes them)", job, out, exc_info=True)


class _Incremental:
    """One invocation of a checkpointed conversion: finish the last run if
    it did not commit, then convert what is new (see the module's
    description)."""

    def __init__(self, spark, paths, out, options, compression, checkpoint, task_hook,
                 driver_hook):
        if options.ending != ReadOptions().ending:
            raise CheckpointError("with a checkpoint each run reads up to the log end: "
                                  "endingOffsets and endingTimestamp do not apply")
        self.spark, self.paths, self.out, self.options = spark, paths, out, options
        self.compression, self.checkpoint = compression, checkpoint
        self.task_hook, self.driver_hook = task_hook, driver_hook
        self.store, self.out_path = _store_of(out, options)
        self.cp_store, self.cp_path = _store_of(checkpoint, options)
        self.metadata = None
        self.results, self.partitions = [], 0

    # ------------------------------------------------------------- paths
    def _log(self, name, number):
        return f"{self.cp_path}/{name}/{number}"

    def _run_manifest(self, number):
        return f"{self.out_path}/{RUN_MANIFESTS}/{number}.json"

    def _hook(self, stage, number):
        if self.driver_hook is not None:
            self.driver_hook(stage, number)

    # -------------------------------------------------------- the driver
    def run(self, mode):
        started = time.perf_counter()
        cp_fs = self.cp_store.fs
        with self.cp_store.errors(self.cp_path, "reading the checkpoint"):
            self.metadata = _read_json(cp_fs, f"{self.cp_path}/{CHECKPOINT_METADATA}")
            planned = _numbers(cp_fs, f"{self.cp_path}/{OFFSETS_LOG}")
            committed = _numbers(cp_fs, f"{self.cp_path}/{COMMITS_LOG}")
        last_planned = planned[-1] if planned else NO_RUN
        last_committed = committed[-1] if committed else NO_RUN
        if last_planned == NO_RUN:
            self._start(mode)
        else:
            self._check(last_committed)
        reports = []
        if last_planned > last_committed:
            reports.append(self._recover(last_planned))
            last_committed = last_planned
        previous = None
        if last_committed != NO_RUN:
            previous = self._read_offsets(last_committed)[2]
        report = self._next(last_committed + 1, previous)
        if report is not None:
            reports.append(report)
        results = self.results
        peaks = [r["peak_memory"] for r in results if r["peak_memory"] is not None]
        return ConvertResult(
            out=self.out, rows=sum(r["rows"] for r in results),
            log_bytes=sum(r["log_bytes"] for r in results),
            parquet_bytes=sum(r["parquet_bytes"] for r in results),
            files=sum(r["path"] is not None for r in results), tasks=len(results),
            partitions=self.partitions, elapsed=time.perf_counter() - started,
            skipped=[s for r in results for s in r["skipped"]],
            task_peak_memory=max(peaks) if peaks else None, runs=reports,
            last_run=reports[-1].number if reports else last_committed)

    def _start(self, mode):
        """Before a checkpoint's first run: an output to start (empty, or
        emptied with mode overwrite), and the checkpoint's metadata."""
        fs, out = self.store.fs, self.out_path
        if self.metadata is not None:
            self._check(NO_RUN)
        with self.store.errors(out, "preparing the output"):
            earlier = _read_json(fs, f"{out}/{MANIFEST}")
            if mode == "error" and earlier is not None and "checkpoint" in earlier:
                raise CheckpointError(
                    f"{self.out} holds the runs of another checkpoint (id "
                    f"{earlier['checkpoint']}): give that checkpoint, or --mode overwrite to "
                    "start this one afresh")
            _prepare(fs, out, mode)
        if self.metadata is None:
            self.metadata = dict(id=uuid.uuid4().hex, out=self.store.uri(out),
                                 include_headers=self.options.include_headers)
            with self.cp_store.errors(self.cp_path, "writing the checkpoint"):
                _write_whole(self.cp_store, f"{self.cp_path}/{CHECKPOINT_METADATA}",
                             json.dumps(self.metadata).encode())

    def _check(self, last_committed):
        """The checkpoint must be this output's, with its schema, and the
        output must still hold the checkpoint's last committed run."""
        metadata, uri = self.metadata, self.store.uri(self.out_path)
        if metadata is None:
            raise CheckpointError(f"{self.checkpoint}: offsets but no {CHECKPOINT_METADATA} "
                                  "file: not a spark-convert checkpoint")
        if metadata["out"] != uri:
            raise CheckpointError(
                f"checkpoint {self.checkpoint} belongs to the output {metadata['out']}, not "
                f"{uri}: give that output, or a new checkpoint for this one")
        if metadata["include_headers"] != self.options.include_headers:
            raise CheckpointError(
                f"checkpoint {self.checkpoint} was started with includeHeaders="
                f"{str(metadata['include_headers']).lower()}: its runs keep the schema")
        if last_committed == NO_RUN:
            return
        with self.store.errors(self.out_path, "reading the output's manifests"):
            done = _read_json(self.store.fs, self._run_manifest(last_committed))
        if done is None or done.get("checkpoint") != metadata["id"]:
            raise CheckpointError(
                f"{self.out} does not hold run {last_committed} of checkpoint "
                f"{self.checkpoint}: the output was removed or replaced; start afresh with a "
                "new checkpoint")

    # -------------------------------------------------------------- runs
    def _read_offsets(self, number):
        """(job, start offsets, end offsets) of a planned run."""
        path = self._log(OFFSETS_LOG, number)
        with self.cp_store.errors(path, "reading the checkpoint"):
            data = _read_bytes(self.cp_store.fs, path)
        try:
            version, about, ends = (data or b"").decode().splitlines()
        except ValueError:
            version = None
        if version != LOG_FORMAT:
            raise CheckpointError(f"{self.cp_store.uri(path)}: not an offsets file of "
                                  f"spark-convert ({LOG_FORMAT})")
        about = json.loads(about)
        return (about["job"], parse_offsets(about["start"]),
                parse_offsets(json.loads(ends)))

    def _plan(self, options, requested):
        """Plan a run; (splits, start and end offsets per partition, data
        loss) where `requested` gives where each partition should start."""
        splits, partitions = plan(self.paths, options)
        self.partitions = len(partitions)
        start = {(p.topic, p.partition): p.start_offset for p in partitions}
        end = {(p.topic, p.partition): p.end_offset for p in partitions}
        loss = [(*key, requested[key], start[key]) for key in sorted(start)
                if key in requested and requested[key] != start[key]]
        return splits, start, end, loss

    def _next(self, number, previous):
        """Plan run `number` from the end offsets of the one before (None:
        the first run, from the options' starting offsets) and run it; None
        when nothing is new."""
        options, requested = self.options, dict(previous or {})
        if previous is None:
            spec = options.starting
            if not spec.timestamps:
                requested = {key: value for key, value in spec.per_partition.items()
                             if value not in (EARLIEST, LATEST, None)}
        else:
            options = replace(options, starting=OffsetSpec(EARLIEST, dict(previous)))
        splits, start, end, loss = self._plan(options, requested)
        new = [] if previous is None else sorted(key for key in start if key not in previous)
        ranges = [(*key, start[key], end[key]) for key in sorted(start) if end[key] > start[key]]
        if previous is not None and not (ranges or new or loss):
            return None
        job = new_job_id()
        ends = {**(previous or {}), **end}
        about = dict(run=number, job=job, start=offsets_json(start))
        path = self._log(OFFSETS_LOG, number)
        with self.cp_store.errors(path, "writing the checkpoint"):
            _write_whole(self.cp_store, path, "\n".join(
                [LOG_FORMAT, json.dumps(about), json.dumps(offsets_json(ends))]).encode())
        report = RunReport(number, job, ranges, new, loss)
        self._execute(report, splits, start, end)
        return report

    def _recover(self, number):
        """Finish run `number`, planned but not committed: commit it when its
        manifest was written, else remove its job's files and redo it with
        the offsets it planned."""
        job, start, ends = self._read_offsets(number)
        end = {key: ends[key] for key in start}
        ranges = [(*key, start[key], end[key]) for key in sorted(start) if end[key] > start[key]]
        with self.store.errors(self.out_path, "reading the output's manifests"):
            done = _read_json(self.store.fs, self._run_manifest(number))
        if done is not None and done["job"] == job:
            self._finish(number, job)
            return RunReport(number, job, ranges, recovered="committed", rows=done["rows"])
        with self.store.errors(self.out_path, "removing the files of an unfinished run"):
            _remove_job_files(self.store, self.out_path, job, start)
        options = replace(self.options, starting=OffsetSpec(EARLIEST, start),
                          ending=OffsetSpec(LATEST, end), topics=None, topic_pattern=None,
                          assign=frozenset(start))
        splits, now, _, loss = self._plan(options, start)
        gone = sorted(key for key in start if key not in now and end[key] > start[key])
        if gone and self.options.fail_on_data_loss:
            raise DataLossError(
                "; ".join(f"{t}-{p}: the partition is gone, offsets {start[(t, p)]}.."
                          f"{end[(t, p)] - 1} of run {number} were not converted"
                          for t, p in gone) + " (set failOnDataLoss=false to skip them)")
        loss += [(t, p, start[(t, p)], end[(t, p)]) for t, p in gone]
        report = RunReport(number, job, ranges, data_loss=loss, recovered="redone")
        self._execute(report, splits, start, end)
        return report

    def _execute(self, report, splits, start, end):
        """Run the tasks of a run, then commit it (its manifest: the commit
        point); a run that fails before that leaves none of its files."""
        number, job = report.number, report.job
        store, out = self.store, self.out_path
        with store.errors(out, "starting a run"):
            _remove_file(store.fs, f"{out}/{SUCCESS}")
        task = _Task(store, out, job, self.options, self.compression, self.task_hook)
        committed = False
        try:
            results = []
            if splits:
                results = _run(self.spark, job, sorted(splits, key=lambda s: -s.size), task)
            self._hook("written", number)
            with store.errors(out, "committing the run"):
                self._commit(number, job, results, start, end)
            committed = True
            self._hook("manifest", number)
            self._finish(number, job)
        except BaseException:
            if not committed:
                _abort_run(store, out, job, start)
            raise
        report.rows = sum(r["rows"] for r in results)
        self.results += results

    def _commit(self, number, job, results, start, end):
        """Write the run's manifest; an output with no rows yet gets an empty
        file too, so that its schema reads."""
        fs, out = self.store.fs, self.out_path
        done = manifest(job, out, self.compression, results, self.options)
        done.update(run=number, checkpoint=self.metadata["id"], start=offsets_json(start),
                    end=offsets_json(end), empty=None)
        so_far = _read_json(fs, f"{out}/{MANIFEST}")
        if not done["files"] and not (so_far and so_far["files"]):
            done["empty"] = f"part-empty-{job}.parquet"
            target = arrow_schema(kafka_schema(self.options.include_headers))
            with fs.open_output_stream(f"{out}/{done['empty']}") as stream:
                pq.write_table(target.empty_table(), stream)
        _write_whole(self.store, self._run_manifest(number), json.dumps(done, indent=1).encode())

    def _finish(self, number, job):
        """After the commit point: PATH/_manifest.json with every committed
        run, PATH/_SUCCESS, then commits/<number>."""
        fs, out = self.store.fs, self.out_path
        with self.store.errors(out, "writing the output's manifest"):
            so_far = _read_json(fs, f"{out}/{MANIFEST}")
            runs = [r["run"] for r in so_far.get("runs", ())] if so_far else []
            if runs != list(range(len(runs))) or len(runs) > number + 1:
                so_far, runs = None, []
            cumulative = so_far or dict(version=MANIFEST_VERSION, rows=0, files=[], empty=[],
                                        runs=[])
            for earlier in range(len(runs), number + 1):
                done = _read_json(fs, self._run_manifest(earlier))
                cumulative.update(job=done["job"], compression=done["compression"],
                                  include_headers=done["include_headers"],
                                  checkpoint=done["checkpoint"])
                cumulative["rows"] += done["rows"]
                cumulative["files"] += [dict(f, run=earlier) for f in done["files"]]
                cumulative["empty"] += [done["empty"]] if done["empty"] else []
                cumulative["runs"].append(dict(run=earlier, job=done["job"], rows=done["rows"],
                                               files=len(done["files"])))
            _write_whole(self.store, f"{out}/{MANIFEST}",
                         json.dumps(cumulative, indent=1).encode())
            with fs.open_output_stream(f"{out}/{SUCCESS}"):
                pass
        self._hook("success", number)
        path = self._log(COMMITS_LOG, number)
        with self.cp_store.errors(path, "writing the checkpoint"):
            _write_whole(self.cp_store, path, "\n".join(
                [LOG_FORMAT, json.dumps(dict(run=number, job=job))]).encode())
