"""The side files of a partition directory, read by kcodec.log: offset and
time indexes (preallocated zero tails, sanity), .txnindex, the leader-epoch
checkpoint and producer snapshots; every inconsistency a CorruptIndexError
naming the file and the byte position."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import crc32c
import pytest
from hypothesis import given, settings, strategies as st

import kcodec
from kcodec import CorruptIndexError
from kcodec.log import (
    OffsetIndex, PartitionLog, TimeIndex, encode_producer_snapshot, read_leader_epoch_checkpoint,
    read_producer_snapshot, read_txn_index, write_log,
)
from kcodec.log.producers import ProducerStates
from log_helpers import entry_bounds, scripted_history, view, write_history


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    history = scripted_history(seed=2)
    directory = tmp_path_factory.mktemp("files") / "t-0"
    return str(write_history(str(directory), history, 5000, 700)), history


def copy_of(tmp_path, log_dir):
    target = tmp_path / "copy-0"
    shutil.copytree(log_dir, target)
    return PartitionLog(target)


def index_file(tmp_path, name, entries, fmt):
    path = tmp_path / name
    path.write_bytes(b"".join(struct.pack(fmt, *e) for e in entries))
    return str(path)


def test_offset_index_lookup(tmp_path):
    path = index_file(tmp_path, "00000000000000000100.index", [(0, 0), (5, 400), (9, 800)], ">ii")
    index = OffsetIndex(path)
    assert index.base_offset == 100 and len(index) == 3
    assert list(index) == [(100, 0), (105, 400), (109, 800)]
    assert index.lookup(99) == (100, 0)          # below every entry: (base, 0)
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 400)
    assert index.lookup(10**6) == (109, 800)


def test_time_index_lookup(tmp_path):
    path = index_file(tmp_path, "00000000000000000100.timeindex",
                      [(1000, 3), (1500, 7), (2000, 9)], ">qi")
    index = TimeIndex(path)
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1000) == (1000, 103)
    assert index.lookup(1999) == (1500, 107)
    assert index.last_entry == (2000, 109)


def test_preallocated_zero_tails_end_the_index(tmp_path):
    path = index_file(tmp_path, "00000000000000000100.index", [(0, 0), (5, 400)], ">ii")
    with open(path, "ab") as f:
        f.write(bytes(10 * 1024 * 1024))
    assert list(OffsetIndex(path)) == [(100, 0), (105, 400)]
    path = index_file(tmp_path, "00000000000000000100.timeindex", [(1000, 3)], ">qi")
    with open(path, "ab") as f:
        f.write(bytes(12 * 1000))
    assert list(TimeIndex(path)) == [(1000, 103)]


def test_preallocated_indexes_of_an_active_segment_read_the_same(tmp_path, log_dir):
    directory, history = log_dir
    log = copy_of(tmp_path, directory)
    active = log.segments[-1]
    for path, entry_size in ((active.index_path, 8), (active.time_index_path, 12)):
        with open(path, "ab") as f:
            f.write(bytes(entry_size * 100_000))
    log = PartitionLog(log.directory)
    assert view(log.read_records()) == history.data_records()
    for a in history.appends[-6:]:
        assert log.decode(a.base_offset).num_rows == len(
            [r for r in history.data_records() if r[0] >= a.base_offset])
    assert log.verify()


def test_preallocated_indexes_with_no_entry_yet_are_empty(tmp_path, log_dir):
    """An active segment's indexes right after a roll: zeros only. The broker's
    first .index entry always follows an append (position > 0), so a lone
    zero entry is padding, not "offset base at position 0"."""
    directory, history = log_dir
    log = copy_of(tmp_path, directory)
    active = log.segments[-1]
    for path, entry_size in ((active.index_path, 8), (active.time_index_path, 12)):
        with open(path, "wb") as f:
            f.write(bytes(entry_size * 1000))
    log = PartitionLog(log.directory)
    assert len(log.segments[-1].offset_index) == 0
    assert len(log.segments[-1].time_index) == 0
    assert log.verify(), str(log.verify())
    first = log.segments[-1].base_offset
    assert view(log.read_records(first)) == [r for r in history.data_records() if r[0] >= first]


@pytest.mark.parametrize("entries,tail,message,position", [
    ([(0, 0), (5, 400)], b"\x00\x00\x00", "not a multiple", 16),
    ([(0, 0), (5, 400), (3, 800)], b"", "offsets not increasing", 16),
    ([(0, 0), (5, 400), (7, 300)], b"", "positions not increasing", 16),
    ([(-4, 0)], b"", "below the base offset", 0),
])
def test_corrupt_offset_index(tmp_path, entries, tail, message, position):
    path = index_file(tmp_path, "00000000000000000100.index", entries, ">ii")
    with open(path, "ab") as f:
        f.write(tail)
    with pytest.raises(CorruptIndexError) as info:
        OffsetIndex(path)
    assert message in str(info.value)
    assert info.value.source == path and info.value.position == position


def test_the_entry_a_broker_is_writing_is_left_out(tmp_path):
    """A broker writes an .index entry's offset before its position: read
    between the two, the last entry has position 0. Anywhere else that is
    corruption."""
    writing = index_file(tmp_path, "00000000000000000100.index",
                         [(0, 0), (5, 400), (9, 0), (0, 0)], ">ii")
    assert list(OffsetIndex(writing)) == [(100, 0), (105, 400)]
    inside = index_file(tmp_path, "00000000000000000200.index", [(0, 0), (5, 0), (9, 800)], ">ii")
    with pytest.raises(CorruptIndexError, match="positions not increasing"):
        OffsetIndex(inside)


ROLLING_INDEX = """
import os, sys, threading
from kcodec import CorruptIndexError
from kcodec.log.indexes import OffsetIndex, TimeIndex
path, kind = sys.argv[1], sys.argv[2]
entry = 8 if kind == "index" else 12
done = threading.Event()
def roll():
    # as a broker does: an active index preallocated, then trimmed to its
    # entries when the segment rolls
    while not done.is_set():
        with open(path, "r+b") as f:
            f.truncate(10 << 20)
            f.truncate(entry * 3)
threading.Thread(target=roll, daemon=True).start()
read = 0
for _ in range(3000):
    try:
        (OffsetIndex if kind == "index" else TimeIndex)(path)
        read += 1
    except CorruptIndexError:
        pass
done.set()
print(read)
"""


@pytest.mark.parametrize("kind,entries,layout", [
    ("index", [(0, 0), (5, 400), (9, 800)], ">ii"),
    ("timeindex", [(1000, 0), (1001, 5), (1002, 9)], ">qi"),
])
def test_an_index_trimmed_while_read_never_kills_the_reader(tmp_path, kind, entries, layout):
    """A broker trims its active segment's indexes when it rolls it: a
    reader that mapped the file would die of SIGBUS touching a page past
    the new end. The reader here reads the files, in a process of its own
    that must end normally."""
    path = index_file(tmp_path, f"00000000000000000000.{kind}", entries, layout)
    run = subprocess.run([sys.executable, "-c", ROLLING_INDEX, path, kind],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) > 0


def test_index_entries_past_the_log_end_are_left_out(tmp_path):
    path = index_file(tmp_path, "00000000000000000000.index", [(0, 0), (5, 200), (9, 400)],
                      ">ii")
    index = OffsetIndex(path, log_size=300)
    assert list(index) == [(0, 0), (5, 200)] and index.past_log_end == [(9, 400)]
    assert index.lookup(20) == (5, 200)
    assert len(OffsetIndex(path)) == 3 and OffsetIndex(path, log_size=401).past_log_end == []
    negative = index_file(tmp_path, "00000000000000000001.index", [(0, -8)], ">ii")
    with pytest.raises(CorruptIndexError, match="negative position -8") as info:
        OffsetIndex(negative)
    assert info.value.position == 0


def test_time_index_going_backwards(tmp_path):
    path = index_file(tmp_path, "00000000000000000000.timeindex",
                      [(1000, 1), (900, 2)], ">qi")
    with pytest.raises(CorruptIndexError) as info:
        TimeIndex(path)
    assert "backwards" in str(info.value) and info.value.position == 12


def test_txn_index(tmp_path):
    rows = [(0, 7, 10, 20, 21), (0, 8, 15, 30, 31)]
    path = index_file(tmp_path, "00000000000000000000.txnindex", rows, ">hqqqq")
    assert [tuple(t) for t in read_txn_index(path)] == [r[1:] for r in rows]
    bad = index_file(tmp_path, "00000000000000000001.txnindex", rows[:1] + [(1, 8, 15, 30, 31)],
                     ">hqqqq")
    with pytest.raises(CorruptIndexError) as info:
        read_txn_index(bad)
    assert info.value.position == 34 and "version" in str(info.value)
    short = tmp_path / "00000000000000000002.txnindex"
    short.write_bytes(b"\x00" * 40)
    with pytest.raises(CorruptIndexError) as info:
        read_txn_index(str(short))
    assert info.value.position == 34


def test_leader_epoch_checkpoint(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n3\n0 0\n2 57\n5 900\n")
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (2, 57), (5, 900)]
    for text in ("", "0\n"):            # as the broker reads them: no entries
        path.write_text(text)
        assert read_leader_epoch_checkpoint(path) == []
    for text, position in (("1\n0\n", 0), ("0\n2\n0 0\n", 2), ("0\n1\n0 x\n", 4),
                           ("0\n2\n3 10\n1 20\n", 9)):
        path.write_text(text)
        with pytest.raises(CorruptIndexError) as info:
            read_leader_epoch_checkpoint(path)
        assert info.value.position == position and info.value.source == str(path)


def snapshot_bytes(entries, version=1):
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", version, crc32c.crc32c(body)) + body


def test_producer_snapshot(tmp_path):
    entries = [(7, 0, 41, 120, 3, 1_700_000_000_000, 2, -1), (8, 1, 9, 130, 0, 5, -1, 125)]
    path = tmp_path / "00000000000000000131.snapshot"
    path.write_bytes(snapshot_bytes(entries))
    assert [tuple(e) for e in read_producer_snapshot(path)] == entries
    assert encode_producer_snapshot(entries) == snapshot_bytes(entries)
    raw = bytearray(snapshot_bytes(entries))
    raw[20] ^= 1
    path.write_bytes(raw)
    with pytest.raises(CorruptIndexError) as info:
        read_producer_snapshot(path)
    assert "CRC" in str(info.value) and info.value.position == 2
    path.write_bytes(snapshot_bytes(entries)[:-5])
    with pytest.raises(CorruptIndexError):
        read_producer_snapshot(path)
    path.write_bytes(snapshot_bytes(entries, version=2))
    with pytest.raises(CorruptIndexError):
        read_producer_snapshot(path)


def test_partition_log_reads_snapshots_and_checkpoints(tmp_path, log_dir):
    directory, _ = log_dir
    log = copy_of(tmp_path, directory)
    for path in (tmp_path / "copy-0").glob("*.snapshot"):      # those write_log wrote
        path.unlink()
    entries = [(7, 0, 41, 120, 3, 1_700_000_000_000, 2, -1)]
    (tmp_path / "copy-0" / "00000000000000000131.snapshot").write_bytes(snapshot_bytes(entries))
    assert {k: [tuple(e) for e in v] for k, v in log.producer_snapshots().items()} == \
        {131: entries}


def states_from_history(history, at):
    """The snapshot entries of the history's producers before offset `at`,
    from what each append held: every producer batch starts at sequence 0,
    epoch 0; markers carry coordinator epoch 0."""
    states = {}
    for a in history.appends:
        if a.producer_id < 0 or a.base_offset >= at:
            continue
        s = states.setdefault(a.producer_id, [0, -1, -1, 0, -1, -1, -1])
        if a.kind == "txn":
            n = len(a.records)
            s[1:5] = [n - 1, a.last_offset, n - 1, max(r[1] for r in a.records)]
            if s[6] < 0:
                s[6] = a.base_offset
        else:
            s[4:7] = [a.marker_timestamp, 0, -1]
    return [(pid, *s) for pid, s in sorted(states.items())]


def test_write_log_writes_producer_snapshots_at_each_roll_and_the_end(log_dir):
    directory, history = log_dir
    log = PartitionLog(directory)
    snapshots = log.producer_snapshots()
    bases = [seg.base_offset for seg in log.segments]
    assert len(bases) > 3
    assert sorted(snapshots) == bases[1:] + [history.end_offset]
    for at, entries in snapshots.items():
        assert [tuple(e) for e in entries] == states_from_history(history, at), at
    # some snapshot holds an open transaction, some a producer between transactions
    firsts = [e.current_txn_first_offset for entries in snapshots.values() for e in entries]
    assert min(firsts) == -1 and max(firsts) > 0


def test_producer_states_follow_the_brokers_rules():
    """An epoch bump forgets the producer's last batch, sequences wrap at
    int32, a marker alone makes an entry, batches without a producer id and
    legacy ones change nothing."""
    states = ProducerStates()
    t = 1_700_000_000_000
    states.append(batch_of(kcodec.encode([(None, b"v", t + i, []) for i in range(10)],
                                         base_offset=0, producer_id=5, producer_epoch=0,
                                         base_sequence=2**31 - 8, transactional=True)))
    assert [tuple(e) for e in states.entries()] == [(5, 0, 1, 9, 9, t + 9, -1, 0)]
    states.append(batch_of(kcodec.encode([(None, b"p", t, [])], base_offset=10)))
    states.append(batch_of(kcodec.encode([(None, b"p", t, [])], base_offset=11, magic=1)))
    states.append(batch_of(kcodec.encode_control("ABORT", producer_id=5, producer_epoch=1,
                                                 offset=12, coordinator_epoch=4,
                                                 timestamp=t + 50)))
    states.append(batch_of(kcodec.encode_control("COMMIT", producer_id=9, producer_epoch=2,
                                                 offset=13, coordinator_epoch=3,
                                                 timestamp=t + 60)))
    assert [tuple(e) for e in states.entries()] == [(5, 1, -1, -1, 0, t + 50, 4, -1),
                                                    (9, 2, -1, -1, 0, t + 60, 3, -1)]


def batch_of(data):
    (batch,) = kcodec.read_batches(data)
    return batch


def test_write_log_rolls_a_week_past_the_first_batch(tmp_path):
    """LogSegment.shouldRoll: a batch whose max timestamp is more than
    segment.ms past the segment's first batch's starts a new segment."""
    day = 24 * 3600 * 1000
    t = 1_700_000_000_000
    sets = [kcodec.encode([(None, b"v", ts, [])], base_offset=i)
            for i, ts in enumerate([t, t + 7 * day, t - day, t + 7 * day + 1, t + 8 * day + 1])]
    paths = write_log(tmp_path / "a-0", sets)
    assert [int(os.path.basename(p)[:20]) for p in paths] == [0, 3]
    paths = write_log(tmp_path / "b-0", sets, segment_ms=day)
    assert [int(os.path.basename(p)[:20]) for p in paths] == [0, 1, 4]
    assert len(write_log(tmp_path / "c-0", sets, segment_ms=None)) == 1
    # a first batch without timestamps (magic 0) rolls by size only
    legacy = kcodec.encode([(None, b"v", None, [])], magic=0)
    assert len(write_log(tmp_path / "d-0", [legacy] + sets[1:])) == 1
    with pytest.raises(ValueError):
        write_log(tmp_path / "e-0", sets, segment_ms=0)


def test_seek_through_a_lying_index_entry_is_a_typed_error(tmp_path, log_dir):
    """An entry whose position holds a batch starting after the entry's
    offset would skip records: the seek refuses it, verify reports it."""
    directory, history = log_dir
    log = copy_of(tmp_path, directory)
    seg, at, lie = None, None, None
    for candidate in log.segments:
        raw = bytearray(open(candidate.index_path, "rb").read())
        bounds = entry_bounds(open(candidate.log_path, "rb").read())
        if not raw:
            continue
        relative, position = struct.unpack_from(">ii", raw, len(raw) - 8)
        later = [b for b in bounds if b[0] > position]
        if later:       # point the last entry at the batch after its own
            seg, at, lie = candidate, len(raw) - 8, later[0][0]
            break
    struct.pack_into(">i", raw, at + 4, lie)
    open(seg.index_path, "wb").write(raw)
    log = PartitionLog(log.directory)
    target = seg.base_offset + relative
    with pytest.raises(CorruptIndexError) as info:
        log.decode(start_offset=target)
    assert info.value.source == seg.index_path and info.value.position == at
    report = log.verify()
    assert not report
    assert any(p.file == seg.index_path and p.position == at for p in report)


@given(used=st.lists(st.integers(0, 5), max_size=40), zeros=st.integers(0, 40),
       preallocated=st.booleans())
@settings(max_examples=500, deadline=None)
def test_the_used_entries_end_at_the_first_zero_after_the_first(used, zeros, preallocated):
    """Bisection over the file (for a broker's preallocated 10 MiB .index)
    finds what a scan for the first zero relative offset after the first
    entry finds, on increasing entries and on corrupt ones alike."""
    from kcodec.log.indexes import OFFSET_ENTRY, _used_entries
    if preallocated:
        used = sorted(set(used))
    relative = used + [0] * zeros
    zero_at = [i for i, r in enumerate(relative) if i > 0 and r == 0]
    expected = relative[:zero_at[0] if zero_at else len(relative)]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "00000000000000000000.index")
        with open(path, "wb") as f:
            f.write(b"".join(struct.pack(">ii", r, 8 * i) for i, r in enumerate(relative)))
        entries = _used_entries(path, OFFSET_ENTRY, zero_first_entry_is_padding=False)
    assert entries["relative_offset"].tolist() == expected
