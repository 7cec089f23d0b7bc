"""The kafka-log stream source's steps without Spark's scheduler, for
tests/test_spark_stream_broker.py: as many triggers as fit in SECONDS over a
live broker's log.dirs, each taking what is new (latestOffset), splitting
it (partitions) and decoding every split (read), read_committed.

    python stream_race.py ROOT TOPIC SECONDS OUT

OUT gets {"triggers": count, "offsets": {partition: [offset, ...]}}, the
offsets of every row read, in the order read. Any error ends the process
with its traceback."""
import json
import sys
import time

from pyspark.sql.datasource import ReadAllAvailable

from kcodec.spark.source import KafkaLogDataSource


def main(root, topic, seconds, out):
    source = KafkaLogDataSource({"path": root, "subscribe": topic, "startingOffsets": "earliest",
                                 "kafka.isolation.level": "read_committed"})
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    offsets, triggers = {}, 0
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        end = reader.latestOffset(start, ReadAllAvailable())
        for split in reader.partitions(start, end):
            for batch in reader.read(split):
                columns = batch.to_pydict()
                for partition, offset in zip(columns["partition"], columns["offset"]):
                    offsets.setdefault(str(partition), []).append(offset)
        start, triggers = end, triggers + 1
    with open(out, "w") as f:
        json.dump({"triggers": triggers, "offsets": offsets}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
