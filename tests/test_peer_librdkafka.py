"""Decode record sets that librdkafka wrote.

Messages are produced with confluent-kafka against librdkafka's in-process
mock cluster, the partition is fetched raw over TCP (tests/peers), and the
bytes are decoded by kcodec and, as an independent reference, kafka-python.
"""
import os
import random
import sys
from dataclasses import dataclass

import pytest
from kafka.record import MemoryRecords

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers.librdkafka_mock import (  # noqa: E402
    CODECS, FetchResult, Message, MockCluster, fix_control_crcs)

KAFKA_PYTHON_CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000


def kcodec():
    """kcodec, imported when a test needs it (the helper checks run without)."""
    import kcodec as kc

    assert hasattr(kc, "read_records"), (
        f"kcodec imported without its API from {kc.__path__} (stale editable install?)")
    return kc


def make_messages(n, seed, *, headers=True, big=False):
    """Deterministic messages covering None/empty keys and values, binary and
    compressible payloads, out-of-order timestamps and varied headers."""
    rng = random.Random(seed)
    out = [Message(None, None, BASE_TS, ()), Message(b"", b"", BASE_TS + 1, ())]
    for i in range(2, n):
        key = rng.choice([None, b"", b"key-%d" % i, rng.randbytes(rng.randrange(1, 40))])
        value = rng.choice([
            None, b"", b"value %d " % i * rng.randrange(1, 60),
            rng.randbytes(rng.randrange(1, 300)),
            # large but compressible: librdkafka stores a batch uncompressed
            # when compressing does not make it smaller
            bytes(rng.choices(b"abcdefgh", k=rng.randrange(5000, 30000))) if big else b"x",
        ])
        ts = BASE_TS + 10 * i + rng.randrange(-5000, 5000)  # not monotonic
        hdrs = ()
        if headers:
            hdrs = tuple(
                (rng.choice(["h", "trace-id", "", "ünï"]),
                 rng.choice([None, b"", rng.randbytes(rng.randrange(1, 20))]))
                for _ in range(rng.randrange(4)))
        out.append(Message(key, value, ts, hdrs))
    return out


@dataclass
class Log:
    sent: list            # [Message]
    fetched: FetchResult  # raw bytes plus high watermark etc.

    @property
    def raw(self):
        return self.fetched.records


def expected(messages, first_offset=0, *, timestamps=True):
    return [(first_offset + i, m.timestamp if timestamps else None, m.key, m.value,
             tuple(m.headers)) for i, m in enumerate(messages)]


def _ts(ts):
    return None if ts is None or ts < 0 else ts  # magic 0: no timestamp


def view(records):
    """Comparable tuples for kcodec or kafka-python records."""
    return [(r.offset, _ts(r.timestamp), r.key, r.value,
             tuple(tuple(h) for h in (r.headers or ()))) for r in records]


def kafka_python_batches(raw):
    """[(batch, [records])] as decoded by kafka-python (control records
    included); every batch's CRC is checked."""
    mr, out = MemoryRecords(raw), []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc(), f"bad CRC at offset {batch.base_offset}"
        out.append((batch, list(batch)))
    return out


def kafka_python_data(raw):
    return [r for b, recs in kafka_python_batches(raw)
            if not getattr(b, "is_control_batch", False) for r in recs]


def check_kcodec_batches(raw, sent_count, **kw):
    """Common structural checks; returns [(batch, [records])]."""
    kc = kcodec()
    batches = [(b, list(b)) for b in kc.read_batches(raw, **kw)]
    assert batches
    expect_next = 0
    for b, recs in batches:
        assert b.base_offset == expect_next
        assert b.last_offset >= b.base_offset
        assert b.count == len(recs) > 0
        assert [r.offset for r in recs] == list(range(b.base_offset, b.base_offset + b.count))
        if b.magic == 2:
            assert b.last_offset == b.base_offset + b.count - 1
        expect_next = b.last_offset + 1
    assert sum(b.count for b, _ in batches) == sent_count
    return batches


# ----------------------------------------------------------------------------
# fixtures: one mock cluster per module, each log produced once
# ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    with MockCluster() as c:
        yield c


@pytest.fixture(scope="module", params=CODECS)
def codec_log(request, cluster):
    codec = request.param
    topic = cluster.new_topic(codec)
    sent = cluster.produce(make_messages(250, seed=codec), topic=topic,
                           compression=codec, batch_size=4096)
    return codec, topic, Log(sent, cluster.fetch(topic))


@pytest.fixture(scope="module", params=CODECS)
def large_log(request, cluster):
    """5-30 kB values: many single-message batches, and between them small
    batches that librdkafka leaves uncompressed (compression didn't pay)."""
    codec = request.param
    topic = cluster.new_topic("large-" + codec)
    sent = cluster.produce(make_messages(80, seed="large" + codec, big=True), topic=topic,
                           compression=codec, batch_size=16384)
    return codec, Log(sent, cluster.fetch(topic))


@pytest.fixture(scope="module", params=["none", "lz4"])
def idempotent_log(request, cluster):
    codec = request.param
    topic = cluster.new_topic("idem-" + codec)
    sent = cluster.produce(make_messages(300, seed="idem" + codec), topic=topic,
                           compression=codec, idempotent=True, batch_size=2048)
    return codec, Log(sent, cluster.fetch(topic))


# (outcome, codec, message count) per transaction, in log order
TXNS = [("commit", "snappy", 70), ("abort", "gzip", 60), ("commit", "zstd", 50),
        ("abort", "none", 40)]


@pytest.fixture(scope="module")
def txn_log(cluster):
    """Four transactions on one partition; each is followed by its marker."""
    topic = cluster.new_topic("txn")
    segments, offset = [], 0
    for k, (outcome, codec, n) in enumerate(TXNS):
        sent = cluster.produce(make_messages(n, seed=f"txn{k}"), topic=topic,
                               compression=codec, transactional=outcome, batch_size=4096)
        segments.append(dict(outcome=outcome, codec=codec, start=offset, sent=sent,
                             marker=offset + n))
        offset += n + 1
    fetched = cluster.fetch(topic)
    # the producer id of each transaction, learnt from the data batch at its start
    by_offset = {b.base_offset: b.producer_id
                 for b, _ in kafka_python_batches(fix_control_crcs(fetched.records))}
    for seg in segments:
        seg["pid"] = by_offset[seg["start"]]
    return segments, fetched


@pytest.fixture(scope="module", params=[0, 1])
def legacy_log(request, cluster):
    """Uncompressed legacy message sets (the mock refuses compressed ones)."""
    magic = request.param
    sent = make_messages(120, seed=f"legacy{magic}", headers=False)
    if magic == 0:  # no ApiVersions, pretend 0.9.0: Produce v1, magic 0
        topic = cluster.new_topic("magic0")
        cluster.produce(sent, topic=topic, broker_version="0.9.0")
        return magic, Log(sent, cluster.fetch(topic))
    with MockCluster(produce_api_max=2) as old:  # Produce v2: magic 1
        topic = old.new_topic("magic1")
        old.produce(sent, topic=topic)
        return magic, Log(sent, old.fetch(topic))


# ----------------------------------------------------------------------------
# the peer helper itself
# ----------------------------------------------------------------------------

def test_fetch_versions_agree(cluster, codec_log):
    codec, topic, log = codec_log
    assert log.fetched.high_watermark == log.fetched.last_stable_offset == len(log.sent)
    assert log.fetched.rounds > 1  # the mock answers one record set per Fetch
    for version in (4, 7):
        again = cluster.fetch(topic, version=version)
        assert again.records == log.raw
        assert again.high_watermark == len(log.sent)
    assert cluster.fetch(topic, read_committed=True).records == log.raw


# ----------------------------------------------------------------------------
# codecs
# ----------------------------------------------------------------------------

def test_kafka_python_reads_codec(codec_log):
    codec, _, log = codec_log
    batches = kafka_python_batches(log.raw)
    assert len(batches) > 1
    for b, _ in batches:
        assert b.magic == 2
        assert b.compression_type == KAFKA_PYTHON_CODEC[codec]
    assert view(r for _, recs in batches for r in recs) == expected(log.sent)


def test_kcodec_reads_codec(codec_log):
    codec, _, log = codec_log
    kc = kcodec()
    batches = check_kcodec_batches(log.raw, len(log.sent))
    assert len(batches) > 1
    for b, _ in batches:
        assert (b.magic, b.compression, b.timestamp_type) == (2, codec, "CreateTime")
        assert b.crc_valid
        assert b.producer_id == -1
        assert not b.is_transactional and not b.is_control
    from_batches = [r for _, recs in batches for r in recs]
    records = list(kc.read_records(log.raw))
    assert view(records) == view(from_batches) == expected(log.sent)
    assert view(records) == view(kafka_python_data(log.raw))


def test_kcodec_reads_large_values(large_log):
    codec, log = large_log
    kc = kcodec()
    reference = kafka_python_batches(log.raw)
    batches = check_kcodec_batches(log.raw, len(log.sent))
    names = {v: k for k, v in KAFKA_PYTHON_CODEC.items()}
    seen = [b.compression for b, _ in batches]
    assert seen == [names[b.compression_type] for b, _ in reference]
    assert set(seen) <= {codec, "none"} and codec in seen
    assert all(b.crc_valid for b, _ in batches)
    assert view(kc.read_records(log.raw)) == expected(log.sent) == view(kafka_python_data(log.raw))


def test_kcodec_reads_mixed_codecs_in_one_partition(cluster):
    kc = kcodec()
    topic, sent, codecs = cluster.new_topic("mixed"), [], []
    for k, codec in enumerate(CODECS * 2):
        sent += cluster.produce(make_messages(30, seed=f"mixed{k}"), topic=topic,
                                compression=codec)
        codecs.append(codec)
    raw = cluster.fetch(topic).records
    batches = check_kcodec_batches(raw, len(sent))
    per_call = len(sent) // len(codecs)
    for b, records in batches:
        calls = {r.offset // per_call for r in records}
        assert len(calls) == 1
        # librdkafka sends a batch uncompressed when compressing does not make it smaller
        assert b.compression in (codecs[calls.pop()], "none")
    assert {b.compression for b, _ in batches} >= set(codecs)
    assert view(kc.read_records(raw)) == expected(sent) == view(kafka_python_data(raw))


# ----------------------------------------------------------------------------
# idempotent producer
# ----------------------------------------------------------------------------

def test_kafka_python_reads_idempotent(idempotent_log):
    _, log = idempotent_log
    batches = kafka_python_batches(log.raw)
    assert len(batches) > 1
    assert len({b.producer_id for b, _ in batches}) == 1 and batches[0][0].producer_id >= 0
    assert [b.base_sequence for b, _ in batches] == [b.base_offset for b, _ in batches]
    assert view(r for _, recs in batches for r in recs) == expected(log.sent)


def test_kcodec_reads_idempotent(idempotent_log):
    codec, log = idempotent_log
    kc = kcodec()
    batches = check_kcodec_batches(log.raw, len(log.sent))
    assert len(batches) > 1
    pids = {b.producer_id for b, _ in batches}
    assert len(pids) == 1 and pids.pop() >= 0
    sequences = [b.base_sequence for b, _ in batches]
    assert sequences == sorted(set(sequences)) and sequences[0] == 0
    for b, recs in batches:
        assert b.compression == codec and b.crc_valid and b.producer_epoch >= 0
        assert not b.is_transactional
        # a fresh producer on a fresh partition: sequence == offset
        assert b.base_sequence == b.base_offset
        assert [r.sequence for r in recs] == [r.offset for r in recs]
    assert view(kc.read_records(log.raw)) == expected(log.sent)
    assert view(kc.read_records(log.raw)) == view(kafka_python_data(log.raw))


# ----------------------------------------------------------------------------
# transactions
# ----------------------------------------------------------------------------

def all_data(segments):
    return [row for s in segments for row in expected(s["sent"], s["start"])]


def fetch_fixed(fetched):
    """The fetched bytes with valid CRCs on the mock's control batches."""
    return fix_control_crcs(fetched.records)


def test_kafka_python_reads_transactions(txn_log):
    segments, fetched = txn_log
    assert fetched.high_watermark == segments[-1]["marker"] + 1
    batches = kafka_python_batches(fetch_fixed(fetched))
    markers = [(recs[0].offset, recs[0].type) for b, recs in batches if b.is_control_batch]
    assert markers == [(s["marker"], int(s["outcome"] == "commit")) for s in segments]
    assert all(b.is_transactional for b, _ in batches)
    assert view(kafka_python_data(fetch_fixed(fetched))) == all_data(segments)


def kafka_python_crcs(raw):
    mr, out = MemoryRecords(raw), []
    while mr.has_next():
        out.append(mr.next_batch().validate_crc())
    return out


def test_mock_control_batches_have_bad_crc(txn_log):
    """librdkafka's mock writes CRC 0 into its COMMIT/ABORT batches; data
    batches, written by the producer, are intact."""
    segments, fetched = txn_log
    crcs = kafka_python_crcs(fetched.records)
    assert crcs.count(False) == len(segments)
    assert all(kafka_python_crcs(fetch_fixed(fetched)))


def test_kcodec_transactional_batches(txn_log):
    segments, fetched = txn_log
    hw = fetched.high_watermark
    batches = check_kcodec_batches(fetch_fixed(fetched), hw)
    seg_at = {s["marker"]: s for s in segments}
    for b, recs in batches:
        assert b.magic == 2 and b.is_transactional and b.crc_valid
        seg = seg_at.get(b.base_offset) or next(
            s for s in segments if s["start"] <= b.base_offset < s["marker"])
        assert b.producer_id == seg["pid"] >= 0
        if b.is_control:
            assert b.base_offset == b.last_offset == seg["marker"] and b.count == 1
            assert b.compression == "none"
        else:
            assert b.compression == seg["codec"]
            assert b.last_offset < seg["marker"]


def test_kcodec_control_records(txn_log):
    segments, fetched = txn_log
    kc = kcodec()
    raw = fetch_fixed(fetched)
    # default: control records are hidden, aborted data is still returned
    data = list(kc.read_records(raw))
    assert all(r.control is None for r in data)
    assert view(data) == all_data(segments) == view(kafka_python_data(raw))
    with_ctrl = list(kc.read_records(raw, include_control=True))
    assert [r.offset for r in with_ctrl] == list(range(fetched.high_watermark))
    markers = [(r.offset, r.control.type, r.control.coordinator_epoch)
               for r in with_ctrl if r.control is not None]
    type_name = lambda t: getattr(t, "name", t)  # noqa: E731  (enum or str)
    assert [(o, type_name(t), e) for o, t, e in markers] == [
        (s["marker"], s["outcome"].upper(), 0) for s in segments]


def test_kcodec_read_committed_drops_aborted(txn_log):
    segments, fetched = txn_log
    kc = kcodec()
    raw = fetch_fixed(fetched)
    # a real broker lists (producer_id, first_offset) of aborted transactions;
    # the mock's list is always empty, so derive it from what was produced
    aborted = fetched.aborted or [(s["pid"], s["start"]) for s in segments
                                  if s["outcome"] == "abort"]
    committed = [s for s in segments if s["outcome"] == "commit"]
    got = kc.read_records(raw, isolation="read_committed", aborted=aborted)
    assert view(got) == all_data(committed)
    # nothing listed as aborted: nothing is dropped
    got = kc.read_records(raw, isolation="read_committed", aborted=[])
    assert view(got) == all_data(segments)


def test_kcodec_crc_verdicts_match_kafka_python(txn_log):
    """On the unrepaired bytes kcodec must notice the mock's bad control-batch
    CRCs: raise a ValueError (kcodec's errors) or flag exactly those batches."""
    segments, fetched = txn_log
    kc = kcodec()
    reference = kafka_python_crcs(fetched.records)
    try:
        batches = list(kc.read_batches(fetched.records, verify_crc=True))
    except ValueError:
        assert not all(reference)
    else:
        assert [b.crc_valid for b in batches] == reference
    unchecked = kc.read_records(fetched.records, verify_crc=False)
    assert view(unchecked) == all_data(segments)


# ----------------------------------------------------------------------------
# legacy magic 0 / 1
# ----------------------------------------------------------------------------

def test_kafka_python_reads_legacy(legacy_log):
    magic, log = legacy_log
    batches = kafka_python_batches(log.raw)
    assert {(b.magic, b.compression_type) for b, _ in batches} == {(magic, 0)}
    recs = [r for _, rs in batches for r in rs]
    assert view(recs) == expected(log.sent, timestamps=magic == 1)


def test_kcodec_reads_legacy(legacy_log):
    magic, log = legacy_log
    kc = kcodec()
    batches = check_kcodec_batches(log.raw, len(log.sent))
    ts_type = "CreateTime" if magic == 1 else "NoTimestampType"
    for b, _ in batches:
        assert (b.magic, b.compression, b.timestamp_type) == (magic, "none", ts_type)
        assert b.crc_valid and not b.is_transactional and not b.is_control
    records = list(kc.read_records(log.raw))
    assert view(records) == expected(log.sent, timestamps=magic == 1)
    assert view(records) == view(kafka_python_data(log.raw))
