"""kcodec against the two Python Kafka clients, in both directions.

1. kafka-python and aiokafka build record sets (every magic, every codec the
   builder supports, idempotent and transactional batches); kcodec decodes them
   and every field must equal what was written and what the same peer's own
   reader reports.
2. kcodec.encode / kcodec.encode_control build record sets; kafka-python's and
   aiokafka's readers decode them, validate their CRCs and must see what kcodec
   was asked to write.
3. Where the format leaves no freedom (uncompressed v2 batches, uncompressed
   v0/v1 messages) kcodec's bytes equal the peers' bytes; where it does (the
   compressed stream, legacy wrapper headers) the parts that are determined are
   compared and the difference is explained.

Facts about the peers these tests rely on (read from their sources):
- Both v2 builders write baseOffset 0 ("set by broker"); kafka-python writes
  partitionLeaderEpoch 0, aiokafka -1 as Java's producer does.  Both store the
  offset passed to append() as the record's offsetDelta; lastOffsetDelta is the
  last offset passed.  Both fall back to an uncompressed batch when compressing
  does not make it smaller.
- Both legacy builders write a compressed wrapper with offset 0 and timestamp 0;
  the inner messages keep the offsets passed to append().  Their readers
  compute absolute = wrapperOffset - lastInnerOffset + innerOffset for magic 1
  and use it only when it is >= 0; magic 0 inner offsets are used as they are.
- aiokafka refuses lz4 in magic 0 (KAFKA-3160) in its builder and its reader;
  kafka-python writes and reads it with the broken 0.8/0.9 header checksum.
- aiokafka's compiled MemoryRecords (0.14) cannot read a record set that mixes
  magic 2 with magic 0/1 entries; its pure-Python MemoryRecords can.
"""
import random
import struct
import zlib

import pytest
import xxhash

import kcodec

import kafka.codec as kp_codec
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record import MemoryRecordsBuilder as KpMemoryRecordsBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.util import calc_crc32 as kp_crc32
from kafka.record.util import calc_crc32c as kp_crc32c

from aiokafka.errors import UnsupportedCodecError as AioUnsupportedCodecError
from aiokafka.producer.message_accumulator import BatchBuilder as AioProducerBatchBuilder
from aiokafka.record import default_records as aio_default
from aiokafka.record import legacy_records as aio_legacy
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from aiokafka.record.memory_records import _MemoryRecordsPy as AioMemoryRecordsPy

from kafka_bytes import INT32_MAX, entries, wrap_sequence

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
V2_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
TS_TYPE = {"NoTimestampType": -1, "CreateTime": 0, "LogAppendTime": 1}
BASE_TS = 1_700_000_000_000
BINARY = bytes(range(256))

# (producer_id, producer_epoch, base_sequence, transactional)
PRODUCERS = {
    "plain": (-1, -1, -1, False),
    # base sequence close to INT32_MAX so that record sequences wrap to 0
    "idempotent": (123_456_789_012, 7, INT32_MAX - 2, False),
    "transactional": (4_242, 32_767, 1_000, True),     # epoch: int16 max
}


def test_peer_readers_and_builders_are_the_compiled_ones():
    # The brief: aiokafka exports its compiled (_crecords) classes by default.
    assert AioMemoryRecords.__module__.startswith("aiokafka.record._crecords")
    assert aio_default.DefaultRecordBatchBuilder.__module__.startswith("aiokafka.record._crecords")
    assert aio_legacy.LegacyRecordBatchBuilder.__module__.startswith("aiokafka.record._crecords")


# --------------------------------------------------------------- test data

def make_records(n, seed, *, magic, headers=True):
    """(key, value, timestamp, headers) covering null, empty, binary and
    compressible keys and values, non-monotonic timestamps (negative deltas)
    and varied headers (v2 only).  Compressible enough that the peers' v2
    builders do not fall back to an uncompressed batch."""
    rng = random.Random(seed)
    header_pool = [("", None), ("trace-id", b"0af7651916cd43dd"), ("\u00fcn\u00ef", b""),
                   ("bin", BINARY[:32]), ("dup", b"1"), ("dup", b"2"), ("null", None)]
    fixed = [(None, None), (b"", b""), (BINARY, BINARY), (None, b"kafka " * 300),
             (b"\x00", None), (b"k" * 200, b"")]
    out = []
    for i in range(n):
        if i < len(fixed):
            key, value = fixed[i]
        else:
            key = rng.choice([None, b"", b"key-%d" % i, rng.randbytes(rng.randrange(1, 40))])
            value = rng.choice([None, b"", b"value %d " % i * rng.randrange(1, 40),
                                rng.randbytes(rng.randrange(1, 64))])
        ts = BASE_TS + 1000 + rng.randrange(-900, 900) if i else BASE_TS + 1000
        hdrs = ()
        if magic == 2 and headers:
            hdrs = tuple(rng.sample(header_pool, rng.randrange(0, 5)))
        out.append((key, value, ts, hdrs))
    return out


def expected_view(records, first_offset, magic):
    """What a reader must report for records written with offsets first_offset..,
    CreateTime (or no timestamp in magic 0)."""
    return [(first_offset + i, ts if magic else -1, 0 if magic else -1, key, value,
             tuple(hdrs) if magic == 2 else ())
            for i, (key, value, ts, hdrs) in enumerate(records)]


# ------------------------------------------------------------------ views

def kc_view(record):
    return (record.offset, record.timestamp, TS_TYPE[record.timestamp_type], record.key,
            record.value, tuple(record.headers))


def _peer_record(record):
    ts = -1 if record.timestamp is None else record.timestamp
    ts_type = -1 if record.timestamp_type is None else record.timestamp_type
    return (record.offset, ts, ts_type, record.key, record.value,
            tuple(tuple(h) for h in (record.headers or ())))


def peer_batches(reader, data):
    """Read a record set with a peer: a list of dicts of batch fields, with
    'crc_ok' from the peer's validate_crc (called before iteration, as both
    peers require) and 'records' as comparable tuples."""
    cls = {"kafka-python": KpMemoryRecords, "aiokafka": AioMemoryRecords,
           "aiokafka-py": AioMemoryRecordsPy}[reader]
    records_set = cls(bytes(data))
    out = []
    while records_set.has_next():
        batch = records_set.next_batch()
        info = {"crc_ok": batch.validate_crc()}
        if hasattr(batch, "is_control_batch"):     # kafka-python's legacy batches lack these
            info["is_control"] = batch.is_control_batch
            info["is_transactional"] = batch.is_transactional
        for name in ("base_offset", "last_offset_delta", "first_timestamp", "max_timestamp",
                     "producer_id", "producer_epoch", "base_sequence", "compression_type",
                     "timestamp_type", "magic", "next_offset", "last_sequence"):
            if hasattr(batch, name):
                info[name] = getattr(batch, name)
        records = list(batch)
        info["raw_records"] = records
        info["records"] = [_peer_record(r) for r in records]
        if reader == "kafka-python" and records and records[0].checksum is not None:
            # legacy records: kafka-python checks each (inner) message's CRC-32
            info["record_crcs_ok"] = [r.validate_crc() for r in records]
        out.append(info)
    return out


def peer_records(reader, data):
    return [r for b in peer_batches(reader, data) for r in b["records"]]


def readers_for(magic, codec):
    # aiokafka cannot read lz4 in magic 0 (checked in its own tests below)
    if magic == 0 and codec == "lz4":
        return ["kafka-python"]
    return ["kafka-python", "aiokafka"]


# --------------------------------------------------------------- writers

def write_kp_memory(records, magic, codec, first_offset=0, producer="plain"):
    pid, epoch, seq, txn = PRODUCERS[producer]
    builder = KpMemoryRecordsBuilder(magic, CODEC_IDS[codec], batch_size=1 << 22,
                                     offset=first_offset, transactional=txn, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=seq)
    for key, value, ts, hdrs in records:
        assert builder.append(ts, key, value, list(hdrs)) is not None
    builder.close()
    return bytes(builder.buffer())


def _write_default(cls, records, codec, first_offset, producer):
    pid, epoch, seq, txn = PRODUCERS[producer]
    builder = cls(2, CODEC_IDS[codec], int(txn), pid, epoch, seq, 1 << 22)
    for i, (key, value, ts, hdrs) in enumerate(records):
        assert builder.append(first_offset + i, ts, key, value, list(hdrs)) is not None
    return bytes(builder.build())


def _write_legacy(cls, records, magic, codec, first_offset):
    builder = cls(magic, CODEC_IDS[codec], 1 << 22)
    for i, (key, value, ts, _) in enumerate(records):
        assert builder.append(first_offset + i, ts, key, value) is not None
    return bytes(builder.build())


V2_WRITERS = {
    "kafka-python.MemoryRecordsBuilder": lambda recs, codec, first=0, producer="plain":
        write_kp_memory(recs, 2, codec, first, producer),
    "kafka-python.DefaultRecordBatchBuilder": lambda recs, codec, first=0, producer="plain":
        _write_default(KpDefaultBuilder, recs, codec, first, producer),
    "aiokafka.DefaultRecordBatchBuilder": lambda recs, codec, first=0, producer="plain":
        _write_default(aio_default.DefaultRecordBatchBuilder, recs, codec, first, producer),
    "aiokafka._DefaultRecordBatchBuilderPy": lambda recs, codec, first=0, producer="plain":
        _write_default(aio_default._DefaultRecordBatchBuilderPy, recs, codec, first, producer),
}
LEGACY_WRITERS = {
    "kafka-python.MemoryRecordsBuilder": lambda recs, magic, codec, first=0:
        write_kp_memory(recs, magic, codec, first),
    "kafka-python.LegacyRecordBatchBuilder": lambda recs, magic, codec, first=0:
        _write_legacy(KpLegacyBuilder, recs, magic, codec, first),
    "aiokafka.LegacyRecordBatchBuilder": lambda recs, magic, codec, first=0:
        _write_legacy(aio_legacy.LegacyRecordBatchBuilder, recs, magic, codec, first),
    "aiokafka._LegacyRecordBatchBuilderPy": lambda recs, magic, codec, first=0:
        _write_legacy(aio_legacy._LegacyRecordBatchBuilderPy, recs, magic, codec, first),
}


def builder_leader_epoch(writer):
    """partitionLeaderEpoch the v2 builders put in: kafka-python 0 (a
    placeholder), aiokafka -1 (none, as Java's producer)."""
    return 0 if writer.startswith("kafka-python") else -1


def own_reader(writer):
    return "kafka-python" if writer.startswith("kafka-python") else "aiokafka"


def legacy_cases():
    for writer in LEGACY_WRITERS:
        for magic in (0, 1):
            for codec in LEGACY_CODECS:
                if magic == 0 and codec == "lz4" and writer.startswith("aiokafka"):
                    continue  # refused by aiokafka; see test_aiokafka_refuses_lz4_magic0
                yield pytest.param(writer, magic, codec, id=f"{writer}-v{magic}-{codec}")


# ====================================================== 1. peers write, kcodec reads

@pytest.mark.parametrize("producer", list(PRODUCERS))
@pytest.mark.parametrize("codec", V2_CODECS)
@pytest.mark.parametrize("writer", list(V2_WRITERS))
def test_v2_peer_batch_read_by_kcodec(writer, codec, producer):
    records = make_records(24, seed=zlib.crc32(f"{writer}{codec}{producer}".encode()), magic=2)
    first = 0
    data = V2_WRITERS[writer](records, codec, first, producer)
    pid, epoch, seq, txn = PRODUCERS[producer]

    [peer] = peer_batches(own_reader(writer), data)
    # premise: the builder really compressed (they fall back to none when it
    # does not pay) and its own reader accepts its CRC
    assert peer["compression_type"] == CODEC_IDS[codec]
    assert peer["crc_ok"]

    [batch] = list(kcodec.read_batches(data))
    assert batch.magic == 2
    assert batch.compression == codec
    assert batch.crc_valid
    assert batch.crc == struct.unpack_from(">I", data, 17)[0]
    assert batch.position == 0 and batch.size == len(data)
    assert batch.base_offset == 0
    assert batch.last_offset == first + len(records) - 1
    assert batch.next_offset == batch.last_offset + 1
    assert batch.count == len(batch) == len(records)
    assert batch.timestamp_type == "CreateTime"
    assert batch.first_timestamp == records[0][2]
    assert batch.max_timestamp == max(r[2] for r in records)
    assert batch.partition_leader_epoch == builder_leader_epoch(writer)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional is txn
    assert batch.is_control is False
    assert batch.delete_horizon_ms is None
    assert batch.last_sequence == wrap_sequence(seq, batch.last_offset - batch.base_offset)
    if "last_sequence" in peer:
        assert batch.last_sequence == peer["last_sequence"]
    for name in ("base_offset", "first_timestamp", "max_timestamp", "producer_id",
                 "producer_epoch", "base_sequence", "is_transactional"):
        assert getattr(batch, name) == peer[name], name

    got = [kc_view(r) for r in batch]
    assert got == expected_view(records, first, 2)
    assert got == peer["records"]
    for r in batch:
        assert r.sequence == wrap_sequence(seq, r.offset - batch.base_offset)
        assert r.control is None
        assert (None if r.key_view is None else bytes(r.key_view)) == r.key
        assert (None if r.value_view is None else bytes(r.value_view)) == r.value
    if producer == "idempotent":
        assert 0 in [r.sequence for r in batch]        # the wrap really happened
    assert [kc_view(r) for r in kcodec.read_records(data)] == got


@pytest.mark.parametrize("writer,magic,codec", list(legacy_cases()))
def test_legacy_peer_messages_read_by_kcodec(writer, magic, codec):
    records = make_records(12, seed=magic * 10 + len(codec), magic=magic)
    first = 30
    data = LEGACY_WRITERS[writer](records, magic, codec, first)
    peer = peer_batches(own_reader(writer), data)
    assert all(b["crc_ok"] for b in peer)

    batches = list(kcodec.read_batches(data))
    expected = expected_view(records, first, magic)
    if codec == "none":
        # one entry per record, offsets as written
        assert len(batches) == len(records)
        for batch, exp, (key, value, ts, _) in zip(batches, expected, records):
            assert batch.count == 1 and batch.base_offset == batch.last_offset == exp[0]
            assert batch.first_timestamp == batch.max_timestamp == exp[1]
    else:
        [batch] = batches
        assert batch.count == len(records)
        assert batch.base_offset == expected[0][0]
        # the wrapper's own offset field, as the builder wrote it (0); Java's
        # lastOffset() of a legacy entry is that field too
        assert batch.last_offset == struct.unpack_from(">q", data, 0)[0] == 0
    pos = 0
    for batch in batches:
        assert batch.magic == magic
        assert batch.compression == codec
        assert batch.crc_valid
        assert batch.crc == struct.unpack_from(">I", data, pos + 12)[0]
        assert batch.position == pos
        pos += batch.size
        assert batch.timestamp_type == ("CreateTime" if magic else "NoTimestampType")
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence,
                batch.last_sequence, batch.partition_leader_epoch) == (-1, -1, -1, -1, -1)
        assert batch.is_transactional is False and batch.is_control is False
    assert pos == len(data)

    got = [kc_view(r) for r in kcodec.read_records(data)]
    assert got == expected
    for reader in readers_for(magic, codec):
        assert peer_records(reader, data) == got, reader
    assert all(r.sequence == -1 and r.control is None for r in kcodec.read_records(data))


def test_aiokafka_refuses_lz4_magic0():
    records = make_records(4, seed=1, magic=0)
    with pytest.raises(AioUnsupportedCodecError):
        _write_legacy(aio_legacy.LegacyRecordBatchBuilder, records, 0, "lz4", 0)
    data = write_kp_memory(records, 0, "lz4")
    # kafka-python reads what it wrote (the broken 0.8/0.9 header checksum) ...
    assert peer_records("kafka-python", data) == expected_view(records, 0, 0)
    # ... aiokafka will not ...
    with pytest.raises(AioUnsupportedCodecError):
        peer_records("aiokafka", data)
    # ... kcodec does
    assert [kc_view(r) for r in kcodec.read_records(data)] == expected_view(records, 0, 0)


def _set_offset(data, offset):
    """What a broker does to an entry's offset field (not covered by any CRC)."""
    return struct.pack(">q", offset) + bytes(data[8:])


@pytest.mark.parametrize("wrapper_offset", [None, 1000], ids=["as-built", "broker-assigned"])
@pytest.mark.parametrize("first", [0, 40], ids=["inner-from-0", "inner-from-40"])
@pytest.mark.parametrize("writer,magic,codec",
                         [p for p in legacy_cases() if p.values[2] != "none"])
def test_legacy_wrapper_offsets(writer, magic, codec, first, wrapper_offset):
    """Offsets of inner messages of a compressed wrapper: kcodec must report
    the same absolute offsets as the peer that wrote the wrapper."""
    n = 6
    records = make_records(n, seed=first + magic, magic=magic)
    data = LEGACY_WRITERS[writer](records, magic, codec, first)
    # Both builders leave the wrapper offset (and timestamp) at 0 and keep the
    # inner offsets they were given.
    assert struct.unpack_from(">q", data, 0)[0] == 0
    if magic == 1:
        assert struct.unpack_from(">q", data, 18)[0] == 0
    if wrapper_offset is not None:
        data = _set_offset(data, wrapper_offset)
    wrapper = struct.unpack_from(">q", data, 0)[0]
    inner = [first + i for i in range(n)]
    if magic == 1 and wrapper != 0:
        want = [wrapper - inner[-1] + o for o in inner]
    else:
        want = inner          # magic 0: absolute inner offsets; magic 1 with wrapper 0: as they are

    got = [r.offset for r in kcodec.read_records(data)]
    assert got == want
    for reader in readers_for(magic, codec):
        assert [r[0] for r in peer_records(reader, data)] == got, reader
    [batch] = kcodec.read_batches(data)
    assert batch.last_offset == wrapper
    assert batch.base_offset == want[0]
    assert batch.count == n


def test_legacy_v1_wrapper_offset_below_last_inner_is_corrupt():
    """kcodec follows Java (spec 2): a v1 wrapper whose offset is non-zero and
    below its last inner offset is corrupt.  The Python peers silently fall
    back to the inner offsets instead; that leniency is not copied."""
    records = make_records(5, seed=3, magic=1)
    data = _set_offset(write_kp_memory(records, 1, "gzip", first_offset=40), 10)
    assert [r[0] for r in peer_records("kafka-python", data)] == [40, 41, 42, 43, 44]
    with pytest.raises(kcodec.CorruptRecordError):
        list(kcodec.read_records(data))


def _set_v2_base(data, base_offset, leader_epoch):
    """A broker's baseOffset and partitionLeaderEpoch (both outside the CRC)."""
    buf = bytearray(data)
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    return bytes(buf)


def _entry_sizes(data):
    """Sizes (with the 12-byte prefix) of the entries of a record set."""
    sizes = [end - start for start, end in entries(data)]
    assert sum(sizes) == len(data)
    return sizes


def _v2_log_append(data, ts, base_offset, leader_epoch):
    """Rewrite a v2 batch the way a broker with LogAppendTime does, CRC-32C
    recomputed with kafka-python's function."""
    buf = bytearray(_set_v2_base(data, base_offset, leader_epoch))
    attrs = struct.unpack_from(">h", buf, 21)[0] | 0x08
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">q", buf, 35, ts)
    struct.pack_into(">I", buf, 17, kp_crc32c(bytes(buf[21:])))
    return bytes(buf)


def _v1_log_append(data, ts, offset):
    """Same for a magic 1 wrapper: attributes bit 3, wrapper timestamp, CRC-32."""
    buf = bytearray(_set_offset(data, offset))
    buf[17] |= 0x08
    struct.pack_into(">q", buf, 18, ts)
    struct.pack_into(">I", buf, 12, kp_crc32(bytes(buf[16:])))
    return bytes(buf)


def test_concatenated_broker_log_of_peer_batches():
    """Several entries of mixed magics and writers, offsets assigned as a broker
    does, two of them rewritten to LogAppendTime, a partial entry at the end."""
    append_ts_v2 = BASE_TS + 50_000
    append_ts_v1 = BASE_TS + 60_000
    pieces, expected = [], []

    def add(data, records, first, magic, *, ts=None, ts_type=None):
        pieces.append(data)
        for (off, t, tt, k, v, h) in expected_view(records, first, magic):
            expected.append((off, t if ts is None else ts, tt if ts_type is None else ts_type,
                             k, v, h))

    r1 = make_records(5, seed=11, magic=2)
    data = V2_WRITERS["kafka-python.MemoryRecordsBuilder"](r1, "gzip")
    add(_set_v2_base(data, 100, leader_epoch=3), r1, 100, 2)
    r2 = make_records(3, seed=12, magic=2)
    data = V2_WRITERS["aiokafka.DefaultRecordBatchBuilder"](r2, "none", 0, "idempotent")
    add(_v2_log_append(data, append_ts_v2, 105, 4), r2, 105, 2, ts=append_ts_v2, ts_type=1)
    r3 = make_records(4, seed=13, magic=1)
    data = LEGACY_WRITERS["kafka-python.LegacyRecordBatchBuilder"](r3, 1, "snappy", 0)
    add(_set_offset(data, 111), r3, 108, 1)                     # inner 0..3 → 108..111
    r4 = make_records(2, seed=14, magic=0)
    add(LEGACY_WRITERS["aiokafka.LegacyRecordBatchBuilder"](r4, 0, "none", 112), r4, 112, 0)
    r5 = make_records(3, seed=15, magic=0)
    data = LEGACY_WRITERS["kafka-python.MemoryRecordsBuilder"](r5, 0, "lz4", 114)
    add(_set_offset(data, 116), r5, 114, 0)                     # inner absolute 114..116
    lz4_v0 = len(pieces) - 1
    r6 = make_records(2, seed=16, magic=1)
    data = LEGACY_WRITERS["aiokafka.LegacyRecordBatchBuilder"](r6, 1, "gzip", 0)
    add(_v1_log_append(data, append_ts_v1, 118), r6, 117, 1, ts=append_ts_v1, ts_type=1)
    r7 = make_records(7, seed=17, magic=2)
    data = V2_WRITERS["kafka-python.DefaultRecordBatchBuilder"](r7, "zstd", 0, "transactional")
    add(_set_offset(data, 119), r7, 119, 2)

    log = b"".join(pieces)
    tail = pieces[0][:40]                 # a partial entry, as at the end of a fetch
    got_batches = list(kcodec.read_batches(log + tail))
    # piece 3 (uncompressed v0) is two entries
    sizes = [len(p) for p in pieces[:3]] + _entry_sizes(pieces[3]) + [len(p) for p in pieces[4:]]
    assert len(_entry_sizes(pieces[3])) == 2
    assert [b.size for b in got_batches] == sizes
    assert [b.position for b in got_batches] == [sum(sizes[:i]) for i in range(len(sizes))]
    assert [b.magic for b in got_batches] == [2, 2, 1, 0, 0, 0, 1, 2]
    assert [b.compression for b in got_batches] == [
        "gzip", "none", "snappy", "none", "none", "lz4", "gzip", "zstd"]
    assert got_batches[0].partition_leader_epoch == 3
    assert got_batches[1].partition_leader_epoch == 4
    assert got_batches[1].timestamp_type == "LogAppendTime"
    assert got_batches[1].max_timestamp == append_ts_v2
    assert got_batches[6].timestamp_type == "LogAppendTime"
    assert got_batches[7].is_transactional
    assert [b.last_offset for b in got_batches] == [104, 107, 111, 112, 113, 116, 118, 125]
    assert all(b.crc_valid for b in got_batches)

    got = [kc_view(r) for r in kcodec.read_records(log + tail)]
    assert got == expected
    assert [r[0] for r in got] == list(range(100, 126))
    assert peer_records("kafka-python", log + tail) == got
    # aiokafka: no lz4 in magic 0.  Its compiled MemoryRecords also fails on
    # record sets that mix magic 2 with magic 0/1 entries (CorruptRecordException
    # or "Negative size passed to PyBytes_FromStringAndSize"), so it reads the
    # entries one piece at a time; its pure-Python MemoryRecords reads the mix.
    lz4_offsets = {114, 115, 116}
    not_lz4_v0 = [r for r in got if r[0] not in lz4_offsets]
    assert [r for i, p in enumerate(pieces) if i != lz4_v0
            for r in peer_records("aiokafka", p)] == not_lz4_v0
    without_lz4_v0 = b"".join(p for i, p in enumerate(pieces) if i != lz4_v0)
    assert peer_records("aiokafka-py", without_lz4_v0 + tail) == not_lz4_v0
    with pytest.raises(kcodec.CorruptRecordError):
        list(kcodec.read_batches(log + tail, partial="error"))


@pytest.mark.parametrize("writer", list(V2_WRITERS))
def test_v2_peer_offsets_start_above_zero(writer):
    """MemoryRecordsBuilder(offset=N) and append(N + i, ...) store N + i as the
    offset delta over baseOffset 0; with a broker-assigned baseOffset on top
    the offsets add up, in kcodec as in the peer's reader."""
    records = make_records(5, seed=5, magic=2)
    base = 1 << 40
    data = _set_offset(V2_WRITERS[writer](records, "none", 17, "idempotent"), base)
    got = [kc_view(r) for r in kcodec.read_records(data)]
    assert got == expected_view(records, base + 17, 2)
    assert got == peer_records(own_reader(writer), data)
    [batch] = kcodec.read_batches(data)
    assert (batch.base_offset, batch.last_offset) == (base, base + 21)
    seq = PRODUCERS["idempotent"][2]
    assert [r.sequence for r in batch] == [wrap_sequence(seq, 17 + i) for i in range(5)]
    if writer.startswith("kafka-python"):
        assert batch.last_sequence == peer_batches("kafka-python", data)[0]["last_sequence"]


@pytest.mark.parametrize("producer", ["plain", "idempotent", "transactional"])
@pytest.mark.parametrize("codec", V2_CODECS)
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_v2_producer_code_paths(client, codec, producer):
    """The way each client's producer builds a batch: producer state set after
    the records are appended (kafka-python MemoryRecordsBuilder.set_producer_state,
    aiokafka BatchBuilder._set_producer_state, which starts from base sequence 0
    even without a producer id)."""
    records = make_records(15, seed=len(codec) + len(producer), magic=2)
    pid, epoch, seq, txn = PRODUCERS[producer]
    if client == "kafka-python":
        builder = KpMemoryRecordsBuilder(2, CODEC_IDS[codec], 1 << 22)
        for key, value, ts, hdrs in records:
            assert builder.append(ts, key, value, list(hdrs)) is not None
        if producer != "plain":
            builder.set_producer_state(pid, epoch, seq, txn)
        builder.close()
        data = bytes(builder.buffer())
    else:
        builder = AioProducerBatchBuilder(1 << 22, CODEC_IDS[codec], is_transactional=int(txn))
        for key, value, ts, hdrs in records:
            assert builder.append(timestamp=ts, key=key, value=value, headers=list(hdrs))
        if producer != "plain":
            builder._set_producer_state(pid, epoch, seq)
        else:
            seq = 0                      # BatchBuilder's default base sequence
        data = bytes(builder._build())
    [peer] = peer_batches(client, data)
    assert peer["compression_type"] == CODEC_IDS[codec]
    [batch] = kcodec.read_batches(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional is txn is peer["is_transactional"]
    assert batch.last_sequence == wrap_sequence(seq, len(records) - 1)
    got = [kc_view(r) for r in batch]
    assert got == expected_view(records, 0, 2) == peer["records"]
    assert [r.sequence for r in batch] == [wrap_sequence(seq, i) for i in range(len(records))]


@pytest.mark.parametrize("magic,codec", [(2, c) for c in V2_CODECS] +
                         [(m, c) for m in (0, 1) for c in LEGACY_CODECS])
def test_compacted_offset_gaps(magic, codec):
    """MemoryRecordsBuilder.skip() leaves offset gaps, as the log cleaner does:
    offsets (and v2 sequences, baseSequence + offsetDelta) keep the gaps, also
    under a broker-assigned offset (v2 baseOffset, v1 wrapper offset)."""
    records = make_records(8, seed=26, magic=magic)
    builder = KpMemoryRecordsBuilder(magic, CODEC_IDS[codec], 1 << 22, offset=0,
                                     **({} if magic < 2 else dict(
                                         producer_id=77, producer_epoch=1, base_sequence=10)))
    offsets = []
    for i, (key, value, ts, hdrs) in enumerate(records):
        builder.skip(i % 3)
        offsets.append(builder.next_offset())
        assert builder.append(ts, key, value, list(hdrs)) is not None
    builder.close()
    data = bytes(builder.buffer())
    assert offsets[-1] > len(records) - 1           # there are gaps
    if magic == 2 or (magic == 1 and codec != "none"):
        data = _set_offset(data, 500 if magic == 2 else 500 + offsets[-1])
        offsets = [500 + o for o in offsets]
    got = [kc_view(r) for r in kcodec.read_records(data)]
    assert [r[0] for r in got] == offsets
    assert got == [(o, *rest) for o, (_, *rest) in zip(offsets, expected_view(records, 0, magic))]
    for reader in readers_for(magic, codec):
        assert peer_records(reader, data) == got, reader
    if magic == 2:
        [batch] = kcodec.read_batches(data)
        assert batch.last_offset == offsets[-1]
        assert [r.sequence for r in batch] == [10 + o - 500 for o in offsets]
        assert batch.last_sequence == 10 + offsets[-1] - 500


@pytest.mark.parametrize("writer", list(V2_WRITERS))
def test_v2_peer_empty_batch(writer):
    """A builder closed without records gives a header-only batch (count 0):
    valid, as compaction leaves them; the next entry is still read."""
    empty = V2_WRITERS[writer]([], "none")
    assert len(empty) == 61
    records = make_records(3, seed=8, magic=2)
    data = empty + _set_offset(V2_WRITERS[writer](records, "gzip"), 1)
    batches = list(kcodec.read_batches(data))
    assert [b.count for b in batches] == [0, 3]
    assert list(batches[0]) == [] and batches[0].crc_valid
    assert batches[0].size == 61 and batches[1].position == 61
    got = [kc_view(r) for r in kcodec.read_records(data)]
    assert got == expected_view(records, 1, 2)
    assert got == peer_records(own_reader(writer), data)


def make_large_records(seed, magic):
    """Enough data for several xerial snappy chunks (32 KiB) and lz4 blocks
    (64 KiB), multi-byte varints (lengths > 16 KiB, > 127 records, > 63
    headers) and timestamp deltas that need a varlong."""
    rng = random.Random(seed)
    out = []
    for i in range(200):
        if i % 25 == 3:
            value = bytes(rng.choices(b"abcdefgh", k=20_000 + i))
        else:
            value = rng.randbytes(rng.randrange(0, 150))
        key = b"key-%05d" % i if i % 7 else None
        ts = BASE_TS + i * 3
        if i == 50:
            ts = 0                      # delta of -1.7e12 ms
        elif i == 51:
            ts = BASE_TS + (1 << 40)    # far future
        hdrs = ()
        if magic == 2 and i == 60:
            hdrs = tuple((f"h{j}", bytes([j]) * j) for j in range(100))
        out.append((key, value, ts, hdrs))
    return out


@pytest.mark.parametrize("codec", V2_CODECS)
@pytest.mark.parametrize("writer", ["kafka-python.DefaultRecordBatchBuilder",
                                    "aiokafka.DefaultRecordBatchBuilder"])
def test_v2_large_batches_both_directions(writer, codec):
    records = make_large_records(31, 2)
    peer = V2_WRITERS[writer](records, codec, 0, "idempotent")
    assert peer_batches(own_reader(writer), peer)[0]["compression_type"] == CODEC_IDS[codec]
    # peers write, kcodec reads (from a bytearray, through the buffer protocol)
    got = [kc_view(r) for r in kcodec.read_records(bytearray(peer))]
    assert got == expected_view(records, 0, 2)
    [batch] = kcodec.read_batches(peer)
    assert (batch.first_timestamp, batch.max_timestamp) == (BASE_TS, BASE_TS + (1 << 40))
    # kcodec writes, both peers read
    pid, epoch, seq, _ = PRODUCERS["idempotent"]
    ours = kcodec.encode(records, compression=codec, base_offset=10, producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq)
    for reader in ("kafka-python", "aiokafka"):
        batches = peer_batches(reader, ours)
        assert all(b["crc_ok"] and b["compression_type"] == CODEC_IDS[codec] for b in batches)
        assert [r for b in batches for r in b["records"]] == expected_view(records, 10, 2)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v1_large_wrapper_both_directions(codec):
    records = make_large_records(32, 1)
    peer = LEGACY_WRITERS["kafka-python.LegacyRecordBatchBuilder"](records, 1, codec, 0)
    assert [kc_view(r) for r in kcodec.read_records(peer)] == expected_view(records, 0, 1)
    ours = kcodec.encode(records, magic=1, compression=codec, base_offset=10)
    for reader in ("kafka-python", "aiokafka"):
        batches = peer_batches(reader, ours)
        assert all(b["crc_ok"] for b in batches)
        assert [r for b in batches for r in b["records"]] == expected_view(records, 10, 1)


# ====================================================== 2. kcodec writes, peers read

def _expected_ts(records, batch_offsets, first, magic, ts_type):
    """Timestamps a reader must report for records encoded by kcodec: their own
    (CreateTime), the batch maximum (LogAppendTime, v2 or v1 wrapper), none (v0)."""
    out = {}
    for offsets in batch_offsets:
        own = [records[o - first][2] for o in offsets]
        for o, t in zip(offsets, own):
            if magic == 0:
                out[o] = (-1, -1)
            elif ts_type == "LogAppendTime":
                out[o] = (max(own), 1)
            else:
                out[o] = (t, 0)
    return out


def kcodec_encode_cases():
    for magic in (0, 1, 2):
        for codec in (V2_CODECS if magic == 2 else LEGACY_CODECS):
            for ts_type in (("CreateTime", "LogAppendTime") if magic else ("CreateTime",)):
                for producer in (PRODUCERS if magic == 2 else ["plain"]):
                    for split in (False, True):
                        yield pytest.param(magic, codec, ts_type, producer, split,
                                           id=f"v{magic}-{codec}-{ts_type}-{producer}"
                                              f"-{'split' if split else 'one'}")


@pytest.mark.parametrize("magic,codec,ts_type,producer,split", list(kcodec_encode_cases()))
def test_kcodec_encode_read_by_peers(magic, codec, ts_type, producer, split):
    records = make_records(20, seed=magic * 100 + len(codec), magic=magic)
    pid, epoch, seq, txn = PRODUCERS[producer]
    first = 5_000_000_000          # beyond int32: offsets are int64 everywhere
    max_batch = 400 if split else 1 << 20
    data = kcodec.encode(records, magic=magic, compression=codec, base_offset=first,
                         timestamp_type=ts_type, producer_id=pid, producer_epoch=epoch,
                         base_sequence=seq, transactional=txn, max_batch_bytes=max_batch)

    for reader in readers_for(magic, codec):
        batches = peer_batches(reader, data)
        if split:
            assert len(batches) > 1
        elif magic == 2 or codec != "none":
            assert len(batches) == 1
        else:
            assert len(batches) == len(records)
        # records grouped as the peer saw the entries
        groups = [[r[0] for r in b["records"]] for b in batches]
        assert [o for g in groups for o in g] == [first + i for i in range(len(records))]
        ts = _expected_ts(records, groups, first, magic, ts_type)
        want = [(o, *ts[o], k, v, h)
                for (o, _, _, k, v, h) in expected_view(records, first, magic)]
        assert [r for b in batches for r in b["records"]] == want, reader

        for b, group in zip(batches, groups):
            assert b["crc_ok"], reader
            assert all(b.get("record_crcs_ok", [True])), reader
            assert b.get("is_control", False) is False
            if magic == 2:
                assert b["compression_type"] == CODEC_IDS[codec]
                assert b["base_offset"] == group[0]
                assert b["last_offset_delta"] == len(group) - 1
                assert b["next_offset"] == group[-1] + 1
                assert b["timestamp_type"] == TS_TYPE[ts_type]
                assert b["first_timestamp"] == records[group[0] - first][2]
                assert b["max_timestamp"] == max(records[o - first][2] for o in group)
                assert (b["producer_id"], b["producer_epoch"]) == (pid, epoch)
                assert b["base_sequence"] == wrap_sequence(seq, group[0] - first)
                assert b["is_transactional"] is txn
                if "last_sequence" in b:
                    assert b["last_sequence"] == wrap_sequence(seq, group[-1] - first)
            else:
                assert b.get("is_transactional", False) is False
                if "next_offset" in b:     # aiokafka: the entry's offset field + 1
                    assert b["next_offset"] == group[-1] + 1
                if "base_offset" in b:     # kafka-python: the entry's offset field
                    # uncompressed: the message's offset; wrapper: its LAST inner offset
                    assert b["base_offset"] == group[-1]
                if "compression_type" in b:
                    assert b["compression_type"] == CODEC_IDS[codec]
                if "timestamp_type" in b:
                    assert b["timestamp_type"] == (TS_TYPE[ts_type] if magic else None)

    if split and magic == 2 and codec == "none":
        for b in kcodec.read_batches(data):
            assert b.size <= max_batch or b.count == 1
    # and kcodec reads its own output the same way
    assert [kc_view(r) for r in kcodec.read_records(data)] == peer_records("kafka-python", data)


@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1, 2)
                                         for c in (V2_CODECS if m == 2 else LEGACY_CODECS)])
def test_kcodec_encode_of_a_table_read_by_peers(magic, codec):
    """A table's offsets (gaps of a compacted log, a batch that starts again
    at 0) and timestamp types, as kcodec.encode writes them from its columns,
    are what the peers read."""
    import pyarrow as pa
    offsets = [5, 7, 8, 40, 41, 3_000_000_000, 3_000_000_002, 0, 1]
    types = [0, 0, 1, 1, 1, 0, 0, 1, 1] if magic else [-1] * len(offsets)
    table = pa.table({
        "key": pa.array([None if o % 3 else b"k%d" % o for o in offsets]),
        "value": pa.array([b"value-%d" % o for o in offsets]),
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array([None if t < 0 else 1_700_000_000_000 + o % 1000
                               for o, t in zip(offsets, types)], pa.timestamp("ms", "UTC")),
        "timestampType": pa.array(types, pa.int32())})
    data = kcodec.encode(table, magic=magic, compression=codec)
    ours = [kc_view(r) for r in kcodec.read_records(data)]
    assert [r[0] for r in ours] == offsets
    assert [r[2] for r in ours] == types
    for reader in readers_for(magic, codec):
        assert peer_records(reader, data) == ours, reader


def test_kcodec_lz4_magic0_read_by_kafka_python_not_aiokafka():
    records = make_records(6, seed=9, magic=0)
    data = kcodec.encode(records, magic=0, compression="lz4", base_offset=70)
    [b] = peer_batches("kafka-python", data)
    assert b["crc_ok"] and all(b["record_crcs_ok"])
    assert b["records"] == expected_view(records, 70, 0)
    # the header checksum kcodec wrote is Kafka 0.8/0.9's broken one (over
    # magic+FLG+BD, not FLG+BD), and the whole frame header is the one
    # kafka-python's lz4_encode_old_kafka writes (no content size, 64 KiB blocks)
    [batch] = kcodec.read_batches(data)
    frame = bytes(batch.records_data)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[:7] == kp_codec.lz4_encode_old_kafka(b"kcodec " * 50)[:7]
    assert frame[6] == (xxhash.xxh32_intdigest(frame[0:6]) >> 8) & 0xFF
    assert frame[6] != (xxhash.xxh32_intdigest(frame[4:6]) >> 8) & 0xFF
    with pytest.raises(AioUnsupportedCodecError):
        peer_records("aiokafka", data)


@pytest.mark.parametrize("coordinator_epoch", [0, 17, INT32_MAX])
@pytest.mark.parametrize("kind", ["COMMIT", "ABORT"])
def test_kcodec_control_batch_read_by_peers(kind, coordinator_epoch):
    pid, epoch = 9_000_000_001, 12
    txn = kcodec.encode(make_records(3, seed=2, magic=2), base_offset=500, producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, transactional=True)
    marker = kcodec.encode_control(kind, producer_id=pid, producer_epoch=epoch, offset=503,
                                   coordinator_epoch=coordinator_epoch, timestamp=BASE_TS + 7)
    data = txn + marker
    type_id = {"ABORT": 0, "COMMIT": 1}[kind]

    kp = peer_batches("kafka-python", data)
    assert [b["is_control"] for b in kp] == [False, True]
    ctl = kp[1]
    assert ctl["crc_ok"] and ctl["is_transactional"]
    assert (ctl["base_offset"], ctl["last_offset_delta"]) == (503, 0)
    assert (ctl["producer_id"], ctl["producer_epoch"]) == (pid, epoch)
    assert ctl["first_timestamp"] == ctl["max_timestamp"] == BASE_TS + 7
    [rec] = ctl["raw_records"]
    assert (rec.offset, rec.timestamp, rec.version, rec.type) == (503, BASE_TS + 7, 0, type_id)
    assert rec.commit is (kind == "COMMIT") and rec.abort is (kind == "ABORT")
    assert rec.value == struct.pack(">hi", 0, coordinator_epoch)

    aio = peer_batches("aiokafka", data)
    assert [b["is_control"] for b in aio] == [False, True]
    ctl = aio[1]
    assert ctl["crc_ok"] and ctl["is_transactional"]
    assert (ctl["base_offset"], ctl["producer_id"], ctl["producer_epoch"]) == (503, pid, epoch)
    [rec] = ctl["raw_records"]
    marker_rec = AioControlRecord.parse(rec.key)
    assert marker_rec == (COMMIT_MARKER if kind == "COMMIT" else ABORT_MARKER)
    assert struct.unpack(">hi", rec.value) == (0, coordinator_epoch)
    assert rec.offset == 503 and rec.timestamp == BASE_TS + 7

    # kcodec sees the same marker, and hides it from consumers by default
    [_, batch] = kcodec.read_batches(data)
    assert batch.is_control and batch.is_transactional and batch.crc_valid
    [r] = batch
    assert (r.control.type, r.control.version, r.control.coordinator_epoch) == (
        kind, 0, coordinator_epoch)
    assert [r.offset for r in kcodec.read_records(data)] == [500, 501, 502]
    committed = [r.offset for r in kcodec.read_records(data, isolation="read_committed")]
    assert committed == ([500, 501, 502] if kind == "COMMIT" else [])


# ====================================================== 3. byte equality

@pytest.mark.parametrize("producer", list(PRODUCERS))
@pytest.mark.parametrize("writer", list(V2_WRITERS))
def test_v2_uncompressed_bytes_equal_peers(writer, producer):
    records = make_records(16, seed=21, magic=2)
    pid, epoch, seq, txn = PRODUCERS[producer]
    peer = V2_WRITERS[writer](records, "none", 0, producer)
    kw = dict(base_offset=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
              transactional=txn)
    # kafka-python writes partitionLeaderEpoch 0 (a placeholder the broker
    # overwrites); aiokafka, Java's producer and kcodec's default write -1 (no
    # epoch).  With the same epoch the bytes are identical.
    epoch_field = builder_leader_epoch(writer)
    assert kcodec.encode(records, partition_leader_epoch=epoch_field, **kw) == peer
    default = kcodec.encode(records, **kw)
    assert default[12:16] == b"\xff\xff\xff\xff"
    # the leader epoch is outside the CRC, so nothing else can differ
    assert default[:12] == peer[:12] and default[16:] == peer[16:]


@pytest.mark.parametrize("base_offset", [0, 77])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("writer", list(LEGACY_WRITERS))
def test_legacy_uncompressed_bytes_equal_peers(writer, magic, base_offset):
    records = make_records(10, seed=22, magic=magic)
    peer = LEGACY_WRITERS[writer](records, magic, "none", base_offset)
    assert kcodec.encode(records, magic=magic, base_offset=base_offset) == peer


@pytest.mark.parametrize("writer", list(V2_WRITERS) + [f"legacy-v{m}:{w}" for w in LEGACY_WRITERS
                                                     for m in (0, 1)])
def test_reencoding_decoded_peer_records_gives_peer_bytes(writer):
    """kcodec.Record objects decoded from a peer's uncompressed entries and
    encoded again (same offsets, producer fields, leader epoch) give back the
    peer's bytes exactly."""
    if writer.startswith("legacy-"):
        magic, name = int(writer[8]), writer.split(":", 1)[1]
        peer = LEGACY_WRITERS[name](make_records(9, seed=25, magic=magic), magic, "none", 9)
        decoded = list(kcodec.read_records(peer))
        assert kcodec.encode(decoded, magic=magic, base_offset=9) == peer
    else:
        pid, epoch, seq, txn = PRODUCERS["transactional"]
        peer = V2_WRITERS[writer](make_records(16, seed=25, magic=2), "none", 0, "transactional")
        decoded = list(kcodec.read_records(peer))
        assert all(isinstance(r, kcodec.Record) for r in decoded)
        assert kcodec.encode(decoded, partition_leader_epoch=builder_leader_epoch(writer),
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                             transactional=txn) == peer


_KP_DECODE = {"gzip": kp_codec.gzip_decode, "snappy": kp_codec.snappy_decode,
              "lz4": kp_codec.lz4_decode, "zstd": kp_codec.zstd_decode}


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("writer", list(V2_WRITERS))
def test_v2_compressed_same_records_section(writer, codec):
    """The compressed stream is not determined (levels, block sizes, framing
    options), but the header and the records it decompresses to are."""
    records = make_records(16, seed=23, magic=2)
    peer = V2_WRITERS[writer](records, codec, 0, "transactional")
    pid, epoch, seq, txn = PRODUCERS["transactional"]
    ours = kcodec.encode(records, compression=codec,
                         partition_leader_epoch=builder_leader_epoch(writer),
                         producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         transactional=txn)
    # identical header fields except batchLength [8,12) and crc [17,21)
    assert ours[:8] + ours[12:17] + ours[21:61] == peer[:8] + peer[12:17] + peer[21:61]
    # both streams decompress, with kafka-python's codec, to the same records
    # section, which is also what an uncompressed batch carries
    plain = kcodec.encode(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          transactional=txn)
    decode = _KP_DECODE[codec]
    assert decode(ours[61:]) == decode(peer[61:]) == plain[61:]


@pytest.mark.parametrize("writer,magic,codec",
                         [p for p in legacy_cases() if p.values[2] != "none"])
def test_legacy_compressed_same_inner_messages(writer, magic, codec):
    """Inside a compressed wrapper the inner message set is determined (relative
    offsets 0..n-1 in magic 1, absolute in magic 0); the wrapper is not: the
    peers leave its offset and timestamp 0 for the broker to fill in, while
    kcodec writes what a broker stores (last absolute offset, max timestamp)."""
    records = make_records(8, seed=24, magic=magic)
    base = 300
    peer = LEGACY_WRITERS[writer](records, magic, codec, 0 if magic == 1 else base)
    ours = kcodec.encode(records, magic=magic, compression=codec, base_offset=base)

    def inner(entry):
        value_pos = 12 + (14 if magic == 1 else 6)
        assert struct.unpack_from(">i", entry, value_pos)[0] == -1          # null key
        size = struct.unpack_from(">i", entry, value_pos + 4)[0]
        stream = bytes(entry[value_pos + 8:value_pos + 8 + size])
        if codec == "lz4" and magic == 0:
            return kp_codec.lz4_decode_old_kafka(stream)
        return _KP_DECODE[codec](stream)

    assert inner(ours) == inner(peer)
    assert inner(ours) == kcodec.encode(records, magic=magic,
                                        base_offset=0 if magic == 1 else base)
    assert struct.unpack_from(">q", ours, 0)[0] == base + len(records) - 1
    assert ours[17] == CODEC_IDS[codec] == peer[17]
    if magic == 1:
        assert struct.unpack_from(">q", ours, 18)[0] == max(r[2] for r in records)
