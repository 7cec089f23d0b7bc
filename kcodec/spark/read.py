"""Decoding one split inside a Spark task: byte ranges of a segment handed
to the compiled core (kcodec.decode), one Arrow table per chunk."""
import json
import logging
import os
import struct
from dataclasses import dataclass, field

from ..arrow import decode
from ..errors import KafkaFormatError, ObjectStoreError, located
from ..log.segment import Segment, released
from ..log.transactions import fetch_aborted
from ..log.verify import scan
from ..records import read_batches
from .plan import DataLossError, Split
from .schema import arrow_schema, to_spark_arrow

MAGIC_V2 = 2        # record batches, whose header holds their max timestamp

# The name the broker gives a segment retention is about to remove.
DELETED_SUFFIX = ".deleted"

log = logging.getLogger("kcodec.spark")


@dataclass
class SplitReport:
    """What reading a split met.

    Attributes:
        split (str): The split's name.
        rows (int): Rows produced.
        log_bytes (int): Log bytes read.
        decoded_bytes (int): Log bytes handed to the decoder: ``log_bytes``
            less the batches a pushed-down timestamp filter skipped.
        skipped (list): ``(file, start, end, message)`` of each byte range
            skipped (``onCorruptData=skip``).
    """
    split: str
    rows: int = 0
    log_bytes: int = 0
    decoded_bytes: int = 0
    skipped: list = field(default_factory=list)     # (file, start, end, message)

    @property
    def skipped_bytes(self):
        """How many bytes were skipped in all."""
        return sum(end - start for _, start, end, _ in self.skipped)


class _Chunk:
    """A byte range of a segment as kcodec.log.verify.scan walks a segment."""

    def __init__(self, data, path):
        self.data, self.size, self.log_path = data, len(data), path

    def view(self, start, end):
        return memoryview(self.data)[start:end]


def _segment_file(path):
    """The segment file, or its ``.deleted`` name: retention renames a
    segment file.delete.delay.ms (a minute by default) before removing it,
    and a split planned before the rename still reads it there."""
    if os.path.exists(path) or not os.path.exists(path + DELETED_SUFFIX):
        return path
    return path + DELETED_SUFFIX


def _gone(split, options):
    """Whether a local split's segment was removed after the read was
    planned: a DataLossError unless failOnDataLoss is false (then the split
    reads nothing, and says so)."""
    if split.filesystem is not None or os.path.exists(_segment_file(split.path)):
        return False
    message = (f"{split.path}: the segment was deleted (retention) after the read was "
               f"planned: offsets {split.start_offset}..{split.end_offset - 1} of "
               f"{split.topic}-{split.partition} from byte {split.start} on are gone")
    if options.fail_on_data_loss:
        raise DataLossError(message + " (set failOnDataLoss=false to skip them)")
    log.warning("kafka-log: %s; skipped", message)
    return True


class _Source:
    """Byte ranges of a segment file: slices of a read-only map on the local
    disk, reads through pyarrow elsewhere."""

    def __init__(self, split):
        self.split = split
        store = split.filesystem
        if store is None:
            self.segment, self.file = Segment(_segment_file(split.path)), None
        else:
            with store.errors(split.path, "opening"):
                self.segment, self.file = None, store.fs.open_input_file(split.path)

    def read(self, start, end):
        if self.file is None:
            return self.segment.view(start, end)
        store = self.split.filesystem
        with store.errors(self.split.path, f"reading bytes {start}-{end} of"):
            data = self.file.read_at(end - start, start)
        if len(data) != end - start:
            raise ObjectStoreError(
                f"{store.uri(self.split.path)}: {len(data)} bytes at byte {start} where "
                f"{end - start} were planned: the object changed since the read was planned",
                uri=store.uri(self.split.path))
        return memoryview(data)

    def done_with(self, start, end):
        if self.segment is not None:
            self.segment.release(start, end)

    def close(self):
        if self.file is not None:
            self.file.close()
        else:
            self.segment.close()


def read_split(split, options, report=None):
    """Decode one split, as a Spark task of the ``kafka-log`` source does.

    Args:
        split: A :class:`Split` from :func:`plan`.
        options: The :class:`ReadOptions` of the read.
        report: A :class:`SplitReport` to fill in (None: a new one).

    Yields:
        pyarrow.Table: :func:`kcodec.decode`'s columns, ``topic`` and
        ``partition`` included, of the records that a consumer with
        ``options.isolation`` reads between the split's offset bounds.

    Raises:
        KafkaFormatError: For corrupt data, naming the file and byte, unless
            ``options.on_corrupt_data`` is ``"skip"``: then it is skipped,
            logged and noted in ``report`` (and in ``corruptDataReport``).
    """
    report = report if report is not None else SplitReport(split.name)
    bounds = [split.start, *split.chunks, split.end]
    if _gone(split, options):
        return
    source = _Source(split)
    try:
        for a, b in zip(bounds, bounds[1:]):
            try:
                with released(source.read(a, b)) as view:
                    final = split.at_file_end and b == split.end
                    for start, end in _recent_runs(view, final, split.min_timestamp):
                        last = final and end == len(view)
                        with released(view[start:end]) as part:
                            for table in _decode_chunk(part, a + start, last, split, options,
                                                       report):
                                report.rows += table.num_rows
                                yield table
                        report.decoded_bytes += end - start
                    report.log_bytes += b - a
            finally:
                source.done_with(a, b)
    finally:
        source.close()
        if report.skipped:
            _report_skips(report, options)


def _recent_runs(view, final, min_timestamp):
    """The byte ranges of `view` to decode: all of it, or, given a timestamp
    floor, its runs of batches less the v2 data batches whose max timestamp
    is below it (control batches stay: read_committed needs the markers).
    Headers only are read; where they do not parse, all of it, for the
    decoder to report or skip as ``onCorruptData`` says."""
    if min_timestamp is None:
        return [(0, len(view))]
    runs = []
    try:
        for batch in read_batches(view, verify_crc=False, partial="stop" if final else "error"):
            if batch.magic == MAGIC_V2 and not batch.is_control and (
                    batch.max_timestamp < min_timestamp):
                continue
            end = batch.position + batch.size
            if runs and runs[-1][1] == batch.position:
                runs[-1][1] = end
            else:
                runs.append([batch.position, end])
    except KafkaFormatError:
        return [(0, len(view))]
    return [tuple(run) for run in runs]


def spark_batches(split, options, schema, readers=None):
    """The Arrow record batches of a split as a Spark reader of the
    ``kafka-log`` source (batch or stream) yields them.

    Args:
        split: A :class:`Split`, or Spark's stand-in for an empty read
            (nothing is yielded).
        options: The :class:`ReadOptions` of the read.
        schema: The schema Spark resolved.
        readers: With ``valueFormat`` / ``keyFormat``: the reader schema
            text of each decoded column (``{"value": text, "key": text}``,
            :func:`kcodec.spark.values.schema_readers`), the planner's.

    Yields:
        pyarrow.RecordBatch: :func:`read_split`'s rows in ``schema``'s types,
        keys and values decoded as the options say.
    """
    if not isinstance(split, Split):
        return
    target = arrow_schema(schema)
    if options.typed and readers is None:
        from .values import schema_readers
        readers = schema_readers(options, schema, None)
    for table in read_split(split, options):
        if table.num_rows:
            if options.typed:
                from .values import typed_table
                table = typed_table(table, options, readers, target)
            yield from to_spark_arrow(table, target).to_batches()


def _decode_options(split, options, view, final):
    aborted = None
    if split.aborted is not None:
        first_offset = struct.unpack_from(">q", view, 0)[0] if len(view) >= 8 else 0
        aborted = fetch_aborted(split.aborted, first_offset)
    return dict(topic=split.topic, partition=split.partition, start_offset=split.start_offset,
                end_offset=split.end_offset, verify_crc=options.verify_crc,
                isolation=options.isolation, aborted=aborted,
                partial="stop" if final else "error")


def _decode_chunk(view, base, final, split, options, report):
    try:
        return [decode(view, **_decode_options(split, options, view, final))]
    except KafkaFormatError as exc:
        if options.on_corrupt_data != "skip":
            raise located(exc, split.source, base) from None
    tables, run = [], None
    for event in scan(_Chunk(view, split.source), first_byte=base):
        if event[0] == "batch":
            _, position, batch = event
            if run is not None and run[1] == position:
                run[1] = position + batch.size
            else:
                if run is not None:
                    tables.append(_decode_run(view, run, final, split, options))
                run = [position, position + batch.size]
        else:
            _, start, end, message = event
            report.skipped.append((split.source, base + start, base + end, message))
    if run is not None:
        tables.append(_decode_run(view, run, final, split, options))
    return tables


def _decode_run(view, run, final, split, options):
    part = view[run[0]:run[1]]
    return decode(part, **_decode_options(split, options, part, False))


def _report_skips(report, options):
    for path, start, end, message in report.skipped:
        log.warning("kafka-log: skipped %s bytes %d-%d: %s", path, start, end, message)
    if options.corrupt_data_report:
        os.makedirs(options.corrupt_data_report, exist_ok=True)
        target = os.path.join(options.corrupt_data_report, f"{report.split}.json")
        with open(target + ".tmp", "w") as f:
            json.dump({"split": report.split, "skipped": [
                {"file": p, "start": s, "end": e, "message": m} for p, s, e, m in report.skipped]},
                f)
        os.replace(target + ".tmp", target)


def read_skip_reports(directory):
    """The byte ranges skipped by reads with ``onCorruptData=skip``.

    Args:
        directory: The ``corruptDataReport`` directory the reads wrote to.

    Returns:
        list[tuple]: ``(file, start, end, message)`` of every range skipped
        (empty when the directory does not exist).
    """
    found = []
    if not os.path.isdir(directory):
        return found
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                found += [(s["file"], s["start"], s["end"], s["message"])
                          for s in json.load(f)["skipped"]]
    return found
