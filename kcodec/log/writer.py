"""Lay out batches as a broker's partition directory: segments rolled by
size, sparse .index and .timeindex entries, a .txnindex per segment holding
ABORT markers, producer state .snapshot files and the leader-epoch-checkpoint.

Every batch is appended as a producer request of its own would be, following
the broker's LogSegment.append: before the append, if more than
index_interval_bytes were appended since the last index entry, an .index
entry names the append's last offset and the position where it starts, and
a .timeindex entry the largest timestamp so far (with the last offset of the
batch holding it) when that timestamp grew. A segment rolls when the append
would take it past segment_bytes, or when the batch's max timestamp is more
than segment_ms past that of the segment's first batch (LogSegment.shouldRoll;
a segment whose first batch has no timestamp rolls by size only, as the
broker's wall clock is not at hand; nor does it roll for a full index, which
takes over a million appends at the default segment.index.bytes). A rolled
(or finally closed) segment gets a last .timeindex entry for its largest
timestamp, as on a clean shutdown.
A producer snapshot is written at every roll, named after the new segment,
and at the log end, as a broker writes them on a clean shutdown.
"""
import os
import struct

import numpy as np

from ..records import encode, read_batches
from .indexes import NO_TIMESTAMP, OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY, write_leader_epoch_checkpoint
from .producers import ProducerStates

INT32_MAX = (1 << 31) - 1
SEGMENT_MS = 7 * 24 * 3600 * 1000       # the broker's default segment.ms


def _is_table(obj):
    return hasattr(obj, "column_names") and hasattr(obj, "num_rows")


def _is_buffer(obj):
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


class _SegmentWriter:
    def __init__(self, directory, base_offset):
        self.stem = os.path.join(directory, f"{base_offset:020d}")
        self.base_offset = base_offset
        self.log = open(self.stem + ".log", "wb")
        self.size = 0
        self.bytes_since_index_entry = 0
        self.index = []
        self.time_index = []
        self.aborted = []
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_timestamp = None       # the first batch's max timestamp

    def rolls_for(self, entry, batch, segment_bytes, segment_ms):
        """Whether appending `batch` (whose bytes are `entry`) rolls this segment."""
        if not self.size:
            return False
        return (self.size + len(entry) > segment_bytes
                or (segment_ms is not None and self.first_timestamp >= 0
                    and batch.max_timestamp - self.first_timestamp > segment_ms)
                or batch.last_offset - self.base_offset > INT32_MAX)

    def append(self, entry, batch, index_interval_bytes):
        if self.first_timestamp is None:
            self.first_timestamp = batch.max_timestamp
        position = self.size
        self.log.write(entry)
        self.size += len(entry)
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
            self.offset_of_max_timestamp = batch.last_offset
        if self.bytes_since_index_entry > index_interval_bytes:
            self.index.append((batch.last_offset - self.base_offset, position))
            self._maybe_time_entry()
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += len(entry)

    def _maybe_time_entry(self):
        last = self.time_index[-1][0] if self.time_index else NO_TIMESTAMP
        if self.max_timestamp > last:
            self.time_index.append((self.max_timestamp,
                                    self.offset_of_max_timestamp - self.base_offset))

    def close(self):
        self._maybe_time_entry()
        self.log.close()
        np.array(self.index, OFFSET_ENTRY).tofile(self.stem + ".index")
        np.array(self.time_index, TIME_ENTRY).tofile(self.stem + ".timeindex")
        if self.aborted:
            rows = [(0,) + tuple(t) for t in self.aborted]
            np.array(rows, TXN_ENTRY).tofile(self.stem + ".txnindex")
        return self.stem + ".log"


def _entries(source, next_offset, encode_options):
    """(bytes of one entry, Batch) for every entry of `source`."""
    if _is_table(source):
        if "offset" not in source.column_names:
            encode_options = {"base_offset": next_offset(), **encode_options}
        source = encode(source, **encode_options)
    view = memoryview(source)
    for batch in read_batches(view):
        yield view[batch.position:batch.position + batch.size], batch


def _sources(batches_or_table):
    if _is_table(batches_or_table) or _is_buffer(batches_or_table):
        return [batches_or_table]
    return batches_or_table


def _first_offset(batch):
    if batch.magic == 2 or batch.compression == "none":
        return batch.base_offset
    for record in batch:
        return record.offset
    return batch.last_offset


def write_log(directory, batches_or_table, segment_bytes=1 << 30, index_interval_bytes=4096,
              segment_ms=SEGMENT_MS, **encode_options):
    """Write a partition directory as a broker lays it out.

    Every batch is appended as a producer request of its own would be (see
    this module's description): segments roll by size or time, ``.index``
    and ``.timeindex`` entries follow ``index_interval_bytes``, each
    segment holding ABORT markers gets a ``.txnindex``, and producer
    ``.snapshot`` files and the ``leader-epoch-checkpoint`` are written.

    Offsets, a table's ``offset`` column's too, are kept when they increase;
    a v2 batch whose base offset is below the log end offset gets the next
    offset, as a broker assigns it (its CRC does not cover the offset).
    Legacy entries must already be in order. A table without an ``offset``
    column is numbered from the log end offset.

    Args:
        directory: The partition directory to write (created if missing; it
            must hold no segment yet), e.g. ``"orders-0"``.
        batches_or_table: A record set (bytes-like), a ``pyarrow.Table`` or
            ``RecordBatch``, or an iterable of those.
        segment_bytes: Roll to a new segment before one would pass this size
            (the broker's ``segment.bytes``).
        index_interval_bytes: Add an index entry once more than this many
            bytes were appended since the last (``index.interval.bytes``; 0:
            an entry for every append).
        segment_ms: Roll when a batch's max timestamp is more than this past
            the segment's first batch's (``segment.ms``; None: never).
        **encode_options: :func:`kcodec.encode` options for tables (e.g.
            ``compression="zstd"``).

    Returns:
        list[str]: The paths of the ``.log`` files written.

    Raises:
        FileExistsError: When ``directory`` already holds segments.
        ValueError: For options out of range, or legacy entries out of order.
    """
    if not 14 <= segment_bytes <= INT32_MAX:
        raise ValueError(f"segment_bytes must be within 14..{INT32_MAX}")
    if index_interval_bytes < 0:
        raise ValueError("index_interval_bytes must not be negative")
    if segment_ms is not None and segment_ms < 1:
        raise ValueError("segment_ms must be at least 1 (None: no rolls by time)")
    os.makedirs(directory, exist_ok=True)
    if any(name.endswith(".log") for name in os.listdir(directory)):
        raise FileExistsError(f"{directory} already holds segments")
    written, epochs = [], []
    producers = ProducerStates()
    segment = None
    end = 0

    for source in _sources(batches_or_table):
        for entry, batch in _entries(source, lambda: end, encode_options):
            first = _first_offset(batch)
            if first < end:
                if batch.magic != 2:
                    raise ValueError(f"legacy entry at offset {first} is below the log end "
                                     f"offset {end}: offsets must increase")
                entry = bytearray(entry)
                struct.pack_into(">q", entry, 0, end)
                batch = next(iter(read_batches(entry)))
                first = end
            if segment is not None and segment.rolls_for(entry, batch, segment_bytes, segment_ms):
                written.append(segment.close())
                segment = None
            if segment is None:
                if written:
                    producers.write_snapshot(directory, first)
                segment = _SegmentWriter(directory, first)
            segment.append(entry, batch, index_interval_bytes)
            completed = producers.append(batch)
            if completed is not None:
                segment.aborted.append(completed)
            epoch = batch.partition_leader_epoch
            if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
                epochs.append((epoch, first))
            end = batch.last_offset + 1
    if segment is None:
        segment = _SegmentWriter(directory, end)
    written.append(segment.close())
    if end > 0:
        producers.write_snapshot(directory, end)
    if epochs:
        write_leader_epoch_checkpoint(os.path.join(directory, "leader-epoch-checkpoint"), epochs)
    return written
