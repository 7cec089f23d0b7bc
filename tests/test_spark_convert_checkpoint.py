"""spark-convert --checkpoint: runs that each convert what is new, checked
against what was appended to the logs between them (more batches in an
active segment, new segments, partitions and topics), under read_committed
transactions left open at a run's end, crashes at each step of a run, and
retention deleting offsets not yet converted."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import kcodec.spark.convert as convert_module
from kcodec.cli import main
from kcodec.log import write_log
from kcodec.spark import parse_options
from kcodec.spark.convert import (COMMITS_LOG, MANIFEST, OFFSETS_LOG, SUCCESS, CheckpointError,
                                  convert)
from kcodec.spark.plan import DataLossError
from converted_output import committed_output, committed_runs
from log_helpers import scripted_history, table_rows
from s3_server import s3  # noqa: F401
from spark_session import spark  # noqa: F401

# Segments of the rolling topic hold a few batches; the other topic's stay
# in one active segment.
SMALL_SEGMENT_BYTES = 6000
LARGE_SEGMENT_BYTES = 1 << 20
INDEX_INTERVAL_BYTES = 800
# Appends of scripted_history that leave transactions open: producer 7's
# and producer 8's of the first round (neither has its marker yet).
OPEN_TRANSACTIONS_AT = 4
ROUND_APPENDS = 9
KILL_TIMEOUT = 300.0
KILL_POLL_SECONDS = 0.05


@pytest.fixture(scope="module")
def histories():
    return {"orders-0": scripted_history(seed=40), "orders-1": scripted_history(seed=41),
            "payments-3": scripted_history(seed=42), "refunds-0": scripted_history(seed=43)}


class Logs:
    """A log.dirs root whose partitions grow as a broker's do: each is
    written again holding more appends (write_log lays out the same appends
    the same way, so what was there stays as it was)."""

    def __init__(self, root, histories):
        self.root, self.histories, self.appended = root, histories, {}

    def grow(self, name, appends):
        directory = os.path.join(self.root, name)
        shutil.rmtree(directory, ignore_errors=True)
        segment_bytes = LARGE_SEGMENT_BYTES if name.startswith("payments") else SMALL_SEGMENT_BYTES
        write_log(directory, [a.data for a in self.histories[name].appends[:appends]],
                  segment_bytes=segment_bytes, index_interval_bytes=INDEX_INTERVAL_BYTES)
        self.appended[name] = appends

    def segments(self, name):
        return sorted(n for n in os.listdir(os.path.join(self.root, name)) if n.endswith(".log"))

    def expected(self, committed_only=False):
        """{partition directory name: rows}: what the logs hold now."""
        out = {}
        for name, count in self.appended.items():
            history = self.histories[name]
            kept = type(history)(history.appends[:count], history.aborted_txns)
            out[name] = kept.data_records(committed_only)
        return out


@pytest.fixture
def logs(tmp_path, histories):
    root = tmp_path / "kafka-logs"
    root.mkdir()
    return Logs(str(root), histories)


def options(**given):
    return parse_options({"includeHeaders": "true", "maxBytesPerPartition": "8000", **given})


def by_partition(table):
    """{partition directory name: rows} of a converted table; each
    partition's offsets must be unique."""
    out = {}
    for topic, partition in {(t, p) for t, p in zip(table["topic"].to_pylist(),
                                                    table["partition"].to_pylist())}:
        mask = pc.and_(pc.equal(table["topic"], topic), pc.equal(table["partition"], partition))
        rows = sorted(table_rows(table.filter(mask)))
        offsets = [r[0] for r in rows]
        assert len(set(offsets)) == len(offsets), f"{topic}-{partition}: duplicate offsets"
        out[f"{topic}-{partition}"] = rows
    return out


def converted(out):
    return by_partition(committed_runs(out)[1])


def checkpoint_log(checkpoint, log, number):
    with open(os.path.join(checkpoint, log, str(number))) as f:
        return f.read().splitlines()


def test_runs_add_up_to_one_read_of_the_final_log(spark, logs, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    logs.grow("orders-0", 10)
    logs.grow("payments-3", 5)
    first = convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    assert [run.number for run in first.runs] == [0]
    assert converted(out) == logs.expected()
    end = logs.histories["orders-0"].appends[9].last_offset + 1
    assert json.loads(checkpoint_log(checkpoint, OFFSETS_LOG, 0)[2])["orders"] == {"0": end}

    rolled, active = logs.segments("orders-0"), logs.segments("payments-3")
    logs.grow("orders-0", 20)
    logs.grow("payments-3", 7)
    second = convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    assert len(logs.segments("orders-0")) > len(rolled) and logs.segments("payments-3") == active
    assert [(t, p, s) for t, p, s, _ in second.runs[0].ranges] == [
        ("orders", 0, end), ("payments", 3, logs.histories["payments-3"].appends[5].base_offset)]
    assert second.summary().startswith("run 1: ")
    assert f"orders-0 [{end}, " in second.summary()
    assert converted(out) == logs.expected()

    logs.grow("orders-1", 6)
    logs.grow("refunds-0", 3)
    third = convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    assert third.runs[0].new_partitions == [("orders", 1), ("refunds", 0)]
    assert "orders-1 [0, " in third.summary() and "(new partition)" in third.summary()
    assert third.rows == len(logs.expected()["orders-1"]) + len(logs.expected()["refunds-0"])

    fourth = convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    assert fourth.runs == [] and fourth.rows == 0
    assert fourth.summary().startswith("nothing new since run 2: 4 partition(s) up to date")
    assert not os.path.exists(os.path.join(checkpoint, OFFSETS_LOG, "3"))

    once = str(tmp_path / "once")
    convert(spark, [logs.root], once, options())
    assert converted(out) == by_partition(committed_output(once)[1]) == logs.expected()


def test_read_committed_holds_rows_back_until_their_transaction_ends(spark, logs, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    committed = options(**{"kafka.isolation.level": "read_committed"})
    history = logs.histories["orders-0"]
    logs.grow("orders-0", OPEN_TRANSACTIONS_AT)
    first = convert(spark, [logs.root], out, committed, checkpoint=checkpoint)
    # The first open transaction's first offset is the last stable offset.
    stable = history.appends[1].base_offset
    assert first.runs[0].ranges == [("orders", 0, 0, stable)]
    assert converted(out) == {"orders-0": history.appends[0].records}

    logs.grow("orders-0", ROUND_APPENDS)
    convert(spark, [logs.root], out, committed, checkpoint=checkpoint)
    assert 0 in history.aborted_txns          # producer 7's first transaction was aborted
    assert converted(out) == logs.expected(committed_only=True)
    aborted = {r[0] for a in history.appends if a.txn == 0 for r in a.records}
    assert aborted and not aborted & {r[0] for r in converted(out)["orders-0"]}


class SimulatedCrash(BaseException):
    """The driver stopping where a hook raises it: nothing of the run is
    cleaned up (the test turns the clean-up off)."""


@pytest.mark.parametrize("stage", ["tasks", "written", "manifest", "success"])
def test_a_run_stopped_at_any_step_is_finished_by_the_next_exactly_once(
        spark, logs, tmp_path, monkeypatch, stage):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    logs.grow("orders-0", 8)
    convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    logs.grow("orders-0", 18)
    logs.grow("payments-3", 6)

    def crash_in_driver(at, number):
        if at == stage:
            raise SimulatedCrash(at)

    def crash_in_task(split, attempt, at):
        if at == "committed" and split.id == 0:
            raise RuntimeError("simulated task failure on every attempt")

    with monkeypatch.context() as patched:
        patched.setattr(convert_module, "_abort_run", lambda *args: None)
        with pytest.raises((SimulatedCrash, Exception)):
            convert(spark, [logs.root], out, options(), checkpoint=checkpoint,
                    _before_commit=crash_in_task if stage == "tasks" else None,
                    _driver_hook=crash_in_driver)
    [planned_job] = [json.loads(checkpoint_log(checkpoint, OFFSETS_LOG, 1)[1])["job"]]
    assert not os.path.exists(os.path.join(checkpoint, COMMITS_LOG, "1"))
    left = [n for _, _, names in os.walk(out) for n in names if planned_job in n]
    assert left, "the stopped run left files behind"
    committed_before = stage in ("manifest", "success")
    # _SUCCESS is gone while a run is under way, back once it is committed.
    assert os.path.exists(os.path.join(out, SUCCESS)) == (stage == "success")

    logs.grow("orders-0", 24)
    # Other split sizes: the same offsets are planned as other splits, so
    # the redone run's file names are not those the stopped one left.
    again = convert(spark, [logs.root], out, options(maxBytesPerPartition=str(
        LARGE_SEGMENT_BYTES)), checkpoint=checkpoint)
    assert [(r.number, r.recovered) for r in again.runs] == [
        (1, "committed" if committed_before else "redone"), (2, None)]
    assert again.runs[0].job == planned_job
    assert ("committed now" if committed_before else "redone with the same offsets") in (
        again.summary())
    manifest, table = committed_runs(out)
    assert [r["job"] for r in manifest["runs"]][1] == planned_job
    assert by_partition(table) == logs.expected()


def test_data_loss_fails_naming_the_partition_and_the_gap_or_is_skipped(spark, logs,
                                                                       tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    history = logs.histories["orders-0"]
    logs.grow("orders-0", 6)
    convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    converted_end = history.appends[5].last_offset + 1
    logs.grow("orders-0", 30)
    directory = os.path.join(logs.root, "orders-0")
    segments = logs.segments("orders-0")
    # Retention deletes the oldest segments, up to one past the converted end.
    kept = next(i for i, name in enumerate(segments) if int(name[:-len(".log")]) > converted_end)
    for name in segments[:kept]:
        stem = name[:-len(".log")]
        for gone in os.listdir(directory):
            if gone.startswith(stem) and not gone.endswith(".snapshot"):
                os.remove(os.path.join(directory, gone))
    log_start = int(segments[kept][:-len(".log")])

    with pytest.raises(DataLossError, match=rf"orders-0: offsets {converted_end}\.\."
                                            rf"{log_start - 1} are before the log start"):
        convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    result = convert(spark, [logs.root], out, options(failOnDataLoss="false"),
                     checkpoint=checkpoint)
    assert result.runs[0].data_loss == [("orders", 0, converted_end, log_start)]
    assert (f"data loss in orders-0: offsets {converted_end}..{log_start - 1} were deleted"
            in result.summary())
    expected = [r for r in history.data_records() if r[0] < converted_end or r[0] >= log_start
                and r[0] < history.appends[29].last_offset + 1]
    assert converted(out) == {"orders-0": expected}


def test_output_and_checkpoint_on_an_object_store(spark, s3, logs, monkeypatch):
    """No rename: every checkpoint and output file is uploaded whole, and a
    run stopped once its files were uploaded is redone."""
    fs, bucket = s3.filesystem(), "kcodec-checkpointed"
    fs.create_dir(bucket)
    out, checkpoint = f"{bucket}/out", f"s3://{bucket}/checkpoint"
    given = options(**s3.options())
    logs.grow("orders-0", 6)
    convert(spark, [logs.root], f"s3://{out}", given, checkpoint=checkpoint)
    logs.grow("orders-0", 12)

    def crash(at, number):
        if at == "written":
            raise SimulatedCrash(at)

    with monkeypatch.context() as patched:
        patched.setattr(convert_module, "_abort_run", lambda *args: None)
        with pytest.raises(SimulatedCrash):
            convert(spark, [logs.root], f"s3://{out}", given, checkpoint=checkpoint,
                    _driver_hook=crash)
    again = convert(spark, [logs.root], f"s3://{out}", options(maxBytesPerPartition=str(
        LARGE_SEGMENT_BYTES), **s3.options()), checkpoint=checkpoint)
    assert [(r.number, r.recovered) for r in again.runs] == [(1, "redone")]
    assert by_partition(committed_runs(out, fs)[1]) == logs.expected()
    with fs.open_input_stream(f"{bucket}/checkpoint/{COMMITS_LOG}/1") as f:
        assert f.read().decode().startswith("v1\n")


def test_a_checkpoint_stays_with_its_output(spark, logs, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    logs.grow("payments-3", 3)
    convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    with pytest.raises(CheckpointError, match="belongs to the output"):
        convert(spark, [logs.root], str(tmp_path / "elsewhere"), options(),
                checkpoint=checkpoint)
    with pytest.raises(CheckpointError, match="holds the runs of another checkpoint"):
        convert(spark, [logs.root], out, options(), checkpoint=str(tmp_path / "another"))
    with pytest.raises(CheckpointError, match="endingOffsets"):
        convert(spark, [logs.root], out, options(endingOffsets="5"), checkpoint=checkpoint)
    shutil.rmtree(out)
    with pytest.raises(CheckpointError, match="does not hold run 0"):
        convert(spark, [logs.root], out, options(), checkpoint=checkpoint)


def test_starting_offsets_apply_to_the_first_run_only(spark, logs, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    history = logs.histories["payments-3"]
    logs.grow("payments-3", 4)
    start = history.appends[1].base_offset
    convert(spark, [logs.root], out, options(startingOffsets=str(start)), checkpoint=checkpoint)
    logs.grow("payments-3", 6)
    logs.grow("orders-1", 2)
    convert(spark, [logs.root], out, options(startingOffsets=str(start)), checkpoint=checkpoint)
    assert converted(out) == {
        "payments-3": [r for r in logs.expected()["payments-3"] if r[0] >= start],
        "orders-1": logs.expected()["orders-1"]}


def directory_table(out):
    """The output read as a directory, skipping names that start with "_"
    or "." as Spark's and pyarrow's discovery do (the run manifests)."""
    return ds.dataset(out, format="parquet", partitioning="hive").to_table()


def test_a_first_run_with_no_rows_leaves_a_readable_table(spark, logs, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    logs.grow("payments-3", 0)
    first = convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    assert first.rows == 0 and first.runs[0].ranges == []
    empty = directory_table(out)
    assert empty.num_rows == 0 and "headers" in empty.column_names
    logs.grow("payments-3", 3)
    second = convert(spark, [logs.root], out, options(), checkpoint=checkpoint)
    assert converted(out) == logs.expected()
    assert by_partition(directory_table(out)) == logs.expected()
    assert second.rows == len(logs.expected()["payments-3"])


def test_the_command_line_runs(spark, logs, tmp_path, capsys):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    logs.grow("payments-3", 4)
    command = ["spark-convert", logs.root, "--out", out, "--checkpoint", checkpoint]
    assert main(command) == 0
    assert capsys.readouterr().out.startswith("run 0: ")
    assert main(command) == 0
    assert capsys.readouterr().out.startswith("nothing new since run 0: 1 partition(s)")
    logs.grow("payments-3", 6)
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("run 1: ") and "payments-3 [" in printed
    assert os.path.exists(os.path.join(out, SUCCESS)) and os.path.exists(
        os.path.join(out, MANIFEST))
    assert converted(out) == logs.expected()
    assert main([*command[:3], str(tmp_path / "other"), *command[4:]]) == 1
    assert "CheckpointError: checkpoint" in capsys.readouterr().err


def test_a_killed_run_is_finished_by_the_next_exactly_once(logs, tmp_path):
    """The command SIGKILLed as soon as its run is in the checkpoint's
    offsets log (its tasks under way), then run again."""
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    for name, history in logs.histories.items():
        logs.grow(name, len(history.appends))
    command = [sys.executable, "-c", "import sys; from kcodec.cli import main; "
               "sys.exit(main(sys.argv[1:]))", "spark-convert", logs.root, "--out", out,
               "--checkpoint", checkpoint, "--master", "local[2]",
               "--max-bytes-per-partition", "2000"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    planned = os.path.join(checkpoint, OFFSETS_LOG, "0")
    killed = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    deadline = time.monotonic() + KILL_TIMEOUT
    while not os.path.exists(planned) and killed.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(KILL_POLL_SECONDS)
    os.killpg(killed.pid, signal.SIGKILL)
    assert killed.wait(KILL_TIMEOUT) == -signal.SIGKILL
    assert os.path.exists(planned)
    assert not os.path.exists(os.path.join(checkpoint, COMMITS_LOG, "0")), \
        "the run committed before the kill: nothing left to finish"
    again = subprocess.run(command, env=env, capture_output=True, text=True,
                           timeout=KILL_TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert "run 0: redone with the same offsets" in again.stdout
    assert converted(out) == logs.expected()
