"""Spark's own Kafka source against kafka-log on the same topic, in one
session: the Kafka source fetches the topic from a real broker (the
spark-sql-kafka-0-10 jar of the installed pyspark), kafka-log reads that
broker's partition directories. Both are written to Spark's noop sink; the
script then checks that both give the same rows (exceptAll both ways).

    bash ci/kafka-broker.sh     # the broker's and the connector's jars, once
    python benchmarks/spark_kafka_bench.py --rows 2000000 --codec lz4

With --write parquet it times the job users write today,
spark.read.format("kafka")...write.parquet(...), against spark-convert of the
broker's partition directories (kcodec.spark.convert.convert, the same
cores), and checks that both Parquet outputs hold the same rows (counts and
per-column checksums):

    python benchmarks/spark_kafka_bench.py --write parquet --rows 4000000 --work DIR

Without --bootstrap it starts its own broker (tests/kafka_broker.py) and
stops it at the end; --json prints the figures as one JSON line last.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kafka_broker import (  # noqa: E402
    BASE_TIMESTAMP, CLIENT_TIMEOUT, KafkaBroker, confluent_producer, spark_kafka_jars,
)

VALUE_BYTES = 100
# A segment holds the producer's batches of up to 1 MiB; several segments per partition.
SEGMENT_BYTES = 16 << 20
PARQUET_TARGET = 5.0


def produce(broker, topic, rows, partitions, codec):
    """`rows` records round-robin over the partitions: 12-byte keys, values
    of printable pseudo-random bytes, a header on every tenth."""
    import numpy as np
    rng = np.random.default_rng(7)
    producer = confluent_producer(broker, compression_type=codec, linger_ms=50,
                                  batch_size=1 << 20, queue_buffering_max_messages=1_000_000,
                                  acks=1)
    errors = []

    def delivered(error, _message):
        if error is not None:
            errors.append(error)

    chunk = 100_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        values = rng.integers(32, 127, size=(n, VALUE_BYTES), dtype=np.uint8)
        for i in range(n):
            number = start + i
            producer.produce(topic, value=values[i].tobytes(), key=b"key-%08d" % number,
                             partition=number % partitions,
                             headers=[("seq", str(number).encode())] if number % 10 == 0
                             else None,
                             timestamp=BASE_TIMESTAMP + number, on_delivery=delivered)
            if i % 1000 == 0:
                producer.poll(0)
    left = producer.flush(CLIENT_TIMEOUT * 5)
    if left or errors:
        raise RuntimeError(f"{left} records not delivered; errors: {errors[:3]}")


def session(jars, master):
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("kcodec spark kafka bench")
             .config("spark.jars", jars)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from kcodec.spark import register
    register(spark)
    return spark


def readers(spark, bootstrap, topic, directories):
    def kafka():
        return (spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .option("includeHeaders", "true")
                .load())

    def kafka_log():
        return (spark.read.format("kafka-log")
                .option("includeHeaders", "true")
                .load([str(d) for d in directories]))

    return {"spark-kafka": kafka, "kafka-log": kafka_log}


def timed_noop(df):
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def same_rows(a, b):
    columns = ["topic", "partition", "offset", "timestamp", "timestampType", "key", "value",
               "headers"]
    a, b = a.select(*columns), b.select(*columns)
    return a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


def run(broker, topic, rows, partitions, codec, repeats, master, produce_rows=True):
    if produce_rows:
        broker.create_topic(topic, partitions=partitions,
                            internal_segment_bytes=str(SEGMENT_BYTES))
        produce(broker, topic, rows, partitions, codec)
    directories = [broker.partition_dir(topic, p) for p in range(partitions)]
    spark = session(spark_kafka_jars(), master)
    try:
        make = readers(spark, broker.bootstrap, topic, directories)
        counts = {name: df().count() for name, df in make.items()}
        seconds = {name: [] for name in make}
        for _ in range(repeats):                  # interleaved, so both see the same machine
            for name, df in make.items():
                seconds[name].append(timed_noop(df()))
        equal = same_rows(make["spark-kafka"](), make["kafka-log"]())
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    log_bytes = sum(os.path.getsize(os.path.join(d, n)) for d in directories
                    for n in os.listdir(d) if n.endswith(".log"))
    best = {name: min(times) for name, times in seconds.items()}
    return {"rows": rows, "codec": codec, "partitions": partitions, "master": master,
            "cores": cores, "log_bytes": log_bytes, "counts": counts, "seconds": seconds,
            "rows_per_s": {name: rows / s for name, s in best.items()},
            "ratio": best["spark-kafka"] / best["kafka-log"], "equal": equal}


def timed_kafka_parquet(spark, bootstrap, topic, out):
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    (spark.read.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap)
     .option("subscribe", topic)
     .option("startingOffsets", "earliest")
     .option("endingOffsets", "latest")
     .option("includeHeaders", "true")
     .load()
     .write.mode("overwrite").parquet(out))
    return time.perf_counter() - started


def run_parquet(broker, topic, rows, partitions, codec, repeats, master, work,
                produce_rows=True):
    """Spark's Kafka source into .write.parquet against spark-convert of the
    broker's partition directories, interleaved, in one session."""
    from kcodec.spark import parse_options
    from kcodec.spark.bench import parquet_digest
    from kcodec.spark.convert import convert
    if produce_rows:
        broker.create_topic(topic, partitions=partitions,
                            internal_segment_bytes=str(SEGMENT_BYTES))
        produce(broker, topic, rows, partitions, codec)
    directories = [str(broker.partition_dir(topic, p)) for p in range(partitions)]
    outputs = {"spark-kafka .write.parquet": os.path.join(work, "kafka-source-parquet"),
               "spark-convert": os.path.join(work, "spark-convert-parquet")}
    options = parse_options({"includeHeaders": "true"})
    spark = session(spark_kafka_jars(), master)
    try:
        jobs = {
            "spark-kafka .write.parquet": lambda out: timed_kafka_parquet(
                spark, broker.bootstrap, topic, out),
            "spark-convert": lambda out: convert(spark, directories, out, options,
                                                 mode="overwrite").elapsed,
        }
        for name, job in jobs.items():          # warm up (JIT, workers, the consumer)
            job(outputs[name])
        seconds = {name: [] for name in jobs}
        for _ in range(repeats):                  # interleaved, so both see the same machine
            for name, job in jobs.items():
                seconds[name].append(job(outputs[name]))
        digests = {name: parquet_digest(spark, out) for name, out in outputs.items()}
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    log_bytes = sum(os.path.getsize(os.path.join(d, n)) for d in directories
                    for n in os.listdir(d) if n.endswith(".log"))
    median = {name: statistics.median(times) for name, times in seconds.items()}
    equal = len(set(digests.values())) == 1 and digests["spark-convert"][0] == rows
    # Each repeat's two jobs ran back to back: their ratio moves less with the machine.
    paired = sorted(kafka / ours for kafka, ours in zip(seconds["spark-kafka .write.parquet"],
                                                       seconds["spark-convert"]))
    return {"write": "parquet", "rows": rows, "codec": codec, "partitions": partitions,
            "master": master, "cores": cores, "log_bytes": log_bytes, "seconds": seconds,
            "rows_per_s": {name: rows / s for name, s in median.items()},
            "ratio": median["spark-kafka .write.parquet"] / median["spark-convert"],
            "paired_ratios": paired, "target": PARQUET_TARGET, "equal": equal,
            "digests": {name: list(d) for name, d in digests.items()}}


def report_parquet(result):
    import pyspark
    lines = [f"pyspark {pyspark.__version__}, master {result['master']} ({result['cores']} "
             f"cores); {result['rows']:,} rows in {result['partitions']} partitions, values "
             f"{VALUE_BYTES} B, {result['codec']}, {result['log_bytes'] / 1e6:.1f} MB of log; "
             f"medians of {len(result['seconds']['spark-convert'])}",
             "", "| job | median s | rows/s |", "|---|---:|---:|"]
    for name, rate in result["rows_per_s"].items():
        lines.append(f"| {name} | {result['rows'] / rate:.2f} | {rate:,.0f} |")
    met = "met" if result["ratio"] >= result["target"] else "not met"
    lines += ["", f"spark-convert / Spark's Kafka source .write.parquet: {result['ratio']:.2f}x "
                  f"(target >= {result['target']}x: {met}); same rows: {result['equal']}",
              "per repeat: " + ", ".join(f"{r:.2f}x" for r in result["paired_ratios"])
              + f" (median {statistics.median(result['paired_ratios']):.2f}x)"]
    return "\n".join(lines)


def report(result):
    import pyspark
    lines = [f"pyspark {pyspark.__version__}, master {result['master']} ({result['cores']} "
             f"cores); {result['rows']:,} rows in {result['partitions']} partitions, values "
             f"{VALUE_BYTES} B, {result['codec']}, {result['log_bytes'] / 1e6:.1f} MB of log",
             "| reader | best s | rows/s |", "|---|---:|---:|"]
    for name, rate in result["rows_per_s"].items():
        lines.append(f"| {name} | {min(result['seconds'][name]):.2f} | {rate:,.0f} |")
    lines.append(f"kafka-log / Spark's Kafka source: {result['ratio']:.2f}x; "
                 f"same rows: {result['equal']}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--codec", default="lz4",
                        choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", help="a running broker (with --log-dirs) instead of "
                                            "starting one")
    parser.add_argument("--log-dirs", help="that broker's log.dirs")
    parser.add_argument("--topic", help="topic name (default: spark-bench-<codec>)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--write", choices=["noop", "parquet"], default="noop",
                        help="noop: kafka-log against the Kafka source into the noop sink; "
                             "parquet: spark-convert against the Kafka source's .write.parquet")
    parser.add_argument("--work", help="where --write parquet writes its outputs "
                                       "(default: a temporary directory)")
    args = parser.parse_args(argv)
    topic = args.topic or f"spark-bench-{args.codec}"
    work = args.work or tempfile.mkdtemp(prefix="kcodec-kafka-parquet-")

    def measure(broker):
        if args.write == "parquet":
            return run_parquet(broker, topic, args.rows, args.partitions, args.codec,
                               args.repeats, args.master, os.path.join(work, "out"))
        return run(broker, topic, args.rows, args.partitions, args.codec, args.repeats,
                   args.master)

    try:
        if args.bootstrap:
            if not args.log_dirs:
                parser.error("--bootstrap needs --log-dirs")
            result = measure(KafkaBroker.attach(args.bootstrap, args.log_dirs))
        else:
            if args.work:
                os.makedirs(args.work, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="kcodec-bench-broker-",
                                             dir=args.work) as workdir, \
                    KafkaBroker(workdir) as broker:
                result = measure(broker)
    finally:
        shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(report_parquet(result) if args.write == "parquet" else report(result))
    if args.json:
        print(json.dumps(result))
    return 0 if result["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
