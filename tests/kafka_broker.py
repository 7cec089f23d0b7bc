"""A real single-node Apache Kafka broker (KRaft, broker and controller in one
JVM) for the conformance tests: `from kafka_broker import broker`.

The jars come from ci/kafka-broker.sh (Maven; KCODEC_KAFKA_CLASSPATH, or the
classpath file that script caches). The broker listens on free ports of
127.0.0.1, keeps its partitions in a temporary `log.dirs` of its own and its
metadata log apart from them, and is stopped with SIGTERM (a controlled
shutdown) at the end of the session. Without Java or the jars the tests
skip, and fail when CI is set.

`python tests/kafka_broker.py` runs one in the foreground, for a look by hand."""
import base64
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from needs import unavailable

CACHE = Path(os.environ.get("KCODEC_KAFKA_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "kcodec" / "kafka")
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
# Kafka 4's floor for segment.bytes is 1 MiB; internal.segment.bytes (a topic
# config meant for tests) rolls segments sooner, so a few hundred records
# already span several segments, indexes and all.
SMALL_SEGMENT_BYTES = 64 * 1024
# Producers' batches must fit a segment: no batch above this.
PRODUCER_BATCH_BYTES = 16 * 1024
HEAP = "-Xmx768m"


class BrokerUnavailable(Exception):
    """Java or the broker's jars are missing."""


def broker_classpath():
    classpath = os.environ.get("KCODEC_KAFKA_CLASSPATH")
    if not classpath and (CACHE / "broker.classpath").exists():
        classpath = (CACHE / "broker.classpath").read_text().strip()
    if not classpath:
        raise BrokerUnavailable("no broker classpath: run `bash ci/kafka-broker.sh` "
                                "(or set KCODEC_KAFKA_CLASSPATH)")
    missing = [jar for jar in classpath.split(os.pathsep) if not os.path.exists(jar)]
    if missing:
        raise BrokerUnavailable(f"{len(missing)} broker jars missing, e.g. {missing[0]}: "
                                "run `bash ci/kafka-broker.sh`")
    return classpath


def spark_kafka_jars():
    """Spark's Kafka source and what it needs beside pyspark, comma-separated."""
    jars = os.environ.get("KCODEC_SPARK_KAFKA_JARS")
    if not jars and (CACHE / "spark-kafka.classpath").exists():
        jars = (CACHE / "spark-kafka.classpath").read_text().strip().replace(os.pathsep, ",")
    if not jars or not all(os.path.exists(j) for j in jars.split(",")):
        raise BrokerUnavailable("Spark's Kafka source jars are missing: run "
                                "`bash ci/kafka-broker.sh` (or set KCODEC_SPARK_KAFKA_JARS)")
    return jars


def java_executable():
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise BrokerUnavailable("java is not installed")
    return java


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cluster_id():
    """A Kafka Uuid as the storage formatter takes it: URL-safe base64, no
    padding (it may begin with "-": pass it as --cluster-id=ID)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker:
    def __init__(self, workdir, classpath=None, java=None):
        self.workdir = Path(workdir)
        self.classpath = classpath or broker_classpath()
        self.java_bin = java or java_executable()
        self.log_dirs = self.workdir / "data"
        self.metadata_dir = self.workdir / "metadata"
        self.broker_log = self.workdir / "broker.log"
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.process = None

    @classmethod
    def attach(cls, bootstrap, log_dirs):
        """A broker running elsewhere (its address and log.dirs), for the helpers."""
        broker = cls.__new__(cls)
        broker.bootstrap, broker.log_dirs, broker.process = bootstrap, Path(log_dirs), None
        return broker

    def server_properties(self):
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dirs),
            "metadata.log.dir": str(self.metadata_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # the cleaner looks for dirty logs every half second
            "log.cleaner.backoff.ms": "500",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(16 << 20),
            # the records carry timestamps of 2023: no segment expires by time
            "log.retention.ms": "-1",
            "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "1000",
            "log.flush.offset.checkpoint.interval.ms": "1000",
            # a transaction left open by a failed test does not hold
            # read_committed back for the default fifteen minutes
            "transaction.max.timeout.ms": "60000",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
        }

    def java_command(self, main, *args, heap=HEAP):
        # UTF-8 whatever the locale: the tools print payloads as text
        return [self.java_bin, heap, "-XX:+UseG1GC", "-Djava.awt.headless=true",
                "-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8", "-Dstderr.encoding=UTF-8",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
                "-cp", self.classpath, main, *map(str, args)]

    def run_tool(self, main, *args, timeout=120):
        """Run a main class of the broker's jars (a Kafka tool) to completion."""
        command = self.java_command(main, *args, heap="-Xmx256m")
        return subprocess.run(command, capture_output=True, text=True, encoding="utf-8",
                              timeout=timeout, env=self._env(), check=False)

    def _env(self):
        env = dict(os.environ)
        env.pop("CLASSPATH", None)
        env.pop("JAVA_TOOL_OPTIONS", None)
        return env

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        formatted = self.run_tool("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id()}",
                                  "-c", config)
        if formatted.returncode != 0:
            raise RuntimeError(f"formatting the broker's storage failed:\n{formatted.stdout}"
                               f"{formatted.stderr}")
        with open(self.broker_log, "wb") as log:
            self.process = subprocess.Popen(self.java_command("kafka.Kafka", config),
                                            stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self._env(),
                                            start_new_session=True,
                                            preexec_fn=_terminate_with_parent)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self):
        admin = self.admin()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the broker exited with {self.process.returncode}:\n"
                                   + self.log_tail())
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception:           # not listening yet
                pass
            time.sleep(0.25)
        raise RuntimeError(f"the broker did not answer within {START_TIMEOUT:.0f} s:\n"
                           + self.log_tail())

    def log_tail(self, lines=40):
        if not self.broker_log.exists():
            return ""
        return "\n".join(self.broker_log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self):
        """SIGTERM (the broker's controlled shutdown); killed if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)

    # ------------------------------------------------------------ helpers
    def admin(self):
        from confluent_kafka.admin import AdminClient
        # log_level 0: no "connection refused" lines while the broker starts
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    def create_topic(self, name, partitions=1, **config):
        """Create a topic (config keys with dots given as underscores or as a
        dict) and wait until its partitions have a leader."""
        from confluent_kafka.admin import NewTopic
        settings = {"internal.segment.bytes": str(SMALL_SEGMENT_BYTES)}
        settings.update({k.replace("_", "."): str(v) for k, v in config.items()})
        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=settings)],
            request_timeout=30)
        futures[name].result(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            if topic and topic.error is None and len(topic.partitions) == partitions and all(
                    p.leader == 1 for p in topic.partitions.values()):
                return name
            time.sleep(0.1)
        raise RuntimeError(f"topic {name} has no leader after 30 s")

    def partition_dir(self, topic, partition=0):
        return self.log_dirs / f"{topic}-{partition}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- clients
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_TIMESTAMP = 1_700_000_000_000
CLIENT_TIMEOUT = 60.0
CONFLUENT_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}
KAFKA_PYTHON_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def record_spec(i, seed=0, kafka_python=False):
    """(key, value, headers, timestamp) of the i-th test record: null keys and
    values now and then, repeated and valueless headers, timestamps that step
    back every few records (the time index keeps only the growing ones).
    kafka-python sends neither a record with no key and no value nor a
    header without a value."""
    rng = random.Random(seed * 1_000_003 + i)
    key = None if i % 7 == 0 and not (kafka_python and i % 11 == 5) else f"key-{i % 50}".encode()
    value = None if i % 11 == 5 else (f"value {i} " * rng.randint(1, 25)).encode() + \
        rng.randbytes(rng.randint(40, 200))
    headers = []
    if i % 3 == 0:
        headers = [("trace", str(i).encode()), ("dup", b"1"), ("dup", b"")]
    elif i % 3 == 1 and not kafka_python:
        headers = [("empty", None)]
    timestamp = BASE_TIMESTAMP + i * 10 - (i % 4) * 25
    return key, value, headers, timestamp


def confluent_producer(broker, **config):
    from confluent_kafka import Producer
    settings = {"bootstrap.servers": broker.bootstrap, "batch.size": PRODUCER_BATCH_BYTES,
                "linger.ms": 10, "log_level": 0}
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    return Producer(settings)


def kafka_python_producer(broker, **config):
    from kafka import KafkaProducer
    settings = dict(bootstrap_servers=broker.bootstrap, batch_size=PRODUCER_BATCH_BYTES,
                    linger_ms=10, request_timeout_ms=30_000)
    settings.update(config)
    return KafkaProducer(**settings)


class Delivery:
    """Delivery callbacks of a confluent-kafka producer; errors fail the test."""

    def __init__(self):
        self.errors = []

    def __call__(self, error, message):
        if error is not None:
            self.errors.append(error)

    def check(self, producer):
        left = producer.flush(CLIENT_TIMEOUT)
        assert left == 0, f"{left} messages not delivered"
        assert not self.errors, self.errors[:3]


def produce_confluent(producer, topic, specs, delivery):
    for key, value, headers, timestamp in specs:
        producer.produce(topic, value=value, key=key, headers=headers or None,
                         timestamp=timestamp, partition=0, on_delivery=delivery)
        producer.poll(0)


def produce_kafka_python(producer, topic, specs):
    futures = [producer.send(topic, value=value, key=key, headers=headers or None,
                             timestamp_ms=timestamp, partition=0)
               for key, value, headers, timestamp in specs]
    producer.flush(CLIENT_TIMEOUT)
    for future in futures:
        future.get(CLIENT_TIMEOUT)


def confluent_rows(broker, topic, isolation, partition=0):
    """(offset, timestamp, timestamp type, key, value, headers) of every
    record a confluent-kafka consumer with this isolation level reads."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kcodec-conformance",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, "log_level": 0})
    rows = []
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return rows
                    raise RuntimeError(f"{topic}: {error}")
                ts_type, timestamp = message.timestamp()
                rows.append((message.offset(), timestamp, CONFLUENT_TIMESTAMP_TYPES[ts_type],
                             message.key(), message.value(),
                             tuple(message.headers() or ())))
        raise RuntimeError(f"{topic}: no end of partition within {CLIENT_TIMEOUT:.0f} s")
    finally:
        consumer.close()


def kafka_python_rows(broker, topic, isolation, partition=0):
    """The same rows, read by a kafka-python consumer up to the end offset
    its isolation level sees (the last stable offset for read_committed)."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, group_id=None)
    tp = TopicPartition(topic, partition)
    rows = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        start = consumer.position(tp)
        end = consumer.end_offsets([tp])[tp]
        if start != 0 or end <= 0:     # none of the test topics is empty
            raise RuntimeError(f"{topic}: kafka-python sees offsets {start}..{end}")
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: kafka-python did not reach {end}")
            for record in consumer.poll(timeout_ms=500, max_records=1000).get(tp, ()):
                rows.append((record.offset, record.timestamp,
                             KAFKA_PYTHON_TIMESTAMP_TYPES[record.timestamp_type], record.key,
                             record.value, tuple(record.headers or ())))
        return rows
    finally:
        consumer.close()


def kcodec_rows(records):
    """The same rows from kcodec Records."""
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))
            for r in records]


def table_rows(table):
    """The same rows from a pyarrow table with decode()'s columns."""
    import pyarrow as pa
    names = ("CreateTime", "LogAppendTime")
    millis = table.column("timestamp").cast(pa.int64()).to_pylist()
    rows = table.select(["offset", "timestampType", "key", "value", "headers"]).to_pylist()
    return [(row["offset"], ts, names[row["timestampType"]], row["key"], row["value"],
             tuple((h["key"], h["value"]) for h in row["headers"] or ()))
            for row, ts in zip(rows, millis)]


# ------------------------------------------------------------ the topics
class Topics(dict):
    """Topic name -> the (key, value, headers, timestamp) sent in offset
    order, or None where the log holds something else (transactions, a
    compacted log)."""


def write_codec_topic(broker, codec):
    """An idempotent confluent-kafka producer, then a plain kafka-python one."""
    topic = broker.create_topic(f"codec-{codec}")
    first = [record_spec(i, seed=1) for i in range(400)]
    second = [record_spec(i, seed=2, kafka_python=True) for i in range(400)]
    delivery = Delivery()
    producer = confluent_producer(broker, enable_idempotence=True, compression_type=codec)
    produce_confluent(producer, topic, first, delivery)
    delivery.check(producer)
    plain = kafka_python_producer(broker, enable_idempotence=False, acks=1,
                                  compression_type=None if codec == "none" else codec)
    produce_kafka_python(plain, topic, second)
    plain.close()
    return topic, first + second


def write_transactions(broker, rounds=8):
    """Two transactional producers (confluent-kafka, lz4; kafka-python, gzip)
    and a plain one between them, some transactions committed, some aborted."""
    topic = broker.create_topic("transactions")
    delivery = Delivery()
    first = confluent_producer(broker, transactional_id="kcodec-txn-confluent",
                               compression_type="lz4")
    first.init_transactions(CLIENT_TIMEOUT)
    second = kafka_python_producer(broker, transactional_id="kcodec-txn-kafka-python",
                                   compression_type="gzip")
    second.init_transactions()
    plain = confluent_producer(broker, enable_idempotence=False, acks=1)
    spec = iter(record_spec(i, seed=3, kafka_python=True) for i in range(100_000))
    for n in range(rounds):
        first.begin_transaction()
        produce_confluent(first, topic, [next(spec) for _ in range(40)], delivery)
        first.flush(CLIENT_TIMEOUT)
        produce_confluent(plain, topic, [next(spec) for _ in range(10)], delivery)
        delivery.check(plain)
        second.begin_transaction()
        produce_kafka_python(second, topic, [next(spec) for _ in range(30)])
        if n % 3 == 1:
            first.abort_transaction(CLIENT_TIMEOUT)
        else:
            first.commit_transaction(CLIENT_TIMEOUT)
        if n % 2 == 0:
            second.abort_transaction()
        else:
            second.commit_transaction()
    delivery.check(first)
    second.close()
    wait_until_stable(broker, topic)
    return topic


def watermarks(broker, topic, isolation, partition=0):
    """(log start offset, end offset) the broker's ListOffsets answers: the
    end is the high watermark, or for read_committed the last stable offset."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kcodec-watermarks",
                         "isolation.level": isolation, "log_level": 0})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                              timeout=CLIENT_TIMEOUT, cached=False)
    finally:
        consumer.close()


def wait_until_stable(broker, topic, timeout=30.0):
    """Wait for the transaction markers: a committed or aborted transaction's
    marker is written after EndTxn has been answered, and until it is, the
    last stable offset stays below the high watermark."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if watermarks(broker, topic, "read_committed") == watermarks(broker, topic,
                                                                      "read_uncommitted"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: transactions still open after {timeout:.0f} s")


def write_log_append_time(broker):
    """message.timestamp.type=LogAppendTime: the broker stamps the batches."""
    topic = broker.create_topic("log-append-time", message_timestamp_type="LogAppendTime")
    delivery = Delivery()
    producer = confluent_producer(broker, compression_type="lz4")
    produce_confluent(producer, topic, [record_spec(i, seed=4) for i in range(300)], delivery)
    delivery.check(producer)
    plain = kafka_python_producer(broker, enable_idempotence=False)
    produce_kafka_python(plain, topic, [record_spec(i, seed=5, kafka_python=True)
                                        for i in range(300)])
    plain.close()
    return topic


COMPACTED_RECORDS = 3000


def compacted_spec(i):
    """The i-th record of the compacted topic: 40 keys, every ninth a tombstone."""
    _, value, headers, timestamp = record_spec(i, seed=6)
    return f"c-{i % 40}".encode(), None if i % 9 == 4 else value, headers, timestamp


def write_compacted(broker):
    """A compacted topic with tombstones, after the log cleaner ran on it."""
    topic = broker.create_topic("compacted", cleanup_policy="compact",
                                min_cleanable_dirty_ratio="0.01", min_compaction_lag_ms="0",
                                delete_retention_ms=str(24 * 3600 * 1000))
    specs = [compacted_spec(i) for i in range(COMPACTED_RECORDS)]
    delivery = Delivery()
    producer = confluent_producer(broker, enable_idempotence=True, compression_type="zstd")
    produce_confluent(producer, topic, specs, delivery)
    delivery.check(producer)
    wait_for_cleaner(broker, topic)
    return topic


def cleaned_up_to(broker, topic, partition=0):
    """The offset the log cleaner checkpointed for a partition (0: not yet)."""
    path = broker.log_dirs / "cleaner-offset-checkpoint"
    if not path.exists():
        return 0
    for line in path.read_text().splitlines()[2:]:
        name, number, offset = line.rsplit(" ", 2)
        if name == topic and int(number) == partition:
            return int(offset)
    return 0


def wait_for_cleaner(broker, topic, timeout=60.0):
    """Wait until the cleaner has cleaned everything but the active segment
    and the segments it replaced are gone, so that the files stay put."""
    directory = broker.partition_dir(topic)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = os.listdir(directory)
        active = max(int(name[:20]) for name in names if name.endswith(".log"))
        if cleaned_up_to(broker, topic) == active and not any(
                name.endswith((".cleaned", ".swap", ".deleted")) for name in names):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the log cleaner did not clean {topic} within {timeout:.0f} s:\n"
                       + broker.log_tail())


# Test modules import the fixtures below, and pytest keeps one definition of
# each per importing module: the broker and the topics live here, made once.
_SESSION = {"users": 0}


@pytest.fixture(scope="session")
def broker_topics(broker):
    """The topics every conformance test reads, written once per session."""
    if _SESSION.get("topics_of") is not broker:
        topics = Topics()
        for codec in CODECS:
            name, sent = write_codec_topic(broker, codec)
            topics[name] = sent
        topics[write_transactions(broker)] = None
        topics[write_log_append_time(broker)] = None
        topics[write_compacted(broker)] = None
        _SESSION["topics"], _SESSION["topics_of"] = topics, broker
    return _SESSION["topics"]


def _terminate_with_parent():
    """In the broker's child process before exec: SIGTERM it when the process
    that started it dies, so a killed test run leaves no JVM behind."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_or_skip(workdir):
    """A started broker; skips (fails when CI is set) without Java or the jars."""
    try:
        broker = KafkaBroker(workdir)
    except BrokerUnavailable as exc:
        unavailable(f"no Kafka broker: {exc}")
    return broker.start()


@pytest.fixture(scope="session")
def broker():
    # pytest keeps one copy of this fixture per importing module: a broker that
    # could not start is not tried again by the next module.
    if "unavailable" in _SESSION:
        outcome, reason = _SESSION["unavailable"]
        outcome(reason)
    if "broker" not in _SESSION:
        workdir = Path(tempfile.mkdtemp(prefix="kcodec-broker-"))
        try:
            _SESSION["broker"] = start_or_skip(workdir)
        except BaseException as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            if isinstance(exc, pytest.skip.Exception):
                _SESSION["unavailable"] = (pytest.skip, str(exc))
            else:
                _SESSION["unavailable"] = (pytest.fail, f"the broker did not start: {exc}")
            raise
        _SESSION["workdir"] = workdir
    _SESSION["users"] += 1
    running = _SESSION["broker"]
    yield running
    _SESSION["users"] -= 1
    if _SESSION["users"] == 0:
        try:
            code = running.stop()
            # 143: the JVM's exit status after a SIGTERM it handled by shutting down
            assert code in (0, 143), f"the broker stopped with {code}:\n{running.log_tail()}"
        finally:
            shutil.rmtree(_SESSION.pop("workdir"), ignore_errors=True)
            _SESSION.pop("broker")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="kcodec-broker-") as workdir, \
            KafkaBroker(workdir) as running:
        print(f"bootstrap.servers={running.bootstrap}  log.dirs={running.log_dirs}  "
              f"log: {running.broker_log}", flush=True)
        # blocked only now: the broker's JVM must not inherit the mask
        stop_signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        signal.sigwait(stop_signals)
    sys.exit(0)
