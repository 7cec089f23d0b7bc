"""`kcodec dump --offsets-decoder / --transaction-log-decoder` against Kafka's
own DumpLogSegments on the broker's __consumer_offsets (offsets committed
for a group that no member joined) and __transaction_state (the conformance
topics' transactional producers).

Not compared: a joined consumer group's GroupMetadata record, whose member
subscriptions and assignments the tool prints decoded (Kafka's consumer
protocol) where kcodec prints their bytes in base64."""
import glob
import os

import pytest

from kcodec.cli import main
from kafka_broker import broker, broker_topics  # noqa: F401

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
GROUP = "kcodec-coordinator-records"


def commit_without_joining(broker, topic):
    """Offsets with metadata committed for a group (OffsetCommit records)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        for offset in (3, 7):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset, "meta-é")],
                            asynchronous=False)
    finally:
        consumer.close()


def log_files(broker, topic):
    return sorted(glob.glob(os.path.join(str(broker.log_dirs), f"{topic}-*", "*.log")))


@pytest.mark.parametrize("topic, option", [("__consumer_offsets", "--offsets-decoder"),
                                           ("__transaction_state", "--transaction-log-decoder")])
def test_decoders_print_what_dump_log_segments_prints(broker, broker_topics, capsys,
                                                      topic, option):
    if topic == "__consumer_offsets":
        commit_without_joining(broker, "codec-none")
    files = log_files(broker, topic)
    assert files
    java = broker.run_tool(DUMP_LOG_SEGMENTS, "--files", ",".join(files), option)
    assert java.returncode == 0, java.stderr
    payloads = [line for line in java.stdout.splitlines() if " payload: " in line]
    assert payloads, java.stdout
    capsys.readouterr()
    assert main(["dump", "--files", ",".join(files), option]) == 0
    ours = capsys.readouterr().out.splitlines()
    for mine, theirs in zip(ours, java.stdout.splitlines()):
        assert mine == theirs
    assert len(ours) == len(java.stdout.splitlines())
