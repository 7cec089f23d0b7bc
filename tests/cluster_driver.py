"""A Spark driver program of its own for tests/test_spark_cluster.py: one
SparkContext per process, so the cluster's driver cannot be the test run's
(which holds the local session).

    python cluster_driver.py MASTER read OUT.arrow PATH... [--option NAME=VALUE]...
    python cluster_driver.py MASTER convert OUT PATH... [--option ...]
        [--kill executor|python --split N --marks DIR]
    ... [--conf KEY=VALUE]...

`read` writes kafka-log's rows (as Spark gives them) to an Arrow file;
`convert` runs spark-convert, with a fault in the first attempt of split N
once its file is written: its executor's JVM SIGKILLed, or its Python
worker. Both wait for every worker's executor first, and print one JSON
line: the executors the job could use, where their Python workers import
kcodec from, and what the job did."""
import argparse
import json
import os
import signal
import sys
import time

import pyarrow as pa

import kcodec.spark
from kcodec.spark.cluster import EXECUTOR_CLASS
from kcodec.spark.convert import convert
from kcodec.spark.options import parse_options
from kcodec.spark.session import local_session

EXECUTORS_TIMEOUT = 120.0


def executor_jvm():
    """The pid of the executor JVM this Python worker runs under (its
    parent's parent, through pyspark's daemon, or nearer)."""
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if EXECUTOR_CLASS.encode() in f.read():
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no executor JVM above this Python worker")


def fault(kind, split_id, marks):
    """A task hook killing, in the first attempt of split `split_id` once
    its file is written, the executor's JVM (and so its Python workers) or
    the Python worker alone; it leaves a mark in `marks` first."""
    def hook(split, attempt, stage):
        if stage != "written" or split.id != split_id or attempt != 0:
            return
        victim = executor_jvm() if kind == "executor" else os.getpid()
        with open(os.path.join(marks, f"killed-{kind}-{split.id}"), "w") as mark:
            mark.write(str(victim))
        os.kill(victim, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    return hook


def wait_for_executors(spark, count):
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + EXECUTORS_TIMEOUT
    while len(tracker.getExecutorInfos()) < count + 1:      # the driver is one too
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {count} executors after {EXECUTORS_TIMEOUT:.0f} s")
        time.sleep(0.2)
    return len(tracker.getExecutorInfos()) - 1


def kcodec_on_executors(spark):
    """Where the executors' Python workers import kcodec from."""
    def where(_):
        import kcodec
        return os.path.realpath(kcodec.__file__)
    tasks = 4 * spark.sparkContext.defaultParallelism
    return sorted(set(spark.sparkContext.parallelize(range(tasks), tasks).map(where).collect()))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("master")
    parser.add_argument("command", choices=("read", "convert"))
    parser.add_argument("out")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--executors", type=int, default=2)
    parser.add_argument("--kill", choices=("executor", "python"))
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--marks")
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args(argv)
    options = dict(item.partition("=")[::2] for item in args.option)
    spark = local_session(args.master, app_name=f"kcodec cluster test {args.command}",
                          **{"spark.pyspark.python": sys.executable,
                             "spark.driver.host": "127.0.0.1",
                             "spark.driver.bindAddress": "127.0.0.1",
                             "spark.executor.cores": "1", "spark.executor.memory": "1g",
                             "spark.ui.enabled": "false",
                             **dict(item.partition("=")[::2] for item in args.conf)})
    executors = wait_for_executors(spark, args.executors)
    report = {"executors": executors, "kcodec_on_executors": kcodec_on_executors(spark)}
    if args.command == "read":
        kcodec.spark.register(spark)
        table = spark.read.format("kafka-log").options(**options).load(args.paths).toArrow()
        with pa.OSFile(args.out, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        report["rows"] = table.num_rows
    else:
        hook = fault(args.kill, args.split, args.marks) if args.kill else None
        result = convert(spark, args.paths, args.out, parse_options(options), _before_commit=hook)
        report.update(rows=result.rows, files=result.files, tasks=result.tasks)
    spark.stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
