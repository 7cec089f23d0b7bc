"""Planning a read: offset bounds per partition, then splits — one per
segment, large segments cut at the byte positions their .index names (where
batches start), so no batch is read twice and none is missed."""
import heapq
import os
from dataclasses import dataclass

import numpy as np
from pyspark.sql.datasource import InputPartition

from ..log.partition import parse_partition_dir
from .files import RemoteSegment, open_partition, partition_dirs
from .filters import Pushdown
from .options import EARLIEST, LATEST


class DataLossError(ValueError):
    """Requested offsets are no longer (or not yet) in the log, and
    failOnDataLoss is true."""


@dataclass
class Split(InputPartition):
    """One task's share of a read: the batches starting in bytes
    ``[start, end)`` of one segment file, decoded in pieces cut at
    ``chunks``; rows outside ``[start_offset, end_offset)`` are dropped.

    Attributes:
        id (int): The split's number in its read.
        topic (str): The topic.
        partition (int): The partition.
        filesystem: The segment's filesystem (a ``kcodec.spark.storage``
            Store, which pickles with the endpoint and credentials the plan
            resolved), or None for the local disk (memory-mapped).
        path (str): The segment file.
        start (int): First byte.
        end (int): Byte to stop before.
        at_file_end (bool): Whether a partial batch at ``end`` is the log's
            tail (the end of its active segment), not corruption.
        chunks (tuple): Byte positions where decoding is cut into pieces.
        start_offset (int): First offset read (inclusive).
        end_offset (int): Offset to stop before.
        aborted (tuple | None): The ``AbortedTxn`` of the segment's range for
            ``read_committed``; None for ``read_uncommitted``.
        min_timestamp (int | None): Batches whose max timestamp (ms) is below
            this are not decoded (a pushed-down timestamp filter); None: all
            are.
    """
    id: int
    topic: str
    partition: int
    filesystem: object          # None: the local disk (memory-mapped)
    path: str
    start: int
    end: int
    at_file_end: bool           # a partial batch at `end` is the log's tail (the end of its
                                # active segment), not corruption
    chunks: tuple
    start_offset: int
    end_offset: int
    aborted: tuple              # AbortedTxn of the segment's range; None: read_uncommitted
    min_timestamp: int = None   # skip batches older than this (ms); None: skip none

    @property
    def source(self):
        """The segment as errors name it: its path, or its URI (``s3://...``)."""
        return self.path if self.filesystem is None else self.filesystem.uri(self.path)

    @property
    def size(self):
        """The split's bytes."""
        return self.end - self.start

    @property
    def name(self):
        """Unique among a read's splits: partition directory, segment, start."""
        directory, segment = os.path.split(self.path)
        return f"{os.path.basename(directory)}.{segment}@{self.start}"


@dataclass
class PartitionPlan:
    topic: str
    partition: int
    directory: str
    start_offset: int
    end_offset: int
    log_start_offset: int
    log_end_offset: int


def resolve_bounds(log, options):
    """[start, end) offsets to read from `log`, as Spark's Kafka source
    resolves startingOffsets/endingOffsets/timestamps against a partition."""
    topic, partition = log.topic, log.partition
    log_start, log_end = log.start_offset, log.end_offset
    value, is_timestamp = options.starting.for_partition(topic, partition, EARLIEST)
    explicit_start = not is_timestamp and value != EARLIEST
    if is_timestamp:
        start = log.offset_for_timestamp(value)
        if start is None:
            if options.starting_by_timestamp_strategy == "error":
                raise ValueError(f"{topic}-{partition}: no record has a timestamp at or after "
                                 f"the starting timestamp {value} (set "
                                 "startingOffsetsByTimestampStrategy=latest to read nothing)")
            start = log_end
    else:
        start = log_start if value == EARLIEST else value
    value, is_timestamp = options.ending.for_partition(topic, partition, LATEST)
    explicit_end = not is_timestamp and value != LATEST
    if is_timestamp:
        end = log.offset_for_timestamp(value)
        end = log_end if end is None else end
    else:
        end = log_end if value == LATEST else value
    if explicit_start and explicit_end and start > end:
        raise ValueError(f"{topic}-{partition}: ending offset {end} is before the starting "
                         f"offset {start}")
    lost = []
    if start < log_start:
        lost.append(f"offsets {start}..{log_start - 1} are before the log start offset")
        start = log_start
    if start > log_end:
        lost.append(f"starting offset {start} is past the log end offset {log_end}")
        start = log_end
    if end > log_end:
        lost.append(f"ending offset {end} is past the log end offset {log_end}")
        end = log_end
    if lost and options.fail_on_data_loss:
        raise DataLossError(f"{log.directory}: " + "; ".join(lost) +
                            " (set failOnDataLoss=false to read what is there)")
    if options.isolation == "read_committed":
        # A read_committed consumer reads no further than the last stable
        # offset: the first offset of a transaction still open at the log end.
        end = min(end, log.last_stable_offset())
    return start, max(start, end)


def _index_entries(seg, first, last):
    """(positions, offsets) of the .index entries whose batch starts inside
    (first, last); on the local disk only those pointing at a plausible
    batch header (its base offset at or below the entry's, a known magic)."""
    index = seg.offset_index
    if index is None or not len(index):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    positions, offsets = index.positions, index.offsets
    inside = (positions > first) & (positions < last)
    positions, offsets = positions[inside], offsets[inside]
    if not isinstance(seg, RemoteSegment) and len(positions):
        data = seg.data
        fits = positions + 17 <= len(data)
        positions, offsets = positions[fits], offsets[fits]
        raw = np.frombuffer(data, np.uint8)
        heads = raw[positions[:, None] + np.arange(17)]
        base = heads[:, :8].copy().view(">i8")[:, 0]
        ok = (base <= offsets) & (heads[:, 16] <= 2)
        positions, offsets = positions[ok], offsets[ok]
    return positions, offsets


def _cut(positions, lower_offsets, first, last, first_offset, last_offset, max_bytes,
         max_rows):
    """Boundaries [first, ..., last] at candidate positions, each piece within
    max_bytes and about max_rows offsets where the candidates allow it."""
    bounds, piece_offset, previous = [first], first_offset, None
    candidates = list(zip(positions.tolist(), lower_offsets.tolist())) + [(last, last_offset)]
    for position, offset in candidates:
        too_big = position - bounds[-1] > max_bytes or (
            max_rows is not None and offset - piece_offset > max_rows)
        if too_big and previous is not None and previous[0] > bounds[-1]:
            bounds.append(previous[0])
            piece_offset = previous[1]
        previous = (position, offset)
    bounds.append(last)
    return bounds


def _segment_pieces(log, start, end, options):
    """(segment, first byte, last byte, at file end, positions, lower offsets)
    of the segments holding [start, end)."""
    segments = log.segments
    for i, seg in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if following is not None and following <= start:
            continue
        if seg.base_offset >= end:
            return
        if not seg.size:
            continue
        first = 0
        if start > seg.base_offset:
            first = seg.position_for(start)
            if first is None:
                continue
        last, at_file_end = seg.size, seg.active
        positions, offsets = _index_entries(seg, first, seg.size)
        # offsets[k] is the last offset of the batch at positions[k]: the batch
        # after it starts past that offset; past end - 1 nothing more is read.
        beyond = np.flatnonzero(offsets >= end - 1)
        if len(beyond) and beyond[0] + 1 < len(positions):
            last, at_file_end = int(positions[beyond[0] + 1]), False
            positions, offsets = positions[:beyond[0] + 1], offsets[:beyond[0] + 1]
        # Lower bound of the first offset of the batch at positions[k].
        lower = np.concatenate(([seg.base_offset], offsets[:-1] + 1))[:len(positions)]
        last_offset = end if following is None else min(end, following)
        yield seg, first, last, at_file_end, positions, lower, last_offset


class _Piece:
    __slots__ = ("seg", "first", "last", "at_file_end", "positions", "lower", "first_offset",
                 "last_offset", "log", "start", "end", "aborted")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)

    def splittable(self):
        return bool(len(self.positions))

    def halve(self):
        middle = (self.first + self.last) / 2
        k = int(np.argmin(np.abs(self.positions - middle)))
        cut = int(self.positions[k])
        left = _Piece(**{s: getattr(self, s) for s in self.__slots__})
        right = _Piece(**{s: getattr(self, s) for s in self.__slots__})
        left.last, left.at_file_end, left.last_offset = cut, False, int(self.lower[k])
        left.positions, left.lower = self.positions[:k], self.lower[:k]
        right.first, right.first_offset = cut, int(self.lower[k])
        right.positions, right.lower = self.positions[k + 1:], self.lower[k + 1:]
        return left, right


def plan(paths, options, pushdown=None):
    """Plan a read: one split per segment, large segments cut at the byte
    positions their ``.index`` names (where batches start), so every batch is
    read by exactly one task.

    Args:
        paths: Partition directories, globs of them, or ``log.dirs`` roots,
            as paths or URIs of any filesystem pyarrow reaches.
        options: The :class:`ReadOptions` of the read.
        pushdown: The :class:`~kcodec.spark.filters.Pushdown` of filters
            Spark pushed down, or None: partitions they exclude are not
            opened, offsets narrowed to theirs and, for a timestamp lower
            bound, started where the ``.timeindex`` says it is reached.

    Returns:
        tuple: The list of :class:`Split` objects, and a ``PartitionPlan``
        (topic, partition, directory, offset bounds, log start and end) per
        partition read.

    Raises:
        DataLossError: When requested offsets are gone and
            ``failOnDataLoss`` is true.
        ValueError: For offsets or timestamps that cannot be resolved.
    """
    pushdown = pushdown if pushdown is not None else Pushdown()
    pieces, partitions = [], []
    for fs, directory in partition_dirs(paths, options.storage):
        topic, partition = parse_partition_dir(directory)
        if not options.wants(topic, partition) or not pushdown.wants(topic, partition):
            continue
        log = open_partition(fs, directory, verify_crc=options.verify_crc)
        start, end = _pushed_bounds(log, *resolve_bounds(log, options), pushdown)
        partitions.append(PartitionPlan(topic, partition, directory, start, end,
                                        log.start_offset, log.end_offset))
        if start >= end:
            continue
        aborted = (log.aborted_transactions(start) if options.isolation == "read_committed"
                   else None)
        for seg, first, last, at_file_end, positions, lower, last_offset in _segment_pieces(
                log, start, end, options):
            seg_aborted = None
            if aborted is not None:
                seg_aborted = tuple(t for t in aborted if t.last_offset >= seg.base_offset
                                    and t.first_offset < end)
            bounds = _cut(positions, lower, first, last, max(start, seg.base_offset), last_offset,
                          options.max_bytes_per_partition, options.max_records_per_partition)
            offset_at = dict(zip(positions.tolist(), lower.tolist()))
            offset_at[first], offset_at[last] = max(start, seg.base_offset), last_offset
            for a, b in zip(bounds, bounds[1:]):
                inside = (positions > a) & (positions < b)
                pieces.append(_Piece(
                    seg=seg, first=a, last=b, at_file_end=at_file_end and b == last,
                    positions=positions[inside], lower=lower[inside], first_offset=offset_at[a],
                    last_offset=offset_at[b], log=log, start=start, end=end,
                    aborted=seg_aborted))
    pieces = _at_least(pieces, options.min_partitions or 0)
    splits = [_split(i, p, options, pushdown.min_timestamp) for i, p in enumerate(pieces)]
    return splits, partitions


def _pushed_bounds(log, start, end, pushdown):
    """[start, end) of a partition narrowed by the pushed-down filters: their
    offset bounds, then the first offset whose timestamp reaches their
    timestamp lower bound (all before it are older)."""
    start, end = pushdown.offsets(start, end)
    if pushdown.min_timestamp is not None and start < end:
        reached = log.offset_for_timestamp(pushdown.min_timestamp)
        start = min(end, max(start, end if reached is None else reached))
    return start, end


def _at_least(pieces, count):
    """Halve the largest splittable pieces until there are `count` of them."""
    if len(pieces) >= count:
        return pieces
    order = {id(p): i for i, p in enumerate(pieces)}
    # (size, the piece it came from, where it starts): unique, so that pieces
    # themselves are never compared.
    heap = [(-(p.last - p.first), order[id(p)], p.first, p) for p in pieces if p.splittable()]
    heapq.heapify(heap)
    done = [p for p in pieces if not p.splittable()]
    total = len(pieces)
    while heap and total < count:
        _, rank, _, piece = heapq.heappop(heap)
        for half in piece.halve():
            if half.splittable():
                heapq.heappush(heap, (-(half.last - half.first), rank, half.first, half))
            else:
                done.append(half)
        total += 1
    pieces = done + [entry[-1] for entry in heap]
    return sorted(pieces, key=lambda p: (p.log.directory, p.seg.base_offset, p.first))


def _split(i, piece, options, min_timestamp):
    seg, log = piece.seg, piece.log
    chunks = _cut(piece.positions, piece.lower, piece.first, piece.last, piece.first_offset,
                  piece.last_offset, options.max_batch_bytes, None)[1:-1]
    remote = getattr(seg, "remote_path", None)
    return Split(
        id=i, topic=log.topic, partition=log.partition,
        filesystem=getattr(seg, "fs", None), path=remote or seg.log_path,
        start=piece.first, end=piece.last, at_file_end=piece.at_file_end, chunks=tuple(chunks),
        start_offset=piece.start, end_offset=piece.end, aborted=piece.aborted,
        min_timestamp=min_timestamp)
