"""spark.readStream.format("kafka-log"): Kafka partition directories read
as a stream, with the offsets, starting points, admission control and data
loss rules of Spark's Kafka source.

An offset is that source's JSON, {"topic": {"partition": next offset}}.
Each trigger lists the paths again (new partition directories and topics
are read from their earliest offset), opens each log at its tail (the last
.index entry of the active segment) and offers what is complete there: up
to the end of the last whole batch, or the last stable offset with
read_committed. A micro-batch is planned by kcodec.spark.plan from the
offsets the previous one ended at, so it seeks through .index and reads no
older segment; the same offsets plan the same splits when Spark replays a
batch after a restart.
"""
import logging
import math
import re
import time
from dataclasses import replace

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from ..log.partition import parse_partition_dir
from .files import open_partition, partition_dirs
from .options import (EARLIEST, LATEST, OffsetSpec, offsets_json, parse_offset_spec,
                      parse_offsets, parse_options, parse_positive_int)
from .plan import DataLossError, plan, resolve_bounds
from .read import spark_batches

log = logging.getLogger("kcodec.spark")

STREAM_ONLY = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")
BATCH_ONLY = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
# Spark's Kafka source waits at most this long for minOffsetsPerTrigger.
DEFAULT_MAX_TRIGGER_DELAY = "15m"
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                "d": 86_400_000}


def duration_seconds(name, text):
    """Seconds of a duration option (``"15m"``, ``"30s"``, ``"500ms"``; a
    bare number is milliseconds, as Spark reads one)."""
    match = _DURATION.match(str(text))
    if match is None:
        raise ValueError(f"option {name} must be a duration like 15m, 30s or 500ms, "
                         f"not {text!r}")
    return int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()] / 1000


class StreamOptions:
    """The options of a ``kafka-log`` stream: a batch read's
    (:func:`parse_options`) plus Spark's Kafka-source stream options.

    Attributes:
        read (ReadOptions): The read options (``startingOffsets`` may say
            ``latest``, the default for a stream; no ``ending*`` option).
        max_offsets (int | None): ``maxOffsetsPerTrigger``.
        min_offsets (int | None): ``minOffsetsPerTrigger``.
        max_trigger_delay (float): ``maxTriggerDelay``, in seconds.
    """

    def __init__(self, options):
        opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
        given = sorted(k for k in BATCH_ONLY if k in opts)
        if given:
            raise ValueError(f"option(s) {', '.join(given)} are for batch reads: a stream has "
                             "no end (Trigger.AvailableNow reads to the end there is now)")
        stream = {k: opts.pop(k) for k in STREAM_ONLY if k in opts}
        # Spark's Kafka source starts a stream at the latest offsets unless told
        # otherwise, and lets startingOffsets say latest (-1) for a stream only.
        starting = opts.pop("startingoffsets", "latest")
        self.read = parse_options(opts)
        if not self.read.starting.timestamps and not any(
                k in opts for k in ("startingtimestamp", "startingoffsetsbytimestamp")):
            self.read = replace(self.read,
                                starting=parse_offset_spec("startingOffsets", starting, LATEST))
        self.max_offsets = self.min_offsets = None
        for name, attribute in (("maxOffsetsPerTrigger", "max_offsets"),
                                ("minOffsetsPerTrigger", "min_offsets")):
            if name.lower() in stream:
                setattr(self, attribute, parse_positive_int(name, stream[name.lower()]))
        self.max_trigger_delay = duration_seconds(
            "maxTriggerDelay", stream.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY))


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The reader of ``spark.readStream.format("kafka-log")``.

    Options are those of :func:`~kcodec.spark.parse_options` without
    ``ending*``, plus ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and
    ``maxTriggerDelay`` (default ``15m``). ``startingOffsets`` defaults to
    ``latest``. Triggers: processing time, ``once`` and ``availableNow``.
    """

    def __init__(self, paths, options, schema):
        self.paths, self.schema = paths, schema
        self.stream = StreamOptions(options)
        self.options = self.stream.read
        self._target = None             # Trigger.AvailableNow: the offsets to stop at
        self._waiting_since = None      # minOffsetsPerTrigger: when the wait began
        self._available = None          # what the last trigger found, for the progress report
        self._scans = {}                # (topic, partition) -> PartitionLog.transaction_scan
        self._readers = None            # valueFormat / keyFormat: the reader schemas' text
        if self.options.typed:
            from .values import schema_readers
            self._readers = schema_readers(self.options, schema, paths)

    # ------------------------------------------------------------ the driver
    def _logs(self):
        """{(topic, partition): PartitionLog} of every partition the paths
        and topic options take, now."""
        logs = {}
        for fs, directory in partition_dirs(self.paths, self.options.storage):
            key = parse_partition_dir(directory)
            if self.options.wants(*key):
                logs[key] = open_partition(fs, directory, verify_crc=self.options.verify_crc)
        return logs

    def _available_end(self, log_):
        """The offset a consumer could read up to now: the end of the last
        whole batch, or the last stable offset with read_committed."""
        if self.options.isolation == "read_committed":
            key = (log_.topic, log_.partition)
            # Each trigger scans for transaction markers only what was
            # appended since the last one.
            stable = log_.last_stable_offset(self._scans.get(key))
            self._scans[key] = log_.transaction_scan
            return stable
        return log_.end_offset

    def initialOffset(self):
        """Where a new query starts: ``startingOffsets`` (default latest),
        ``startingTimestamp`` or ``startingOffsetsByTimestamp``, per
        partition."""
        offsets = {}
        for key, log_ in self._logs().items():
            value, is_timestamp = self.options.starting.for_partition(*key, LATEST)
            if not is_timestamp and value == LATEST:
                offsets[key] = self._available_end(log_)
            else:
                offsets[key], _ = resolve_bounds(log_, replace(self.options,
                                                               ending=OffsetSpec(LATEST)))
        return offsets_json(offsets)

    def _from(self, key, start, log_):
        """The offset a partition's next batch starts at, after checking that
        retention left it in the log."""
        topic, partition = key
        if start is None:           # a partition (or topic) new since the last trigger
            return log_.start_offset
        if start < log_.start_offset:
            gap = f"offsets {start}..{log_.start_offset - 1}"
            if self.options.fail_on_data_loss:
                raise DataLossError(
                    f"{log_.directory}: {topic}-{partition}: {gap} were deleted (retention) "
                    "before the stream read them (set failOnDataLoss=false to skip them)")
            log.warning("kafka-log: %s-%d: %s were deleted before the stream read them; "
                        "skipped", topic, partition, gap)
            return log_.start_offset
        return start

    def latestOffset(self, start, limit):
        """The offsets the next micro-batch ends at, within ``limit`` (and
        ``minOffsetsPerTrigger`` / ``maxTriggerDelay``), never past what
        :meth:`prepareForTriggerAvailableNow` saw."""
        current = parse_offsets(start)
        ranges, self._available = {}, {}
        for key, log_ in self._logs().items():
            available = self._available[key] = self._available_end(log_)
            if self._target is not None and key not in self._target and key not in current:
                continue            # new since Trigger.AvailableNow fixed what it reads
            begin = self._from(key, current.get(key), log_)
            end = max(begin, available)
            if self._target is not None:
                end = max(begin, min(end, self._target.get(key, begin)))
            ranges[key] = (begin, end)
        ends = {key: end for key, (_, end) in ranges.items()}
        if not isinstance(limit, ReadAllAvailable):
            ends = self._admit(ranges)
            if ends is None:
                return start
        return offsets_json({**current, **ends})

    def _admit(self, ranges):
        """Ends within maxOffsetsPerTrigger (each partition its share of the
        limit by its backlog, as Spark's Kafka source shares it), or None to
        wait for minOffsetsPerTrigger."""
        backlog = sum(end - begin for begin, end in ranges.values())
        minimum = self.stream.min_offsets
        if minimum is not None and self._target is None and backlog < minimum:
            now = time.monotonic()
            self._waiting_since = self._waiting_since or now
            if now - self._waiting_since < self.stream.max_trigger_delay:
                return None
        self._waiting_since = None
        maximum = self.stream.max_offsets
        if maximum is None or backlog <= maximum:
            return {key: end for key, (_, end) in ranges.items()}
        ends = {}
        for key, (begin, end) in ranges.items():
            share = maximum * (end - begin) / backlog
            ends[key] = min(end, begin + (math.ceil(share) if share < 1 else math.floor(share)))
        return ends

    def getDefaultReadLimit(self):
        """``maxOffsetsPerTrigger`` as a row limit, else
        ``minOffsetsPerTrigger``, else everything available."""
        if self.stream.max_offsets is not None:
            return ReadMaxRows(self.stream.max_offsets)
        if self.stream.min_offsets is not None:
            return ReadMinRows(self.stream.min_offsets)
        return ReadAllAvailable()

    def reportLatestOffset(self):
        """What the partitions held at the last trigger, for the query's
        progress report (None before the first)."""
        return None if self._available is None else offsets_json(self._available)

    def prepareForTriggerAvailableNow(self):
        """Fix what Trigger.AvailableNow reads: what each partition holds now."""
        self._target = {key: self._available_end(log_) for key, log_ in self._logs().items()}

    def partitions(self, start, end):
        """The splits of the offsets between ``start`` and ``end``: those of
        :func:`kcodec.spark.plan` (partitions new in ``end`` read from
        their earliest offset)."""
        begin, finish = parse_offsets(start), parse_offsets(end)
        wanted = {key for key, offset in finish.items() if offset > begin.get(key, -1)}
        if not wanted:
            return []
        options = replace(
            self.options,
            starting=OffsetSpec(EARLIEST, {k: v for k, v in begin.items() if k in wanted}),
            ending=OffsetSpec(LATEST, {k: finish[k] for k in wanted}),
            assign=frozenset(wanted))
        splits, _ = plan(self.paths, options)
        return splits

    def commit(self, end):
        """Nothing to release: each trigger reopens the logs."""

    # ----------------------------------------------------------- the executors
    def read(self, split):
        """Decode one split (:func:`kcodec.spark.read.spark_batches`).

        Args:
            split: A split of :meth:`partitions`.
        """
        return spark_batches(split, self.options, self.schema, self._readers)
