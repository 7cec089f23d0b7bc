"""Corrupted copies of a log: typed errors naming file and position when
reading, verify() reports, salvage() recovers every intact batch."""
import os
import shutil
import struct

import pytest

from kcodec import CrcMismatchError, KafkaFormatError
import kcodec
from kcodec.log import PartitionLog, salvage, write_log
from log_helpers import entry_bounds, scripted_history, view, write_history


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    history = scripted_history(seed=3, rounds=4)
    directory = tmp_path_factory.mktemp("verify") / "t-0"
    return str(write_history(str(directory), history, 8000, 1024)), history


@pytest.fixture
def copy(tmp_path, pristine):
    directory, history = pristine
    target = tmp_path / "t-0"
    shutil.copytree(directory, target)
    return PartitionLog(target), history


def segment_batches(seg):
    return entry_bounds(open(seg.log_path, "rb").read())


def flip(path, position, bit=1):
    raw = bytearray(open(path, "rb").read())
    raw[position] ^= bit
    open(path, "wb").write(raw)


def test_pristine_log_verifies(pristine):
    report = PartitionLog(pristine[0]).verify()
    assert report, str(report)
    assert "OK" in str(report) and len(report) == 0
    assert any(p.endswith(".index") for p in report.checked)


def test_bit_flip_in_a_batch(copy):
    log, history = copy
    seg = log.segments[1]
    start, end, base, last = segment_batches(seg)[2]
    flip(seg.log_path, start + 70)
    for decode in (log.decode, lambda **o: list(log.iter_decode(**o))):
        for isolation in ("read_uncommitted", "read_committed"):
            with pytest.raises(CrcMismatchError) as info:
                decode(isolation=isolation)
            assert info.value.source == seg.log_path and info.value.position == start
    with pytest.raises(KafkaFormatError) as info:
        list(log.read_records())
    assert info.value.source == seg.log_path and info.value.position == start
    report = log.verify()
    assert not report
    [problem] = [p for p in report if p.file == seg.log_path]
    assert (problem.position, problem.end) == (start, end)
    assert "CRC" in problem.message

    good, skipped = salvage(log.directory)
    assert [(p.file, p.position, p.end) for p in skipped] == [(seg.log_path, start, end)]
    kept = [r for g in good for r in g.batch if not g.batch.is_control]
    lost = set(range(base, last + 1))
    assert view(kept) == [r for r in history.data_records() if r[0] not in lost]
    assert all(g.batch.crc_valid for g in good)
    assert all(bytes(g.data[:8]) == struct.pack(">q", g.batch.base_offset) for g in good)


def test_reading_an_intact_range_of_a_damaged_log_still_works(copy):
    log, history = copy
    seg = log.segments[1]
    start, _, base, _ = segment_batches(seg)[2]
    flip(seg.log_path, start + 70)
    later = log.segments[2].base_offset
    assert view(log.read_records(later)) == [r for r in history.data_records() if r[0] >= later]
    assert log.decode(0, base).num_rows == len([r for r in history.data_records() if r[0] < base])


@pytest.mark.parametrize("field,offset", [("size", 8), ("magic", 16)])
def test_broken_framing_is_skipped_up_to_the_next_batch(copy, field, offset):
    log, history = copy
    seg = log.segments[0]
    bounds = segment_batches(seg)
    start, end, _, _ = bounds[1]
    raw = bytearray(open(seg.log_path, "rb").read())
    if field == "size":
        struct.pack_into(">i", raw, start + 8, 3)        # below the 14-byte minimum
    else:
        raw[start + 16] = 9
    open(seg.log_path, "wb").write(raw)
    with pytest.raises(KafkaFormatError) as info:
        log.decode()
    assert info.value.source == seg.log_path
    assert info.value.position is not None and start <= info.value.position < end
    good, skipped = salvage(seg.log_path)
    assert [(p.position, p.end) for p in skipped] == [(start, end)]
    assert [g.position for g in good] == [b[0] for b in bounds if b[0] != start]


def test_truncated_segment(copy):
    log, history = copy
    seg = log.segments[-1]
    bounds = segment_batches(seg)
    start, end, base, _ = bounds[-1]
    cut = start + (end - start) // 2
    with open(seg.log_path, "r+b") as f:
        f.truncate(cut)
    log = PartitionLog(log.directory)
    # a partial trailing entry ends the data silently, as in Kafka
    assert view(log.read_records()) == [r for r in history.data_records() if r[0] < base]
    assert log.end_offset == base
    report = log.verify()
    assert [(p.file, p.position, p.end) for p in report if p.file == seg.log_path] == \
        [(seg.log_path, start, cut)]
    # index entries for the lost batch, if any, are reported against their files
    assert {p.file for p in report} <= {seg.log_path, seg.index_path, seg.time_index_path}
    good, skipped = salvage(log.directory)
    assert [(p.position, p.end) for p in skipped] == [(start, cut)]


def test_garbage_between_batches_is_skipped(copy):
    log, history = copy
    seg = log.segments[0]
    start, _, _, _ = segment_batches(seg)[1]
    raw = open(seg.log_path, "rb").read()
    junk = bytes(range(256)) * 3 + b"\x00\x00\x00\x02" * 10
    open(seg.log_path, "wb").write(raw[:start] + junk + raw[start:])
    good, skipped = salvage(seg.log_path)
    assert [(p.position, p.end) for p in skipped] == [(start, start + len(junk))]
    assert [g.batch.base_offset for g in good] == [b[2] for b in entry_bounds(raw)]


def test_bad_index_entries_are_reported(copy):
    log, _ = copy
    seg = next(s for s in log.segments if len(s.offset_index) >= 1)
    raw = bytearray(open(seg.index_path, "rb").read())
    relative, position = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">i", raw, 4, position + 1)             # not at a batch start
    open(seg.index_path, "wb").write(raw)
    tidx = bytearray(open(seg.time_index_path, "rb").read())
    struct.pack_into(">q", tidx, 0, struct.unpack_from(">q", tidx, 0)[0] - 1)
    open(seg.time_index_path, "wb").write(tidx)
    report = PartitionLog(log.directory).verify()
    assert (seg.index_path, 0) in [(p.file, p.position) for p in report]
    assert (seg.time_index_path, 0) in [(p.file, p.position) for p in report]


def test_txnindex_disagreeing_with_markers_is_reported(copy):
    log, history = copy
    seg = next(s for s in log.segments if os.path.exists(s.txn_index_path))
    raw = bytearray(open(seg.txn_index_path, "rb").read())
    struct.pack_into(">q", raw, 2, 999)                      # another producer id
    open(seg.txn_index_path, "wb").write(raw)
    report = PartitionLog(log.directory).verify()
    assert [p.file for p in report] == [seg.txn_index_path] * 2
    assert report.problems[0].position == 0


def test_a_broken_index_file_is_reported_not_raised(copy):
    log, _ = copy
    seg = log.segments[0]
    with open(seg.index_path, "ab") as f:
        f.write(b"\x01\x02\x03")
    report = PartitionLog(log.directory).verify()
    assert [(p.file, "multiple" in p.message) for p in report] == [(seg.index_path, True)]


def test_salvage_of_a_clean_log_keeps_everything(pristine):
    directory, history = pristine
    good, skipped = salvage(directory)
    assert skipped and not skipped.problems
    assert [g.batch.base_offset for g in good] == [a.base_offset for a in history.appends]
    assert b"".join(bytes(g.data) for g in good) == history.record_set()


def test_time_index_naming_the_record_with_the_max_timestamp_verifies(tmp_path):
    """Brokers before the shallow-offset change indexed an uncompressed
    append under the offset of its record holding the max timestamp, inside
    the batch: a valid index. An offset outside every batch is not."""
    rows = [(b"k", b"v", ts, []) for ts in (1000, 1500, 1200)]     # max at offset 1
    data = kcodec.encode(rows) + kcodec.encode(rows, base_offset=3)
    directory = tmp_path / "t-0"
    write_log(str(directory), data)
    stem = directory / f"{0:020d}"
    (stem.with_suffix(".timeindex")).write_bytes(struct.pack(">qi", 1500, 1))
    assert PartitionLog(directory).verify(), str(PartitionLog(directory).verify())
    (stem.with_suffix(".timeindex")).write_bytes(struct.pack(">qi", 1500, 1)
                                                 + struct.pack(">qi", 1600, 4))
    report = PartitionLog(directory).verify()
    assert [(p.file, p.position) for p in report] == [(str(stem) + ".timeindex", 12)]
    assert "1500" in report.problems[0].message          # that batch's max timestamp


def test_a_log_cut_short_before_its_index_entries(copy):
    """A copy of an active segment taken while the broker appended: its
    .index and .timeindex already name batches the .log does not hold yet.
    Reads use the entries the log has; verify reports the rest once a file."""
    log, history = copy
    seg = log.segments[-1]
    bounds = segment_batches(seg)
    start, _, base, _ = bounds[len(bounds) // 2]
    assert seg.offset_index.positions[-1] > start            # entries past the cut
    with open(seg.log_path, "r+b") as f:
        f.truncate(start)
    log = PartitionLog(log.directory)
    kept = [r for r in history.data_records() if r[0] < base]
    assert log.end_offset == base
    assert view(log.read_records()) == kept
    for first in (seg.base_offset, bounds[len(bounds) // 4][2], base - 1):
        assert view(log.read_records(first)) == [r for r in kept if r[0] >= first]
    assert list(log.read_records(base)) == []
    index = log.segments[-1].offset_index
    assert index.past_log_end and all(e.position >= start for e in index.past_log_end)
    assert all(position < start for position in index.positions)
    report = log.verify()
    assert [p.file for p in report] == [seg.index_path, seg.time_index_path]
    assert "past the end of the" in report.problems[0].message
    assert report.problems[0].position == len(index) * index.entry_size
    assert "past the segment's last batch" in report.problems[1].message


def test_index_entries_for_appends_of_several_batches_verify(tmp_path):
    """An index entry names the last offset of an append and the position
    where it began; one append may hold several batches."""
    rows = [(b"k%d" % i, b"v" * 40, 1_700_000_000_000 + i, []) for i in range(40)]
    data = kcodec.encode(rows, max_batch_bytes=600)
    directory = tmp_path / "t-0"
    write_log(str(directory), data, index_interval_bytes=1 << 30)
    bounds = entry_bounds(data)
    assert len(bounds) >= 4
    index_path = str(directory / f"{0:020d}.index")

    def index(*entries):
        with open(index_path, "wb") as f:
            f.write(b"".join(struct.pack(">ii", offset, position) for offset, position in entries))
        return PartitionLog(directory)

    # appends: batches 0-1, then 2-3
    log = index((bounds[1][3], bounds[0][0]), (bounds[3][3], bounds[2][0]))
    assert log.verify(), str(log.verify())
    for first in range(0, 40, 7):
        assert [r.offset for r in log.read_records(first)] == list(range(first, 40))
    # an offset inside batch 1, and one before the batch at the position
    log = index((bounds[1][2], bounds[0][0]), (bounds[1][3], bounds[2][0]))
    assert [(p.file, p.position) for p in log.verify()] == [(index_path, 0), (index_path, 8)]
    # appends that would overlap: batches 0-2, then 1-3
    log = index((bounds[2][3], bounds[0][0]), (bounds[3][3], bounds[1][0]))
    assert [(p.file, p.position) for p in log.verify()] == [(index_path, 0)]
    assert "up to the next entry's position" in next(iter(log.verify())).message


def test_a_log_starting_inside_a_transaction_verifies(tmp_path):
    """The first segment, where a transaction began, deleted: the producer
    snapshot at the log start holds the transaction open, and its ABORT's
    .txnindex entry names the offset where it began, before the log start."""
    directory = tmp_path / "t-0"

    def plain(offset):
        return kcodec.encode([(b"k", b"v" * 400, 1_700_000_000_000, [])] * 5, base_offset=offset)

    def txn(offset):
        return kcodec.encode([(b"t", b"x", 1_700_000_000_000, [])], base_offset=offset,
                             producer_id=7, producer_epoch=0, base_sequence=offset,
                             transactional=True)

    appends = [txn(0), plain(1), plain(6), txn(11), plain(12), plain(17),
               kcodec.encode_control("ABORT", producer_id=7, producer_epoch=0, offset=22,
                                     timestamp=1_700_000_000_000)]
    write_log(str(directory), appends, segment_bytes=3000)
    log = PartitionLog(directory)
    assert len(log.segments) >= 2 and log.verify(), str(log.verify())
    first = log.segments[0]
    assert [tuple(t)[:2] for t in log.segments[-1].aborted_transactions()] == [(7, 0)]
    for path in (first.log_path, first.index_path, first.time_index_path):
        os.remove(path)
    log = PartitionLog(directory)
    assert log.start_offset > 0
    assert log.verify(), str(log.verify())
