"""spark-convert against its limit, cold and warm, and a task's peak memory
as the log grows (issue 46, points a and e).

    python benchmarks/convert_bench.py warm --gib 1 --work DIR
    python benchmarks/convert_bench.py cold --gib 1 --work DIR
    python benchmarks/convert_bench.py memory --gibs 1,2,4 --work DIR
    python benchmarks/convert_bench.py profile --gib 1 --work DIR

warm: one session; spark-convert (median of --repeats, after a warm-up)
against the limit: every split converted in this process on one core
exactly as a task does (kcodec.spark.bench.convert_in_process), times the
session's cores; the two are interleaved so both see the same machine.

cold: `python -m kcodec.cli spark-convert` in a fresh process, as a user runs
it (median of --repeats), then once more with Spark's event log on, whose
timestamps and task metrics (with the import times of a fresh driver and a
fresh worker, measured apart) say where the time goes.

profile: one cold CLI run under py-spy (pip install py-spy), the samples
of its Python processes (idle ones too) by process (driver, workers) and
by what ran.

memory: spark-convert of logs of each size with a fresh Python worker per
task (spark.python.worker.reuse=false); each worker's VmHWM is polled from
/proc, and ConvertResult.task_peak_memory is shown too where it exists.

Logs are written under --work/logs once and kept (write_bench_log, 100-byte
values, 2 partitions, 128 MiB segments); outputs go to --work/out.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from kcodec.spark.bench import (
    GIB, ParallelLimit, WorkerMemoryPoller, cached_bench_log, convert_in_process, log_bytes_of,
    parquet_digest, rows_for_gib, rows_written,
)

SEGMENT_BYTES = 128 << 20
MIB = 1 << 20
TARGET_TO_LIMIT = 0.8
PROFILE_RATE = 100
DRIVER_IMPORTS = ("import kcodec.cli, pyspark.sql, kcodec.spark.convert, "
                  "kcodec.spark.options, kcodec.spark.session")
# What a Python worker imports before and while running its first
# spark-convert task (the daemon forks it with pyspark.worker loaded).
WORKER_IMPORTS = "import pyspark.daemon, pyspark.worker, kcodec.spark.convert, pyarrow.parquet"


def bench_log(work, gib, rows=None):
    name = f"rows-{rows}" if rows else f"gib-{gib:g}"
    rows = rows or rows_for_gib(gib)
    root = os.path.join(work, "logs", name)
    paths = cached_bench_log(root, rows, segment_bytes=SEGMENT_BYTES)
    return paths, rows_written(rows)


def session(master, **conf):
    from kcodec.spark.session import local_session
    return local_session(master, "kcodec convert bench",
                         **{"spark.ui.enabled": "false", **conf})


def machine_note():
    import pyspark
    load = os.getloadavg()
    # Other work on the machine shows in the load average: quote it with the figures.
    return (f"pyspark {pyspark.__version__}, {os.cpu_count()} CPUs, load average "
            f"{load[0]:.2f}")


# ------------------------------------------------------------------- warm

def local_cores(master):
    inside = master[len("local["):-1] if master.startswith("local[") else ""
    return int(inside) if inside.isdigit() else os.cpu_count()


def event_log_conf(directory):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{directory}",
            "spark.eventLog.rolling.enabled": "false", "spark.eventLog.compress": "false"}


def run_warm(args):
    from kcodec.spark import parse_options
    from kcodec.spark.convert import convert
    paths, rows = bench_log(args.work, args.gib, args.rows)
    options = parse_options({"includeHeaders": "true"})
    limit_out = os.path.join(args.work, "out", "limit")
    convert_out = os.path.join(args.work, "out", "spark-convert")
    event_dir = os.path.join(args.work, "out", "event-log-warm")
    # Forked before the JVM starts: a fork of a process with py4j's threads is not safe.
    parallel = ParallelLimit(local_cores(args.master))
    spark = session(args.master, **event_log_conf(event_dir))
    cores = spark.sparkContext.defaultParallelism
    try:
        convert(spark, paths, convert_out, options, mode="overwrite")   # warm-up
        convert_in_process(paths, options, limit_out)
        limit_s, parallel_s, convert_s = [], [], []
        for repeat in range(args.repeats):
            limit_rows, seconds = convert_in_process(paths, options, limit_out)
            limit_s.append(seconds)
            parallel_rows, seconds = parallel.run(paths, options, limit_out + "-parallel")
            parallel_s.append(seconds)
            started = time.time()
            result = convert(spark, paths, convert_out, options, mode="overwrite")
            convert_s.append(result.elapsed)
            print(f"  repeat {repeat + 1}: limit (one core) {limit_s[-1]:.2f} s, "
                  f"{parallel.processes} processes at once {parallel_s[-1]:.2f} s, "
                  f"spark-convert {result.elapsed:.2f} s", flush=True)
        digests = {"limit": parquet_digest(spark, limit_out),
                   "spark-convert": parquet_digest(spark, convert_out)}
    finally:
        spark.stop()
        parallel.close()
    events, tasks, jobs = event_log_phases(event_dir)
    [(submitted, ended)] = [job for job in jobs
                            if started <= job[0] <= started + result.elapsed]
    last = [t for t in tasks if submitted <= t["launch"] <= ended]
    breakdown = [
        ("plan and output prepared (convert called to job submitted)", submitted - started),
        ("scheduling (job submitted to first task launched)",
         min(t["launch"] for t in last) - submitted),
        ("tasks (first launch to last finish)",
         max(t["finish"] for t in last) - min(t["launch"] for t in last)),
        ("last task finished to job end", ended - max(t["finish"] for t in last)),
        ("commit, _SUCCESS, cleanup (job end to convert returned)",
         started + result.elapsed - ended),
    ]
    equal = (digests["limit"] == digests["spark-convert"] and digests["limit"][0] == rows
             and limit_rows == parallel_rows == rows == result.rows)
    one_core = rows / statistics.median(limit_s)
    converted = rows / statistics.median(convert_s)
    parallel_rate = rows / statistics.median(parallel_s)
    return {"what": "warm", "rows": rows, "log_bytes": log_bytes_of(paths), "cores": cores,
            "master": args.master, "tasks": result.tasks, "limit_s": limit_s,
            "parallel_s": parallel_s, "convert_s": convert_s,
            "limit_one_core_rows_per_s": one_core,
            "limit_rows_per_s": one_core * cores, "parallel_rows_per_s": parallel_rate,
            "convert_rows_per_s": converted,
            "ratio": converted / (one_core * cores), "ratio_to_parallel": converted / parallel_rate,
            "target": TARGET_TO_LIMIT, "equal": equal, "digest": list(digests["limit"]),
            "last_run": breakdown, "last_run_s": result.elapsed, "last_tasks": last,
            "limit_last_s": limit_s[-1]}


def report_warm(r):
    tasks = r["last_tasks"]
    busy = sum(t["finish"] - t["launch"] for t in tasks)
    lines = [
        f"{r['rows']:,} rows, {r['log_bytes'] / GIB:.2f} GiB of log, {r['tasks']} tasks, "
        f"{r['master']} ({r['cores']} cores), medians of {len(r['convert_s'])}",
        "",
        "| operation | median s | rows/s |", "|---|---:|---:|",
        f"| limit, one core (in process) | {statistics.median(r['limit_s']):.2f} | "
        f"{r['limit_one_core_rows_per_s']:,.0f} |",
        f"| limit x {r['cores']} cores | | {r['limit_rows_per_s']:,.0f} |",
        f"| limit, {r['cores']} processes at once (measured) | "
        f"{statistics.median(r['parallel_s']):.2f} | {r['parallel_rows_per_s']:,.0f} |",
        f"| spark-convert (warm session) | {statistics.median(r['convert_s']):.2f} | "
        f"{r['convert_rows_per_s']:,.0f} |",
        "",
        f"spark-convert / limit: {r['ratio']:.2f}x (target >= {r['target']}x: "
        f"{'met' if r['ratio'] >= r['target'] else 'not met'}); against {r['cores']} processes "
        f"measured at once: {r['ratio_to_parallel']:.2f}x; same rows: {r['equal']}",
        "",
        f"The last spark-convert ({r['last_run_s']:.2f} s), from Spark's event log:",
        "",
        "| phase | s |", "|---|---:|",
    ]
    lines += [f"| {name} | {seconds:.2f} |" for name, seconds in r["last_run"]]
    lines += [
        "",
        f"Its {len(tasks)} tasks kept the slots busy {busy:.2f} s in all (executor run time "
        f"{sum(t['run'] for t in tasks):.2f} s), against {r['limit_last_s']:.2f} s for the "
        f"same splits on one core in process just before.",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------- cold

def cli_command(paths, out, master, extra=()):
    return [sys.executable, "-m", "kcodec.cli", "spark-convert", *paths, "--out", out,
            "--master", master, "--mode", "overwrite", *extra]


def timed_process(command, **kwargs):
    started = time.perf_counter()
    launched = time.time()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"{command[:4]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed, launched, done


def import_seconds(statement, repeats):
    """Median wall time of a fresh interpreter running `statement`, less
    that of a bare one: what the imports cost."""
    def once(code):
        return timed_process([sys.executable, "-c", code])[0]
    bare = statistics.median(once("pass") for _ in range(repeats))
    return statistics.median(once(statement) for _ in range(repeats)) - bare, bare


def event_log_phases(directory):
    """Timestamps (s since the epoch), task metrics and (submitted, ended)
    of each job from the one event log in `directory`."""
    [name] = os.listdir(directory)
    path = os.path.join(directory, name)
    # Spark 4 writes a directory of rolled files unless rolling is off.
    files = ([os.path.join(path, n) for n in sorted(os.listdir(path)) if n.startswith("events")]
             if os.path.isdir(path) else [path])
    events, submitted, ended = {}, {}, {}
    tasks = []
    for file in files:
        with open(file) as f:
            lines = f.readlines()
        for line in lines:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerApplicationStart":
                events["app_start"] = event["Timestamp"] / 1e3
            elif kind == "SparkListenerApplicationEnd":
                events["app_end"] = event["Timestamp"] / 1e3
            elif kind == "SparkListenerJobStart":
                events.setdefault("job_submit", event["Submission Time"] / 1e3)
                submitted[event["Job ID"]] = event["Submission Time"] / 1e3
            elif kind == "SparkListenerJobEnd":
                events["job_end"] = event["Completion Time"] / 1e3
                ended[event["Job ID"]] = event["Completion Time"] / 1e3
            elif kind == "SparkListenerTaskEnd":
                info, metrics = event["Task Info"], event["Task Metrics"]
                tasks.append({"launch": info["Launch Time"] / 1e3,
                              "finish": info["Finish Time"] / 1e3,
                              "deserialize": metrics["Executor Deserialize Time"] / 1e3,
                              "run": metrics["Executor Run Time"] / 1e3,
                              "result_serialize": metrics["Result Serialization Time"] / 1e3,
                              "gc": metrics["JVM GC Time"] / 1e3})
    jobs = [(submitted[job], ended[job]) for job in sorted(submitted) if job in ended]
    return events, sorted(tasks, key=lambda t: t["launch"]), jobs


def run_cold(args):
    paths, rows = bench_log(args.work, args.gib, args.rows)
    out = os.path.join(args.work, "out", "spark-convert-cold")
    from kcodec.spark import parse_options
    # The limit of each split, to tell a task's own work from its overhead.
    limit_rows, limit_s = convert_in_process(paths, parse_options({"includeHeaders": "true"}),
                                             os.path.join(args.work, "out", "limit"))
    cold_s = []
    for repeat in range(args.repeats):
        seconds, _, done = timed_process(cli_command(paths, out, args.master))
        cold_s.append(seconds)
        print(f"  cold run {repeat + 1}: {seconds:.2f} s; {done.stdout.strip()}", flush=True)
    driver_imports, bare = import_seconds(DRIVER_IMPORTS, args.repeats)
    worker_imports, _ = import_seconds(WORKER_IMPORTS, args.repeats)
    event_dir = os.path.join(args.work, "out", "event-log")
    conf = [part for key, value in event_log_conf(event_dir).items()
            for part in ("--conf", f"{key}={value}")]
    profiled_s, launched, done = timed_process(cli_command(paths, out, args.master, conf))
    exited = launched + profiled_s
    events, tasks, _ = event_log_phases(event_dir)
    cores = local_cores(args.master)
    task_busy = sum(t["finish"] - t["launch"] for t in tasks)
    first_launch, last_finish = tasks[0]["launch"], max(t["finish"] for t in tasks)
    phases = [
        ("Python start and driver imports (measured apart)", bare + driver_imports),
        ("JVM and SparkContext start (the rest up to the application's start)",
         events["app_start"] - launched - bare - driver_imports),
        ("session, plan, output prepared (application start to job submitted)",
         events["job_submit"] - events["app_start"]),
        ("scheduling (job submitted to first task launched)",
         first_launch - events["job_submit"]),
        ("tasks (first launch to last finish)", last_finish - first_launch),
        ("last task finished to job end",
         events["job_end"] - last_finish),
        ("job end to application end (manifest, _SUCCESS, spark.stop)",
         events["app_end"] - events["job_end"]),
        ("application end to process exit (JVM shutdown, exit)", exited - events["app_end"]),
    ]
    # Within the tasks: what the splits cost on one core in process, against
    # what the task slots were busy for.
    task_overhead = task_busy - limit_s
    return {"what": "cold", "rows": rows, "log_bytes": log_bytes_of(paths),
            "master": args.master, "cores": cores, "cold_s": cold_s,
            "cold_rows_per_s": rows / statistics.median(cold_s),
            "profiled_s": profiled_s, "phases": phases, "tasks": tasks,
            "task_busy_s": task_busy, "limit_one_core_s": limit_s,
            "limit_rows_per_s": cores * rows / limit_s,
            "task_overhead_s": task_overhead, "worker_imports_s": worker_imports,
            "driver_imports_s": driver_imports, "python_start_s": bare,
            "summary": done.stdout.strip(), "equal": limit_rows == rows}


def report_cold(r):
    lines = [
        f"{r['rows']:,} rows, {r['log_bytes'] / GIB:.2f} GiB of log, {r['master']}; "
        f"`python -m kcodec.cli spark-convert` in a fresh process, page cache warm",
        "",
        "| figure | s | rows/s |", "|---|---:|---:|",
        f"| cold run, median of {len(r['cold_s'])} | {statistics.median(r['cold_s']):.2f} | "
        f"{r['cold_rows_per_s']:,.0f} |",
        f"| limit x {r['cores']} cores (in process) | {r['limit_one_core_s'] / r['cores']:.2f} | "
        f"{r['limit_rows_per_s']:,.0f} |",
        "",
        f"cold / limit: {r['cold_rows_per_s'] / r['limit_rows_per_s']:.3f}x",
        "",
        f"Where the time of one cold run with the event log on ({r['profiled_s']:.2f} s) goes:",
        "",
        "| phase | s | share |", "|---|---:|---:|",
    ]
    lines += [f"| {name} | {seconds:.2f} | {seconds / r['profiled_s']:.0%} |"
              for name, seconds in r["phases"]]
    tasks = r["tasks"]
    lines += [
        "",
        f"Tasks: {len(tasks)}; task slots busy {r['task_busy_s']:.2f} s in all, against "
        f"{r['limit_one_core_s']:.2f} s for the same splits on one core in process: "
        f"{r['task_overhead_s']:.2f} s of overhead in the tasks "
        f"(a fresh worker's imports: {r['worker_imports_s']:.2f} s each, measured apart; "
        f"deserialization {sum(t['deserialize'] for t in tasks):.2f} s, "
        f"JVM GC {sum(t['gc'] for t in tasks):.2f} s in all).",
        "",
        "| task | launched at s | duration s | run s |", "|---:|---:|---:|---:|",
    ]
    start = tasks[0]["launch"]
    lines += [f"| {n} | {t['launch'] - start:.2f} | {t['finish'] - t['launch']:.2f} | "
              f"{t['run']:.2f} |" for n, t in enumerate(tasks)]
    return "\n".join(lines)


# ----------------------------------------------------------------- memory

def run_memory(args):
    from kcodec.spark import parse_options
    from kcodec.spark.convert import convert
    options = parse_options({"includeHeaders": "true"})
    out = os.path.join(args.work, "out", "spark-convert-memory")
    spark = session(args.master, **{"spark.python.worker.reuse": "false"})
    sizes = []
    try:
        for gib in args.gibs:
            paths, rows = bench_log(args.work, gib)
            with WorkerMemoryPoller() as poller:
                result = convert(spark, paths, out, options, mode="overwrite")
            digest = parquet_digest(spark, out)
            sizes.append({"gib": gib, "rows": rows, "log_bytes": log_bytes_of(paths),
                          "tasks": result.tasks, "workers_seen": poller.workers,
                          "polled_peak": poller.peak,
                          "task_peak_memory": getattr(result, "task_peak_memory", None),
                          "seconds": result.elapsed, "output_rows": digest[0],
                          "equal": digest[0] == rows == result.rows})
            print(f"  {gib} GiB: {result.summary()}", flush=True)
    finally:
        spark.stop()
    peaks = [s["polled_peak"] for s in sizes]
    return {"what": "memory", "master": args.master, "sizes": sizes,
            "growth": max(peaks) / min(peaks) if min(peaks) else None}


def report_memory(r):
    lines = ["| log GiB | rows | tasks | workers seen | peak VmHWM of a task, MiB (polled) | "
             "ConvertResult.task_peak_memory, MiB | s | same rows |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in r["sizes"]:
        own = s["task_peak_memory"]
        lines.append(f"| {s['log_bytes'] / GIB:.2f} | {s['rows']:,} | {s['tasks']} | "
                     f"{s['workers_seen']} | {s['polled_peak'] / MIB:.0f} | "
                     f"{'-' if own is None else f'{own / MIB:.0f}'} | {s['seconds']:.1f} | "
                     f"{s['equal']} |")
    lines += ["", f"largest / smallest peak: {r['growth']:.2f}x (flat: about 1.0x)"]
    return "\n".join(lines)


# ---------------------------------------------------------------- profile

# What a sample was doing: the first phase one of whose functions is on its
# stack (py-spy's frames are "function (file:line)"), else "other".
DRIVER_PHASES = [
    ("session start (JVM, SparkContext, SparkSession)", {"getOrCreate", "setLogLevel"}),
    ("plan", {"plan"}),
    ("output prepared", {"_prepare"}),
    ("job: parallelize, run, collect", {"parallelize", "collect"}),
    ("commit", {"_commit_job"}),
    ("spark.stop", {"stop"}),
    ("imports", {"_find_and_load"}),
]
WORKER_PHASES = [
    ("imports", {"_find_and_load"}),
    ("Parquet write", {"write_table", "close"}),
    ("to_spark_arrow", {"to_spark_arrow"}),
    ("decode (read_split)", {"read_split"}),
    ("rest of the task", {"_convert", "_write"}),
    ("worker waiting for its task", {"read_int"}),
    ("daemon waiting for tasks (idle)", {"manager"}),
]
MAIN_THREAD = "_run_module_as_main"
WORKER_MODULE = "pyspark.daemon"
PROCESS_FRAME = "process "


def sample_category(functions, phases):
    for name, marks in phases:
        if marks & functions:
            return name
    return "other"


def sample_key(stack):
    """(process, what) of one sample; None for the driver's other threads.
    With --subprocesses each process's frame nests in its parent's."""
    frames = stack.split(";")
    process = [f for f in frames if f.startswith(PROCESS_FRAME)][-1]
    # "Class.method (file:line)": the method's own name
    functions = {f.split(" (", 1)[0].rsplit(".", 1)[-1] for f in frames
                 if not f.startswith(PROCESS_FRAME)}
    if WORKER_MODULE in process:
        return "Python daemon and workers", sample_category(functions, WORKER_PHASES)
    if MAIN_THREAD not in functions:
        return None
    return "driver (main thread)", sample_category(functions, DRIVER_PHASES)


def run_profile(args):
    """One cold CLI run under py-spy (every Python process it starts, the
    workers included; idle samples too, so that the driver's waits on the
    JVM show), its samples sorted by process and by what ran."""
    paths, rows = bench_log(args.work, args.gib, args.rows)
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    raw = os.path.join(args.work, "out", "py-spy.txt")
    out = os.path.join(args.work, "out", "spark-convert-profiled")
    command = [py_spy, "record", "--subprocesses", "--idle", "--format", "raw", "--rate",
               str(PROFILE_RATE), "--output", raw, "--",
               *cli_command(paths, out, args.master)]
    seconds, _, done = timed_process(command)
    return {"what": "profile", "rows": rows, "master": args.master, "seconds": seconds,
            "rate": PROFILE_RATE, "samples": profile_samples(raw),
            "summary": done.stdout.strip().splitlines()[-1]}


def profile_samples(raw):
    """[process, what, samples] of a py-spy raw file."""
    samples = {}
    with open(raw) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            key = sample_key(stack)
            if key is not None:
                samples[key] = samples.get(key, 0) + int(count)
    return [[*key, n] for key, n in sorted(samples.items())]


def report_profile(r):
    lines = [f"py-spy --idle, {r['rate']} samples/s of each Python process, one cold "
             f"`python -m kcodec.cli spark-convert` of {r['rows']:,} rows, {r['master']}, "
             f"{r['seconds']:.2f} s under py-spy. Driver: its main thread (wall time, waits "
             f"on the JVM included); workers: every forked worker and its threads, idle "
             f"included, summed.",
             "", "| process | what | s | share of the process's samples |",
             "|---|---|---:|---:|"]
    totals = {}
    for kind, _, n in r["samples"]:
        totals[kind] = totals.get(kind, 0) + n
    lines += [f"| {kind} | {what} | {n / r['rate']:.2f} | {n / totals[kind]:.0%} |"
              for kind, what, n in r["samples"]]
    return "\n".join(lines)


RUNS = {"warm": (run_warm, report_warm), "cold": (run_cold, report_cold),
        "memory": (run_memory, report_memory), "profile": (run_profile, report_profile)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=sorted(RUNS))
    parser.add_argument("--gib", type=float, default=1.0, help="log size (warm, cold)")
    parser.add_argument("--rows", type=int, help="log size in rows instead of --gib")
    parser.add_argument("--gibs", default="1,2,4", help="log sizes (memory)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", required=True, help="logs are kept here between runs")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    args.gibs = [float(g) for g in args.gibs.split(",")]
    os.makedirs(args.work, exist_ok=True)
    measure, report = RUNS[args.what]
    print(machine_note(), flush=True)
    result = measure(args)
    result["machine"] = machine_note()
    print(report(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    ok = result.get("equal", True) and all(s["equal"] for s in result.get("sizes", []))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
