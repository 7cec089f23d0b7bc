"""PartitionLog.offset_for_timestamp against the broker's own ListOffsets
answer (through confluent-kafka's offsets_for_times) for the same
timestamps: every record's timestamp, the ones just around it, before the
first and after the last, and the latest/earliest specials."""
import random

import pytest

from kcodec.log import PartitionLog
from kafka_broker import (  # noqa: F401
    CLIENT_TIMEOUT, broker, broker_topics, kcodec_rows,
)

TOPICS = ["codec-none", "codec-zstd", "transactions", "log-append-time", "compacted"]
LATEST, EARLIEST = -1, -2


def broker_offsets(broker, topic, timestamps):
    """{timestamp: offset} as ListOffsets answers, -1 where no record is that recent."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kcodec-offsets",
                         "log_level": 0})
    try:
        answers = {}
        for timestamp in timestamps:
            [found] = consumer.offsets_for_times([TopicPartition(topic, 0, timestamp)],
                                                 timeout=CLIENT_TIMEOUT)
            assert found.error is None, found.error
            answers[timestamp] = found.offset
        return answers
    finally:
        consumer.close()


@pytest.mark.parametrize("topic", TOPICS)
def test_offset_for_timestamp_is_what_list_offsets_answers(broker, broker_topics, topic):
    log = PartitionLog(broker.partition_dir(topic))
    # transaction markers count: their timestamps are the coordinator's clock
    stamps = sorted({row[1] for row in kcodec_rows(log.read_records(include_control=True))})
    rng = random.Random(topic)
    sample = rng.sample(stamps, min(len(stamps), 120))
    timestamps = sorted({t + d for t in sample for d in (-1, 0, 1)}
                        | {stamps[0] - 1000, stamps[0], stamps[-1], stamps[-1] + 1, 0})
    answers = broker_offsets(broker, topic, timestamps + [LATEST, EARLIEST])
    ours = {t: log.offset_for_timestamp(t) for t in timestamps + [LATEST, EARLIEST]}
    ours = {t: -1 if offset is None else offset for t, offset in ours.items()}
    assert ours == answers
    assert answers[stamps[-1] + 1] == -1 and answers[EARLIEST] == 0
    assert answers[LATEST] == log.end_offset
    # many different answers (a LogAppendTime topic has a timestamp per batch).
    # Not so for the compacted log: the broker searches only the first segment
    # whose largest timestamp reaches the target, and a cleaned segment may
    # hold few records, or none at that timestamp, while its index says more.
    if topic != "compacted":
        assert len(set(answers.values())) > 10
