"""A streaming query of its own process, for tests/test_spark_stream_broker.py:
the test run holds a local SparkContext already, and a driver process is what
the tests kill.

    python stream_driver.py ROOT OUT CHECKPOINT --until FILE|available-now
        [--option NAME=VALUE]... [--trigger SECONDS]

It reads ROOT with spark.readStream.format("kafka-log") into a Parquet sink
at OUT with its checkpoint at CHECKPOINT. With --until FILE it runs micro-
batches every --trigger seconds until FILE exists, then stops the query;
with --until available-now it runs Trigger.AvailableNow. Each completed
micro-batch is noted, as a JSON line on stdout: its id, input rows and end
offsets."""
import argparse
import json
import os
import sys
import time

import kcodec.spark
from kcodec.spark.session import local_session

POLL_SECONDS = 0.2


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("out")
    parser.add_argument("checkpoint")
    parser.add_argument("--until", required=True)
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--trigger", type=float, default=1.0)
    args = parser.parse_args(argv)
    spark = local_session("local[2]")
    kcodec.spark.register(spark)
    reader = spark.readStream.format("kafka-log")
    for item in args.option:
        name, _, value = item.partition("=")
        reader = reader.option(name, value)
    writer = (reader.load(args.root).writeStream.format("parquet")
              .option("checkpointLocation", args.checkpoint))
    if args.until == "available-now":
        query = writer.trigger(availableNow=True).start(args.out)
    else:
        query = writer.trigger(processingTime=f"{args.trigger} seconds").start(args.out)
    seen = -1
    try:
        while query.isActive and (args.until == "available-now" or not os.path.exists(args.until)):
            seen = report(query, seen)
            time.sleep(POLL_SECONDS)
        if query.isActive:
            query.stop()
        query.awaitTermination()
        report(query, seen)
    finally:
        spark.stop()
    return 0


def report(query, seen):
    """Print the progress of micro-batches not printed yet; the last id."""
    for progress in query.recentProgress:
        if progress["batchId"] > seen:
            seen = progress["batchId"]
            source = progress["sources"][0]
            print(json.dumps({"batch": seen, "rows": progress["numInputRows"],
                              "end": source["endOffset"]}), flush=True)
    return seen


if __name__ == "__main__":
    sys.exit(main())
