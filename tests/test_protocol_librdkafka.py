"""kcodec.protocol.Connection against librdkafka's mock cluster
(confluent-kafka, test.mock.num.brokers): fetch what librdkafka's producer
wrote, produce raw kcodec batches that librdkafka's consumer then reads, drive
the transaction APIs, and get typed broker errors.

librdkafka's mock differs from a Kafka broker in ways these tests work around:
it creates topics only on Metadata, answers Produce with acks=0, leaves
log_start_offset out of its Produce v5 response and a trailing byte after
flexible Metadata responses, writes CRC 0 into the control batches it appends,
and ignores read_committed on Fetch (empty aborted list, LSO = high watermark)."""
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from needs import require_module  # noqa: E402

confluent_kafka = require_module("confluent_kafka")
from peers.librdkafka_mock import Message, MockCluster  # noqa: E402

import kcodec  # noqa: E402
from kcodec.protocol import (  # noqa: E402
    BrokerError, Connection, ProtocolError, UnsupportedVersionError,
)

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster():
    with MockCluster() as c:
        yield c


@pytest.fixture()
def conn(cluster):
    with Connection(cluster.host, cluster.port, client_id="kcodec-tests", timeout=10.0) as c:
        yield c


def messages(n, tag):
    return [Message(b"k%d" % i if i % 3 else None, (b"%s-%d " % (tag.encode(), i)) * (i % 7),
                    BASE_TS + i, (("h", b"%d" % i),) if i % 2 else ()) for i in range(n)]


def fetch_all(conn, topic, end, *, version=None, isolation_level=0, rounds=500):
    """Raw record sets from offset 0 to `end` (the mock answers one stored
    record set per Fetch), each decoded as it arrives."""
    offset, tables, parts = 0, [], []
    for _ in range(rounds):
        if offset >= end:
            break
        part = conn.fetch(topic, 0, offset, version=version, isolation_level=isolation_level)
        assert isinstance(part["records"], memoryview)
        table = kcodec.decode(part["records"], verify_crc=False)
        assert table.num_rows, f"no records at {offset} below {end}"
        tables.append(table)
        parts.append(part)
        offset = table.column("offset")[-1].as_py() + 1
    assert offset == end
    return tables, parts


def rows(tables):
    out = []
    for table in tables:
        for row in table.to_pylist():
            headers = tuple((h["key"], h["value"]) for h in row["headers"] or ())
            out.append((row["offset"], row["key"], row["value"],
                        int(row["timestamp"].timestamp() * 1000), headers))
    return out


def expected(sent, first=0):
    return [(first + i, m.key, m.value, m.timestamp, tuple(m.headers)) for i, m in enumerate(sent)]


def consume(bootstrap, topic, count, *, isolation="read_uncommitted", timeout=20.0):
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": isolation, "log_level": 3})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            got.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1],
                        tuple(msg.headers() or ())))
        return got
    finally:
        consumer.close()


def test_api_versions_negotiation(conn):
    versions = conn.api_versions()
    assert versions["Fetch"][0] == 0 and versions["Fetch"][1] >= 11
    assert versions["Produce"][1] >= 7 and "Metadata" in versions
    assert conn.version_for("Fetch") == min(versions["Fetch"][1], 18)
    assert conn.version_for("Produce", 3) == 3
    with pytest.raises(UnsupportedVersionError):
        conn.version_for("Fetch", 19)


def test_metadata_any_version(conn, cluster):
    topic = cluster.new_topic("md")
    for version in range(0, conn.version_for("Metadata") + 1):
        body = conn.request("Metadata", version, {"topics": [{"name": topic}]})
        assert [b["port"] for b in body["brokers"]] == [cluster.port]
        [entry] = body["topics"]
        assert entry["name"] == topic and entry["error_code"] == 0
        assert [p["partition_index"] for p in entry["partitions"]][:1] == [0]


@pytest.mark.parametrize("codec", ["none", "zstd", "lz4"])
def test_fetch_what_librdkafka_produced(cluster, conn, codec):
    topic = cluster.new_topic("rd-" + codec)
    sent = cluster.produce(messages(60, codec), topic=topic, compression=codec, batch_size=512)
    end = conn.list_offsets(topic, 0, -1).offset
    assert end == len(sent)
    top = conn.version_for("Fetch")
    for version in sorted({4, 7, 11, 12, top}):      # classic, sessions, rack, flexible, ids
        tables, parts = fetch_all(conn, topic, end, version=version)
        assert rows(tables) == expected(sent), f"Fetch v{version}"
        assert parts[-1]["high_watermark"] == end
        assert parts[-1]["last_stable_offset"] == end
        assert parts[-1]["aborted_transactions"] == []     # the mock never lists any


@pytest.mark.parametrize("version", [3, 7, 9, 10])
def test_librdkafka_consumes_what_we_produce(cluster, conn, version):
    """Raw kcodec batches produced at several Produce versions (v5 excluded:
    librdkafka's mock leaves log_start_offset out of its v5 response)."""
    topic = cluster.new_topic(f"raw-v{version}")
    conn.metadata([topic])                      # the mock creates topics on Metadata
    records = [(b"key-%d" % i, b"value-%d" % i * 3, BASE_TS + i, [("n", b"%d" % i)])
               for i in range(30)]
    offsets = []
    for codec, chunk in zip(("none", "gzip", "snappy"), (records[:10], records[10:20],
                                                         records[20:])):
        data = kcodec.encode(chunk, compression=codec)
        offsets.append(conn.produce(topic, 0, data, version=min(version, conn.version_for(
            "Produce"))))
    assert offsets == [0, 10, 20]
    got = consume(cluster.bootstrap, topic, len(records))
    assert got == [(i, k, v, ts, tuple(h)) for i, (k, v, ts, h) in enumerate(records)]


def test_acks_zero_has_no_response_and_later_requests_still_match(cluster, conn):
    topic = cluster.new_topic("acks0")
    conn.metadata([topic])
    assert conn.produce(topic, 0, kcodec.encode([(None, b"a", BASE_TS, [])]), acks=0) is None
    assert conn.produce(topic, 0, kcodec.encode([(None, b"b", BASE_TS, [])]), acks=1) == 1
    assert conn.list_offsets(topic, 0, -1).offset == 2
    tables, _ = fetch_all(conn, topic, 2)
    assert [r[2] for r in rows(tables)] == [b"a", b"b"]


def test_list_offsets_every_version(cluster, conn):
    topic = cluster.new_topic("lo")
    cluster.produce(messages(5, "lo"), topic=topic)
    for version in range(0, conn.version_for("ListOffsets") + 1):
        assert conn.list_offsets(topic, 0, -2, version=version).offset == 0, version
        assert conn.list_offsets(topic, 0, -1, version=version).offset == 5, version


def test_pipelined_requests_match_by_correlation_id(cluster, conn):
    topic = cluster.new_topic("pipe")
    cluster.produce(messages(3, "p"), topic=topic)
    version = conn.version_for("ListOffsets")
    ids = [conn.send("ListOffsets", version, {"replica_id": -1, "topics": [{
        "name": topic, "partitions": [{"partition_index": 0, "timestamp": ts}]}]})
        for ts in (-2, -1)]
    latest = conn.receive(ids[1]).body["topics"][0]["partitions"][0]["offset"]
    earliest = conn.receive(ids[0]).body["topics"][0]["partitions"][0]["offset"]
    assert (earliest, latest) == (0, 3)
    with pytest.raises(ProtocolError, match="no request in flight"):
        conn.receive(ids[0])


def test_broker_errors_are_typed(cluster, conn):
    topic = cluster.new_topic("err")
    cluster.produce(messages(2, "e"), topic=topic)
    with pytest.raises(BrokerError) as info:
        conn.fetch(topic, 99, 0)
    assert (info.value.code, info.value.name) == (3, "UNKNOWN_TOPIC_OR_PARTITION")
    assert (info.value.api, info.value.topic, info.value.partition) == ("Fetch", topic, 99)
    with pytest.raises(BrokerError) as info:
        conn.fetch(topic, 0, 1000)
    assert info.value.name == "OFFSET_OUT_OF_RANGE" and "err" in str(info.value)
    body = conn.request("Fetch", 11, {"topics": [{"topic": topic, "partitions": [
        {"partition": 99, "fetch_offset": 0, "partition_max_bytes": 1000}]}]}, check=False)
    assert body["responses"][0]["partitions"][0]["error_code"] == 3


def test_transaction_apis_drive_a_transactional_produce(cluster, conn):
    """FindCoordinator, InitProducerId, AddPartitionsToTxn, transactional
    Produce and EndTxn through conn.request; librdkafka's read_committed
    consumer then sees the committed records only."""
    topic, txn = cluster.new_topic("txn"), "kcodec-txn"
    conn.metadata([topic])
    coordinator = conn.request("FindCoordinator", None, {"key": txn, "key_type": 1,
                                                         "coordinator_keys": [txn]})
    port = coordinator["port"] if coordinator["port"] else coordinator["coordinators"][0]["port"]
    assert port == cluster.port
    ids = conn.request("InitProducerId", None, {"transactional_id": txn,
                                                "transaction_timeout_ms": 60000})
    pid, epoch = ids["producer_id"], ids["producer_epoch"]
    assert pid >= 0

    def add_partition():
        conn.request("AddPartitionsToTxn", None, {
            "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})

    sequence = 0
    for committed, values in ((True, [b"c1", b"c2"]), (False, [b"a1"]), (True, [b"c3"])):
        add_partition()
        data = kcodec.encode([(None, v, BASE_TS, []) for v in values], producer_id=pid,
                             producer_epoch=epoch, base_sequence=sequence, transactional=True)
        sequence += len(values)
        conn.produce(topic, 0, data, transactional_id=txn)
        conn.request("EndTxn", None, {"transactional_id": txn, "producer_id": pid,
                                      "producer_epoch": epoch, "committed": committed})
    # The mock writes the markers (with CRC 0) but ignores read_committed on
    # Fetch, so the transactions are checked in the raw log it serves.
    end = conn.list_offsets(topic, 0, -1).offset
    offset, raw = 0, b""
    while offset < end:
        records = conn.fetch(topic, 0, offset)["records"].tobytes()
        raw += records
        offset = list(kcodec.read_batches(records, verify_crc=False))[-1].last_offset + 1
    batches = list(kcodec.read_batches(raw, verify_crc=False))
    assert [(b.is_control, b.producer_id, b.is_transactional) for b in batches] == \
        [(False, pid, True), (True, pid, True)] * 3
    assert [next(iter(b)).control.type for b in batches if b.is_control] == \
        ["COMMIT", "ABORT", "COMMIT"]
    committed = kcodec.decode(raw, verify_crc=False, isolation="read_committed")
    assert committed.column("value").to_pylist() == [b"c1", b"c2", b"c3"]
    got = consume(cluster.bootstrap, topic, 4)
    assert [value for _, _, value, _, _ in got] == [b"c1", b"c2", b"a1", b"c3"]
