"""kcodec dump / verify / convert. Expected dump lines are built here from
the bytes of the files (struct) and from what was written, in the formats
of shared/spec/kafka-formats.md §6."""
import json
import os
import shutil
import struct

import pyarrow.parquet as pq
import pytest

import kcodec
from kcodec.cli import main
from kcodec.log import PartitionLog, write_log
from log_helpers import scripted_history, table_rows, write_history

CODEC_NAMES = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def history_dir(tmp_path_factory):
    history = scripted_history(seed=4, rounds=3)
    directory = tmp_path_factory.mktemp("cli") / "events-0"
    return str(write_history(str(directory), history, 7000, 1024)), history


def run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def batch_line(raw, pos):
    """The v2 batch line of spec §6, from the header bytes at `pos`."""
    (base, size, ple, magic, crc, attrs, last_delta, _first_ts, max_ts, pid, epoch, base_seq,
     count) = struct.unpack_from(">qiibIhiqqqhii", raw, pos)
    last_seq = -1 if base_seq < 0 else (base_seq + last_delta) % (1 << 31)
    ts_type = "LogAppendTime" if attrs & 8 else "CreateTime"
    return (f"baseOffset: {base} lastOffset: {base + last_delta} count: {count} "
            f"baseSequence: {base_seq} lastSequence: {last_seq} producerId: {pid} "
            f"producerEpoch: {epoch} partitionLeaderEpoch: {ple} "
            f"isTransactional: {str(bool(attrs & 16)).lower()} "
            f"isControl: {str(bool(attrs & 32)).lower()} deleteHorizonMs: OptionalLong.empty "
            f"position: {pos} {ts_type}: {max_ts} size: {size + 12} magic: {magic} "
            f"compresscodec: {CODEC_NAMES[attrs & 7]} crc: {crc} isvalid: true")


def test_dump_log_batches(capsys, history_dir):
    directory, _ = history_dir
    log_path = os.path.join(directory, f"{0:020d}.log")
    raw = open(log_path, "rb").read()
    expected = [f"Dumping {log_path}", "Log starting offset: 0"]
    pos = 0
    while pos < len(raw):
        expected.append(batch_line(raw, pos))
        pos += 12 + struct.unpack_from(">i", raw, pos + 8)[0]
    status, out, err = run(capsys, "dump", "--files", log_path)
    assert status == 0 and out == expected and err == []


def test_dump_records_with_data(capsys, tmp_path):
    data = kcodec.encode([(b"k1", b"hello", 1000, [("a", b"1"), ("b", None)]),
                          (None, b"", 1005, [])], compression="gzip", producer_id=4,
                         producer_epoch=0, base_sequence=7, transactional=True)
    data += kcodec.encode_control("COMMIT", producer_id=4, producer_epoch=0, offset=2,
                                  coordinator_epoch=3, timestamp=1010)
    write_log(tmp_path / "d-0", data)
    path = str(tmp_path / "d-0" / f"{0:020d}.log")
    status, out, _ = run(capsys, "dump", "--files", path, "--print-data-log")
    assert status == 0
    assert out[3:5] == [
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: 7 headerKeys: [a,b] "
        "key: k1 payload: hello",
        "| offset: 1 CreateTime: 1005 keySize: -1 valueSize: 0 sequence: 8 headerKeys: [] "
        "payload: ",
    ]
    assert out[6] == ("| offset: 2 CreateTime: 1010 keySize: 4 valueSize: 6 sequence: -1 "
                      "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3")
    status, out, _ = run(capsys, "dump", "--files", path, "--print-data-log",
                         "--skip-record-metadata")
    assert out[3:5] == ["| key: k1 payload: hello", "| payload: "]
    status, out, _ = run(capsys, "dump", "--files", path, "--deep-iteration")
    assert out[3].endswith("headerKeys: [a,b]")


def test_dump_json(capsys, history_dir):
    directory, history = history_dir
    path = os.path.join(directory, f"{0:020d}.log")
    status, out, _ = run(capsys, "dump", "--files", path, "--deep-iteration", "--json")
    objects = [json.loads(line) for line in out]
    batches = [o for o in objects if o["type"] == "batch"]
    records = [o for o in objects if o["type"] == "record"]
    first_segment = [a for a in history.appends
                     if a.base_offset < PartitionLog(directory).segments[1].base_offset]
    assert [b["base_offset"] for b in batches] == [a.base_offset for a in first_segment]
    assert [r["offset"] for r in records if "control" not in r] == \
        [rec[0] for a in first_segment for rec in a.records]


def test_dump_max_bytes_and_trailing_bytes(capsys, history_dir, tmp_path):
    directory, _ = history_dir
    path = os.path.join(directory, f"{0:020d}.log")
    raw = open(path, "rb").read()
    second = 12 + struct.unpack_from(">i", raw, 8)[0]
    third = second + 12 + struct.unpack_from(">i", raw, second + 8)[0]
    status, out, _ = run(capsys, "dump", "--files", path, "--max-bytes", str(third - 1))
    assert len(out) == 3                      # header lines and the first batch only
    cut = tmp_path / f"{0:020d}.log"
    cut.write_bytes(raw[:third + 20])
    status, out, _ = run(capsys, "dump", "--files", str(cut))
    assert out[-1] == f"Found 20 invalid bytes at the end of {cut.name}"


def test_dump_indexes(capsys, history_dir):
    directory, history = history_dir
    log = PartitionLog(directory)
    seg = log.segments[0]
    raw = open(seg.index_path, "rb").read()
    expected = [f"offset: {seg.base_offset + rel} position: {pos}"
                for rel, pos in struct.iter_unpack(">ii", raw)]
    traw = open(seg.time_index_path, "rb").read()
    time_expected = [f"timestamp: {ts} offset: {seg.base_offset + rel}"
                     for ts, rel in struct.iter_unpack(">qi", traw)]
    txn_seg = next(s for s in log.segments if os.path.exists(s.txn_index_path))
    txn_expected = [f"version: {v} producerId: {p} firstOffset: {f} lastOffset: {last} "
                    f"lastStableOffset: {lso}" for v, p, f, last, lso in
                    struct.iter_unpack(">hqqqq", open(txn_seg.txn_index_path, "rb").read())]
    status, out, err = run(capsys, "dump", "--files",
                           ",".join([seg.index_path, seg.time_index_path, txn_seg.txn_index_path]))
    assert status == 0 and err == []
    assert out == ([f"Dumping {seg.index_path}"] + expected + [f"Dumping {seg.time_index_path}"]
                   + time_expected + [f"Dumping {txn_seg.txn_index_path}"] + txn_expected)
    assert expected and time_expected and txn_expected


def test_dump_index_checks(capsys, history_dir, tmp_path):
    directory, _ = history_dir
    copy = tmp_path / "c-0"
    shutil.copytree(directory, copy)
    seg = PartitionLog(copy).segments[0]
    status, out, err = run(capsys, "dump", "--files", seg.index_path, "--index-sanity-check")
    assert out == [f"Dumping {seg.index_path}", f"{seg.index_path} passed sanity check."]
    status, out, err = run(capsys, "dump", "--files", seg.index_path, "--verify-index-only")
    assert out == [f"Dumping {seg.index_path}"] and err == []
    raw = bytearray(open(seg.index_path, "rb").read())
    rel, pos = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">i", raw, 0, rel + 1)
    open(seg.index_path, "wb").write(raw)
    status, out, err = run(capsys, "dump", "--files", seg.index_path, "--verify-index-only")
    assert err == [f"Mismatches in :{os.path.abspath(seg.index_path)}",
                   f"  Index offset: {seg.base_offset + rel + 1}, log offset: "
                   f"{seg.base_offset + rel}"]
    status, out, err = run(capsys, "dump", "--files", str(tmp_path / "c-0" / "x.unknown"))
    assert err == [f"Ignoring unknown file {tmp_path / 'c-0' / 'x.unknown'}"]


def test_dump_time_index_offsets_not_found_in_the_log(capsys, history_dir, tmp_path):
    """An index with no entry yet (zeros) reads as one entry naming the base
    offset; the batch holding it ends later, which the tool reports per file."""
    directory, _ = history_dir
    copy = tmp_path / "t-0"
    shutil.copytree(directory, copy)
    seg = PartitionLog(copy).segments[0]
    first = next(iter(kcodec.read_batches(open(seg.log_path, "rb").read())))
    assert first.last_offset > seg.base_offset
    open(seg.time_index_path, "wb").write(bytes(12 * 8))
    status, out, err = run(capsys, "dump", "--files", seg.time_index_path, "--verify-index-only")
    assert status == 0 and out == [f"Dumping {seg.time_index_path}"]
    assert err == [f"The following indexed offsets are not found in :"
                   f"{os.path.abspath(seg.time_index_path)}",
                   f"Indexed offset: {seg.base_offset}, found log offset: {first.last_offset}"]


def test_dump_names_files_as_java_does(capsys, history_dir, tmp_path, monkeypatch):
    """The tool names files as java.io.File does: repeated slashes dropped,
    and where it gives the absolute path, the working directory before a
    relative one with ".." kept."""
    directory, _ = history_dir
    shutil.copytree(directory, tmp_path / "t-0")
    (tmp_path / "sub").mkdir()
    seg = PartitionLog(tmp_path / "t-0").segments[0]
    open(seg.time_index_path, "wb").write(bytes(12 * 8))
    name = os.path.basename(seg.time_index_path)
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "dump", "--files", f"sub/..//t-0/{name}", "--verify-index-only")
    assert status == 0 and out == [f"Dumping sub/../t-0/{name}"]
    assert err[0] == f"The following indexed offsets are not found in :{tmp_path}/sub/../t-0/{name}"


def test_dump_snapshot(capsys, tmp_path):
    from kcodec.log import encode_producer_snapshot
    path = tmp_path / f"{131:020d}.snapshot"
    path.write_bytes(encode_producer_snapshot([(7, 1, 41, 120, 3, 1_700_000_000_000, 2, 118)]))
    status, out, _ = run(capsys, "dump", "--files", str(path))
    assert out[1] == ("producerId: 7 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: "
                      "OptionalLong[118] lastTimestamp: 1700000000000 firstSequence: 38 "
                      "lastSequence: 41 lastOffset: 120 offsetDelta: 3 timestamp: 1700000000000")


def string16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_offsets_decoder(capsys, tmp_path):
    key = struct.pack(">h", 1) + string16("grp") + string16("orders") + struct.pack(">i", 3)
    value = struct.pack(">hqi", 3, 42, 5) + string16("meta") + struct.pack(">q", 1700)
    group_key = struct.pack(">h", 2) + string16("grp")
    data = kcodec.encode([(key, value), (key, None), (group_key, None)])
    write_log(tmp_path / "__consumer_offsets-0", data)
    path = str(tmp_path / "__consumer_offsets-0" / f"{0:020d}.log")
    status, out, _ = run(capsys, "dump", "--files", path, "--offsets-decoder")
    records = [line for line in out if line.startswith("|")]
    assert records[0].endswith(
        ' key: {"type":"1","data":{"group":"grp","topic":"orders","partition":3}} payload: '
        '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"meta",'
        '"commitTimestamp":1700}}')
    assert records[1].endswith(" payload: <DELETE>")
    assert ' key: {"type":"2","data":{"group":"grp"}} payload: <DELETE>' in records[2]


def test_transaction_log_decoder(capsys, tmp_path):
    key = struct.pack(">h", 0) + string16("tx-1")
    value = (struct.pack(">hqhib", 0, 9, 1, 60000, 2) + struct.pack(">i", 1) + string16("t")
             + struct.pack(">iii", 2, 0, 1) + struct.pack(">qq", 1700, 1600))
    write_log(tmp_path / "__transaction_state-0", kcodec.encode([(key, value)]))
    path = str(tmp_path / "__transaction_state-0" / f"{0:020d}.log")
    status, out, _ = run(capsys, "dump", "--files", path, "--transaction-log-decoder")
    assert out[3].endswith(
        ' key: {"type":"0","data":{"transactionalId":"tx-1"}} payload: {"version":"0","data":'
        '{"producerId":9,"producerEpoch":1,"transactionTimeoutMs":60000,"transactionStatus":2,'
        '"transactionPartitions":[{"topic":"t","partitionIds":[0,1]}],'
        '"transactionLastUpdateTimestampMs":1700,"transactionStartTimestampMs":1600}}')


def test_dump_corrupt_log_names_file_and_position(capsys, history_dir, tmp_path):
    directory, _ = history_dir
    raw = bytearray(open(os.path.join(directory, f"{0:020d}.log"), "rb").read())
    second = 12 + struct.unpack_from(">i", raw, 8)[0]
    raw[second + 16] = 7                                    # unknown magic
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(raw)
    status, out, err = run(capsys, "dump", "--files", str(path))
    assert status == 1 and len(out) == 3
    assert str(path) in err[0] and f"byte {second + 16}" in err[0]   # the magic field


def test_verify_command(capsys, history_dir, tmp_path):
    directory, _ = history_dir
    status, out, _ = run(capsys, "verify", directory)
    assert status == 0 and "OK" in out[0]
    copy = tmp_path / "v-0"
    shutil.copytree(directory, copy)
    seg = PartitionLog(copy).segments[0]
    raw = bytearray(open(seg.log_path, "rb").read())
    raw[100] ^= 4
    open(seg.log_path, "wb").write(raw)
    status, out, _ = run(capsys, "verify", str(copy))
    assert status == 1 and any(seg.log_path in line for line in out)
    status, out, _ = run(capsys, "verify", str(tmp_path))   # a log.dirs root
    assert status == 1


def test_convert_to_parquet(capsys, history_dir, tmp_path):
    directory, history = history_dir
    target = tmp_path / "out.parquet"
    status, out, _ = run(capsys, "convert", directory, "--to", str(target),
                         "--isolation", "read_committed", "--start-offset", "10",
                         "--max-rows", "50", "--max-bytes", "5000")
    assert status == 0 and "rows" in out[0]
    table = pq.read_table(target)
    expected = [r for r in history.data_records(committed_only=True) if r[0] >= 10]
    assert table_rows(table) == expected
    assert table.schema.equals(kcodec.arrow.schema(topic=True, partition=True))
    assert set(table.column("topic").to_pylist()) == {"events"}
    assert pq.ParquetFile(target).metadata.num_row_groups >= len(expected) // 50
    assert not os.path.exists(str(target) + ".tmp")


def test_convert_an_empty_range(capsys, history_dir, tmp_path):
    directory, _ = history_dir
    target = tmp_path / "empty.parquet"
    status, _, _ = run(capsys, "convert", directory, "--to", str(target),
                       "--start-offset", str(10**9))
    assert status == 0 and pq.read_table(target).num_rows == 0


def test_dump_empty_index_is_reported_before_the_sanity_check(capsys, tmp_path):
    """DumpLogSegments.dumpIndex returns "<file> is empty." when the index
    has no entries, before looking at --index-sanity-check."""
    path = tmp_path / f"{0:020d}.index"
    path.write_bytes(b"")
    status, out, err = run(capsys, "dump", "--files", str(path), "--index-sanity-check")
    assert out == [f"Dumping {path}", f"{path} is empty."]


def test_dump_index_mismatches_by_index_offset_highest_first(capsys, history_dir, tmp_path):
    """Kafka 4's tool keeps index mismatches in a map sorted by index offset and
    lists them highest first."""
    directory, _ = history_dir
    copy = tmp_path / "m-0"
    shutil.copytree(directory, copy)
    seg = PartitionLog(copy).segments[0]
    raw = bytearray(open(seg.index_path, "rb").read())
    entries = list(struct.iter_unpack(">ii", raw))
    assert len(entries) >= 2
    for i, (rel, pos) in enumerate(entries[:2]):
        struct.pack_into(">i", raw, 8 * i + 4, pos + 1)      # no batch starts there
    open(seg.index_path, "wb").write(raw)
    status, out, err = run(capsys, "dump", "--files", seg.index_path, "--verify-index-only")
    assert err[0] == f"Mismatches in :{os.path.abspath(seg.index_path)}"
    assert [line.split(",")[0] for line in err[1:]] == [
        f"  Index offset: {seg.base_offset + rel}" for rel, _ in reversed(entries[:2])]


@pytest.mark.parametrize("magic", [0, 1])
def test_dump_legacy_record_lines(capsys, tmp_path, magic):
    """Legacy records end " isValid: <b> crc: <crc>", as Kafka 4's tool prints them."""
    data = kcodec.encode([(b"k", b"v1", 1000, []), (None, b"v2", 1001, [])], magic=magic)
    directory = tmp_path / "legacy-0"
    write_log(str(directory), data)
    path = str(directory / f"{0:020d}.log")
    raw = open(path, "rb").read()
    status, out, err = run(capsys, "dump", "--files", path, "--deep-iteration")
    records = [line for line in out if line.startswith("| ")]
    second = 12 + struct.unpack_from(">i", raw, 8)[0]
    for (pos, key_size, value), line in zip([(0, 1, b"v1"), (second, -1, b"v2")], records):
        crc = struct.unpack_from(">I", raw, pos + 12)[0]
        ts = (f"CreateTime: {1000 + (pos > 0)}" if magic else "NoTimestampType: -1")
        assert line == (f"| offset: {int(pos > 0)} {ts} keySize: {key_size} valueSize: "
                        f"{len(value)} isValid: true crc: {crc}")
    assert len(records) == 2
