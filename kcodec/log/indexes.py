"""The fixed-width side files of a partition directory.

    .index      [int32 offset - base][int32 position in .log]            8 bytes
    .timeindex  [int64 timestamp][int32 offset - base]                   12 bytes
    .txnindex   [int16 version=0][int64 producerId][int64 firstOffset]
                [int64 lastOffset][int64 lastStableOffset]               34 bytes
    leader-epoch-checkpoint   text: version, count, "epoch startOffset" lines
    .snapshot   [int16 version][uint32 CRC-32C of bytes 6..][int32 count]
                count x [int64 producerId][int16 epoch][int32 lastSequence]
                [int64 lastOffset][int32 offsetDelta][int64 timestamp]
                [int32 coordinatorEpoch][int64 currentTxnFirstOffset]    46 bytes

The offset and time indexes of an active segment are preallocated and zero
filled: an entry after the first whose relative offset is 0 ends them, and a
first entry of zeros only means there is none yet.
Index files are read, never mapped: a broker trims its active segment's
indexes when it rolls the segment, and a mapped page past the new end would
kill the reading process with SIGBUS.
Every inconsistency raises CorruptIndexError naming the file and the byte
position of the offending entry.
"""
import mmap
import os
import re
import struct
from collections import namedtuple

import numpy as np

from .._core.crc import crc32c
from ..errors import CorruptIndexError
from ..records import AbortedTxn

OFFSET_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
TXN_ENTRY = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                      ("last_offset", ">i8"), ("last_stable_offset", ">i8")])
SNAPSHOT_ENTRY = np.dtype([
    ("producer_id", ">i8"), ("producer_epoch", ">i2"), ("last_sequence", ">i4"),
    ("last_offset", ">i8"), ("offset_delta", ">i4"), ("timestamp", ">i8"),
    ("coordinator_epoch", ">i4"), ("current_txn_first_offset", ">i8")])
SNAPSHOT_HEADER = struct.Struct(">hIi")
NO_TIMESTAMP = -1

IndexEntry = namedtuple("IndexEntry", "offset position")
IndexEntry.__doc__ = "An ``.index`` entry: an absolute offset and its byte position in the ``.log``."
TimeIndexEntry = namedtuple("TimeIndexEntry", "timestamp offset")
TimeIndexEntry.__doc__ = "A ``.timeindex`` entry: a timestamp (ms) and an absolute offset."
EpochEntry = namedtuple("EpochEntry", "epoch start_offset")
EpochEntry.__doc__ = "A ``leader-epoch-checkpoint`` entry: a leader epoch and its start offset."
ProducerSnapshotEntry = namedtuple("ProducerSnapshotEntry", SNAPSHOT_ENTRY.names)
ProducerSnapshotEntry.__doc__ = (
    "One producer's state in a ``.snapshot`` file: producer_id, producer_epoch, last_sequence, "
    "last_offset, offset_delta, timestamp, coordinator_epoch and current_txn_first_offset "
    "(-1: no ongoing transaction).")


def map_file(path):
    """A read-only mmap of the file, or b"" when it is empty (mmap refuses those)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def base_offset_of(path):
    """The base offset a segment file's name carries (20 digits)."""
    stem = os.path.basename(path).split(".", 1)[0]
    if not stem.isdigit():
        raise ValueError(f"{path}: not a segment file name (20-digit base offset expected)")
    return int(stem)


def _check_whole_entries(size, dtype, path):
    if size % dtype.itemsize:
        raise CorruptIndexError(
            f"index file length {size} is not a multiple of the {dtype.itemsize}-byte entry",
            position=size - size % dtype.itemsize, source=path)


def _entries(path, dtype):
    """Every entry the file's length holds."""
    with open(path, "rb") as f:
        data = f.read()
    _check_whole_entries(len(data), dtype, path)
    return np.frombuffer(data, dtype)


def _used_entries(path, dtype, zero_first_entry_is_padding=True):
    """The entries of a zero-padded index before its preallocated tail, read
    alone: an entry after the first whose relative offset is 0 ends them.
    The used entries increase, so where the zeros begin is found by
    bisection over single entries (an active index is 10 MiB, nearly all
    zeros), and the entries before it are then checked to hold no zero (a
    corrupt index can). A first entry of zeros with nothing after it is
    padding too: a preallocated index with no entry yet (the broker never
    writes that entry: its first .index entry follows an append, so its
    position is > 0). kafka-dump-log prints it all the same:
    `zero_first_entry_is_padding=False`."""
    size = dtype.itemsize
    field_dtype, field_at = dtype.fields["relative_offset"][:2]
    with open(path, "rb") as f:
        fd = f.fileno()
        count = os.fstat(fd).st_size
        _check_whole_entries(count, dtype, path)
        count //= size

        # pread returns fewer bytes only past the end (a live broker may
        # trim the file meanwhile): those entries count as zeros.
        def is_zero(i):
            return not os.pread(fd, field_dtype.itemsize, i * size + field_at).strip(b"\0")

        low, high = 1, count
        while low < high:
            middle = (low + high) // 2
            if is_zero(middle):
                high = middle
            else:
                low = middle + 1
        data = os.pread(fd, min(low, count) * size, 0)
    entries = np.frombuffer(data, dtype, count=len(data) // size)
    zeros = np.flatnonzero(entries["relative_offset"][1:] == 0)
    used = entries[:zeros[0] + 1] if len(zeros) else entries
    if zero_first_entry_is_padding and len(used) == 1 and not used.tobytes().strip(b"\0"):
        return used[:0]
    return used


def _first_bad(mask):
    return int(np.flatnonzero(mask)[0])


class OffsetIndex:
    """A segment's sparse offset index (``.index``).

    Given the size of its log, entries at or past the log's end are left out,
    kept apart in ``past_log_end``: the broker indexes a batch once it is
    written, so a log copied or cut short while it wrote can end before
    entries its index has (the broker drops them when it recovers the log).
    Iterating yields :class:`IndexEntry` objects.

    Args:
        path: The ``.index`` file.
        base_offset: Its segment's base offset (None: from the file's name).
        log_size: The size of its ``.log`` (None: keep every entry).

    Attributes:
        path (str): The file.
        base_offset (int): The segment's base offset.
        offsets (numpy.ndarray): The entries' absolute offsets (int64).
        positions (numpy.ndarray): Their byte positions in the ``.log``.
        past_log_end (list[IndexEntry]): Entries left out as past the log's end.

    Raises:
        CorruptIndexError: For a file that is not a valid index, naming the
            entry's byte.
    """

    entry_size = OFFSET_ENTRY.itemsize

    def __init__(self, path, base_offset=None, log_size=None):
        self.path = str(path)
        self.base_offset = base_offset_of(path) if base_offset is None else base_offset
        entries = _used_entries(self.path, OFFSET_ENTRY)
        if len(entries) > 1 and entries["position"][-1] == 0:
            # A broker writes an entry's offset, then its position: a live
            # index read between the two ends in the entry it is writing.
            entries = entries[:-1]
        self.offsets = entries["relative_offset"].astype(np.int64) + self.base_offset
        self.positions = entries["position"].astype(np.int64)
        self._check(log_size)

    def _check(self, log_size):
        where = dict(source=self.path)
        if len(self.offsets) and self.offsets[-1] < self.base_offset:
            raise CorruptIndexError(
                f"last offset {self.offsets[-1]} is below the base offset {self.base_offset}",
                position=(len(self.offsets) - 1) * self.entry_size, **where)
        problems = [
            (np.diff(self.offsets) <= 0, "offsets not increasing"),
            (np.diff(self.positions) <= 0, "positions not increasing"),
        ]
        for mask, what in problems:
            if mask.any():
                i = _first_bad(mask) + 1
                raise CorruptIndexError(f"{what} at entry {i} (offset {self.offsets[i]}, "
                                        f"position {self.positions[i]})",
                                        position=i * self.entry_size, **where)
        negative = self.positions < 0
        if negative.any():
            i = _first_bad(negative)
            raise CorruptIndexError(f"entry {i} points at negative position {self.positions[i]}",
                                    position=i * self.entry_size, **where)
        kept = len(self.positions)
        if log_size is not None:
            kept = int(np.searchsorted(self.positions, log_size))
        self.past_log_end = [self.entry(i) for i in range(kept, len(self.positions))]
        self.offsets, self.positions = self.offsets[:kept], self.positions[:kept]

    def __len__(self):
        return len(self.offsets)

    def __iter__(self):
        return (IndexEntry(int(o), int(p)) for o, p in zip(self.offsets, self.positions))

    def entry(self, i):
        """The ``i``-th entry, an :class:`IndexEntry`."""
        return IndexEntry(int(self.offsets[i]), int(self.positions[i]))

    def lookup(self, offset):
        """The largest entry at or below ``offset``, else
        ``(base offset, 0)``, as the broker looks an offset up."""
        i = int(np.searchsorted(self.offsets, offset, side="right")) - 1
        return self.entry(i) if i >= 0 else IndexEntry(self.base_offset, 0)


class TimeIndex:
    """A segment's time index (``.timeindex``). Iterating yields
    :class:`TimeIndexEntry` objects.

    Args:
        path: The ``.timeindex`` file.
        base_offset: Its segment's base offset (None: from the file's name).

    Attributes:
        path (str): The file.
        base_offset (int): The segment's base offset.
        timestamps (numpy.ndarray): The entries' timestamps (int64 ms).
        offsets (numpy.ndarray): Their absolute offsets.

    Raises:
        CorruptIndexError: For a file that is not a valid time index.
    """

    entry_size = TIME_ENTRY.itemsize

    def __init__(self, path, base_offset=None):
        self.path = str(path)
        self.base_offset = base_offset_of(path) if base_offset is None else base_offset
        entries = _used_entries(self.path, TIME_ENTRY)
        self.timestamps = entries["timestamp"].astype(np.int64)
        self.offsets = entries["relative_offset"].astype(np.int64) + self.base_offset
        self._check()

    def _check(self):
        where = dict(source=self.path)
        n = len(self.offsets)
        if n and self.offsets[-1] < self.base_offset:
            raise CorruptIndexError(
                f"last offset {self.offsets[-1]} is below the base offset {self.base_offset}",
                position=(n - 1) * self.entry_size, **where)
        for mask, what in ((np.diff(self.timestamps) <= 0, "timestamps going backwards"),
                           (np.diff(self.offsets) < 0, "offsets going backwards")):
            if mask.any():
                i = _first_bad(mask) + 1
                raise CorruptIndexError(f"{what} at entry {i} (timestamp {self.timestamps[i]}, "
                                        f"offset {self.offsets[i]})",
                                        position=i * self.entry_size, **where)

    def __len__(self):
        return len(self.offsets)

    def __iter__(self):
        return (TimeIndexEntry(int(t), int(o)) for t, o in zip(self.timestamps, self.offsets))

    @property
    def last_entry(self):
        """The last entry, or ``(-1, base offset)`` when there is none."""
        if not len(self):
            return TimeIndexEntry(NO_TIMESTAMP, self.base_offset)
        return TimeIndexEntry(int(self.timestamps[-1]), int(self.offsets[-1]))

    def lookup(self, timestamp):
        """The entry with the largest timestamp at or below ``timestamp``,
        else ``(-1, base offset)``."""
        i = int(np.searchsorted(self.timestamps, timestamp, side="right")) - 1
        if i < 0:
            return TimeIndexEntry(NO_TIMESTAMP, self.base_offset)
        return TimeIndexEntry(int(self.timestamps[i]), int(self.offsets[i]))


def read_txn_index(path):
    """The aborted transactions a ``.txnindex`` file lists.

    Args:
        path: The file.

    Returns:
        list[AbortedTxn]: In file order.

    Raises:
        CorruptIndexError: For an unknown entry version or an entry that ends
            before it starts.
    """
    path = str(path)
    entries = _entries(path, TXN_ENTRY)
    bad = entries["version"] != 0
    if bad.any():
        i = _first_bad(bad)
        raise CorruptIndexError(f"unsupported .txnindex entry version {entries['version'][i]}",
                                position=i * TXN_ENTRY.itemsize, source=path)
    backwards = entries["last_offset"] < entries["first_offset"]
    if backwards.any():
        i = _first_bad(backwards)
        raise CorruptIndexError(
            f"aborted transaction ends (offset {entries['last_offset'][i]}) before it starts "
            f"(offset {entries['first_offset'][i]})", position=i * TXN_ENTRY.itemsize, source=path)
    return [AbortedTxn(*map(int, row[1:])) for row in entries.tolist()]


def read_leader_epoch_checkpoint(path):
    """The entries of a ``leader-epoch-checkpoint`` file.

    Args:
        path: The file.

    Returns:
        list[EpochEntry]: ``(epoch, start_offset)`` pairs.

    Raises:
        CorruptIndexError: For a malformed file, naming the line's byte.
    """
    path = str(path)
    with open(path, "rb") as f:
        text = f.read(1 << 24)
    lines, position = [], 0
    for raw in text.splitlines(keepends=True):
        lines.append((position, raw.strip()))
        position += len(raw)

    def fail(message, at):
        raise CorruptIndexError(message, position=at, source=path)

    def number(i):
        at, raw = lines[i] if i < len(lines) else (len(text), b"")
        try:
            return int(raw)
        except ValueError:
            fail(f"line {i + 1}: expected a number, found {raw[:40]!r}", at)

    # The broker reads a file that ends before its count as holding no entries.
    if not lines:
        return []
    if number(0) != 0:
        fail(f"unsupported checkpoint version {number(0)}", 0)
    if len(lines) == 1:
        return []
    count = number(1)
    if count < 0 or len(lines) - 2 < count:
        fail(f"checkpoint announces {count} entries, has {len(lines) - 2}", lines[1][0])
    entries = []
    for at, raw in lines[2:2 + count]:
        fields = raw.split()
        try:
            epoch, start = (int(x) for x in fields)
        except ValueError:
            fail(f"expected 'epoch startOffset', found {raw[:40]!r}", at)
        if entries and (epoch <= entries[-1].epoch or start < entries[-1].start_offset):
            fail(f"epochs must increase with their start offsets, found {epoch} {start} "
                 f"after {entries[-1].epoch} {entries[-1].start_offset}", at)
        entries.append(EpochEntry(epoch, start))
    if any(raw for _, raw in lines[2 + count:]):
        fail("unexpected lines after the announced entries", lines[2 + count][0])
    return entries


def write_leader_epoch_checkpoint(path, entries):
    lines = ["0", str(len(entries))] + [f"{epoch} {start}" for epoch, start in entries]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


SNAPSHOT_NAME = re.compile(r"^\d{20}\.snapshot$")


def snapshot_path(directory, offset):
    """Where the producer snapshot taken at `offset` lives in `directory`."""
    return os.path.join(directory, f"{offset:020d}.snapshot")


def snapshot_offsets(directory):
    """The offsets of the producer snapshots in `directory`, in order."""
    return sorted(int(name[:20]) for name in os.listdir(directory) if SNAPSHOT_NAME.match(name))


def read_producer_snapshot(path):
    """The producer states a ``.snapshot`` file holds (its CRC-32C checked).

    Args:
        path: The file.

    Returns:
        list[ProducerSnapshotEntry]: One per producer.

    Raises:
        CorruptIndexError: For a wrong version, CRC or size.
    """
    path = str(path)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptIndexError(f"producer snapshot of {len(data)} bytes is shorter than its "
                                "10-byte header", position=0, source=path)
    version, stored, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != 1:
        raise CorruptIndexError(f"unsupported producer snapshot version {version}",
                                position=0, source=path)
    computed = crc32c(memoryview(data)[6:])
    if computed != stored:
        raise CorruptIndexError(f"producer snapshot CRC-32C 0x{stored:08x} != computed "
                                f"0x{computed:08x}", position=2, source=path)
    body = len(data) - SNAPSHOT_HEADER.size
    if count < 0 or count * SNAPSHOT_ENTRY.itemsize != body:
        raise CorruptIndexError(f"producer snapshot announces {count} entries of "
                                f"{SNAPSHOT_ENTRY.itemsize} bytes but holds {body} bytes",
                                position=6, source=path)
    rows = np.frombuffer(data, SNAPSHOT_ENTRY, offset=SNAPSHOT_HEADER.size)
    return [ProducerSnapshotEntry(*map(int, row)) for row in rows.tolist()]


def encode_producer_snapshot(entries):
    """The bytes of a ``.snapshot`` file (version 1, CRC-32C) holding entries.

    Args:
        entries: :class:`ProducerSnapshotEntry` objects or tuples of the same
            fields.

    Returns:
        bytes: The file's contents.
    """
    rows = np.array([tuple(e) for e in entries], SNAPSHOT_ENTRY)
    body = struct.pack(">i", len(rows)) + rows.tobytes()
    return struct.pack(">hI", 1, crc32c(body)) + body
