"""Spark figures on one log, one session: kafka-log vs the transport ceiling
vs Spark's Parquet scan, and spark-convert vs the DataFrame write path.

    python benchmarks/spark_bench.py --rows 6000000 [--compression lz4] [--master local[*]]
"""
import argparse
import os
import shutil
import sys
import tempfile

from kcodec.spark.bench import SparkBench, report, write_bench_log
from kcodec.spark.convert import local_session


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2, help="Kafka partitions")
    parser.add_argument("--segment-bytes", type=int, default=128 << 20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--no-headers", action="store_true")
    parser.add_argument("--work", help="working directory (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="kcodec-spark-bench-")
    try:
        paths = write_bench_log(os.path.join(work, "logs"), args.rows,
                                compression=args.compression, value_bytes=args.value_bytes,
                                partitions=args.partitions, segment_bytes=args.segment_bytes)
        log_bytes = sum(os.path.getsize(os.path.join(p, n)) for p in paths
                        for n in os.listdir(p) if n.endswith(".log"))
        spark = local_session(args.master, "kcodec spark bench",
                              **{"spark.ui.enabled": "false",
                                 "spark.driver.memory": "4g"})
        spark.sparkContext.setLogLevel("ERROR")
        import pyspark
        print(f"pyspark {pyspark.__version__}, master {args.master} "
              f"({spark.sparkContext.defaultParallelism} cores), {os.cpu_count()} CPUs; "
              f"{args.rows:,} rows, values {args.value_bytes} B, {args.compression}, "
              f"headers column {'off' if args.no_headers else 'on'}")
        bench = SparkBench(spark, paths, work, include_headers=not args.no_headers)
        seconds = bench.run(args.repeats, out=sys.stdout)
        text, _, _ = report(bench.rows, seconds, log_bytes, bench.outputs_equal())
        print(text)
        spark.stop()
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
