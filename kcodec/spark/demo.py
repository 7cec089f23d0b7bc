"""`kcodec demo`: the main job on an embedded default log.

Writes a log.dirs root the way a broker lays it out (kcodec.log.write_log):
orders-0, orders-1 and payments-0, each several segments of batches in
every codec, records with headers, plain producers beside a transactional
one whose every fifth transaction is aborted. Then spark-convert turns it
into Parquet on local[*] (read_committed) and Spark reads the result back.
"""
import json
import os
import random
import shutil
import sys

from .. import encode, encode_control
from ..log import write_log

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = (("orders", 0), ("orders", 1), ("payments", 0))
BATCHES_PER_PARTITION = 240
RECORDS_PER_BATCH = 200
SEGMENT_BYTES = 1 << 20
BASE_TIMESTAMP = 1_700_000_000_000
TRANSACTIONAL_PRODUCER = 1001


def _records(rng, topic, partition, first, n, clock):
    out = []
    for i in range(n):
        clock += rng.randrange(1, 20)
        number = first + i
        customer = rng.randrange(10_000)
        if topic == "orders":
            body = {"order": f"o-{partition}-{number}", "customer": customer,
                    "items": rng.randrange(1, 9), "total": round(rng.uniform(3, 400), 2)}
        else:
            body = {"payment": f"p-{number}", "customer": customer,
                    "method": rng.choice(["card", "sepa", "wallet"]),
                    "amount": round(rng.uniform(3, 400), 2)}
        headers = [("source", rng.choice([b"web", b"ios", b"android"])),
                   ("trace-id", rng.randbytes(8).hex().encode())]
        key = None if rng.random() < 0.05 else f"customer-{customer}".encode()
        out.append((key, json.dumps(body).encode(), clock, headers))
    return out, clock


def write_demo_logs(root, seed=7):
    """Write the demo's partition directories under `root`; returns
    {(topic, partition): (records appended, records in aborted transactions)}."""
    rng = random.Random(seed)
    written = {}
    for topic, partition in PARTITIONS:
        offset, clock, batches = 0, BASE_TIMESTAMP, []
        appended = aborted = 0
        sequence = 0
        for b in range(BATCHES_PER_PARTITION):
            codec = CODECS[b % len(CODECS)]
            records, clock = _records(rng, topic, partition, offset, RECORDS_PER_BATCH, clock)
            transactional = b % 3 == 2
            if not transactional:
                batches.append(encode(records, compression=codec, base_offset=offset))
                offset += len(records)
                appended += len(records)
                continue
            batches.append(encode(records, compression=codec, base_offset=offset,
                                  producer_id=TRANSACTIONAL_PRODUCER, producer_epoch=0,
                                  base_sequence=sequence, transactional=True))
            sequence += len(records)
            offset += len(records)
            appended += len(records)
            kind = "ABORT" if (b // 3) % 5 == 4 else "COMMIT"
            aborted += len(records) if kind == "ABORT" else 0
            batches.append(encode_control(kind, producer_id=TRANSACTIONAL_PRODUCER,
                                          producer_epoch=0, offset=offset, timestamp=clock))
            offset += 1
        write_log(os.path.join(root, f"{topic}-{partition}"), batches,
                  segment_bytes=SEGMENT_BYTES)
        written[(topic, partition)] = (appended, aborted)
    return written


def run_demo(directory="kcodec-demo", master="local[*]", out=sys.stdout, verbose=False):
    """Write the demo log under `directory`, convert it on Spark and print
    what came out to `out`. Spark logs errors only unless `verbose`
    (kcodec.spark.session)."""
    from pyspark.sql import functions as F

    from .convert import convert
    from .options import parse_options
    from .session import local_session

    root = os.path.join(directory, "kafka-logs")
    parquet = os.path.join(directory, "parquet")
    shutil.rmtree(root, ignore_errors=True)
    written = write_demo_logs(root)
    segments = sum(n.endswith(".log") for _, _, names in os.walk(root) for n in names)
    total = sum(a for a, _ in written.values())
    dropped = sum(d for _, d in written.values())
    out.write(f"wrote {total:,} records ({dropped:,} of them in aborted transactions) to "
              f"{len(written)} partitions, {segments} segments, codecs {', '.join(CODECS)}: "
              f"{root}\n")
    out.flush()
    spark = local_session(master, "kcodec demo", verbose=verbose, **{"spark.ui.enabled": "false"})
    try:
        options = parse_options({"includeHeaders": "true",
                                 "kafka.isolation.level": "read_committed"})
        out.write(f"spark-convert {root} --out {parquet} --isolation read_committed "
                  f"(master {master})\n")
        out.flush()
        result = convert(spark, [root], parquet, options, mode="overwrite")
        out.write(result.summary() + "\n\n")
        df = spark.read.parquet(parquet)
        out.write("read back with spark.read.parquet: "
                  f"{df.schema.simpleString()}\n")
        counts = df.groupBy("topic", "partition").count().orderBy("topic", "partition").collect()
        for row in counts:
            appended, aborted = written[(row["topic"], row["partition"])]
            out.write(f"  {row['topic']}-{row['partition']}: {row['count']:,} rows "
                      f"({appended:,} appended - {aborted:,} aborted)\n")
        shown = (df.orderBy("topic", "partition", "offset")
                 .select("topic", "partition", "offset", "timestamp",
                         F.col("key").cast("string").alias("key"),
                         F.col("value").cast("string").alias("value"),
                         F.transform("headers", lambda h: F.concat_ws(
                             "=", h["key"], h["value"].cast("string"))).alias("headers")))
        out.flush()
        shown.show(5, truncate=48)
        expected = total - dropped
        if result.rows != expected:
            out.write(f"MISMATCH: {result.rows} rows converted, {expected} expected\n")
            return 1
        out.write(f"OK: {result.rows:,} committed records converted "
                  f"({result.rows_per_second:,.0f} rows/s)\n")
        return 0
    finally:
        spark.stop()
