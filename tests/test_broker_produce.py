"""Batches made by kcodec.encode, sent to the real broker in raw Produce
requests through kcodec.protocol: plain, idempotent (InitProducerId) and
transactional (FindCoordinator, InitProducerId, then each transaction either
the classic way — AddPartitionsToTxn v3, Produce v11, EndTxn v4 — or Kafka
4's transaction protocol, where Produce v12+ adds the partition and EndTxn
v5 bumps the epoch), every codec. The broker must accept them, and
confluent-kafka, kafka-python and kcodec.log read them back equal."""
import time

import pytest

import kcodec
from kcodec.log import PartitionLog
from kcodec.protocol import BrokerError, Connection
from kafka_broker import (  # noqa: F401
    CODECS, broker, confluent_rows, kafka_python_rows, kcodec_rows, record_spec,
    wait_until_stable, watermarks,
)

# The broker appends nothing when it answers one of these, so a client sends
# the same request again. NOT_LEADER_OR_FOLLOWER comes from a lone broker too:
# while a new partition opens, or while a broker that missed heartbeats on a
# busy machine is fenced.
RETRIABLE = {"COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR",
             "CONCURRENT_TRANSACTIONS", "NOT_LEADER_OR_FOLLOWER"}


def connect(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    return Connection(host, int(port), client_id="kcodec-tests", timeout=30.0)


def retried(call, attempts=300, pause=0.1):
    """call() again while the broker answers with a retriable error."""
    for _ in range(attempts - 1):
        try:
            return call()
        except BrokerError as exc:
            if exc.name not in RETRIABLE:
                raise
            time.sleep(pause)
    return call()


def records(n, seed):
    return [(key, value, timestamp, [(k, v) for k, v in headers])
            for key, value, headers, timestamp in (record_spec(i, seed) for i in range(n))]


def sent_rows(base_offset, batch):
    """(offset, timestamp, key, value, headers) the consumers should give back."""
    return [(base_offset + i, timestamp, key, value, tuple(headers))
            for i, (key, value, timestamp, headers) in enumerate(batch)]


def consumed(rows):
    return [(offset, ts, key, value, headers) for offset, ts, _, key, value, headers in rows]


def check_read_back(broker, topic, committed, everything):
    for isolation, expected in (("read_committed", committed),
                                ("read_uncommitted", everything)):
        rows = confluent_rows(broker, topic, isolation)
        assert consumed(rows) == expected, isolation
        assert kafka_python_rows(broker, topic, isolation) == rows, isolation
        log = PartitionLog(broker.partition_dir(topic))
        assert kcodec_rows(log.read_records(isolation=isolation)) == rows, isolation


def test_plain_and_idempotent_batches_of_every_codec(broker):
    topic = broker.create_topic("raw-produce")
    expected, sent = [], []
    with connect(broker) as conn:
        for n, codec in enumerate(CODECS):
            batch = records(30, seed=20 + n)
            base = retried(lambda: conn.produce(topic, 0, kcodec.encode(batch, compression=codec)))
            expected += sent_rows(base, batch)
            sent.append((base, codec, -1))
        answer = retried(lambda: conn.request("InitProducerId", None, {
            "transactional_id": None, "transaction_timeout_ms": -1}))
        producer_id, epoch = answer["producer_id"], answer["producer_epoch"]
        sequence = 0
        for n, codec in enumerate(CODECS):
            batch = records(40, seed=30 + n)
            data = kcodec.encode(batch, compression=codec, producer_id=producer_id,
                                 producer_epoch=epoch, base_sequence=sequence)
            base = retried(lambda: conn.produce(topic, 0, data))
            sequence += len(batch)
            expected += sent_rows(base, batch)
            sent.append((base, codec, producer_id))
        # the same batch again: the broker knows its sequence and appends nothing
        assert retried(lambda: conn.produce(topic, 0, data)) == sent[-1][0]
        assert conn.list_offsets(topic, 0, -1).offset == len(expected)
    check_read_back(broker, topic, expected, expected)
    log = PartitionLog(broker.partition_dir(topic))
    batches = {b.base_offset: b for b in log.read_batches()}
    for base, codec, producer_id in sent:
        assert (batches[base].compression, batches[base].producer_id) == (codec, producer_id)


def test_transactions_of_every_codec_in_both_protocols(broker):
    topic = broker.create_topic("raw-transactions")
    transactional_id = "kcodec-raw-txn"
    committed, everything = [], []
    with connect(broker) as conn:
        versions = conn.api_versions()
        assert versions["Produce"][1] >= 12 and versions["EndTxn"][1] >= 5
        retried(lambda: conn.request("FindCoordinator", None, {
            "key": transactional_id, "key_type": 1, "coordinator_keys": [transactional_id]}))
        answer = retried(lambda: conn.request("InitProducerId", None, {
            "transactional_id": transactional_id, "transaction_timeout_ms": 60_000}))
        producer_id, epoch = answer["producer_id"], answer["producer_epoch"]
        sequence = 0
        for n, codec in enumerate(CODECS * 2):
            kafka4 = n >= len(CODECS)
            commit = n % 2 == 0
            if n == len(CODECS):
                # A producer switching protocols starts again, as a restarted client
                # would: the classic EndTxn keeps the epoch, and a Produce v12+ of
                # that epoch reaching the partition before the last marker would
                # count as part of the transaction that marker ends.
                answer = retried(lambda: conn.request("InitProducerId", None, {
                    "transactional_id": transactional_id, "transaction_timeout_ms": 60_000,
                    "producer_id": producer_id, "producer_epoch": epoch}))
                assert answer["producer_id"] == producer_id
                epoch, sequence = answer["producer_epoch"], 0
            if not kafka4:
                retried(lambda: conn.request("AddPartitionsToTxn", 3, {
                    "v3_and_below_transactional_id": transactional_id,
                    "v3_and_below_producer_id": producer_id,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}))
            for part in range(2):
                batch = records(25, seed=40 + 2 * n + part)
                data = kcodec.encode(batch, compression=codec, producer_id=producer_id,
                                     producer_epoch=epoch, base_sequence=sequence,
                                     transactional=True)
                base = retried(lambda: conn.produce(topic, 0, data,
                                                    transactional_id=transactional_id,
                                                    version=None if kafka4 else 11))
                sequence += len(batch)
                everything += sent_rows(base, batch)
                if commit:
                    committed += sent_rows(base, batch)
            ended = retried(lambda: conn.request("EndTxn", None if kafka4 else 4, {
                "transactional_id": transactional_id, "producer_id": producer_id,
                "producer_epoch": epoch, "committed": commit}))
            if kafka4:
                # Kafka 4's protocol ends each transaction with a new epoch
                assert ended["producer_epoch"] == epoch + 1
                epoch, sequence = ended["producer_epoch"], 0
    wait_until_stable(broker, topic)
    log = PartitionLog(broker.partition_dir(topic))
    assert watermarks(broker, topic, "read_committed")[1] == len(everything) + 2 * len(CODECS), [
        (b.base_offset, b.last_offset, b.producer_epoch, b.is_control,
         [r.control.type for r in b] if b.is_control else None) for b in log.read_batches()]
    check_read_back(broker, topic, committed, everything)
    log = PartitionLog(broker.partition_dir(topic))
    assert len(log.aborted_transactions()) == len(CODECS)
    markers = [b for b in log.read_batches() if b.is_control]
    assert [r.control.type for b in markers for r in b] == ["COMMIT", "ABORT"] * len(CODECS)
    assert {b.compression for b in log.read_batches() if not b.is_control} == set(CODECS)


@pytest.mark.parametrize("timestamp", [-2, -1, 1_700_000_000_100, 1_700_000_000_101])
def test_list_offsets_through_kcodec_protocol(broker, timestamp):
    """The protocol's ListOffsets and PartitionLog.offset_for_timestamp agree."""
    topic = "raw-list-offsets"
    if not broker.partition_dir(topic).exists():
        broker.create_topic(topic)
        with connect(broker) as conn:
            for seed in range(4):
                data = kcodec.encode(records(30, seed), compression="lz4")
                retried(lambda: conn.produce(topic, 0, data))
    with connect(broker) as conn:
        listed = conn.list_offsets(topic, 0, timestamp)
    found = PartitionLog(broker.partition_dir(topic)).offset_for_timestamp(timestamp)
    assert listed.offset == (-1 if found is None else found)
    assert listed.offset >= 0
