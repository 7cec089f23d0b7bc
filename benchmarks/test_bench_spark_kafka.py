"""Spark's own Kafka source against kafka-log on one topic of the test
broker: benchmarks/spark_kafka_bench.py in a child process, because its
SparkSession needs the connector's jars, which a session already open in
this process (the other Spark tests') cannot take. CI runs it once, small
(--benchmark-disable); the figures in docs/performance.md come from the script itself."""
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kafka_broker import BrokerUnavailable, broker, spark_kafka_jars  # noqa: E402,F401
from needs import unavailable  # noqa: E402

SCRIPT = Path(__file__).with_name("spark_kafka_bench.py")
ROWS = 20_000


def test_bench_spark_kafka_source_vs_kafka_log(benchmark, broker):
    try:
        spark_kafka_jars()
    except BrokerUnavailable as exc:
        unavailable(str(exc))
    command = [sys.executable, str(SCRIPT), "--rows", str(ROWS), "--codec", "zstd",
               "--repeats", "1", "--bootstrap", broker.bootstrap,
               "--log-dirs", str(broker.log_dirs), "--topic", "spark-bench", "--json"]

    def run():
        return subprocess.run(command, capture_output=True, text=True, timeout=600)

    benchmark.group = "spark-kafka"
    done = benchmark.pedantic(run, rounds=1, iterations=1)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["counts"] == {"spark-kafka": ROWS, "kafka-log": ROWS}
    assert result["equal"] is True
    benchmark.extra_info.update(rows_per_s=result["rows_per_s"], ratio=result["ratio"])
