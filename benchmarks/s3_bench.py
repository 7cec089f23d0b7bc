"""kafka-log reading one log from object storage against the same log on
the local disk: one Spark session, one timed run each (after an untimed
full read of the local copy and a few rows of the S3 one), rows/s to
Spark's noop sink.

The object store is S3Proxy (tests/s3_server.py: filesystem backend on
this machine, through 127.0.0.1), the jar from ci/s3proxy.sh.

    python benchmarks/s3_bench.py --rows 2000000 [--json FILE]

With --convert it also times spark-convert (kcodec.spark.convert.convert)
of the same log from S3 and from the local disk, both to the local disk,
after an untimed conversion of the local copy, and checks that both outputs
hold the same rows (counts and per-column checksums).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import kcodec.spark  # noqa: E402
from kcodec.spark import parse_options  # noqa: E402
from kcodec.spark.bench import parquet_digest, write_bench_log  # noqa: E402
from kcodec.spark.convert import convert, local_session  # noqa: E402
from s3_server import S3Server  # noqa: E402


def timed_read(spark, path, options):
    reader = spark.read.format("kafka-log").option("includeHeaders", "true")
    for name, value in options.items():
        reader = reader.option(name, value)
    started = time.perf_counter()
    reader.load(path).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def timed_converts(spark, local, s3, options, work, rows, s3_first):
    """spark-convert of the local copy and of the S3 one, each to the local
    disk, after an untimed conversion of the local copy."""
    outputs = {"local": os.path.join(work, "converted-local"),
               "s3": os.path.join(work, "converted-s3")}
    sources = {"local": (local, parse_options({"includeHeaders": "true"})),
               "s3": (s3, parse_options({"includeHeaders": "true", **options}))}

    def timed(name):
        path, parsed = sources[name]
        return convert(spark, [path], outputs[name], parsed, mode="overwrite").elapsed

    timed("local")
    order = ["s3", "local"] if s3_first else ["local", "s3"]
    seconds = {name: timed(name) for name in order}
    digests = {name: parquet_digest(spark, out) for name, out in outputs.items()}
    return {"convert_local_s": round(seconds["local"], 3),
            "convert_local_rows_per_s": round(rows / seconds["local"]),
            "convert_s3_s": round(seconds["s3"], 3),
            "convert_s3_rows_per_s": round(rows / seconds["s3"]),
            "convert_s3_to_local": round(seconds["local"] / seconds["s3"], 3),
            "convert_equal": digests["local"] == digests["s3"] and digests["local"][0] == rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--segment-bytes", type=int, default=64 << 20)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--s3-first", action="store_true",
                        help="time the S3 read before the local one (default: after)")
    parser.add_argument("--convert", action="store_true",
                        help="also time spark-convert from S3 against the local disk")
    parser.add_argument("--work", help="the directory to work in (default: the system's "
                                       "temporary one)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    os.environ.setdefault("CI", "")
    work = tempfile.mkdtemp(prefix="kcodec-s3-bench-", dir=args.work)
    server = S3Server(os.path.join(work, "s3proxy")).start()
    try:
        root = os.path.join(work, "logs")
        paths = write_bench_log(root, args.rows, partitions=args.partitions,
                                segment_bytes=args.segment_bytes)
        log_bytes = sum(os.path.getsize(os.path.join(p, n)) for p in paths
                        for n in os.listdir(p) if n.endswith(".log"))
        started = time.perf_counter()
        server.upload(root, "bench/logs")
        upload_s = time.perf_counter() - started
        spark = local_session(args.master, "kcodec s3 bench", **{"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        kcodec.spark.register(spark)
        options = server.options()
        # Warm-up: the first full read of a session pays for starting the
        # Python workers and more (about 3 s here), whichever source it reads.
        timed_read(spark, root, {})
        timed_read(spark, "s3://bench/logs", {**options, "endingOffsets": "10"})
        if args.s3_first:
            s3_s = timed_read(spark, "s3://bench/logs", options)
            local_s = timed_read(spark, root, {})
        else:
            local_s = timed_read(spark, root, {})
            s3_s = timed_read(spark, "s3://bench/logs", options)
        converted = timed_converts(spark, root, "s3://bench/logs", options, work, args.rows,
                                   args.s3_first) if args.convert else {}
        spark.stop()
        figures = {
            "rows": args.rows, "log_bytes": log_bytes, "partitions": args.partitions,
            "master": args.master, "order": "s3 first" if args.s3_first else "local first",
            "upload_s": round(upload_s, 2),
            "local_s": round(local_s, 3), "local_rows_per_s": round(args.rows / local_s),
            "s3_s": round(s3_s, 3), "s3_rows_per_s": round(args.rows / s3_s),
            "s3_to_local": round(local_s / s3_s, 3),
            "server": "S3Proxy 2.7.0, filesystem backend, 127.0.0.1",
            **converted,
        }
        print(f"{args.rows:,} rows, {log_bytes:,} log bytes, {args.master}: "
              f"local disk {figures['local_rows_per_s']:,} rows/s ({local_s:.2f} s), "
              f"S3 {figures['s3_rows_per_s']:,} rows/s ({s3_s:.2f} s): "
              f"S3 at {figures['s3_to_local']:.2f}x local")
        if converted:
            print(f"spark-convert: local disk {converted['convert_local_rows_per_s']:,} rows/s "
                  f"({converted['convert_local_s']:.2f} s), S3 "
                  f"{converted['convert_s3_rows_per_s']:,} rows/s "
                  f"({converted['convert_s3_s']:.2f} s): S3 at "
                  f"{converted['convert_s3_to_local']:.2f}x local; same rows: "
                  f"{converted['convert_equal']}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)
                f.write("\n")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
