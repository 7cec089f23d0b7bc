"""kcodec.log reading a real broker's partition directories, record for
record against what real consumers (confluent-kafka, kafka-python) fetch
from the same broker, at both isolation levels."""
import pyarrow as pa
import pytest

from kcodec.log import PartitionLog, read_producer_snapshot, write_log
from kcodec.log.indexes import snapshot_offsets, snapshot_path
from kcodec.log.producers import ProducerStates
from kafka_broker import (  # noqa: F401
    SMALL_SEGMENT_BYTES, CLIENT_TIMEOUT, COMPACTED_RECORDS, Delivery, broker, broker_topics, compacted_spec,
    confluent_producer, confluent_rows, produce_confluent, record_spec, wait_until_stable,
    watermarks, kafka_python_rows, kcodec_rows, table_rows,
)

TOPICS = ["codec-none", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd", "transactions",
          "log-append-time", "compacted"]
ISOLATIONS = ["read_uncommitted", "read_committed"]


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("topic", TOPICS)
def test_partition_log_reads_what_consumers_fetch(broker, broker_topics, topic, isolation):
    log = PartitionLog(broker.partition_dir(topic))
    assert len(log.segments) > 1, "the topic should span several segments"
    expected = confluent_rows(broker, topic, isolation)
    assert expected
    assert kafka_python_rows(broker, topic, isolation) == expected
    assert kcodec_rows(log.read_records(isolation=isolation)) == expected
    assert table_rows(log.decode(isolation=isolation)) == expected
    chunks = log.iter_decode(isolation=isolation, max_rows=97, max_bytes=16 << 10)
    assert table_rows(pa.Table.from_batches(list(chunks))) == expected


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codec_topic_holds_what_the_producers_sent(broker, broker_topics, codec):
    topic = f"codec-{codec}"
    sent = broker_topics[topic]
    log = PartitionLog(broker.partition_dir(topic))
    rows = kcodec_rows(log.read_records())
    assert [(key, value, headers, ts) for _, ts, _, key, value, headers in rows] == [
        (key, value, tuple(headers), ts) for key, value, headers, ts in sent]
    batches = list(log.read_batches())
    assert {b.compression for b in batches} == {codec}
    # the idempotent producer's batches carry a producer id, the plain one's none
    half = len(sent) // 2
    assert all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches
               if b.last_offset < half)
    assert all(b.producer_id == -1 for b in batches if b.base_offset >= half)


def test_transactions_committed_and_aborted(broker, broker_topics):
    log = PartitionLog(broker.partition_dir("transactions"))
    # 8 rounds: the confluent-kafka producer aborts rounds 1, 4, 7 (40 records
    # each), the kafka-python one rounds 0, 2, 4, 6 (30 each)
    assert len(log.aborted_transactions()) == 7
    assert any(seg.has_txn_index for seg in log.segments)
    assert log.last_stable_offset() == log.end_offset
    assert sum(1 for _ in log.read_records()) == 8 * 80
    assert sum(1 for _ in log.read_records(isolation="read_committed")) == 8 * 80 - 3 * 40 - 4 * 30


def test_log_append_time_replaces_the_producers_timestamps(broker, broker_topics):
    log = PartitionLog(broker.partition_dir("log-append-time"))
    batches = list(log.read_batches())
    assert {b.timestamp_type for b in batches} == {"LogAppendTime"}
    for batch in batches:
        assert {r.timestamp for r in batch} == {batch.max_timestamp}
    assert min(b.max_timestamp for b in batches) > 1_700_000_100_000


def test_compacted_topic_keeps_the_latest_value_of_each_key(broker, broker_topics):
    log = PartitionLog(broker.partition_dir("compacted"))
    rows = kcodec_rows(log.read_records())
    offsets = [row[0] for row in rows]
    assert len(rows) < COMPACTED_RECORDS and offsets[-1] == COMPACTED_RECORDS - 1
    assert offsets != list(range(len(rows)))
    latest_sent = {}
    for i in range(COMPACTED_RECORDS):
        key, value, _, _ = compacted_spec(i)
        latest_sent[key] = value
    latest_read = {key: value for _, _, _, key, value, _ in rows}
    assert latest_read == latest_sent
    # the cleaner stamped a delete horizon on the batches whose tombstones it kept
    assert any(b.delete_horizon_ms is not None for b in log.read_batches())


def test_open_transaction_holds_read_committed_back(broker):
    """Until its marker, a transaction's first offset is the last stable
    offset: kcodec.log stops there as the broker's read_committed fetch does."""
    topic = broker.create_topic("open-transaction")
    delivery = Delivery()
    plain = confluent_producer(broker, enable_idempotence=False, acks=1)
    produce_confluent(plain, topic, [record_spec(i, seed=7) for i in range(5)], delivery)
    delivery.check(plain)
    txn = confluent_producer(broker, transactional_id="kcodec-open", compression_type="snappy")
    txn.init_transactions(CLIENT_TIMEOUT)
    txn.begin_transaction()
    try:
        produce_confluent(txn, topic, [record_spec(i, seed=8) for i in range(10)], delivery)
        txn.flush(CLIENT_TIMEOUT)
        produce_confluent(plain, topic, [record_spec(i, seed=9) for i in range(5)], delivery)
        delivery.check(plain)
        log = PartitionLog(broker.partition_dir(topic))
        assert watermarks(broker, topic, "read_committed")[1] == 5 == log.last_stable_offset()
        expected = confluent_rows(broker, topic, "read_committed")
        assert [row[0] for row in expected] == [0, 1, 2, 3, 4]
        assert kafka_python_rows(broker, topic, "read_committed") == expected
        assert kcodec_rows(log.read_records(isolation="read_committed")) == expected
        assert table_rows(log.decode(isolation="read_committed")) == expected
    finally:
        txn.commit_transaction(CLIENT_TIMEOUT)
    wait_until_stable(broker, topic)
    log = PartitionLog(broker.partition_dir(topic))
    expected = confluent_rows(broker, topic, "read_committed")
    assert len(expected) == 20
    assert kcodec_rows(log.read_records(isolation="read_committed")) == expected


@pytest.mark.parametrize("topic", [t for t in TOPICS if t != "compacted"])
def test_producer_snapshots_hold_what_the_broker_wrote(broker, broker_topics, topic, tmp_path):
    """Each producer snapshot the broker wrote at a segment roll holds the
    producer states ProducerStates learns from the batches before it, and
    write_log, given the broker's batches, rolls at the same offsets and
    writes the same entries there (in producer id order; the broker's hash
    map order is the same for the small ids of a fresh broker, so here the
    bytes are the same too). The compacted topic is left out: the cleaner has
    removed batches the states before a roll were learnt from."""
    directory = broker.partition_dir(topic)
    log = PartitionLog(directory)
    snapshots = log.producer_snapshots()
    assert snapshots, "the broker writes a snapshot at every roll"
    # log-append-time's producer is not idempotent: its snapshots hold no producer
    assert any(entries for entries in snapshots.values()) == (topic != "log-append-time")
    batches = list(log.read_batches())
    for at, entries in snapshots.items():
        states = ProducerStates()
        for batch in batches:
            if batch.last_offset < at:
                states.append(batch)
        assert states.entries() == sorted(entries), at

    data = b"".join(bytes(seg.data) for seg in log.segments)
    written = tmp_path / f"{topic}-0"
    write_log(written, data, segment_bytes=SMALL_SEGMENT_BYTES)
    ours = {at: snapshot_path(written, at) for at in snapshot_offsets(written)}
    # write_log rolls where the broker did (by size, and by time where a
    # marker's timestamp is a week past the producers' ones) and writes the
    # last snapshot at the log end, as the broker does on a clean shutdown
    assert sorted(ours) == sorted(set(snapshots) | {log.end_offset})
    for at in snapshots:
        assert read_producer_snapshot(ours[at]) == sorted(snapshots[at]), at
        with open(ours[at], "rb") as f:
            assert f.read() == open(snapshot_path(directory, at), "rb").read(), at
