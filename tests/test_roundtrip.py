"""Round trips: whatever kcodec.encode writes, kcodec.read_records and
read_batches read back exactly (keys, values, headers, offsets, timestamps,
sequences, producer fields, batch limits), for every magic and codec; control
markers and read_committed filtering over random transactional logs."""
import collections
import os
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import kcodec

from kafka_bytes import INT32_MAX, wrap_sequence

# KCODEC_ROUNDTRIP_EXAMPLES raises the example count for a long session.
SETTINGS = settings(max_examples=int(os.environ.get("KCODEC_ROUNDTRIP_EXAMPLES", 150)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

blobs = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=40),
                  st.binary(min_size=500, max_size=4000))
timestamps = st.one_of(st.just(-1), st.integers(0, 1 << 45),
                       st.integers(1_600_000_000_000, 1_600_000_100_000))
headers = st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=30))),
                   max_size=4)
records = st.lists(st.tuples(blobs, blobs, timestamps, headers), min_size=1, max_size=25)
sequences = st.one_of(st.just(-1), st.integers(0, INT32_MAX), st.integers(INT32_MAX - 30, INT32_MAX))
codecs = st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"])
batch_limits = st.one_of(st.integers(1, 200), st.integers(200, 20_000), st.just(1 << 20))


def record_tuple(r):
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers, r.sequence)


@SETTINGS
@given(recs=records, magic=st.sampled_from([0, 1, 2]), codec=codecs,
       base_offset=st.integers(0, 1 << 62), max_batch_bytes=batch_limits,
       timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
       producer_id=st.one_of(st.just(-1), st.integers(0, (1 << 63) - 1)),
       producer_epoch=st.integers(-1, 32767), base_sequence=sequences,
       transactional=st.booleans(), leader_epoch=st.integers(-1, INT32_MAX))
def test_encode_then_read_gives_the_records_back(recs, magic, codec, base_offset, max_batch_bytes,
                                                 timestamp_type, producer_id, producer_epoch,
                                                 base_sequence, transactional, leader_epoch):
    assume(codec != "zstd" or magic == 2)
    if magic < 2:
        recs = [(k, v, ts, []) for k, v, ts, _ in recs]
        producer = {}
    else:
        producer = dict(producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence, transactional=transactional,
                        partition_leader_epoch=leader_epoch)
    data = kcodec.encode(recs, magic=magic, compression=codec, base_offset=base_offset,
                         max_batch_bytes=max_batch_bytes, timestamp_type=timestamp_type,
                         **producer)

    batches = list(kcodec.read_batches(data))
    decoded = [(b, r) for b in batches for r in b]
    assert len(decoded) == len(recs)
    assert sum(b.count for b in batches) == len(recs)
    assert all(b.crc_valid for b in batches)
    assert {b.magic for b in batches} == {magic}
    assert {b.compression for b in batches} == {codec}

    for i, ((batch, r), (key, value, ts, hdrs)) in enumerate(zip(decoded, recs)):
        assert (r.key, r.value) == (key, value)
        assert r.headers == tuple((k, v) for k, v in hdrs)
        assert r.offset == base_offset + i
        assert r.control is None
        if magic == 0:
            assert (r.timestamp, r.timestamp_type) == (-1, "NoTimestampType")
        elif timestamp_type == "CreateTime":
            assert (r.timestamp, r.timestamp_type) == (ts, "CreateTime")
        else:
            assert (r.timestamp, r.timestamp_type) == (batch.max_timestamp, "LogAppendTime")
        assert r.sequence == (wrap_sequence(base_sequence, i) if magic == 2 else -1)

    # Batches: contiguous offsets, their records' timestamps, producer fields.
    first = 0
    for b in batches:
        n = b.count
        mine = recs[first:first + n]
        assert (b.base_offset, b.last_offset, b.next_offset) == (
            base_offset + first, base_offset + first + n - 1, base_offset + first + n)
        if magic > 0:
            assert b.max_timestamp == max(ts for _, _, ts, _ in mine)
        if magic == 2:
            assert b.first_timestamp == mine[0][2]
            assert (b.producer_id, b.producer_epoch, b.is_transactional,
                    b.partition_leader_epoch) == (producer_id, producer_epoch, transactional,
                                                  leader_epoch)
            assert (b.base_sequence, b.last_sequence) == (
                wrap_sequence(base_sequence, first), wrap_sequence(base_sequence, first + n - 1))
            assert b.timestamp_type == timestamp_type
            if codec == "none":
                assert b.size <= max_batch_bytes or n == 1, (b.size, max_batch_bytes, n)
        else:
            assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
                    b.partition_leader_epoch, b.is_transactional) == (-1, -1, -1, -1, -1, False)
            if codec == "none":
                assert n == 1
        assert not b.is_control
        first += n

    assert [record_tuple(r) for r in kcodec.read_records(data)] == [
        record_tuple(r) for _, r in decoded]


@SETTINGS
@given(recs=records, base_offset=st.integers(0, 1 << 62), max_batch_bytes=batch_limits,
       producer_id=st.one_of(st.just(-1), st.integers(0, 1 << 40)),
       producer_epoch=st.integers(-1, 32767), base_sequence=sequences,
       transactional=st.booleans(), codec=codecs)
def test_v2_reencode_is_byte_identical(recs, base_offset, max_batch_bytes, producer_id,
                                       producer_epoch, base_sequence, transactional, codec):
    params = dict(base_offset=base_offset, max_batch_bytes=max_batch_bytes,
                  producer_id=producer_id, producer_epoch=producer_epoch,
                  base_sequence=base_sequence, transactional=transactional)
    data = kcodec.encode(recs, **params)
    again = kcodec.encode(list(kcodec.read_records(data)), **params)
    assert again == data
    # Through a compressed set (batched by uncompressed size, like the plain
    # one): re-encoding its records uncompressed gives the plain set again.
    packed = kcodec.encode(recs, compression=codec, **params)
    assert kcodec.encode(list(kcodec.read_records(packed)), **params) == data
    assert kcodec.encode(list(kcodec.read_records(packed)), compression=codec, **params) == packed


@SETTINGS
@given(recs=records, magic=st.sampled_from([0, 1]), codec=st.sampled_from(["none", "gzip", "snappy", "lz4"]),
       base_offset=st.integers(0, 1 << 62), max_batch_bytes=batch_limits)
def test_legacy_reencode_reads_the_same(recs, magic, codec, base_offset, max_batch_bytes):
    recs = [(k, v, ts, None) for k, v, ts, _ in recs]
    data = kcodec.encode(recs, magic=magic, compression=codec, base_offset=base_offset,
                         max_batch_bytes=max_batch_bytes)
    again = kcodec.encode(list(kcodec.read_records(data)), magic=magic, compression=codec,
                          base_offset=base_offset, max_batch_bytes=max_batch_bytes)
    assert again == data
    assert [record_tuple(r) for r in kcodec.read_records(again)] == [
        record_tuple(r) for r in kcodec.read_records(data)]


@pytest.mark.parametrize("params", [
    dict(producer_id=1, producer_epoch=1 << 15),            # int16 field
    dict(producer_id=1, producer_epoch=70000),
    dict(producer_id=1, producer_epoch=-2),
    dict(base_offset=(1 << 63) - 2),                         # offsets 2**63-2 .. 2**63
    dict(base_offset=-5),
    dict(producer_id=1, base_sequence=1 << 31),
    dict(producer_id=1, base_sequence=-5),                   # -1 is the only 'none'
    dict(partition_leader_epoch=1 << 31),
])
def test_encode_refuses_values_its_fields_cannot_hold(params):
    # Writing a different number than asked for is worse than refusing.
    try:
        data = kcodec.encode([(b"k", b"v", 1, None)] * 3, **params)
    except (ValueError, OverflowError):
        return
    batches = list(kcodec.read_batches(data))
    got = {"producer_epoch": batches[0].producer_epoch, "producer_id": batches[0].producer_id,
           "base_sequence": batches[0].base_sequence,
           "partition_leader_epoch": batches[0].partition_leader_epoch,
           "base_offset": batches[0].base_offset}
    assert {k: got[k] for k in params} == params
    assert [r.offset for b in batches for r in b] == [params.get("base_offset", 0) + i
                                                      for i in range(3)]


@pytest.mark.parametrize("params", [dict(producer_epoch=70000), dict(producer_epoch=-2),
                                    dict(offset=-1), dict(producer_id=-1)])
def test_encode_control_refuses_values_its_fields_cannot_hold(params):
    args = dict(producer_id=1, producer_epoch=0, offset=0, coordinator_epoch=0, timestamp=0)
    args.update(params)
    try:
        data = kcodec.encode_control("COMMIT", **args)
    except (ValueError, OverflowError):
        return
    (batch,) = kcodec.read_batches(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_offset) == (
        args["producer_id"], args["producer_epoch"], args["offset"])


def test_empty_input_encodes_to_nothing():
    assert kcodec.encode([]) == b""
    assert list(kcodec.read_batches(b"")) == []


def test_record_forms_encode_alike():
    as_tuples = kcodec.encode([(b"k", b"v", 5, [("h", b"1")]), (None, None, 6, None)])
    as_dicts = kcodec.encode([{"key": b"k", "value": b"v", "timestamp": 5, "headers": [("h", b"1")]},
                              {"key": None, "value": None, "timestamp": 6}])
    as_records = kcodec.encode([kcodec.Record(b"k", b"v", 5, [("h", b"1")]),
                                kcodec.Record(None, None, 6)])
    Row = collections.namedtuple("Row", "key value timestamp headers")
    as_named_tuples = kcodec.encode([Row(b"k", b"v", 5, [("h", b"1")]), Row(None, None, 6, None)])
    assert as_tuples == as_dicts == as_records == as_named_tuples


def test_sequences_wrap_across_batches():
    data = kcodec.encode([(b"k", b"v" * 50, 1, None)] * 6, producer_id=3, producer_epoch=0,
                         base_sequence=INT32_MAX - 3, max_batch_bytes=200)
    batches = list(kcodec.read_batches(data))
    assert len(batches) > 1
    assert [r.sequence for b in batches for r in b] == [
        INT32_MAX - 3, INT32_MAX - 2, INT32_MAX - 1, INT32_MAX, 0, 1]
    assert [(b.base_sequence, b.last_sequence) for b in batches] == [
        (wrap_sequence(INT32_MAX - 3, sum(c.count for c in batches[:i])),
         wrap_sequence(INT32_MAX - 3, sum(c.count for c in batches[:i + 1]) - 1))
        for i in range(len(batches))]


# --------------------------------------------------------------- control

@SETTINGS
@given(kind=st.sampled_from(["COMMIT", "ABORT"]), producer_id=st.integers(0, (1 << 63) - 1),
       producer_epoch=st.integers(0, 32767), offset=st.integers(0, 1 << 62),
       coordinator_epoch=st.integers(-(1 << 31), INT32_MAX), timestamp=st.integers(0, 1 << 45),
       leader_epoch=st.integers(-1, INT32_MAX))
def test_control_markers_round_trip(kind, producer_id, producer_epoch, offset, coordinator_epoch,
                                    timestamp, leader_epoch):
    data = kcodec.encode_control(kind, producer_id=producer_id, producer_epoch=producer_epoch,
                                 offset=offset, coordinator_epoch=coordinator_epoch,
                                 timestamp=timestamp, partition_leader_epoch=leader_epoch)
    (batch,) = kcodec.read_batches(data)
    assert (batch.is_control, batch.is_transactional, batch.producer_id, batch.producer_epoch,
            batch.base_offset, batch.last_offset, batch.count, batch.max_timestamp,
            batch.partition_leader_epoch, batch.base_sequence) == (
        True, True, producer_id, producer_epoch, offset, offset, 1, timestamp, leader_epoch, -1)
    (record,) = batch
    assert (record.offset, record.timestamp) == (offset, timestamp)
    assert (record.control.type, record.control.version, record.control.coordinator_epoch) == (
        kind, 0, coordinator_epoch)
    assert list(kcodec.read_records(data)) == []
    assert [r.control.type for r in kcodec.read_records(data, include_control=True)] == [kind]


# -------------------------------------------------------- read_committed

@st.composite
def transactional_logs(draw):
    """A log of plain batches, transactional batches of a few producers and
    their COMMIT/ABORT markers. Returns (data, every data offset, offsets a
    read_committed consumer sees, the aborted list of a Fetch response)."""
    events = draw(st.lists(st.tuples(st.sampled_from(["plain", "data", "data", "end"]),
                                     st.integers(1, 3), st.integers(1, 3),
                                     st.sampled_from(["COMMIT", "ABORT"])), max_size=25))
    codec = draw(st.sampled_from(["none", "gzip", "lz4"]))
    chunks, offset = [], 0
    open_txns, log = {}, []          # log: (offset, txn or None)
    aborted = []

    def end(pid, outcome):
        nonlocal offset
        txn = open_txns.pop(pid)
        txn["outcome"] = outcome
        chunks.append(kcodec.encode_control(outcome, producer_id=pid, producer_epoch=0,
                                            offset=offset, coordinator_epoch=2, timestamp=offset))
        offset += 1
        if outcome == "ABORT":
            aborted.append((pid, txn["first"]))

    for kind, pid, n, outcome in events:
        if kind == "end":
            if pid in open_txns:
                end(pid, outcome)
            continue
        recs = [(b"%d" % (offset + i), b"v", offset + i, None) for i in range(n)]
        if kind == "plain":
            chunks.append(kcodec.encode(recs, base_offset=offset, compression=codec))
            txn = None
        else:
            txn = open_txns.setdefault(pid, {"first": offset, "outcome": None})
            chunks.append(kcodec.encode(recs, base_offset=offset, compression=codec,
                                        producer_id=pid, producer_epoch=0, transactional=True))
        log.extend((offset + i, txn) for i in range(n))
        offset += n
    for pid in sorted(open_txns):
        end(pid, draw(st.sampled_from(["COMMIT", "ABORT"])))
    visible = [o for o, txn in log if txn is None or txn["outcome"] == "COMMIT"]
    return b"".join(chunks), [o for o, _ in log], visible, aborted


@SETTINGS
@given(log=transactional_logs(), seed=st.integers(0, 1000))
def test_read_committed_drops_aborted_transactions(log, seed):
    data, everything, visible, aborted = log
    offsets = lambda **kw: [r.offset for r in kcodec.read_records(data, **kw)]  # noqa: E731
    assert offsets() == everything
    assert offsets(isolation="read_committed") == visible
    shuffled = list(aborted)
    random.Random(seed).shuffle(shuffled)               # a Fetch response need not sort them
    assert offsets(isolation="read_committed", aborted=shuffled) == visible
    # Keys carry the offsets: the records themselves, not only the offsets, are right.
    assert [int(r.key) for r in kcodec.read_records(data, isolation="read_committed")] == visible
    markers = [r for r in kcodec.read_records(data, isolation="read_committed", include_control=True)
               if r.control is not None]
    assert len(markers) == sum(1 for b in kcodec.read_batches(data) if b.is_control)


def test_read_committed_example():
    pid_a, pid_b = 1, 2
    txn = dict(producer_epoch=0, transactional=True)
    data = b"".join([
        kcodec.encode([(b"a0", b"", 0, None)], base_offset=0, producer_id=pid_a, **txn),
        kcodec.encode([(b"b0", b"", 0, None)], base_offset=1, producer_id=pid_b, **txn),
        kcodec.encode([(b"p0", b"", 0, None)], base_offset=2),
        kcodec.encode_control("ABORT", producer_id=pid_a, producer_epoch=0, offset=3, timestamp=0),
        kcodec.encode([(b"a1", b"", 0, None)], base_offset=4, producer_id=pid_a, **txn),
        kcodec.encode_control("COMMIT", producer_id=pid_b, producer_epoch=0, offset=5, timestamp=0),
        kcodec.encode_control("COMMIT", producer_id=pid_a, producer_epoch=0, offset=6, timestamp=0),
    ])
    keys = lambda **kw: [r.key for r in kcodec.read_records(data, **kw)]  # noqa: E731
    assert keys() == [b"a0", b"b0", b"p0", b"a1"]
    assert keys(isolation="read_committed") == [b"b0", b"p0", b"a1"]
    assert keys(isolation="read_committed", aborted=[(pid_a, 0)]) == [b"b0", b"p0", b"a1"]
    # An explicit list is believed: with nothing aborted, everything is committed.
    assert keys(isolation="read_committed", aborted=[]) == [b"a0", b"b0", b"p0", b"a1"]
    with pytest.raises(ValueError):
        list(kcodec.read_records(data, isolation="serializable"))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_large_batches_round_trip(codec):
    # Past the sizes where the core releases the GIL (CRC and record parsing)
    # and past one xerial chunk / lz4 block.
    rng = random.Random(codec)
    recs = [(b"%06d" % i, rng.randbytes(rng.randrange(0, 3000)), 1_600_000_000_000 + i,
             [("i", b"%d" % i)]) for i in range(600)]
    data = kcodec.encode(recs, compression=codec, max_batch_bytes=4 << 20, base_offset=10)
    (batch,) = kcodec.read_batches(data)
    assert batch.count == 600 and batch.size > 500_000
    got = [(r.key, r.value, r.timestamp, r.headers) for r in batch]
    assert got == [(k, v, ts, tuple(h)) for k, v, ts, h in recs]
    assert kcodec.encode(list(kcodec.read_records(data)), compression=codec,
                         max_batch_bytes=4 << 20, base_offset=10) == data
