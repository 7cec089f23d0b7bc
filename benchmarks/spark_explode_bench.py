"""explode_records on a DataFrame of many small record sets (as a column of
captured fetch payloads holds them), timed to Spark's noop sink.

    python benchmarks/spark_explode_bench.py --sets 100000 --records 5

Prints the median of --repeats runs after a warm-up, in records/s. The
record sets are cached in Spark first, so what is timed is the decode in
df.mapInArrow and Spark's transport of the rows it makes."""
import argparse
import os
import statistics
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=100_000, help="record sets (rows)")
    parser.add_argument("--records", type=int, default=5, help="records in each record set")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import kcodec
    from kcodec.spark import explode_records
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(args.master).appName("kcodec-explode-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    try:
        rows = [(i, kcodec.encode([(b"k%d" % i, b"v" * 100)] * args.records,
                                  base_offset=i * args.records)) for i in range(args.sets)]
        df = spark.createDataFrame(rows, "id long, content binary").repartition(2).cache()
        df.count()
        out = explode_records(df, "content", topic="orders", partition=0)
        expected = args.sets * args.records
        if out.count() != expected:
            raise SystemExit(f"expected {expected} records, got {out.count()}")
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out.write.format("noop").mode("overwrite").save()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(f"kcodec {kcodec.__version__}, {args.master}: {args.sets:,} record sets of "
              f"{args.records}: median {median:.2f} s of {args.repeats}, "
              f"{expected / median:,.0f} records/s")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
