"""spark.readStream.format("kafka-log") tailing a live broker's own partition
directories while producers write: plain, idempotent and transactional
(commits and aborts), segments rolling and retention deleting them. The
query is killed (SIGKILL of its driver process) and stopped mid-stream, and
restarted from its checkpoint each time. Its Parquet sink must hold exactly
what a read_committed confluent-kafka consumer read, with no duplicate."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from kafka_broker import (  # noqa: F401
    CLIENT_TIMEOUT, CONFLUENT_TIMESTAMP_TYPES, Delivery, broker, confluent_producer, record_spec,
    watermarks,
)
from kcodec.log import PartitionLog
from spark_session import spark  # noqa: F401

TOPIC = "live-stream"
PARTITIONS = 2
# Per partition: the oldest segments go once a partition holds more than
# this. The producers write about 6 KiB/s to each partition, so a query down
# for well over a minute (a restart on a loaded machine) still finds every
# record it has not read.
RETENTION_BYTES = 512 * 1024
RECORDS_PER_PRODUCER = 3
ROUND_PAUSE_SECONDS = 0.3
ABORT_EVERY = 3
# Every few rounds a transaction stays open across micro-batches.
HOLD_OPEN_EVERY = 10
HOLD_OPEN_SECONDS = 1.5
BATCHES_BEFORE_FAULT = 2
DRIVER_TIMEOUT = 300.0
RETENTION_TIMEOUT = 400.0
RACE_TOPIC = "live-race"
RACE_SECONDS = 90
HERE = Path(__file__).parent
# What a failed driver's message shows of its stderr.
ERROR_LINE = re.compile(r"^\S.*(Error|Exception)\b.*:")
ERROR_LINES = 40
STDERR_TAIL = 3000


class Production(threading.Thread):
    """Three producers taking turns, until told to finish: plain (acks=1, no
    idempotence), idempotent, and transactional, whose every third
    transaction aborts."""

    def __init__(self, broker, topic=TOPIC):
        super().__init__(daemon=True)
        self.broker, self.topic, self.error, self.rounds, self.aborted = broker, topic, None, 0, 0
        self.finish = threading.Event()

    def run(self):
        try:
            self._produce()
        except BaseException as exc:        # the test reports it
            self.error = exc

    def _produce(self):
        delivery = Delivery()
        plain = confluent_producer(self.broker, enable_idempotence=False, acks=1,
                                   compression_type="lz4")
        idempotent = confluent_producer(self.broker, enable_idempotence=True,
                                        compression_type="zstd")
        txn = confluent_producer(self.broker, transactional_id=f"kcodec-{self.topic}",
                                 compression_type="snappy")
        txn.init_transactions(CLIENT_TIMEOUT)
        specs = (record_spec(i, seed=47) for i in range(10 ** 6))

        def send(producer, partition):
            for _ in range(RECORDS_PER_PRODUCER):
                key, value, headers, timestamp = next(specs)
                producer.produce(self.topic, value=value, key=key, headers=headers or None,
                                 timestamp=timestamp, partition=partition, on_delivery=delivery)
                producer.poll(0)

        r = 0
        while not self.finish.is_set():
            send(plain, r % PARTITIONS)
            send(idempotent, (r + 1) % PARTITIONS)
            txn.begin_transaction()
            for partition in range(PARTITIONS):
                send(txn, partition)
            txn.flush(CLIENT_TIMEOUT)
            if r % HOLD_OPEN_EVERY == 0:
                time.sleep(HOLD_OPEN_SECONDS)
            if r % ABORT_EVERY == 1:
                txn.abort_transaction(CLIENT_TIMEOUT)
                self.aborted += 1
            else:
                txn.commit_transaction(CLIENT_TIMEOUT)
            r = self.rounds = r + 1
            time.sleep(ROUND_PAUSE_SECONDS)
        delivery.check(plain)
        delivery.check(idempotent)
        delivery.check(txn)


class CommittedReader(threading.Thread):
    """A read_committed confluent-kafka consumer reading every partition from
    the beginning as the records arrive (before retention deletes them),
    until told to finish and then at the end of every partition."""

    def __init__(self, broker):
        super().__init__(daemon=True)
        self.broker, self.rows, self.error = broker, [], None
        self.finish = threading.Event()

    def run(self):
        try:
            self._consume()
        except BaseException as exc:
            self.error = exc

    def _consume(self):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.broker.bootstrap,
                             "group.id": "kcodec-live-stream", "enable.auto.commit": False,
                             "isolation.level": "read_committed",
                             "enable.partition.eof": True, "log_level": 0})
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        following = {p: OFFSET_BEGINNING for p in range(PARTITIONS)}
        at_end, targets = {}, None       # partition -> offset its end-of-partition event gave
        try:
            while targets is None or any(at_end.get(p, -1) < t for p, t in enumerate(targets)):
                if targets is None and self.finish.is_set():
                    # Told to finish once no transaction is open: read up to each
                    # partition's last stable offset then, from a fresh fetch
                    # (an end already reached is not announced again).
                    targets = [watermarks(self.broker, TOPIC, "read_committed", p)[1]
                               for p in range(PARTITIONS)]
                    at_end.clear()
                    consumer.assign([TopicPartition(TOPIC, p, offset)
                                     for p, offset in following.items()])
                for message in consumer.consume(1000, timeout=0.5):
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(f"{TOPIC}: {error}")
                        at_end[message.partition()] = message.offset()
                        continue
                    at_end.pop(message.partition(), None)
                    following[message.partition()] = message.offset() + 1
                    ts_type, timestamp = message.timestamp()
                    assert CONFLUENT_TIMESTAMP_TYPES[ts_type] == "CreateTime"
                    self.rows.append((message.partition(), message.offset(), timestamp,
                                      message.key(), message.value(),
                                      tuple(message.headers() or ())))
        finally:
            consumer.close()


class Driver:
    """stream_driver.py in a process group of its own (its JVM and Python
    workers with it), reading the broker's log.dirs root."""

    def __init__(self, broker, work, until):
        self.out, self.checkpoint = work / "sink", work / "checkpoint"
        self.stdout = open(work / f"driver-{time.monotonic_ns()}.out", "w+")
        self.stderr_path = work / f"driver-{time.monotonic_ns()}.err"
        options = {"subscribe": TOPIC, "kafka.isolation.level": "read_committed",
                   "startingOffsets": "earliest", "includeHeaders": "true"}
        command = [sys.executable, str(HERE / "stream_driver.py"), str(broker.log_dirs),
                   str(self.out), str(self.checkpoint), "--until", str(until)]
        for name, value in options.items():
            command += ["--option", f"{name}={value}"]
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(command, cwd=HERE, stdout=self.stdout,
                                            stderr=stderr, env=env, start_new_session=True)

    def batches(self):
        """The micro-batches the driver reported completing."""
        self.stdout.seek(0)
        return [json.loads(line) for line in self.stdout.read().splitlines() if line.strip()]

    def wait_for_batches(self, count):
        deadline = time.monotonic() + DRIVER_TIMEOUT
        while time.monotonic() < deadline:
            done = [b for b in self.batches() if b["rows"]]
            if len(done) >= count:
                return done
            assert self.process.poll() is None, f"the driver exited early:\n{self.stderr()}"
            time.sleep(0.2)
        raise AssertionError(f"fewer than {count} micro-batches in {DRIVER_TIMEOUT:.0f} s:\n"
                             f"{self.stderr()}")

    def kill(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(DRIVER_TIMEOUT)

    def wait(self):
        try:
            code = self.process.wait(DRIVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        assert code == 0, f"the driver failed ({code}):\n{self.stderr()}"
        return self.batches()

    def stderr(self):
        """The driver's error lines (a failed batch's cause is far above the
        end of its stack traces), then the end of its stderr."""
        text = self.stderr_path.read_text()
        errors = [line for line in text.splitlines() if ERROR_LINE.search(line)]
        return "\n".join(errors[:ERROR_LINES]) + "\n...\n" + text[-STDERR_TAIL:]


def wait_for_retention(broker, production):
    """Until retention has deleted the first segment of every partition (the
    producers still writing)."""
    deadline = time.monotonic() + RETENTION_TIMEOUT
    while time.monotonic() < deadline:
        assert production.is_alive(), f"the producers stopped: {production.error!r}"
        if all(PartitionLog(broker.partition_dir(TOPIC, p)).start_offset > 0
               for p in range(PARTITIONS)):
            return
        time.sleep(1)
    raise AssertionError(f"retention deleted no segment in {RETENTION_TIMEOUT:.0f} s")


def wait_until_stable(broker):
    """Until no transaction is open: the last stable offsets reach the high
    watermarks."""
    deadline = time.monotonic() + CLIENT_TIMEOUT
    while time.monotonic() < deadline:
        if all(watermarks(broker, TOPIC, "read_committed", p)
               == watermarks(broker, TOPIC, "read_uncommitted", p) for p in range(PARTITIONS)):
            return
        time.sleep(0.2)
    raise AssertionError(f"{TOPIC}: a transaction is still open after {CLIENT_TIMEOUT:.0f} s")


def sink_rows(spark, out):
    """The sink's rows, read by Spark through the sink's own commit log."""
    df = spark.read.parquet(str(out))
    rows = []
    for r in df.select("partition", "offset", F.unix_millis("timestamp").alias("ts"), "key",
                       "value", "headers").collect():
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                        for h in r["headers"] or ())
        rows.append((r["partition"], r["offset"], r["ts"],
                     None if r["key"] is None else bytes(r["key"]),
                     None if r["value"] is None else bytes(r["value"]), headers))
    return rows


def test_stream_from_a_live_broker_survives_a_kill_and_a_stop(spark, broker, tmp_path):
    broker.create_topic(TOPIC, partitions=PARTITIONS, retention_bytes=RETENTION_BYTES)
    reader, production = CommittedReader(broker), Production(broker)
    reader.start()
    production.start()
    try:
        first = Driver(broker, tmp_path, tmp_path / "never")
        before_kill = first.wait_for_batches(BATCHES_BEFORE_FAULT)
        assert first.kill() == -signal.SIGKILL

        second = Driver(broker, tmp_path, tmp_path / "stop")
        second.wait_for_batches(BATCHES_BEFORE_FAULT)
        (tmp_path / "stop").touch()
        stopped = second.wait()

        wait_for_retention(broker, production)
        production.finish.set()
        production.join(DRIVER_TIMEOUT)
        assert not production.is_alive() and production.error is None, production.error
        wait_until_stable(broker)
        reader.finish.set()
        reader.join(DRIVER_TIMEOUT)
        assert not reader.is_alive() and reader.error is None, reader.error

        last = Driver(broker, tmp_path, "available-now").wait()
    finally:
        production.finish.set()
        reader.finish.set()

    expected = sorted(reader.rows)
    got = sink_rows(spark, tmp_path / "sink")
    assert len(got) == len({(r[0], r[1]) for r in got}), "a record is in the sink twice"
    assert sorted(got) == expected
    # What the test was meant to show did happen: aborted transactions, and
    # each run did micro-batches with rows.
    assert production.aborted > 0
    assert before_kill and [b for b in stopped if b["rows"]] and [b for b in last if b["rows"]]


def test_triggers_racing_a_live_broker_read_each_offset_once(broker, tmp_path):
    """The stream source's driver and executor steps (latestOffset,
    partitions, read), back to back for a minute and a half in a process of
    its own, over a broker's log.dirs while the producers write and
    segments roll: the broker replaces checkpoints, trims the indexes of
    the segments it rolls and writes index entries under the reader. No
    step may fail or kill the process, and each partition's offsets come
    once each, in order."""
    broker.create_topic(RACE_TOPIC, partitions=PARTITIONS, retention_bytes=RETENTION_BYTES)
    production = Production(broker, RACE_TOPIC)
    production.start()
    try:
        out = tmp_path / "offsets.json"
        run = subprocess.run([sys.executable, str(HERE / "stream_race.py"), str(broker.log_dirs),
                              RACE_TOPIC, str(RACE_SECONDS), str(out)],
                             capture_output=True, text=True, timeout=RACE_SECONDS + DRIVER_TIMEOUT)
        assert run.returncode == 0, run.stderr[-4000:]
    finally:
        production.finish.set()
        production.join(DRIVER_TIMEOUT)
    assert production.error is None, production.error
    read = json.loads(out.read_text())
    assert read["triggers"] > RACE_SECONDS      # many, not a handful
    for partition, offsets in read["offsets"].items():
        assert offsets == sorted(set(offsets)), f"partition {partition}: out of order or twice"
    assert production.rounds > 0 and sum(map(len, read["offsets"].values())) > 0
