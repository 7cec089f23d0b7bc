"""Partition directories laid out by hand from batches other implementations
wrote (kafka-python's and aiokafka's builders; librdkafka through
confluent-kafka's mock cluster), read with kcodec.log and compared with what
the peers produced and what their readers see."""
import os
import random
import struct

import pytest
from aiokafka.record import default_records as aio_default
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from kcodec.log import PartitionLog, write_log
from log_helpers import BASE_TS, table_rows, view
from peers.librdkafka_mock import Message, MockCluster, fix_control_crcs

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_rows(n, seed):
    rng = random.Random(seed)
    return [(rng.choice([None, b"k%d" % i]), rng.choice([None, rng.randbytes(rng.randrange(80))]),
             BASE_TS + i * 3 + rng.randrange(-2, 3),
             [("h", b"%d" % i)] if i % 3 else []) for i in range(n)]


def v2_batch(builder_class, rows, codec, first_offset):
    """A producer's batch (offset deltas from 0), then its base offset set as
    the broker assigns it (the CRC does not cover it)."""
    builder = builder_class(2, CODEC_IDS[codec], 0, -1, -1, -1, 1 << 22)
    for i, (key, value, ts, headers) in enumerate(rows):
        assert builder.append(i, ts, key, value, headers) is not None
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, first_offset)
    return bytes(data)


def legacy_batch(rows, magic, codec, first_offset):
    """Messages with absolute offsets; a compressed wrapper then gets the
    offset of its last inner message, as the broker stores it."""
    builder = KpLegacyBuilder(magic, CODEC_IDS[codec], 1 << 22)
    for i, (key, value, ts, _) in enumerate(rows):
        assert builder.append(first_offset + i, ts, key, value) is not None
    data = bytearray(builder.build())
    if codec != "none":
        struct.pack_into(">q", data, 0, first_offset + len(rows) - 1)
    return bytes(data)


def lay_out(directory, batches, split_every):
    """Segments by hand: a new .log (named by its first offset, as
    kafka-python reads it) every `split_every` batches, no index files at all."""
    os.makedirs(directory)
    for i in range(0, len(batches), split_every):
        group = batches[i:i + split_every]
        mr = MemoryRecords(group[0])
        first = next(iter(mr.next_batch())).offset
        with open(os.path.join(directory, f"{first:020d}.log"), "wb") as f:
            f.write(b"".join(group))


def kafka_python_records(raw):
    out, mr = [], MemoryRecords(raw)
    while mr.has_next():
        batch = mr.next_batch()
        if getattr(batch, "is_control_batch", False):
            continue
        out += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers or ())) for r in batch]
    return out


@pytest.mark.parametrize("builder", [KpDefaultBuilder, aio_default.DefaultRecordBatchBuilder],
                         ids=["kafka-python", "aiokafka"])
def test_peer_v2_batches_by_hand(tmp_path, builder):
    batches, offset = [], 0
    for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"] * 3):
        rows = make_rows(30 + i, seed=i)
        batches.append(v2_batch(builder, rows, codec, offset))
        offset += len(rows)
    directory = str(tmp_path / "peer-topic-5")
    lay_out(directory, batches, split_every=4)
    log = PartitionLog(directory)
    assert len(log.segments) == 4 and log.partition == 5 and log.topic == "peer-topic"
    expected = kafka_python_records(b"".join(batches))
    assert view(log.read_records()) == expected
    assert table_rows(log.decode()) == expected
    # no index files: seeks scan from the segment start
    for start in (0, 17, 200, offset - 1):
        assert view(log.read_records(start)) == [r for r in expected if r[0] >= start]
    assert log.end_offset == offset
    stamps = sorted({r[1] for r in expected})
    target = stamps[len(stamps) // 2]
    assert log.offset_for_timestamp(target) == next(r[0] for r in expected if r[1] >= target)

    # the same batches through write_log: indexes appear and verify
    written = str(tmp_path / "again-5")
    write_log(written, batches, segment_bytes=4000, index_interval_bytes=500)
    again = PartitionLog(written)
    assert view(again.read_records()) == expected and again.verify()


@pytest.mark.parametrize("magic", [0, 1])
def test_peer_legacy_message_sets_by_hand(tmp_path, magic):
    batches, offset = [], 0
    for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "none", "gzip"]):
        rows = make_rows(10, seed=100 + i)
        batches.append(legacy_batch(rows, magic, codec, offset))
        offset += len(rows)
    directory = str(tmp_path / f"legacy-{magic}")
    lay_out(directory, batches, split_every=2)
    log = PartitionLog(directory)
    expected = kafka_python_records(b"".join(batches))
    expected = [(o, ts if magic else -1, k, v, h) for o, ts, k, v, h in expected]
    assert view(log.read_records()) == expected
    assert view(log.read_records(25, 44)) == [r for r in expected if 25 <= r[0] < 44]
    assert log.end_offset == offset
    assert log.verify()


# ------------------------------------------------------------- librdkafka

TXNS = [("commit", "snappy", 30), ("abort", "gzip", 25), ("commit", "zstd", 20),
        ("abort", "lz4", 15), ("commit", "none", 10)]


@pytest.fixture(scope="module")
def librdkafka_log():
    """Transactions committed and aborted by librdkafka, with plain batches
    produced between them; the partition fetched raw."""
    with MockCluster() as cluster:
        topic = cluster.new_topic("txn")
        sent, offset = [], 0
        for k, (outcome, codec, n) in enumerate(TXNS):
            messages = [Message(b"k%d" % i, b"txn%d-%d" % (k, i), BASE_TS + 100 * k + i,
                                (("n", b"%d" % i),)) for i in range(n)]
            cluster.produce(messages, topic=topic, compression=codec, transactional=outcome,
                            batch_size=1024)
            sent.append((outcome, offset, messages))
            offset += n + 1
            plain = [Message(None, b"plain%d" % k, BASE_TS + 100 * k + 50, ())]
            cluster.produce(plain, topic=topic)
            sent.append(("plain", offset, plain))
            offset += 1
        fetched = cluster.fetch(topic)
    return sent, fix_control_crcs(fetched.records)


def expected_from_sent(sent, committed_only):
    rows = []
    for outcome, first, messages in sent:
        if committed_only and outcome == "abort":
            continue
        rows += [(first + i, m.timestamp, m.key, m.value, tuple(m.headers))
                 for i, m in enumerate(messages)]
    return rows


def split_batches(raw):
    out, pos = [], 0
    while pos < len(raw):
        end = pos + 12 + struct.unpack_from(">i", raw, pos + 8)[0]
        out.append(raw[pos:end])
        pos = end
    return out


@pytest.mark.parametrize("layout", ["by-hand", "write_log"])
def test_librdkafka_transactions_read_committed(tmp_path, librdkafka_log, layout):
    sent, raw = librdkafka_log
    batches = split_batches(raw)
    directory = str(tmp_path / "rdkafka-0")
    if layout == "by-hand":
        lay_out(directory, batches, split_every=5)
    else:
        write_log(directory, batches, segment_bytes=1000, index_interval_bytes=300)
    log = PartitionLog(directory)
    assert len(log.segments) > 2
    assert view(log.read_records()) == expected_from_sent(sent, False) == \
        kafka_python_records(raw)
    committed = expected_from_sent(sent, True)
    assert view(log.read_records(isolation="read_committed")) == committed
    assert table_rows(log.decode(isolation="read_committed")) == committed
    aborted_starts = [first for outcome, first, _ in sent if outcome == "abort"]
    assert [t.first_offset for t in log.aborted_transactions()] == aborted_starts
    for start in range(0, log.end_offset, 7):
        got = log.decode(start_offset=start, isolation="read_committed")
        assert table_rows(got) == [r for r in committed if r[0] >= start]
    if layout == "write_log":
        assert any(os.path.exists(s.txn_index_path) for s in log.segments)
        assert log.verify()
