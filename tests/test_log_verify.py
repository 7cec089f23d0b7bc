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
