"""kcodec.log reading a real broker's partition directories, record for
record against what real consumers (confluent-kafka, kafka-python) fetch
from the same broker, at both isolation levels."""
import pytest

from kcodec.log import PartitionLog
from kafka_broker import (  # noqa: F401
    broker, broker_topics, confluent_rows, kafka_python_rows, kcodec_rows, table_rows,
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
