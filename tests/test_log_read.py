"""PartitionLog on logs written by write_log: layout, seeks, decode,
iter_decode, offset_for_timestamp and read_committed, all checked against
what was appended."""
import os
import shutil
import struct

import numpy as np
import pyarrow as pa
import pytest

import kcodec
from kcodec.log import PartitionLog, Segment, parse_partition_dir, write_log
from log_helpers import (
    entry_bounds, scripted_history, table_rows, view, write_history,
)

SEGMENT_BYTES = 6000
BASE_TS_LSO = 1_700_000_000_000
INTERVAL = 1024


@pytest.fixture(scope="module")
def history():
    return scripted_history(seed=1)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory, history):
    directory = tmp_path_factory.mktemp("logs") / "orders-eu-west-12"
    return str(write_history(str(directory), history, SEGMENT_BYTES, INTERVAL))


@pytest.fixture
def log(log_dir):
    return PartitionLog(log_dir)


def files(directory, suffix):
    return sorted(n for n in os.listdir(directory) if n.endswith(suffix))


# ----------------------------------------------------------------- layout

def test_topic_and_partition_from_the_directory_name(log):
    assert (log.topic, log.partition) == ("orders-eu-west-12"[:-3], 12)
    assert parse_partition_dir("/x/__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir("a-b-c-0.0123456789abcdef0123456789abcdef-delete") == ("a-b-c", 0)
    with pytest.raises(ValueError):
        parse_partition_dir("/x/no_partition")


def test_a_partition_directory_named_relatively(log, monkeypatch):
    monkeypatch.chdir(log.directory)
    for name in (".", "./", "../" + os.path.basename(log.directory) + "/."):
        here = PartitionLog(name)
        assert (here.topic, here.partition) == (log.topic, log.partition)
        assert here.decode().equals(log.decode())


def expected_layout(history, segment_bytes, interval):
    """The broker's append rules replayed over the appended batches' sizes:
    (base offset, [(relative offset, position)], [(timestamp, relative offset)])."""
    segments = []
    for a in history.appends:
        size = len(a.data)
        max_ts = max([r[1] for r in a.records], default=None)
        if a.kind in ("COMMIT", "ABORT"):
            max_ts = struct.unpack_from(">q", a.data, 35)[0]
        seg = segments[-1] if segments else None
        if seg is None or (seg["size"] and seg["size"] + size > segment_bytes):
            if seg is not None:
                close_time_index(seg)
            seg = dict(base=a.base_offset, size=0, since=0, index=[], time=[], max_ts=-1,
                       max_at=a.base_offset)
            segments.append(seg)
        if max_ts > seg["max_ts"]:
            seg["max_ts"], seg["max_at"] = max_ts, a.last_offset
        if seg["since"] > interval:
            seg["index"].append((a.last_offset - seg["base"], seg["size"]))
            close_time_index(seg)
            seg["since"] = 0
        seg["since"] += size
        seg["size"] += size
    close_time_index(segments[-1])
    return [(s["base"], s["index"], s["time"]) for s in segments]


def close_time_index(seg):
    if seg["max_ts"] > (seg["time"][-1][0] if seg["time"] else -1):
        seg["time"].append((seg["max_ts"], seg["max_at"] - seg["base"]))


def test_write_log_lays_out_segments_and_indexes_like_a_broker(log_dir, history):
    layout = expected_layout(history, SEGMENT_BYTES, INTERVAL)
    assert len(layout) >= 4
    assert files(log_dir, ".log") == [f"{base:020d}.log" for base, _, _ in layout]
    for base, index, time_index in layout:
        stem = os.path.join(log_dir, f"{base:020d}")
        raw = open(stem + ".index", "rb").read()
        assert [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)] == index
        raw = open(stem + ".timeindex", "rb").read()
        assert [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)] == time_index
    # the segments hold the appended bytes, in order
    joined = b"".join(open(os.path.join(log_dir, n), "rb").read() for n in files(log_dir, ".log"))
    assert joined == history.record_set()


def test_txnindex_lists_aborted_transactions_where_their_markers_are(log_dir, history, log):
    expected = history.aborted_entries()
    assert expected
    listed = []
    for seg in log.segments:
        if os.path.exists(seg.txn_index_path):
            raw = open(seg.txn_index_path, "rb").read()
            assert len(raw) % 34 == 0
            for i in range(0, len(raw), 34):
                version, pid, first, last, lso = struct.unpack_from(">hqqqq", raw, i)
                assert version == 0 and first <= last
                assert seg.base_offset <= last  # the marker lies in this segment
                listed.append((pid, first, last))
    assert listed == expected
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in log.aborted_transactions()] == expected


def test_start_and_end_offsets(log, history):
    assert log.start_offset == 0
    assert log.end_offset == history.end_offset


def test_files_being_deleted_cleaned_or_swapped_are_not_live(tmp_path, log_dir, history):
    copy = tmp_path / "t-0"
    shutil.copytree(log_dir, copy)
    garbage = b"\xff" * 100
    for name in ("00000000000099999999.log.deleted", "00000000000099999998.log.cleaned",
                 "00000000000099999997.log.swap", "00000000000099999997.index.swap"):
        (copy / name).write_bytes(garbage)
    log = PartitionLog(copy)
    assert [s.base_offset for s in log.segments] == [s.base_offset for s in
                                                    PartitionLog(log_dir).segments]
    assert view(log.read_records()) == history.data_records()


# ---------------------------------------------------------------- reading

def test_read_records_everything(log, history):
    assert view(log.read_records()) == history.data_records()


@pytest.mark.parametrize("start,end", [(0, None), (1, 2), (37, 411), (250, None), (None, 5),
                                       (10**9, None), (500, 500), (-2**70, 2**70),
                                       (2**63, None), (None, -2**70)])
def test_read_and_decode_offset_ranges(log, history, start, end):
    lo = start or 0
    hi = end if end is not None else float("inf")
    expected = [r for r in history.data_records() if lo <= r[0] < hi]
    assert view(log.read_records(start, end)) == expected
    table = log.decode(start_offset=start, end_offset=end)
    assert table_rows(table) == expected
    assert set(table.column("topic").to_pylist()) <= {log.topic}
    assert set(table.column("partition").to_pylist()) <= {log.partition}


def test_decode_schema_and_columns(log):
    table = log.decode(0, 10)
    assert table.schema == kcodec.arrow.schema(topic=True, partition=True)
    assert log.decode(0, 10, columns=["offset", "value"]).column_names == ["offset", "value"]
    empty = log.decode(10**9)
    assert empty.num_rows == 0 and empty.schema == table.schema


def test_seek_uses_the_index_then_scans(log, history):
    """Every offset seeks to the batch holding it, and the index is consulted:
    the scan starts at the largest entry at or below the target."""
    bounds = [(seg, entry_bounds(bytes(seg.data))) for seg in log.segments]
    for seg, entries in bounds:
        for start, _end, base, last in entries:
            for target in (base, last):
                assert seg.position_for(target) == start
            entry = seg.offset_index.lookup(last)
            assert entry.offset <= last and entry.position <= start
        assert seg.position_for(entries[-1][3] + 1) is None


def test_iter_decode_is_decode_in_bounded_batches(log):
    whole = log.decode()
    batches = list(log.iter_decode(max_rows=100, max_bytes=4096))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert all(b.num_rows <= 100 for b in batches)
    assert len(batches) > whole.num_rows // 100
    assert pa.Table.from_batches(batches).equals(whole)
    ranged = pa.Table.from_batches(list(log.iter_decode(40, 300, max_rows=7, max_bytes=1000)))
    assert ranged.equals(log.decode(40, 300))


def test_iter_decode_read_committed_with_columns(log, history):
    rows = [b.to_pydict()["offset"] for b in log.iter_decode(
        isolation="read_committed", columns=["offset"], max_rows=13, max_bytes=2000)]
    assert [o for chunk in rows for o in chunk] == \
        [r[0] for r in history.data_records(committed_only=True)]


def test_iter_decode_rejects_non_positive_limits(log):
    with pytest.raises(ValueError):
        next(log.iter_decode(max_rows=0))


# ------------------------------------------------------------- timestamps

def list_offsets(log, history, target):
    """ListOffsets by its definition, from the appended records grouped by segment."""
    bases = [s.base_offset for s in log.segments] + [float("inf")]
    for lo, hi in zip(bases, bases[1:]):
        appends = [a for a in history.appends if lo <= a.base_offset < hi]
        stamps = [r[1] for a in appends for r in a.records] + [
            struct.unpack_from(">q", a.data, 35)[0] for a in appends if not a.records]
        if max(stamps, default=-1) < target:
            continue
        for a in appends:
            for r in a.records:
                if r[1] >= target:
                    batch_max = max(x[1] for x in a.records)
                    assert batch_max >= target
                    return r[0]
        return None
    return None


def test_offset_for_timestamp_answers_like_list_offsets(log, history):
    stamps = sorted({r[1] for r in history.data_records()})
    probes = [stamps[0] - 1, stamps[0], stamps[-1], stamps[-1] + 1] + stamps[::37]
    probes += [s + 1 for s in stamps[::41]]
    for target in probes:
        assert log.offset_for_timestamp(target) == list_offsets(log, history, target), target
    assert log.offset_for_timestamp(-1) == history.end_offset
    assert log.offset_for_timestamp(-2) == 0


def test_decode_by_timestamps(log, history):
    stamps = sorted({r[1] for r in history.data_records()})
    t0, t1 = stamps[len(stamps) // 4], stamps[len(stamps) // 2]
    lo, hi = log.offset_for_timestamp(t0), log.offset_for_timestamp(t1)
    expected = [r for r in history.data_records() if lo <= r[0] < hi]
    assert table_rows(log.decode(start_timestamp=t0, end_timestamp=t1)) == expected
    assert log.decode(start_timestamp=stamps[-1] + 10**6).num_rows == 0


# ---------------------------------------------------------- read_committed

def test_read_committed_drops_aborted_transactions(log, history):
    expected = history.data_records(committed_only=True)
    assert len(expected) < len(history.data_records())
    assert view(log.read_records(isolation="read_committed")) == expected
    assert table_rows(log.decode(isolation="read_committed")) == expected


def test_read_committed_without_txnindex_rebuilds_from_markers(tmp_path, log_dir, history):
    copy = tmp_path / "t-1"
    shutil.copytree(log_dir, copy)
    for name in files(copy, ".txnindex"):
        os.remove(copy / name)
    log = PartitionLog(copy)
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in log.aborted_transactions()] == history.aborted_entries()
    assert view(log.read_records(isolation="read_committed")) == \
        history.data_records(committed_only=True)


@pytest.mark.parametrize("with_txnindex", [True, False])
def test_aborted_transactions_from_an_offset_read_no_older_segment(tmp_path, log_dir, history,
                                                                   with_txnindex, monkeypatch):
    copy = tmp_path / "t-1"
    shutil.copytree(log_dir, copy)
    if not with_txnindex:
        for name in files(copy, ".txnindex"):
            os.remove(copy / name)
    everything = PartitionLog(copy).aborted_transactions()
    touched = set()
    for method in ("batches", "aborted_transactions"):
        original = getattr(Segment, method)

        def spy(seg, *args, original=original, **kw):
            touched.add(seg.base_offset)
            return original(seg, *args, **kw)
        monkeypatch.setattr(Segment, method, spy)
    for start in sorted({a.base_offset + 1 for a in history.appends}):
        log = PartitionLog(copy)
        touched.clear()
        found = log.aborted_transactions(start)
        holding = max(seg.base_offset for seg in log.segments if seg.base_offset <= start)
        assert min(touched, default=holding) >= holding, "an older segment was read"
        # A transaction begun before the scan's start has the first offset the
        # scan saw of it: what a reader from `start` needs.
        wanted = [t for t in everything if t.last_offset >= start]
        assert [(t.producer_id, t.last_offset) for t in found] == \
            [(t.producer_id, t.last_offset) for t in wanted]
        assert all(f.first_offset >= min(w.first_offset, start) for f, w in zip(found, wanted))


def test_read_committed_from_every_batch_start(log, history):
    """Starting after an aborted transaction's marker must not drop the same
    producer's later committed transactions (and vice versa)."""
    expected = history.data_records(committed_only=True)
    for a in history.appends:
        want = [r for r in expected if r[0] >= a.base_offset]
        got = log.decode(start_offset=a.base_offset, isolation="read_committed")
        assert table_rows(got) == want, a.base_offset


def test_read_committed_equals_kafka_python_consumer_filter(log, history):
    """kafka-python's fetcher drops aborted batches with the same algorithm;
    here its record reader supplies the records and our aborted list the
    Fetch response's aborted transactions."""
    from kafka.record import MemoryRecords
    raw = history.record_set()
    aborted = sorted((pid, first) for pid, first, _ in history.aborted_entries())
    records, open_aborts, pending = [], set(), list(aborted)
    mr = MemoryRecords(raw)
    while mr.has_next():
        batch = mr.next_batch()
        last = batch.base_offset + batch.last_offset_delta
        while pending and pending[0][1] <= last:
            open_aborts.add(pending.pop(0)[0])
        if batch.is_control_batch:
            if list(batch)[0].type == 0:
                open_aborts.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in open_aborts:
            continue
        records += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    assert view(PartitionLog(os.path.dirname(log.segments[0].log_path))
                .read_records(isolation="read_committed")) == records


def test_isolation_is_checked(log):
    with pytest.raises(ValueError):
        log.decode(isolation="read_most")


# ------------------------------------------------------------- write_log

def test_write_log_from_tables_assigns_offsets(tmp_path):
    rows = [(b"k%d" % i, b"v%d" % i, 1_000 + i, []) for i in range(3000)]
    table = kcodec.decode(kcodec.encode(rows))
    paths = write_log(tmp_path / "t-3", [table, table.slice(0, 100)], segment_bytes=4000,
                      compression="lz4", max_batch_bytes=3000)
    assert len(paths) > 3
    log = PartitionLog(tmp_path / "t-3")
    got = log.decode()
    assert got.column("offset").to_pylist() == list(range(3100))
    assert got.column("value").to_pylist() == [r[1] for r in rows] + [r[1] for r in rows[:100]]
    assert {b.compression for b in log.read_batches()} == {"lz4"}


def test_write_log_keeps_a_tables_offsets(tmp_path):
    # A compacted partition's table, written back: its gaps stay, so offsets
    # a consumer committed still name the same records.
    offsets = [3, 4, 9, 10, 11, 250]
    table = pa.table({"value": pa.array([b"v%d" % o for o in offsets]),
                      "offset": pa.array(offsets, pa.int64())})
    write_log(tmp_path / "t-6", [table, table.drop_columns(["offset"])])
    log = PartitionLog(tmp_path / "t-6")
    assert [r.offset for r in log.read_records()] == offsets + list(range(251, 257))
    assert log.decode().column("value").to_pylist() == table.column("value").to_pylist() * 2
    # base_offset, an encode option, numbers a table without offsets from there
    write_log(tmp_path / "t-7", table.drop_columns(["offset"]), base_offset=1000)
    assert [r.offset for r in PartitionLog(tmp_path / "t-7").read_records()] == \
        list(range(1000, 1006))


def test_write_log_moves_v2_batches_to_the_log_end_but_keeps_gaps(tmp_path):
    first = kcodec.encode([(None, b"a")] * 3)                    # offsets 0..2
    again = kcodec.encode([(None, b"b")] * 2)                    # also at 0: moved to 3
    later = kcodec.encode([(None, b"c")], base_offset=100)      # a gap is kept
    write_log(tmp_path / "t-4", [first, again, later])
    log = PartitionLog(tmp_path / "t-4")
    assert [r.offset for r in log.read_records()] == [0, 1, 2, 3, 4, 100]
    assert all(b.crc_valid for b in log.read_batches())
    assert log.end_offset == 101
    legacy = kcodec.encode([(None, b"x")], magic=1)
    with pytest.raises(ValueError):
        write_log(tmp_path / "t-5", [first, legacy])


def test_write_log_refuses_a_directory_with_segments(tmp_path, log_dir):
    with pytest.raises(FileExistsError):
        write_log(log_dir, b"")


def test_empty_log(tmp_path):
    write_log(tmp_path / "e-0", [])
    log = PartitionLog(tmp_path / "e-0")
    assert (log.start_offset, log.end_offset) == (0, 0)
    assert log.decode().num_rows == 0
    assert list(log.iter_decode()) == []
    assert log.offset_for_timestamp(0) is None
    assert log.verify()


def test_leader_epoch_checkpoint_written_from_batches(tmp_path):
    data = b"".join(kcodec.encode([(None, b"x")] * n, base_offset=o, partition_leader_epoch=e)
                    for o, n, e in ((0, 3, 0), (3, 2, 0), (5, 4, 2), (9, 1, 5)))
    write_log(tmp_path / "t-6", data)
    text = (tmp_path / "t-6" / "leader-epoch-checkpoint").read_text()
    assert text.split("\n") == ["0", "3", "0 0", "2 5", "5 9", ""]
    assert PartitionLog(tmp_path / "t-6").leader_epochs() == [(0, 0), (2, 5), (5, 9)]


def test_segment_reads_are_zero_copy(log):
    seg = log.segments[0]
    base = np.frombuffer(seg.data, np.uint8).ctypes.data
    batch = next(iter(seg.batches()))[1]
    first = next(iter(batch))
    value = first.value_view
    if value is not None and batch.compression == "none":
        address = np.frombuffer(value, np.uint8).ctypes.data
        assert base <= address < base + seg.size


def test_segment_repr_and_names(log):
    seg = log.segments[1]
    assert isinstance(seg, Segment) and repr(seg).startswith("Segment(")
    assert seg.index_path.endswith(f"{seg.base_offset:020d}.index")


# ------------------------------------------------ the last stable offset

def txn_batch(offset, pid, n=2, ts=BASE_TS_LSO):
    return kcodec.encode([(b"t", b"%d" % (offset + i), ts + offset + i, []) for i in range(n)],
                         base_offset=offset, producer_id=pid, producer_epoch=0,
                         base_sequence=offset, transactional=True)


def plain_batch(offset, n=2, ts=BASE_TS_LSO):
    return kcodec.encode([(b"p", b"%d" % (offset + i), ts + offset + i, []) for i in range(n)],
                         base_offset=offset)


def marker(kind, offset, pid):
    return kcodec.encode_control(kind, producer_id=pid, producer_epoch=0, offset=offset,
                                 timestamp=BASE_TS_LSO + offset)


@pytest.mark.parametrize("with_txnindex", [True, False])
def test_read_committed_stops_at_the_last_stable_offset(tmp_path, with_txnindex):
    """A read_committed consumer fetches up to the LSO: the first offset of a
    transaction still open at the log end. Records after it, committed or
    not, are not returned (yet)."""
    sets = [plain_batch(0), txn_batch(2, 5), marker("ABORT", 4, 5),   # 0-1 plain, 2-3 aborted
            plain_batch(5), txn_batch(7, 6),                          # 7-8: pid 6 never ends
            plain_batch(9), txn_batch(11, 5), marker("COMMIT", 13, 5), plain_batch(14)]
    directory = tmp_path / "t-0"
    write_log(str(directory), sets, segment_bytes=200, index_interval_bytes=0)
    if not with_txnindex:
        for name in files(directory, ".txnindex"):
            os.remove(directory / name)
    assert bool(files(directory, ".txnindex")) == with_txnindex
    log = PartitionLog(directory)
    assert log.last_stable_offset() == 7
    want = [0, 1, 5, 6]
    assert [r.offset for r in log.read_records(isolation="read_committed")] == want
    assert log.decode(isolation="read_committed")["offset"].to_pylist() == want
    assert [b.base_offset for b in log.read_batches(isolation="read_committed")] == [0, 4, 5]
    got = [o for b in log.iter_decode(isolation="read_committed", max_rows=1)
           for o in b.column("offset").to_pylist()]
    assert got == want
    assert log.decode(start_offset=6, end_offset=100, isolation="read_committed")[
        "offset"].to_pylist() == [6]
    assert log.decode(start_offset=9, isolation="read_committed").num_rows == 0
    # read_uncommitted reads to the log end
    assert log.decode()["offset"].to_pylist()[-1] == 15


def test_last_stable_offset_from_the_producer_snapshot(tmp_path):
    """A transaction whose first batches went with a deleted segment is known
    from the producer snapshot write_log wrote at the roll, as a broker does
    (currentTxnFirstOffset); the LSO is then the log start offset, as
    UnifiedLog clamps it."""
    from kcodec.log import ProducerSnapshotEntry, read_producer_snapshot
    sets = [plain_batch(0), txn_batch(2, 6), plain_batch(4), txn_batch(6, 6), plain_batch(8)]
    directory = tmp_path / "t-0"
    paths = write_log(str(directory), sets, segment_bytes=2 * len(sets[0]) + 10, index_interval_bytes=0)
    bases = [int(os.path.basename(p)[:20]) for p in paths]
    assert 2 < bases[1] <= 4, bases          # pid 6's first batch is in the first segment
    # no marker yet: the coordinator epoch is unknown (-1)
    assert read_producer_snapshot(directory / f"{bases[1]:020d}.snapshot") == [
        ProducerSnapshotEntry(producer_id=6, producer_epoch=0, last_sequence=3, last_offset=3,
                              offset_delta=1, timestamp=BASE_TS_LSO + 3, coordinator_epoch=-1,
                              current_txn_first_offset=2)]
    for suffix in (".log", ".index", ".timeindex"):
        os.remove(directory / f"{bases[0]:020d}{suffix}")
    log = PartitionLog(directory)
    assert log.start_offset == bases[1]
    assert log.last_stable_offset() == bases[1]
    assert log.decode(isolation="read_committed").num_rows == 0
    # without the snapshots the open transaction is first seen at offset 6
    for path in directory.glob("*.snapshot"):
        os.remove(path)
    assert PartitionLog(directory).last_stable_offset() == 6


def _cut_log(tmp_path, segment):
    """A 4-segment log with `segment`'s .log missing its last 100 bytes."""
    directory = str(tmp_path / "t-0")
    write_log(directory, [kcodec.encode([(b"k", b"v" * 300)] * 5, base_offset=5 * i)
                          for i in range(8)], segment_bytes=4000)
    log = PartitionLog(directory)
    assert len(log.segments) == 4
    path = log.segments[segment].log_path
    os.truncate(path, os.path.getsize(path) - 100)
    return PartitionLog(directory), path


def test_a_partial_entry_ends_only_the_active_segment_silently(tmp_path):
    log, _ = _cut_log(tmp_path, -1)
    assert [s.active for s in log.segments] == [False, False, False, True]
    offsets = [r.offset for r in log.read_records()]
    assert offsets == list(range(35))               # the last batch is cut: the log's tail
    assert log.decode().column("offset").to_pylist() == offsets
    assert [o for t in log.iter_decode(max_rows=3) for o in t.column("offset").to_pylist()] \
        == offsets


@pytest.mark.parametrize("read", [lambda log: list(log.read_records()),
                                  lambda log: log.decode(),
                                  lambda log: list(log.iter_decode(max_rows=3)),
                                  lambda log: list(log.read_records(isolation="read_committed"))])
def test_a_partial_entry_in_a_closed_segment_is_corruption(tmp_path, read):
    # Silently going on with the next segment would drop the batches after it.
    log, path = _cut_log(tmp_path, 0)
    with pytest.raises(kcodec.CorruptRecordError) as raised:
        read(log)
    assert raised.value.source == path


@pytest.mark.invalid_input
@pytest.mark.parametrize("codec", ["none", "gzip"])
@pytest.mark.parametrize("seek", [False, True])
def test_an_error_in_a_batchs_records_names_the_file_and_its_byte(tmp_path, codec, seek):
    """read_records fails where decode does, and so does iterating the
    batches of read_batches: the segment file, the byte in it, the offset; a
    seek through the index changes none of them."""
    directory = str(tmp_path / "t-0")
    records = [(b"k%d" % i, b"v" * 50, 1000 + i, None) for i in range(100)]
    paths = write_log(directory, [kcodec.encode(records[i:i + 10], base_offset=i,
                                                compression=("none", "gzip")[i // 10 % 2])
                                  for i in range(0, 100, 10)],
                      segment_bytes=1500, index_interval_bytes=0)
    path = paths[1]
    raw = bytearray(open(path, "rb").read())
    batch = next(b for b in kcodec.read_batches(bytes(raw)) if b.compression == codec)
    assert batch.position > 0 or codec == "gzip"
    if codec == "none":
        raw[batch.position + 61] = 0x01                     # the first record's length: -1
    else:
        raw[batch.position + 61:batch.position + batch.size] = b"\xff" * (batch.size - 61)
    open(path, "wb").write(raw)
    log = PartitionLog(directory, verify_crc=False)
    start_offset = batch.base_offset + 5 if seek else None
    errors = []
    for read in (lambda: list(log.read_records(start_offset=start_offset)),
                 lambda: log.decode(start_offset=start_offset),
                 lambda: [list(b) for b in log.read_batches(start_offset=start_offset)]):
        with pytest.raises(kcodec.KafkaFormatError) as raised:
            read()
        errors.append(raised.value)
    from_records, from_decode, from_batches = errors
    assert type(from_records) is type(from_decode) is type(from_batches)
    assert from_records.source == from_decode.source == from_batches.source == path
    assert from_records.offset == from_decode.offset == from_batches.offset == batch.base_offset
    assert from_records.position == from_decode.position == from_batches.position
    assert batch.position <= from_records.position < batch.position + batch.size


def test_an_abort_ending_no_transaction_with_data_is_not_indexed(tmp_path):
    # The broker lists a transaction in the .txnindex only when it has data
    # (ProducerAppendInfo.appendEndTxnMarker): an ABORT alone ends nothing.
    directory = str(tmp_path / "t-0")
    data = kcodec.encode([(b"k", b"v")] * 3, producer_id=7, producer_epoch=0, base_sequence=0,
                         transactional=True)
    batches = [data,
               kcodec.encode_control("ABORT", producer_id=7, producer_epoch=0, offset=3),
               kcodec.encode_control("ABORT", producer_id=4, producer_epoch=0, offset=4),
               kcodec.encode_control("ABORT", producer_id=7, producer_epoch=0, offset=5)]
    write_log(directory, batches)
    log = PartitionLog(directory)
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in log.aborted_transactions()] == [(7, 0, 3)]
    raw = open(log.segments[0].txn_index_path, "rb").read()
    assert [struct.unpack_from(">hqqqq", raw, i)[1:4] for i in range(0, len(raw), 34)] \
        == [(7, 0, 3)]
    assert log.verify().problems == []


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_offsets_of_a_log_read_take_no_float(log, isolation):
    for read in (log.read_batches, log.read_records):
        for bound in ("start_offset", "end_offset"):
            with pytest.raises(TypeError, match=f"^{bound} must be an integer, not float$"):
                list(read(**{bound: 10.5}, isolation=isolation))
    numpy_bounds = dict(start_offset=np.int64(10), end_offset=np.int64(40), isolation=isolation)
    assert ([r.offset for r in log.read_records(**numpy_bounds)]
            == [r.offset for r in log.read_records(10, 40, isolation=isolation)])


def test_last_stable_offset_resumes_where_an_earlier_scan_ended(tmp_path, history, monkeypatch):
    """A reader following the tail passes each PartitionLog the scan of the
    one before: the result is a fresh scan's, reading only what is new."""
    directory = str(tmp_path / "t-0")
    scanned = []
    original = Segment.batches

    def spy(seg, position=0, *args, **kw):
        scanned.append((seg.base_offset, position))
        return original(seg, position, *args, **kw)

    resume = None
    for appends in range(1, len(history.appends) + 1):
        shutil.rmtree(directory, ignore_errors=True)
        write_log(directory, [a.data for a in history.appends[:appends]], segment_bytes=6000)
        fresh = PartitionLog(directory).last_stable_offset()
        log = PartitionLog(directory)
        monkeypatch.setattr(Segment, "batches", spy)
        scanned.clear()
        assert log.last_stable_offset(resume) == fresh
        monkeypatch.undo()
        if resume is not None and resume[0] in {s.base_offset for s in log.segments}:
            assert scanned[0] == resume[:2], "the scan did not resume where the last one ended"
        resume = log.transaction_scan
