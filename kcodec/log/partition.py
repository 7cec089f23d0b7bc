"""A partition directory (`<topic>-<partition>/`) read like a broker serves it."""
import os
import re
import pyarrow as pa

from ..arrow import decode as decode_record_set, schema as arrow_schema
from ..compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from ..errors import CorruptIndexError, KafkaFormatError, integer_option, located
from ..records import RecordIterator, check_isolation, committed, offset_bounds, overlaps
from .indexes import (read_leader_epoch_checkpoint, read_producer_snapshot, snapshot_offsets,
                      snapshot_path)
from .segment import Segment, released
from ..records import TransactionTracker
from .transactions import fetch_aborted

SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
# A copy the broker is deleting, moving to another log dir, or left behind.
_NOT_LIVE_SUFFIX = r"\.[0-9a-f]{32}-(?:delete|future|stray)"
_NOT_LIVE = re.compile(_NOT_LIVE_SUFFIX + "$")
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)(?:" + _NOT_LIVE_SUFFIX + ")?$")
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
DEFAULT_MAX_ROWS = 1 << 16
DEFAULT_MAX_BYTES = 64 << 20
# Input bytes of the first chunk of a compressed log, as a share of max_bytes,
# until the decoded size of a chunk tells the real expansion.
_FIRST_EXPANSION = 8.0


def _starts_at_or_after(batch, offset):
    """Whether every offset of `batch` is at or after `offset`: reading in
    log order, nothing below `offset` can follow (records.overlaps' rule)."""
    return not overlaps(batch, None, offset)


def is_not_live_copy(name):
    """Whether a directory name is that of a partition copy being deleted,
    moved or left behind: not what a log.dirs root or a glob stands for (a
    copy named explicitly is still read)."""
    return bool(_NOT_LIVE.search(name))


def is_live_partition_dir(name):
    """Whether a directory name is that of a partition's live copy."""
    return bool(PARTITION_DIR.match(name)) and not is_not_live_copy(name)


def parse_partition_dir(name):
    """The topic and partition a partition directory's name stands for.

    Args:
        name: A directory name or path like ``"orders-3"`` or
            ``"/var/kafka-logs/my-topic-0"`` (topics may hold dashes; a copy
            being deleted or moved, ``<topic>-<partition>.<id>-delete``,
            parses too).

    Returns:
        tuple[str, int]: ``(topic, partition)``.

    Raises:
        ValueError: When the name is not ``<topic>-<partition>``.
    """
    found = PARTITION_DIR.match(os.path.basename(os.path.abspath(str(name))))
    if not found:
        raise ValueError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    return found["topic"], int(found["partition"])


class PartitionLog:
    """One partition directory (``<topic>-<partition>/``), read as a broker
    serves it, without a broker.

    Segments (``.log``) are memory-mapped read-only and handed to the codec
    without a copy; seeks use the ``.index`` and ``.timeindex`` files as the
    broker does; ``read_committed`` uses the ``.txnindex`` files (or, without
    any, the ABORT markers). Files of segments being deleted, cleaned or
    swapped (``.deleted``, ``.cleaned``, ``.swap``) are ignored, as the
    broker does not serve them. Errors name the file and the byte in it.

    Args:
        directory: The partition directory.
        topic: The topic (None: from the directory's name).
        partition: The partition (None: from the directory's name).
        verify_crc: Check every batch's CRC when reading.
        max_decompressed_bytes: The most bytes one batch may decompress to.

    Attributes:
        directory (str): The partition directory.
        topic (str): The topic.
        partition (int): The partition.
        transaction_scan (tuple | None): After :meth:`last_stable_offset`:
            where its scan ended, to pass to a later ``PartitionLog`` of the
            directory as ``resume``.

    Raises:
        FileNotFoundError: When ``directory`` does not exist.
        ValueError: When its name is not ``<topic>-<partition>`` and
            ``topic`` or ``partition`` is not given.
    """

    def __init__(self, directory, *, topic=None, partition=None, verify_crc=True,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES):
        self.directory = str(directory)
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(f"{self.directory}: no such partition directory")
        if topic is None or partition is None:
            parsed_topic, parsed_partition = parse_partition_dir(self.directory)
            topic = parsed_topic if topic is None else topic
            partition = parsed_partition if partition is None else partition
        self.topic, self.partition = topic, partition
        self.verify_crc = verify_crc
        self.max_decompressed_bytes = max_decompressed_bytes
        names = sorted(n for n in os.listdir(self.directory) if SEGMENT_NAME.match(n))
        self.segments = [Segment(os.path.join(self.directory, n)) for n in names]
        self._aborted = None
        self._open_transactions = None   # producer id -> first offset, at the log end
        # Where last_stable_offset's scan ended: (segment base offset, byte,
        # open transactions there), for a later PartitionLog to resume from.
        self.transaction_scan = None

    def __repr__(self):
        return f"PartitionLog({self.directory!r}, segments={len(self.segments)})"

    @property
    def segments(self):
        """The live segments, oldest first (the last is the active one)."""
        return self._segments

    @segments.setter
    def segments(self, segments):
        self._segments = list(segments)
        for i, seg in enumerate(self._segments):
            seg.active = i == len(self._segments) - 1

    @property
    def start_offset(self):
        """The first segment's base offset (the log start offset of a broker
        that has not advanced it by deleting records)."""
        return self.segments[0].base_offset if self.segments else 0

    @property
    def end_offset(self):
        """The log end offset: the offset the next record would get."""
        return self.segments[-1].next_offset() if self.segments else 0

    def leader_epochs(self):
        """The ``leader-epoch-checkpoint`` file's entries.

        Returns:
            list[EpochEntry]: ``(epoch, start_offset)`` pairs; empty when the
            file is missing.
        """
        path = os.path.join(self.directory, "leader-epoch-checkpoint")
        return read_leader_epoch_checkpoint(path) if os.path.exists(path) else []

    def producer_snapshots(self):
        """The producer state ``.snapshot`` files.

        Returns:
            dict[int, list[ProducerSnapshotEntry]]: The entries of each
            snapshot, by the offset it was taken at.
        """
        return {offset: read_producer_snapshot(snapshot_path(self.directory, offset))
                for offset in snapshot_offsets(self.directory)}

    # --------------------------------------------------------- transactions
    def aborted_transactions(self, start_offset=None):
        """The aborted transactions of the log.

        Read from the ``.txnindex`` files when the log has any (the broker
        writes one only for segments holding an ABORT marker), else rebuilt
        by scanning the markers.

        Args:
            start_offset: Only the transactions that can hold a record at or
                after this offset (their ABORT marker is at or after it).
                Without ``.txnindex`` files the scan then starts at the latest
                producer snapshot at or below it (else at the offset itself,
                through the ``.index``), not at the log start: a reader that
                resumes at an offset reads no older segment.

        Returns:
            list[AbortedTxn]: ``(producer_id, first_offset, last_offset,
            last_stable_offset)`` of each, ``last_offset`` being its ABORT
            marker's offset. A transaction that began before a scan's start
            has the first offset the scan saw of it.
        """
        if start_offset is not None and start_offset > self.start_offset \
                and self._aborted is None:
            if any(seg.has_txn_index for seg in self.segments):
                # A .txnindex lists the transactions whose ABORT marker is in
                # its segment: none before start_offset's segment matters.
                later = [seg for seg, _ in self._ranges(start_offset, None)]
                found = [t for seg in later for t in seg.aborted_transactions()]
            else:
                tracker, snapshot = self.tracker_from_snapshot(start_offset)
                batches = self._all_batches(start_offset if snapshot is None else snapshot)
                found = [t for t in map(tracker.append, batches) if t is not None]
            return [t for t in found if t.last_offset >= start_offset]
        if self._aborted is None:
            if any(seg.has_txn_index for seg in self.segments):
                self._aborted = [t for seg in self.segments for t in seg.aborted_transactions()]
            else:
                tracker, _ = self.tracker_from_snapshot(self.start_offset)
                self._aborted = [t for t in map(tracker.append, self._all_batches())
                                 if t is not None]
                self._open_transactions = dict(tracker.open)
        return [t for t in self._aborted if start_offset is None or t.last_offset >= start_offset]

    def last_stable_offset(self, resume=None):
        """The offset a read_committed consumer reads up to: the first offset
        of the earliest transaction still open at the log end (no COMMIT or
        ABORT marker yet; not below the log start offset), else the log end
        offset. (A broker also caps it at
        the high watermark, which a partition directory does not record.)

        Found from the latest producer snapshot and the batches after it, or
        from a scan of the whole log already made for
        :meth:`aborted_transactions`.

        Args:
            resume: The :attr:`transaction_scan` of an earlier
                ``PartitionLog`` of this directory: only the batches appended
                since are scanned (a reader following the log's tail).
        """
        if self._open_transactions is None:
            self._open_transactions = self._scan_open_transactions(resume)
        first_open = min(self._open_transactions.values(), default=self.end_offset)
        return max(first_open, self.start_offset)     # as UnifiedLog clamps it

    def _scan_open_transactions(self, resume):
        """Transactions open at the log end, as the broker recovers them: the
        latest producer snapshot's ongoing transactions, then the batches
        after it (the whole log when there is no readable snapshot); or those
        of `resume` and the batches after its byte. Sets transaction_scan."""
        bases = [seg.base_offset for seg in self.segments]
        if resume is not None:
            base, position, still_open = resume
            if base not in bases or self.segments[bases.index(base)].size < position:
                resume = None           # truncated, or deleted: start afresh
        tracker = TransactionTracker()
        if resume is None:
            tracker, start = self.tracker_from_snapshot(self.end_offset)
            ranges = list(self._ranges(start, None))
        else:
            tracker.open.update(still_open)
            first = bases.index(base)
            ranges = [(seg, position if i == first else 0)
                      for i, seg in enumerate(self.segments[first:], first)]
        scanned = (bases[-1], 0) if bases else None
        for seg, position in ranges:
            end = position
            for at, batch in seg.batches(position, verify_crc=False):
                tracker.append(batch)
                end = at + batch.size
            scanned = (seg.base_offset, end)
        self.transaction_scan = None if scanned is None else (*scanned, dict(tracker.open))
        return dict(tracker.open)

    def tracker_from_snapshot(self, at_most):
        """The transactions open at the latest readable producer snapshot.

        Args:
            at_most: Use the latest snapshot taken at or below this offset.

        Returns:
            tuple: A ``TransactionTracker`` holding that snapshot's ongoing
            transactions, and the snapshot's offset (None when there is none).
        """
        tracker = TransactionTracker()
        snapshots = [offset for offset in snapshot_offsets(self.directory) if offset <= at_most]
        for offset in reversed(snapshots):
            try:
                entries = read_producer_snapshot(snapshot_path(self.directory, offset))
            except (CorruptIndexError, FileNotFoundError):  # deleted since listed: retention
                continue
            tracker.open.update((e.producer_id, e.current_txn_first_offset)
                                for e in entries if e.current_txn_first_offset >= 0)
            return tracker, offset
        return tracker, None

    def _all_batches(self, start_offset=None):
        for seg, position in self._ranges(start_offset, None):
            for _, batch in seg.batches(position, verify_crc=False):
                if start_offset is None or batch.last_offset >= start_offset:
                    yield batch

    def _committed_end(self, isolation, end_offset):
        """end_offset, capped at the last stable offset for read_committed."""
        if end_offset is not None:
            end_offset = integer_option("end_offset", end_offset)
        if check_isolation(isolation) != "read_committed":
            return end_offset
        stable = self.last_stable_offset()
        return stable if end_offset is None else min(end_offset, stable)

    # ------------------------------------------------------------- reading
    def _ranges(self, start_offset, end_offset):
        """(segment, start position) of the segments holding [start, end)."""
        for i, seg in enumerate(self.segments):
            following = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if start_offset is not None and following is not None and following <= start_offset:
                continue
            if end_offset is not None and seg.base_offset >= end_offset:
                return
            position = 0
            if start_offset is not None and start_offset > seg.base_offset:
                position = seg.position_for(start_offset)
                if position is None:
                    continue
            yield seg, position

    def _resolve(self, start_offset, end_offset, start_timestamp=None, end_timestamp=None):
        if start_timestamp is not None:
            found = self.offset_for_timestamp(start_timestamp)
            start_offset = max(start_offset or 0, found if found is not None else self.end_offset)
        if end_timestamp is not None:
            found = self.offset_for_timestamp(end_timestamp)
            if found is not None:
                end_offset = found if end_offset is None else min(end_offset, found)
        return start_offset, end_offset

    def read_batches(self, start_offset=None, end_offset=None, *, isolation="read_uncommitted"):
        """The batches holding offsets in ``[start_offset, end_offset)``.

        Batches come in log order, headers only (nothing is decompressed
        until a batch is iterated). A batch's ``position`` is relative to
        where the read started in its segment; its errors, its records' too,
        name the segment file and the byte in it.

        Args:
            start_offset: The first offset wanted (inclusive); None: the log
                start. The read starts at the ``.index`` entry at or below it.
            end_offset: The offset to stop before (exclusive); None: the log
                end.
            isolation: ``"read_uncommitted"``, or ``"read_committed"``: the
                batches of aborted transactions are dropped and the read stops
                at the last stable offset.

        Returns:
            An iterator of :class:`kcodec.Batch`.
        """
        if start_offset is not None:
            start_offset = integer_option("start_offset", start_offset)
        end_offset = self._committed_end(isolation, end_offset)
        return self._read_batches(start_offset, end_offset, isolation)

    def _read_batches(self, start_offset, end_offset, isolation):
        """read_batches, end_offset already capped for the isolation level."""
        batches = self._batches(start_offset, end_offset)
        if isolation != "read_committed":
            return batches
        return committed(batches, fetch_aborted(self.aborted_transactions(), start_offset or 0))

    def _batches(self, start_offset, end_offset):
        """The batches in range."""
        for seg, position in self._ranges(start_offset, end_offset):
            for _, batch in seg.batches(position, verify_crc=self.verify_crc,
                                        max_decompressed_bytes=self.max_decompressed_bytes):
                if end_offset is not None and _starts_at_or_after(batch, end_offset):
                    return
                if overlaps(batch, start_offset, None):
                    yield batch

    def read_records(self, start_offset=None, end_offset=None, *, isolation="read_uncommitted",
                     include_control=False):
        """Records with offsets in ``[start_offset, end_offset)``, as a
        consumer with this isolation level sees them.

        Args:
            start_offset: The first offset (inclusive); None: the log start.
            end_offset: The offset to stop before (exclusive); None: the end.
            isolation: ``"read_uncommitted"`` or ``"read_committed"`` (up to
                the last stable offset, aborted transactions dropped).
            include_control: Also yield control records.

        Returns:
            An iterator of :class:`kcodec.Record`.
        """
        start_offset, end_offset = offset_bounds(start_offset,
                                                 self._committed_end(isolation, end_offset))
        batches = self._read_batches(start_offset, end_offset, isolation)
        return RecordIterator(batches, include_control, start_offset, end_offset)

    def offset_for_timestamp(self, timestamp):
        """The offset a broker's ListOffsets answers for a timestamp.

        In the first segment whose largest timestamp reaches it, the first
        batch whose max timestamp reaches it, the first record in it at or
        after it.

        Args:
            timestamp: Milliseconds since the epoch; -1 (latest) gives the log
                end offset, -2 (earliest) the log start offset.

        Returns:
            int | None: The offset, or None when no record is that recent.
        """
        if timestamp == LATEST_TIMESTAMP:
            return self.end_offset
        if timestamp == EARLIEST_TIMESTAMP:
            return self.start_offset
        for seg in self.segments:
            if seg.largest_timestamp() >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.start_offset)
                return None if found is None else found[0]
        return None

    def decode(self, start_offset=None, end_offset=None, start_timestamp=None,
               end_timestamp=None, isolation="read_uncommitted", columns=None,
               batch_columns=False):
        """The records with offsets in ``[start_offset, end_offset)`` as one
        table with :func:`kcodec.decode`'s columns, ``topic`` and
        ``partition`` included.

        Args:
            start_offset: The first offset (inclusive); None: the log start.
            end_offset: The offset to stop before (exclusive); None: the end.
            start_timestamp: Start at :meth:`offset_for_timestamp` of this
                (ms), as Spark's ``startingTimestamp`` does.
            end_timestamp: End before :meth:`offset_for_timestamp` of this
                (ms), as Spark's ``endingTimestamp`` does.
            isolation: ``"read_uncommitted"`` or ``"read_committed"``
                (aborted transactions from ``.txnindex``, up to the last
                stable offset).
            columns: Only these columns, in this order (None: all).
            batch_columns: Add the batch columns (see :func:`kcodec.decode`).

        Returns:
            pyarrow.Table: One row per record.
        """
        tables = list(self._decode_chunks(start_offset, end_offset, start_timestamp,
                                          end_timestamp, isolation, batch_columns, None, None))
        target = arrow_schema(topic=True, partition=True, batch_columns=batch_columns)
        table = pa.concat_tables(tables) if tables else target.empty_table()
        return table.select(columns) if columns is not None else table

    def iter_decode(self, start_offset=None, end_offset=None, start_timestamp=None,
                    end_timestamp=None, isolation="read_uncommitted", columns=None,
                    batch_columns=False, max_rows=DEFAULT_MAX_ROWS, max_bytes=DEFAULT_MAX_BYTES):
        """:meth:`decode` as a stream of record batches, in bounded memory.

        The log is decoded a slice of a segment at a time, sized so that its
        decoded columns stay near ``max_bytes``, and the mapped pages read are
        released: memory stays within a few times ``max_bytes`` plus one Kafka
        batch decompressed, whatever the log's size.

        Args:
            start_offset: As in :meth:`decode`.
            end_offset: As in :meth:`decode`.
            start_timestamp: As in :meth:`decode`.
            end_timestamp: As in :meth:`decode`.
            isolation: As in :meth:`decode`.
            columns: As in :meth:`decode`.
            batch_columns: As in :meth:`decode`.
            max_rows: The most rows in one record batch.
            max_bytes: About the most bytes of one record batch's columns.

        Yields:
            pyarrow.RecordBatch: The records, in log order.

        Raises:
            ValueError: When ``max_rows`` or ``max_bytes`` is below 1.
        """
        if max_rows < 1 or max_bytes < 1:
            raise ValueError("max_rows and max_bytes must be positive")
        for table in self._decode_chunks(start_offset, end_offset, start_timestamp, end_timestamp,
                                         isolation, batch_columns, max_rows, max_bytes):
            if columns is not None:
                table = table.select(columns)
            if not table.num_rows:
                continue
            row_bytes = max(1, table.nbytes // table.num_rows)
            step = max(1, min(max_rows, max_bytes // row_bytes))
            for start in range(0, table.num_rows, step):
                yield from table.slice(start, step).combine_chunks().to_batches()

    def _decode_chunks(self, start_offset, end_offset, start_timestamp, end_timestamp,
                       isolation, batch_columns, max_rows, max_bytes):
        start_offset, end_offset = self._resolve(start_offset, end_offset, start_timestamp,
                                                 end_timestamp)
        end_offset = self._committed_end(isolation, end_offset)
        if start_offset is not None and end_offset is not None and start_offset >= end_offset:
            return
        committed_only = isolation == "read_committed"
        aborted = self.aborted_transactions() if committed_only else None
        expansion = _FIRST_EXPANSION
        for seg, position in self._ranges(start_offset, end_offset):
            if max_bytes is None:
                chunks = self._chunks(seg, position, end_offset, None, lambda: float("inf"))
            else:
                chunks = self._chunks(seg, position, end_offset, max_rows,
                                      lambda: max_bytes / expansion)
            for first, last, first_offset in chunks:
                chunk_aborted = None if aborted is None else fetch_aborted(aborted, first_offset)
                with released(seg.view(first, last)) as view:
                    try:
                        table = decode_record_set(
                            view, isolation=isolation, topic=self.topic, partition=self.partition,
                            aborted=chunk_aborted, batch_columns=batch_columns,
                            start_offset=start_offset, end_offset=end_offset,
                            verify_crc=self.verify_crc,
                            max_decompressed_bytes=self.max_decompressed_bytes)
                    except KafkaFormatError as exc:
                        raise located(exc, seg.log_path, first) from None
                if max_bytes is not None:
                    if table.num_rows:
                        expansion = max(table.nbytes / (last - first), 0.5)
                    seg.release(first, last)
                yield table

    def _chunks(self, seg, position, end_offset, max_rows, input_budget):
        """(first, last, first offset): byte ranges of whole batches from
        `position`, each about input_budget() bytes and max_rows offsets."""
        first = last = position
        first_offset = rows = 0
        for at, batch in seg.batches(position, verify_crc=False):
            if end_offset is not None and _starts_at_or_after(batch, end_offset):
                break
            if last > first and (last - first + batch.size > input_budget()
                                 or (max_rows is not None and rows >= max_rows)):
                yield first, last, first_offset
                first, rows = last, 0
            if first == at:
                first_offset = batch.base_offset
            last = at + batch.size
            rows += batch.last_offset - batch.base_offset + 1 if batch.magic == 2 else 1
        if last > first:
            yield first, last, first_offset

    def verify(self):
        """Check every batch, offset and index file (see :func:`verify_log`).

        Returns:
            VerifyReport: Truthy when nothing is wrong.
        """
        from .verify import verify_log
        return verify_log(self)


def open_logs(paths):
    """Open partition directories, or every live partition directory below
    ``log.dirs`` roots.

    Args:
        paths: Paths of partition directories (a directory holding ``.log``
            segments) or of roots holding them (copies being deleted, moved
            or left behind are skipped).

    Returns:
        list[PartitionLog]: In the order given, and by name within a root.
    """
    logs = []
    for path in paths:
        path = str(path)
        if any(SEGMENT_NAME.match(n) for n in os.listdir(path)):
            logs.append(PartitionLog(path))
        else:
            logs += [PartitionLog(os.path.join(path, n)) for n in sorted(os.listdir(path))
                     if os.path.isdir(os.path.join(path, n)) and is_live_partition_dir(n)]
    return logs


__all__ = ["PartitionLog", "parse_partition_dir", "is_live_partition_dir", "is_not_live_copy",
           "open_logs"]
