"""One segment of a partition log: a .log file of concatenated entries and
its .index, .timeindex and .txnindex side files.

The .log is mapped read-only and slices of the map go to the compiled codec
as they are, with the file's name and the slice's first byte, so that its
errors name the file and the byte in it.
"""
import contextlib
import mmap
import os
from functools import cached_property

from ..errors import CorruptIndexError
from ..records import read_batches
from .indexes import (
    NO_TIMESTAMP, OffsetIndex, TimeIndex, base_offset_of, map_file, read_txn_index,
)

SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
PAGE = mmap.PAGESIZE


@contextlib.contextmanager
def released(view):
    """`view`, released when the block ends. An error leaving the block may
    hold exports of it in its traceback's frames: then the view goes with
    them, and release's BufferError does not replace the error."""
    try:
        yield view
    except BaseException:
        with contextlib.suppress(BufferError):
            view.release()
        raise
    view.release()


class Segment:
    """One segment of a partition log: a ``<20-digit base offset>.log`` file
    and its ``.index``, ``.timeindex`` and ``.txnindex`` side files.

    The ``.log`` is mapped read-only when first read.

    Args:
        log_path: The segment's ``.log`` file.

    Attributes:
        log_path (str): The ``.log`` file.
        base_offset (int): The offset its name carries.
        index_path (str): Its ``.index`` file (which may be missing).
        time_index_path (str): Its ``.timeindex`` file.
        txn_index_path (str): Its ``.txnindex`` file.
        active (bool): Whether it is its log's last segment: only there may a
            partial entry end the file without being corruption.
    """

    def __init__(self, log_path):
        self.log_path = str(log_path)
        self.base_offset = base_offset_of(self.log_path)
        stem = self.log_path[:-len(".log")]
        self.index_path = stem + ".index"
        self.time_index_path = stem + ".timeindex"
        self.txn_index_path = stem + ".txnindex"
        self._data = None
        # Only the active (last) segment of a log may end in a partial entry:
        # one anywhere else is corruption. A segment alone may be a log's tail.
        self.active = True

    def __repr__(self):
        return f"Segment({self.log_path!r})"

    # ------------------------------------------------------------- files
    @property
    def data(self):
        """The .log contents: a read-only mmap (b"" for an empty file)."""
        if self._data is None:
            self._data = map_file(self.log_path)
        return self._data

    @property
    def size(self):
        """The ``.log`` file's size in bytes."""
        return len(self.data)

    def release(self, start, end):
        """Drop the pages of bytes ``[start, end)`` from this process's
        resident set (they stay in the page cache): long sequential reads keep
        RSS flat.

        Args:
            start: First byte.
            end: Byte to stop before.
        """
        if isinstance(self.data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            start -= start % PAGE
            if end > start:
                self.data.madvise(mmap.MADV_DONTNEED, start, end - start)

    def close(self):
        """Unmap the ``.log`` file (it is mapped again when next read)."""
        if isinstance(self._data, mmap.mmap):
            try:
                self._data.close()
            except BufferError:     # slices still in use: the map goes with them
                pass
        self._data = None

    @cached_property
    def offset_index(self):
        """The ``.index`` file as an :class:`OffsetIndex` (None when it is
        missing)."""
        if not os.path.exists(self.index_path):
            return None
        return OffsetIndex(self.index_path, self.base_offset, self.size)

    @cached_property
    def time_index(self):
        """The ``.timeindex`` file as a :class:`TimeIndex` (None when it is
        missing)."""
        if not os.path.exists(self.time_index_path):
            return None
        return TimeIndex(self.time_index_path, self.base_offset)

    @property
    def has_txn_index(self):
        """Whether the segment has a ``.txnindex`` file."""
        return os.path.exists(self.txn_index_path)

    def aborted_transactions(self):
        """The entries of the ``.txnindex`` file.

        Returns:
            list[AbortedTxn]: Empty when there is no such file.
        """
        return read_txn_index(self.txn_index_path) if self.has_txn_index else []

    # ----------------------------------------------------------- reading
    def batches(self, position=0, end=None, *, verify_crc=True, partial=None, **options):
        """The entries of the ``.log`` from a byte position on.

        Batches are read from a view of the mapped file; nothing is copied.

        Args:
            position: The byte to start at (where an entry starts).
            end: The byte to stop before (None: the end of the file).
            verify_crc: Check CRCs.
            partial: As in :func:`kcodec.read_batches`; None: ``"stop"`` for
                the active segment, else ``"error"``.
            **options: More :func:`kcodec.read_batches` options.

        Yields:
            tuple[int, kcodec.Batch]: Each entry's position in the file and
            the entry.
        """
        if partial is None:
            partial = "stop" if self.active else "error"
        view = memoryview(self.data)[position:end]
        for batch in read_batches(view, verify_crc=verify_crc, partial=partial,
                                  source=self.log_path, first_byte=position, **options):
            yield position + batch.position, batch

    def view(self, start, end):
        """A memoryview of the ``.log``'s bytes ``[start, end)``, without a copy."""
        return memoryview(self.data)[start:end]

    def position_for(self, offset):
        """Where to start reading for an offset, as the broker's
        ``translateOffset``: the largest index entry at or below it, then a
        forward scan to the first batch whose last offset reaches it.

        Args:
            offset: The offset wanted.

        Returns:
            int | None: The byte position of that batch, or None when every
            batch of the segment ends before ``offset``.

        Raises:
            CorruptIndexError: When the index entry points at a batch past
                the entry's offset.
        """
        entry = self.offset_index.lookup(offset) if self.offset_index is not None else None
        start = entry.position if entry is not None else 0
        for position, batch in self.batches(start, verify_crc=False):
            if entry is not None and position == start and entry.position > 0 \
                    and batch.base_offset > entry.offset:
                raise CorruptIndexError(
                    f"index entry for offset {entry.offset} points at position {start}, where "
                    f"the batch starts at offset {batch.base_offset}",
                    position=self._entry_byte(entry), source=self.index_path)
            if batch.last_offset >= offset:
                return position
        return None

    def _entry_byte(self, entry):
        i = int(self.offset_index.offsets.searchsorted(entry.offset))
        return i * OffsetIndex.entry_size

    def next_offset(self):
        """The offset after this segment's last batch (its base offset when
        it is empty)."""
        last = None
        start = 0
        if self.offset_index is not None and len(self.offset_index):
            start = int(self.offset_index.positions[-1])
        for _, batch in self.batches(start, verify_crc=False):
            last = batch
        if last is None and start:
            for _, batch in self.batches(0, verify_crc=False):
                last = batch
        return self.base_offset if last is None else last.last_offset + 1

    def largest_timestamp(self):
        """The segment's largest timestamp as the broker knows it: the time
        index's last entry, raised by the batches after it; the file's
        modification time when no batch has a timestamp."""
        largest = NO_TIMESTAMP
        start = 0
        index = self.time_index
        if index is not None and len(index):
            largest = index.last_entry.timestamp
            if self.offset_index is not None:
                start = self.offset_index.lookup(index.last_entry.offset).position
        for _, batch in self.batches(start, verify_crc=False):
            largest = max(largest, batch.max_timestamp)
        if largest < 0:
            return int(os.path.getmtime(self.log_path) * 1000)
        return largest

    def find_offset_by_timestamp(self, timestamp, starting_offset=0):
        """The first record at or after a timestamp, as the broker's
        ``LogSegment.findOffsetByTimestamp``.

        Args:
            timestamp: Milliseconds since the epoch.
            starting_offset: Ignore records below this offset (the log start
                offset).

        Returns:
            tuple[int, int] | None: ``(offset, timestamp)`` of that record, or
            None when no record of the segment is that recent.
        """
        target = starting_offset
        if self.time_index is not None:
            target = max(self.time_index.lookup(timestamp).offset, starting_offset)
        start = self.offset_index.lookup(target).position if self.offset_index is not None else 0
        for _, batch in self.batches(start):
            if batch.max_timestamp < timestamp:
                continue
            for record in batch:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None
