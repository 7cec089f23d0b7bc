"""spark-convert on a standalone cluster of one worker against two (one core
each), the same log (issue 46, point c).

    python benchmarks/cluster_bench.py --gib 1 --work DIR

Each cluster size runs in a process of its own (one SparkContext per
process): it starts kcodec.spark.cluster.LocalCluster, waits for every
executor, converts once to warm up, then --repeats times; sizes alternate
over --rounds. The outputs of the two sizes must hold the same rows (count
and checksums). Logs are kept under --work/logs (as convert_bench.py does).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from kcodec.spark.bench import (
    GIB, cached_bench_log, log_bytes_of, parquet_digest, rows_for_gib, rows_written,
)

SEGMENT_BYTES = 128 << 20
WORKER_MEMORY = "3g"
EXECUTOR_WAIT_SECONDS = 120
TARGET_SPEEDUP = 1.7


def bench_log(work, gib, rows=None):
    name = f"rows-{rows}" if rows else f"gib-{gib:g}"
    rows = rows or rows_for_gib(gib)
    return cached_bench_log(os.path.join(work, "logs", name), rows,
                            segment_bytes=SEGMENT_BYTES), rows_written(rows)


def wait_for_executors(spark, count):
    """Until `count` executors (besides the driver) have registered."""
    deadline = time.monotonic() + EXECUTOR_WAIT_SECONDS
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    while status.size() < count + 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {status.size() - 1} of {count} executors registered")
        time.sleep(0.2)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()


def measure_cluster(args):
    """In its own process: one cluster size, its convert times as JSON."""
    from kcodec.spark import parse_options
    from kcodec.spark.cluster import LocalCluster
    from kcodec.spark.convert import convert
    paths, rows = bench_log(args.work, args.gib, args.rows)
    options = parse_options({"includeHeaders": "true"})
    out = os.path.join(args.work, "out", f"cluster-{args.workers}")
    with LocalCluster(workers=args.workers, cores=1, memory=WORKER_MEMORY) as cluster:
        spark = cluster.session(f"kcodec cluster bench, {args.workers} worker(s)")
        try:
            wait_for_executors(spark, args.workers)
            convert(spark, paths, out, options, mode="overwrite")       # warm-up
            seconds = []
            for _ in range(args.repeats):
                result = convert(spark, paths, out, options, mode="overwrite")
                seconds.append(result.elapsed)
            digest = parquet_digest(spark, out)
        finally:
            spark.stop()
    print(json.dumps({"workers": args.workers, "rows": rows, "seconds": seconds,
                      "converted_rows": result.rows, "tasks": result.tasks,
                      "digest": list(digest), "log_bytes": log_bytes_of(paths)}))


def run_size(args, workers):
    command = [sys.executable, os.path.abspath(__file__), "--workers", str(workers),
               "--work", args.work, "--repeats", str(args.repeats), "--gib", str(args.gib)]
    if args.rows:
        command += ["--rows", str(args.rows)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{workers} worker(s) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rows", type=int, help="log size in rows instead of --gib")
    parser.add_argument("--repeats", type=int, default=3, help="timed converts per cluster")
    parser.add_argument("--rounds", type=int, default=1, help="alternations of the two sizes")
    parser.add_argument("--work", required=True)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)     # the child's
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    if args.workers:
        measure_cluster(args)
        return 0
    bench_log(args.work, args.gib, args.rows)       # written before any cluster starts
    runs = {1: [], 2: []}
    for _ in range(args.rounds):
        for workers in runs:
            runs[workers].append(run_size(args, workers))
            print(f"  {workers} worker(s): {runs[workers][-1]['seconds']}", flush=True)
    rows = runs[1][0]["rows"]
    seconds = {w: [s for run in r for s in run["seconds"]] for w, r in runs.items()}
    rate = {w: rows / statistics.median(s) for w, s in seconds.items()}
    digests = {tuple(run["digest"]) for r in runs.values() for run in r}
    equal = len(digests) == 1 and next(iter(digests))[0] == rows and all(
        run["converted_rows"] == rows for r in runs.values() for run in r)
    speedup = rate[2] / rate[1]
    load = os.getloadavg()
    print(f"{rows:,} rows, {runs[1][0]['log_bytes'] / GIB:.2f} GiB of log, "
          f"{runs[1][0]['tasks']} tasks; standalone cluster, one-core workers of "
          f"{WORKER_MEMORY}; medians of {len(seconds[1])}; {os.cpu_count()} CPUs, load "
          f"average {load[0]:.2f} at the end")
    print()
    print("| workers | median s | rows/s |")
    print("|---:|---:|---:|")
    for workers in runs:
        print(f"| {workers} | {statistics.median(seconds[workers]):.2f} | {rate[workers]:,.0f} |")
    print()
    print(f"two workers / one: {speedup:.2f}x (target >= {TARGET_SPEEDUP}x: "
          f"{'met' if speedup >= TARGET_SPEEDUP else 'not met'}); same rows: {equal}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "runs": runs, "rows_per_s": rate, "speedup": speedup,
                       "target": TARGET_SPEEDUP, "equal": equal}, f, indent=1)
            f.write("\n")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
