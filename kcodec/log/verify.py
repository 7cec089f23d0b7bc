"""Checking a partition log (verify) and recovering what is intact (salvage).

Both walk each segment with one scanner: entries are read in order with
their CRCs checked and their records decoded; where that fails, the scanner
looks for the next byte position at which an intact entry starts (plausible
framing first, then a full read whose CRC must hold) and reports the bytes
in between as skipped.
"""
import bisect
import os
from collections import namedtuple

import numpy as np

from ..errors import CorruptIndexError, KafkaFormatError
from .._core.records import LAYOUT
from ..records import read_batches
from .indexes import SNAPSHOT_NAME, read_leader_epoch_checkpoint, read_producer_snapshot
from .segment import Segment

INT32_MAX = (1 << 31) - 1
DEFAULT_MAX_ENTRY_BYTES = 64 << 20
_WINDOW = 1 << 20


class Problem(namedtuple("Problem", "file position message end")):
    """Something wrong in a file; prints as ``file:position: message``.

    Args:
        file: The file (str).
        position: The byte where it is (None when unknown).
        message: What is wrong.
        end: For a skipped range of bytes, the byte it ends before.
    """

    def __new__(cls, file, position, message, end=None):
        return super().__new__(cls, str(file), position, message, end)

    def __str__(self):
        where = f"{self.position}" if self.end is None else f"{self.position}-{self.end}"
        return f"{self.file}:{where}: {self.message}"


class VerifyReport:
    """What :func:`verify_log` or :func:`salvage` found: truthy when there is
    no problem. Iterating yields the :class:`Problem` objects; ``str()``
    gives one line per problem, or ``OK: N files checked``.

    Args:
        problems: The problems found.
        checked: The files checked.

    Attributes:
        problems (list[Problem]): The problems found.
        checked (list[str]): The files checked.
    """

    def __init__(self, problems=(), checked=()):
        self.problems = list(problems)
        self.checked = list(checked)

    def __bool__(self):
        return not self.problems

    def __iter__(self):
        return iter(self.problems)

    def __len__(self):
        return len(self.problems)

    def __str__(self):
        if not self.problems:
            return f"OK: {len(self.checked)} files checked"
        return "\n".join(map(str, self.problems))

    def __repr__(self):
        return f"VerifyReport({len(self.problems)} problems, {len(self.checked)} files checked)"


SalvagedBatch = namedtuple("SalvagedBatch", "file position batch data")
SalvagedBatch.__doc__ = ("An intact entry: its file, byte position in it, the Batch (CRC and "
                         "records checked) and its bytes (a view into the mapped file).")


def _candidates(data, start, max_entry_bytes):
    """Positions >= start where an entry could begin: magic 0..2, a size that
    fits the file and the magic's minimum, a known codec."""
    n = len(data)
    smallest = LAYOUT.LOG_OVERHEAD + LAYOUT.MIN_ENTRY_SIZE
    while start + smallest <= n:
        m = min(_WINDOW, n - smallest + 1 - start)
        strided = dict(buffer=data, strides=(1,))
        sizes = np.ndarray((m,), ">i4", offset=start + LAYOUT.ENTRY_SIZE_AT,
                           **strided).astype(np.int64)
        magic = np.ndarray((m,), "u1", offset=start + LAYOUT.MAGIC_AT, **strided)
        legacy_codec = np.ndarray((m,), "u1", offset=start + LAYOUT.MESSAGE_ATTRIBUTES_AT,
                                  **strided) & LAYOUT.ATTR_CODEC_MASK
        v2_codec = np.ndarray((m,), "u1", offset=start + LAYOUT.V2_ATTRIBUTES_LOW_BYTE_AT,
                              **strided) & LAYOUT.ATTR_CODEC_MASK
        ends = start + np.arange(m, dtype=np.int64) + LAYOUT.LOG_OVERHEAD + sizes
        ok = ((magic <= 2) & (sizes >= LAYOUT.MIN_ENTRY_SIZE) & (sizes <= max_entry_bytes)
              & (ends <= n))
        ok &= np.where(magic == 2,
                       (sizes >= LAYOUT.V2_MIN_ENTRY_SIZE) & (v2_codec <= LAYOUT.MAX_CODEC_ID),
                       legacy_codec <= LAYOUT.MAX_LEGACY_CODEC_ID)
        for i in np.flatnonzero(ok):
            yield start + int(i)
        start += m


def _checked(batch):
    for _ in batch:
        pass
    return batch


def scan(segment, max_entry_bytes=DEFAULT_MAX_ENTRY_BYTES, first_byte=0):
    """("batch", position, Batch) for each intact entry of `segment` and
    ("skip", start, end, message) for each run of bytes that is not one.
    Messages name bytes of the file, whose byte `first_byte` segment.data
    starts at (positions count from segment.data's start)."""
    data, size, path = segment.data, segment.size, segment.log_path
    position = 0
    while position < size:
        current = position
        try:
            for batch in read_batches(segment.view(position, None), partial="error",
                                      max_entry_bytes=max_entry_bytes, source=path,
                                      first_byte=first_byte + position):
                current = position + batch.position
                yield "batch", current, _checked(batch)
                current += batch.size
            return
        except KafkaFormatError as error:
            message = error.message if error.position is None else \
                f"{error.message} (at byte {error.position})"
        resync = None
        for candidate in _candidates(data, current + 1, max_entry_bytes):
            try:
                reader = read_batches(segment.view(candidate, None), partial="error",
                                      max_entry_bytes=max_entry_bytes)
                _checked(next(reader))
            except (KafkaFormatError, StopIteration):
                continue
            resync = candidate
            break
        end = size if resync is None else resync
        yield "skip", current, end, message
        position = end


def _log_paths(path_or_dir):
    path = str(path_or_dir)
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path))
                if n.endswith(".log") and n[:-4].isdigit()]
    return [path]


def salvage(path_or_dir, *, max_entry_bytes=DEFAULT_MAX_ENTRY_BYTES):
    """Every intact entry of a ``.log`` file (or of all segments of a
    partition directory), read around corrupt regions.

    Where an entry fails its checks, the scan looks for the next byte at which
    an intact entry starts (plausible framing first, then a full read whose
    CRC holds) and reports the bytes in between as skipped.

    Args:
        path_or_dir: A ``.log`` file (or any record-set file), or a partition
            directory.
        max_entry_bytes: The largest entry considered when resynchronising.

    Returns:
        tuple[list[SalvagedBatch], VerifyReport]: The intact entries, and a
        report whose problems are the skipped byte ranges.
    """
    good, skipped, paths = [], [], _log_paths(path_or_dir)
    for path in paths:
        segment = Segment(path) if path.endswith(".log") and os.path.basename(path)[:-4].isdigit() \
            else _AnyFile(path)
        for event in scan(segment, max_entry_bytes):
            if event[0] == "batch":
                _, position, batch = event
                good.append(SalvagedBatch(path, position, batch,
                                          segment.view(position, position + batch.size)))
            else:
                _, start, end, message = event
                skipped.append(Problem(path, start, f"skipped {end - start} bytes: {message}",
                                       end))
    return good, VerifyReport(skipped, paths)


class _AnyFile(Segment):
    """A record-set file that is not named like a segment (a copy, a capture)."""

    def __init__(self, path):
        self.log_path = str(path)
        self.base_offset = 0
        self._data = None


def verify_log(log, *, max_entry_bytes=DEFAULT_MAX_ENTRY_BYTES):
    """Check a partition log.

    Checks every entry intact (CRC, records), offsets increasing within and
    across segments and within each segment's range, every ``.index`` entry
    naming the last offset of an append (one batch or more) that starts at
    its position, and none past the log's end, every ``.timeindex`` entry
    naming an offset of a batch (its last, as current brokers write) and that
    batch's max timestamp, the ``.txnindex`` entries equal to the ABORT
    markers found, and the checkpoint and snapshot files readable.

    Args:
        log: A :class:`PartitionLog`.
        max_entry_bytes: The largest entry considered when resynchronising
            after damage.

    Returns:
        VerifyReport: Every problem found, each naming file and byte.
    """
    problems, checked = [], []
    # As the log's readers do: a transaction that the producer snapshot at the
    # log start holds open began in a segment that may be deleted since.
    tracker, _ = log.tracker_from_snapshot(log.start_offset)
    use_txn_index = any(seg.has_txn_index for seg in log.segments)
    previous_last = None
    for i, seg in enumerate(log.segments):
        checked.append(seg.log_path)
        following = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else None
        batches = {}                  # position -> (first offset, last offset, max timestamp)
        aborted = []
        for event in scan(seg, max_entry_bytes):
            if event[0] == "skip":
                _, start, end, message = event
                problems.append(Problem(seg.log_path, start,
                                        f"{end - start} bytes unreadable: {message}", end))
                continue
            _, position, batch = event
            first = batch.base_offset
            if previous_last is not None and first <= previous_last:
                problems.append(Problem(seg.log_path, position,
                                        f"offset {first} does not follow {previous_last}"))
            if first < seg.base_offset or batch.last_offset - seg.base_offset > INT32_MAX:
                problems.append(Problem(seg.log_path, position,
                                        f"batch offsets {first}..{batch.last_offset} are outside "
                                        f"the segment's range from {seg.base_offset}"))
            if following is not None and batch.last_offset >= following:
                problems.append(Problem(seg.log_path, position,
                                        f"batch ends at offset {batch.last_offset}, at or past "
                                        f"the next segment's base offset {following}"))
            previous_last = batch.last_offset
            batches[position] = (first, batch.last_offset, batch.max_timestamp)
            completed = tracker.append(batch)
            if completed is not None:
                aborted.append(completed)
        problems += _check_offset_index(seg, batches, checked)
        problems += _check_time_index(seg, batches, checked)
        if use_txn_index:
            problems += _check_txn_index(seg, aborted, checked)
    for name in sorted(os.listdir(log.directory)):
        path = os.path.join(log.directory, name)
        reader = {"leader-epoch-checkpoint": read_leader_epoch_checkpoint}.get(name)
        if SNAPSHOT_NAME.match(name):
            reader = read_producer_snapshot
        if reader is None:
            continue
        checked.append(path)
        try:
            reader(path)
        except CorruptIndexError as exc:
            problems.append(Problem(path, exc.position, exc.message))
    return VerifyReport(problems, checked)


def _load(seg, attribute, problems):
    try:
        return getattr(seg, attribute)
    except CorruptIndexError as exc:
        problems.append(Problem(exc.source, exc.position, exc.message))
        return None


def _check_offset_index(seg, batches, checked):
    problems = []
    index = _load(seg, "offset_index", problems)
    if index is None:
        return problems
    checked.append(index.path)
    # An entry names the last offset of an append, which may hold several
    # batches, and the position of its first batch: the batch ending at the
    # offset lies from there to before the next append's.
    end_of_batch_at = {last: position for position, (_, last, _) in batches.items()}
    next_positions = list(index.positions[1:]) + [seg.size]
    for i, (offset, position) in enumerate(index):
        at = i * index.entry_size
        found = batches.get(position)
        ending = end_of_batch_at.get(offset, -1)
        if found is None:
            problems.append(Problem(index.path, at, f"entry (offset {offset}, position "
                                    f"{position}) does not point at the start of a batch"))
        elif not found[0] <= offset or not position <= ending < next_positions[i]:
            problems.append(Problem(index.path, at, f"entry (offset {offset}, position "
                                    f"{position}): no batch from the one there (offsets "
                                    f"{found[0]}..{found[1]}) up to the next entry's position "
                                    f"ends at offset {offset}"))
    if index.past_log_end:
        first = index.past_log_end[0]
        problems.append(Problem(index.path, len(index) * index.entry_size,
                                f"{len(index.past_log_end)} entries, from (offset {first.offset}, "
                                f"position {first.position}), point past the end of the "
                                f"{seg.size}-byte log"))
    return problems


def _check_time_index(seg, batches, checked):
    problems = []
    index = _load(seg, "time_index", problems)
    if index is None:
        return problems
    checked.append(index.path)
    # Brokers name the batch's last offset (current versions, recovery, the
    # cleaner) or, for uncompressed appends on older versions, the offset of
    # the record holding the max timestamp: any offset of the batch.
    spans = sorted(batches.values(), key=lambda b: b[1])
    lasts = [last for _, last, _ in spans]
    past_last = []                 # as a log cut short leaves them: one problem for all
    for i, (timestamp, offset) in enumerate(index):
        at = i * index.entry_size
        j = bisect.bisect_left(lasts, offset)
        if j == len(spans):
            past_last.append((at, timestamp, offset))
        elif spans[j][0] > offset:
            problems.append(Problem(index.path, at, f"entry (timestamp {timestamp}, offset "
                                    f"{offset}) names an offset no batch holds"))
        elif spans[j][2] != timestamp:
            problems.append(Problem(index.path, at, f"entry (timestamp {timestamp}, offset "
                                    f"{offset}): that batch's max timestamp is {spans[j][2]}"))
    if past_last:
        at, timestamp, offset = past_last[0]
        problems.append(Problem(index.path, at, f"{len(past_last)} entries, from (timestamp "
                                f"{timestamp}, offset {offset}), name offsets past the "
                                f"segment's last batch"))
    return problems


def _check_txn_index(seg, found, checked):
    problems = []
    try:
        listed = seg.aborted_transactions()
    except CorruptIndexError as exc:
        return [Problem(exc.source, exc.position, exc.message)]
    if seg.has_txn_index:
        checked.append(seg.txn_index_path)
    key = lambda t: (t.producer_id, t.first_offset, t.last_offset)  # noqa: E731
    expected = {key(t) for t in found}
    for i, txn in enumerate(listed):
        if key(txn) not in expected:
            problems.append(Problem(seg.txn_index_path, i * 34, f"aborted transaction "
                                    f"(producer {txn.producer_id}, offsets {txn.first_offset}.."
                                    f"{txn.last_offset}) has no ABORT marker in the segment"))
    present = {key(t) for t in listed}
    for txn in found:
        if key(txn) not in present:
            problems.append(Problem(seg.txn_index_path, 34 * len(listed), f"ABORT marker at "
                                    f"offset {txn.last_offset} (producer {txn.producer_id}) is "
                                    "missing from the .txnindex"))
    return problems
