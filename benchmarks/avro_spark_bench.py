"""Spark's own ``from_avro`` (the spark-avro jar from Maven Central) against
kcodec's ``decode_values`` on the same Confluent-framed Avro values, rows/s
per core (issue 48; goal: at least 1x).

    python benchmarks/avro_spark_bench.py [--rows 300000] [--repeats 5] [--master local[1]]

The values: the typed-values workload's "order" records (benchmarks/
value_workloads.py: 12 fields, strings, longs, an int, a double, a boolean,
an enum, a timestamp-millis, a nested record, an array, a nullable union),
written by fastavro and framed in the Confluent wire format, in one cached
DataFrame of a binary ``value`` column. Both sides read that cache:

- ``from_avro(expr("substring(value, 6)"), schema)``: the 5-byte header
  stripped by hand, as Spark's users do (from_avro does not read it);
- ``kcodec.spark.decode_values(df, schemas={id: schema})``: the frames read
  as they are (mapInArrow, Python workers, the compiled core).

Each query is written to Spark's ``noop`` sink, which consumes every row's
every field: both sides decode all fields. Untimed first, both results are
checked to be the same rows (same Spark type; ``exceptAll`` both ways). The
repeats interleave the two sides; the figures are medians. With ``local[1]``
(the default) one core does the work, so rows/s is rows/s per core (another
--master divides by its core count).

The spark-avro jar: $KCODEC_SPARK_AVRO_JAR, else resolved with Maven into
its local repository (offline first, as ci/kafka-broker.sh resolves the
Kafka connector's jars) and its path cached in
~/.cache/kcodec/kafka/spark-avro.classpath.

Results go to benchmarks/results/spark/<git short sha>-avro-from_avro.{json,md}.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

SPARK_AVRO = "org.apache.spark:spark-avro_2.13:{version}"
CACHE = Path(os.environ.get("KCODEC_KAFKA_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "kcodec" / "kafka")
RESULTS = HERE / "results" / "spark"


def spark_avro_jar(version):
    """The spark-avro jar of this pyspark version (see the module's doc)."""
    given = os.environ.get("KCODEC_SPARK_AVRO_JAR")
    if given:
        if not os.path.exists(given):
            raise SystemExit(f"KCODEC_SPARK_AVRO_JAR={given} does not exist")
        return given
    cached = CACHE / f"spark-avro-{version}.classpath"
    if cached.exists() and os.path.exists(cached.read_text().strip()):
        return cached.read_text().strip()
    artifact = SPARK_AVRO.format(version=version)
    repository = Path.home() / ".m2" / "repository"
    jar = (repository / "org" / "apache" / "spark" / "spark-avro_2.13" / version
           / f"spark-avro_2.13-{version}.jar")
    if not jar.exists():
        command = ["mvn", "-B", "-q", "dependency:get", f"-Dartifact={artifact}",
                   "-Dtransitive=false"]
        # offline first: quick when Maven's repository already holds it
        for extra in (["-o"], []):
            done = subprocess.run(command + extra, capture_output=True, text=True)
            if done.returncode == 0 and jar.exists():
                break
        else:
            raise SystemExit(f"could not resolve {artifact} with Maven:\n"
                             f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(str(jar) + "\n")
    return str(jar)


def session(master, jar):
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("kcodec avro vs from_avro")
             .config("spark.jars", jar)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "4g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cores(master):
    match = re.fullmatch(r"local\[(\d+)(,\d+)?\]", master)
    if match:
        return int(match.group(1))
    return os.cpu_count() if master in ("local[*]",) else 1


def _stat(pid):
    """(ppid, CPU seconds of it and its waited-for children) from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), sum(int(v) for v in fields[11:15]) / ticks


def tree_cpu_seconds(root):
    """CPU seconds used so far by process `root` (Spark's JVM) and every
    process under it (the Python workers), from /proc; None elsewhere."""
    if not os.path.isdir("/proc"):
        return None
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stats[int(name)] = _stat(name)
            except (OSError, IndexError, ValueError):
                continue
    children = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
            todo += children.get(pid, [])
    return total


def git_sha():
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--master", default="local[1]")
    parser.add_argument("--partitions", type=int, default=None,
                        help="partitions of the cached DataFrame (default: 2 per core)")
    parser.add_argument("--out", default=str(RESULTS), help="the results directory")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    import pyarrow as pa
    import pyspark
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    import kcodec
    from kcodec.spark import decode_values
    from value_workloads import SCHEMA_TEXT, get_workload

    jar = spark_avro_jar(pyspark.__version__)
    started = time.perf_counter()
    workload = get_workload(args.rows)
    print(f"{args.rows} framed Avro values made in {time.perf_counter() - started:.1f} s "
          f"({sum(map(len, workload.values)) / args.rows:.0f} bytes each)", flush=True)

    spark = session(args.master, jar)
    n_cores = cores(args.master)
    partitions = args.partitions or 2 * n_cores
    df = spark.createDataFrame(pa.table({"value": workload.column})).repartition(partitions)
    df = df.cache()
    assert df.count() == args.rows
    schemas = {workload.schema_id: SCHEMA_TEXT}

    def spark_from_avro():
        return df.select(from_avro(F.expr("substring(value, 6)"), SCHEMA_TEXT).alias("value"))

    def kcodec_decode_values():
        return decode_values(df, schemas=schemas)

    # Untimed: both give the same rows, of the same Spark type.
    ours, theirs = kcodec_decode_values().select("value"), spark_from_avro()
    if ours.schema != theirs.schema:
        raise SystemExit(f"the types differ:\n kcodec    {ours.schema.simpleString()}\n "
                         f"from_avro {theirs.schema.simpleString()}")
    if ours.exceptAll(theirs).limit(1).count() or theirs.exceptAll(ours).limit(1).count():
        raise SystemExit("kcodec and from_avro decode different rows")
    print(f"checked: same type and rows ({args.rows} rows, exceptAll both ways)", flush=True)

    sides = {"spark from_avro": spark_from_avro, "kcodec decode_values": kcodec_decode_values}
    times = {name: [] for name in sides}
    cpu = {name: [] for name in sides}
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()

    def run(make):
        cpu_before, started = tree_cpu_seconds(jvm), time.perf_counter()
        make().write.format("noop").mode("overwrite").save()
        elapsed, cpu_after = time.perf_counter() - started, tree_cpu_seconds(jvm)
        return elapsed, None if cpu_before is None else cpu_after - cpu_before

    for make in sides.values():                     # warm: JIT, Python workers
        run(make)
    for _ in range(args.repeats):
        for name, make in sides.items():
            elapsed, used = run(make)
            times[name].append(elapsed)
            cpu[name].append(used)
    medians = {name: statistics.median(t) for name, t in times.items()}
    per_core = {name: args.rows / m / n_cores for name, m in medians.items()}
    ratio = per_core["kcodec decode_values"] / per_core["spark from_avro"]
    per_cpu = cpu_ratio = None
    if all(v is not None for t in cpu.values() for v in t):
        per_cpu = {name: args.rows / statistics.median(t) for name, t in cpu.items()}
        cpu_ratio = per_cpu["kcodec decode_values"] / per_cpu["spark from_avro"]
    spark.stop()

    command = "python benchmarks/avro_spark_bench.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    result = {
        "benchmark": "avro-from_avro",
        "issue": 48,
        "git": git_sha(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command.strip(),
        "rows": args.rows,
        "repeats": args.repeats,
        "master": args.master,
        "cores": n_cores,
        "partitions": partitions,
        "value_bytes_mean": sum(map(len, workload.values)) / args.rows,
        "schema_fields": len(json.loads(SCHEMA_TEXT)["fields"]),
        "seconds": times,
        "median_seconds": medians,
        "rows_per_s_per_core": per_core,
        "ratio_kcodec_over_from_avro": ratio,
        "cpu_seconds": cpu,
        "rows_per_cpu_second": per_cpu,
        "ratio_per_cpu_second": cpu_ratio,
        "load_average": ([round(x, 2) for x in os.getloadavg()]
                         if hasattr(os, "getloadavg") else None),
        "versions": {"pyspark": pyspark.__version__, "kcodec": kcodec.__version__,
                     "pyarrow": pa.__version__, "python": platform.python_version(),
                     "spark_avro_jar": os.path.basename(jar)},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
    }
    for name in sides:
        print(f"{name:22s} median {medians[name]:7.3f} s   "
              f"{per_core[name]:>12,.0f} rows/s per core")
    print(f"ratio (kcodec / from_avro, rows/s per core): {ratio:.2f}x")
    if per_cpu is not None:
        for name in sides:
            print(f"{name:22s} {per_cpu[name]:>12,.0f} rows per CPU-second (JVM + Python workers)")
        print(f"ratio (kcodec / from_avro, rows per CPU-second): {cpu_ratio:.2f}x")
    if not args.no_write:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / f"{result['git']}-avro-from_avro"
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        stem.with_suffix(".md").write_text(markdown(result))
        print(f"wrote {stem}.json and {stem}.md")
    return result


def markdown(result):
    per_cpu = result["rows_per_cpu_second"] or {}
    rows = "\n".join(
        f"| {name} | {result['median_seconds'][name]:.3f} | "
        f"{result['rows_per_s_per_core'][name]:,.0f} | "
        + (f"{per_cpu[name]:,.0f} |" if name in per_cpu else "- |")
        for name in result["median_seconds"])
    cpu_line = ("" if result["ratio_per_cpu_second"] is None else
                f"; per CPU-second (the JVM and its Python workers, from /proc): "
                f"**{result['ratio_per_cpu_second']:.2f}x**")
    return f"""# Avro values on Spark: kcodec decode_values vs Spark's from_avro

{result['rows']:,} Confluent-framed Avro values of a {result['schema_fields']}-field record
(benchmarks/value_workloads.py; {result['value_bytes_mean']:.0f} bytes each), one cached
DataFrame, each query written to the noop sink; master `{result['master']}`
({result['cores']} core(s), {result['partitions']} partitions), median of {result['repeats']}
interleaved runs after a warm-up. from_avro reads `substring(value, 6)` (the header
stripped); decode_values reads the frames.

| side | median s | rows/s per core | rows per CPU-second |
|---|---:|---:|---:|
{rows}

Ratio (kcodec / from_avro), rows/s per core:
**{result['ratio_kcodec_over_from_avro']:.2f}x**{cpu_line}. With `local[1]` one task
runs at a time, but kcodec's Python worker is a process of its own beside the JVM's task
thread, so the CPU-second figures count both. Load average (1, 5, 15 min) at the end:
{result['load_average']}.

Command: `{result['command']}` (git {result['git']}, {result['date']};
pyspark {result['versions']['pyspark']}, {result['versions']['spark_avro_jar']}).
"""


if __name__ == "__main__":
    main()
