"""`kcodec dump` against Kafka's own DumpLogSegments (org.apache.kafka.tools,
from the broker's jars) on the broker's segments, offset indexes, time
indexes, transaction indexes and producer snapshots: the same stdout lines,
and the same summary on stderr.

Deliberate differences:
- the tool keeps its per-file summaries in a HashMap, so files come in hash
  order; kcodec lists them in the order given. Summaries are compared per file.
- on a file that fails, the tool stops; kcodec reports it and goes on."""
import glob
import os
import re
import shutil
import struct

import pytest

from kcodec.cli import main
from kafka_broker import broker, broker_topics  # noqa: F401

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
TOPICS = ["codec-none", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd", "transactions",
          "log-append-time", "compacted"]
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
SUMMARY_HEADS = ("Mismatches in :", "Found timestamp mismatch in :",
                 "Found out of order timestamp in :",
                 "The following indexed offsets are not found in :",
                 "Non-consecutive offsets in ")


def partition_files(broker, topic):
    directory = broker.partition_dir(topic)
    return sorted(path for path in glob.glob(os.path.join(directory, "*"))
                  if path.endswith(SUFFIXES))


def is_active(path):
    """Whether a file belongs to its partition's last (active) segment."""
    directory, name = os.path.split(path)
    bases = [int(n[:20]) for n in os.listdir(directory) if n.endswith(".log")]
    return int(name[:20]) == max(bases)


def summary_blocks(stderr):
    """The tool's end-of-run summary as a sorted list of per-file blocks
    (lines before the first heading, e.g. a JVM warning, are not part of it)."""
    blocks = []
    for line in stderr.splitlines():
        if line.startswith(SUMMARY_HEADS):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    return sorted(blocks)


def both(broker, capsys, files, *options):
    java = broker.run_tool(DUMP_LOG_SEGMENTS, "--files", ",".join(files), *options)
    assert java.returncode == 0, java.stderr
    capsys.readouterr()
    status = main(["dump", "--files", ",".join(files), *options])
    ours = capsys.readouterr()
    assert status == 0, ours.err
    return java, ours


@pytest.mark.parametrize("topic", TOPICS)
def test_dump_prints_what_dump_log_segments_prints(broker, broker_topics, capsys, topic):
    files = partition_files(broker, topic)
    assert {os.path.splitext(f)[1] for f in files} >= {".log", ".index", ".timeindex"}
    java, ours = both(broker, capsys, files, "--print-data-log")
    lines = java.stdout.splitlines()
    assert sum(line.startswith("baseOffset: ") for line in lines) > 1
    assert sum(line.startswith("| offset: ") for line in lines) > 100
    assert ours.out.splitlines() == lines
    assert summary_blocks(ours.err) == summary_blocks(java.stderr)


def test_dump_options_on_every_topic(broker, broker_topics, capsys):
    """Batch and record metadata without payloads, payloads without metadata,
    and the index checks, over all the topics' files in one run each."""
    files = [f for topic in TOPICS for f in partition_files(broker, topic)]
    indexes = [f for f in files if f.endswith((".index", ".timeindex"))]
    # the tool stops at the first index failing the sanity check: the active
    # segments' preallocated time indexes fail it (test below)
    closed_indexes = [f for f in indexes if not is_active(f)]
    summaries = {}
    for options, paths in [(["--deep-iteration"], files),
                           (["--print-data-log", "--skip-record-metadata"], files),
                           ([], files),
                           (["--verify-index-only"], indexes),
                           (["--index-sanity-check"], closed_indexes)]:
        java, ours = both(broker, capsys, paths, *options)
        assert ours.out.splitlines() == java.stdout.splitlines(), options
        summaries[tuple(options)] = summary_blocks(java.stderr)
        assert summary_blocks(ours.err) == summaries[tuple(options)], options
    # a segment after the first starts above offset 0, which the tool reports
    # (it checks a segment's first record against -1); compaction leaves gaps
    deep = summaries[("--deep-iteration",)]
    assert any(block[0].startswith("Non-consecutive offsets in ") and "compacted-0" in block[0]
               for block in deep)


@pytest.mark.parametrize("entries", ["none yet", "off the batch ends"])
def test_time_index_offsets_not_found_in_the_log_as_the_tool_reports(broker, broker_topics,
                                                                     capsys, tmp_path, entries):
    """A time index entry names the last offset of a batch. An index with no
    entry yet (preallocated zeros) reads as one entry naming the segment's
    base offset; entries moved off the batch ends name offsets inside them.
    Both are checked against the log beside the index on a copy of a closed
    segment."""
    log = next(f for f in partition_files(broker, "codec-none")
               if f.endswith(".log") and not is_active(f))
    stem = os.path.basename(log)[:-len(".log")]
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copy(os.path.join(os.path.dirname(log), stem + suffix), tmp_path)
    path = tmp_path / (stem + ".timeindex")
    if entries == "none yet":
        path.write_bytes(bytes(12 * 64))
    else:
        raw = bytearray(path.read_bytes())
        assert len(raw) >= 24
        for at in range(0, len(raw), 12):
            struct.pack_into(">i", raw, at + 8, struct.unpack_from(">i", raw, at + 8)[0] - 1)
        path.write_bytes(bytes(raw))
    for options in ([], ["--verify-index-only"]):
        java, ours = both(broker, capsys, [str(path)], *options)
        assert ours.out.splitlines() == java.stdout.splitlines()
        blocks = summary_blocks(java.stderr)
        assert any(block[0] == f"The following indexed offsets are not found in :{path}"
                   for block in blocks), java.stderr
        assert summary_blocks(ours.err) == blocks


@pytest.mark.parametrize("topic", ["codec-lz4", "transactions"])
def test_sanity_check_fails_on_a_live_time_index_as_the_tool_does(broker, broker_topics,
                                                                  capsys, topic):
    """An active segment's time index is preallocated: read by its length, its
    last entry is zeros, older than its first, which the broker's sanity
    check rejects (it would rebuild the index after a crash)."""
    path = [f for f in partition_files(broker, topic)
            if f.endswith(".timeindex") and is_active(f)][0]
    java = broker.run_tool(DUMP_LOG_SEGMENTS, "--files", path, "--index-sanity-check")
    assert java.returncode != 0
    reason = next(line for line in java.stderr.splitlines()
                  if "Corrupt time index found" in line)
    reason = reason[reason.index("Corrupt time index found"):]
    capsys.readouterr()
    status = main(["dump", "--files", path, "--index-sanity-check"])
    ours = capsys.readouterr()
    assert status == 1
    assert ours.out.splitlines() == java.stdout.splitlines() == [f"Dumping {path}"]
    assert reason in ours.err


# What the tool's JVM prints for payload bytes (seen with Java 17's UTF-8
# decoder): a surrogate's three-byte encoding is one malformed sequence.
JAVA_TEXT = [(b"\xed\xb5\xae:\xec\xba", "\ufffd:\ufffd"),
             (b"\xed\xa0A", "\ufffdA"),
             (b"\xed\xa0\x80\x80A", "\ufffd\ufffdA"),
             (b"\xe4\xb8A", "\ufffdA"),
             (b"\xffok\xc3\xa9", "\ufffdok\u00e9")]


@pytest.mark.parametrize("raw, text", JAVA_TEXT)
def test_payloads_replace_invalid_utf8_as_the_tool_does(capsys, tmp_path, raw, text):
    import kcodec
    from kcodec.log import write_log
    write_log(tmp_path / "t-0", kcodec.encode([(None, raw, 1000, [])]))
    path = str(tmp_path / "t-0" / f"{0:020d}.log")
    capsys.readouterr()
    assert main(["dump", "--files", path, "--print-data-log"]) == 0
    assert capsys.readouterr().out.splitlines()[3].endswith(f" payload: {text}")


def test_non_consecutive_offsets_as_the_tool_reports_them(capsys, tmp_path):
    """Each segment's first record is checked against -1 and every later one
    against the record before it; the pairs are listed by the earlier offset."""
    import kcodec
    from kcodec.log import write_log
    data = b"".join(kcodec.encode([(None, b"v", 1000, [])] * 2, base_offset=base)
                    for base in (10, 20, 30))
    path = write_log(tmp_path / "g-0", data)[0]
    capsys.readouterr()
    assert main(["dump", "--files", path, "--deep-iteration"]) == 0
    captured = capsys.readouterr()
    offsets = [int(line.split()[2]) for line in captured.out.splitlines()
               if line.startswith("| offset: ")]
    assert offsets == [10, 11, 20, 21, 30, 31]
    assert captured.err.splitlines() == [f"Non-consecutive offsets in {os.path.abspath(path)}",
                                         "  -1 is followed by 10", "  11 is followed by 20",
                                         "  21 is followed by 30"]


def test_sanity_check_reads_a_preallocated_time_index_by_its_length(capsys, tmp_path):
    import struct
    path = tmp_path / f"{5:020d}.timeindex"
    path.write_bytes(struct.pack(">qi", 1_700_000_000_000, 3) + bytes(12 * 99))
    capsys.readouterr()
    assert main(["dump", "--files", str(path), "--index-sanity-check"]) == 1
    assert "the last timestamp is 0 which is less than the first timestamp" in \
        capsys.readouterr().err
    path.write_bytes(struct.pack(">qi", 1_700_000_000_000, 3))
    assert main(["dump", "--files", str(path), "--index-sanity-check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{path} passed sanity check."


LEGACY_CRC = re.compile(r" isValid: (true|false) crc: (\d+)")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_legacy_segments_as_the_tool_prints_them(broker, capsys, tmp_path, magic, codec):
    """Message sets v0/v1 (a Kafka 4 broker no longer writes them, but reads
    old segments), laid out by kcodec.log.write_log. Deliberate differences:
    kcodec ends a record's crc with "}" as Kafka 3's tool did, and for a
    compressed wrapper prints the wrapper's CRC where the tool prints each
    inner message's; the record lines are compared without those."""
    import kcodec
    from kcodec.log import write_log
    batch = [(None if i % 3 == 0 else b"k%d" % i, None if i % 5 == 0 else b"v%d" % i,
              1_700_000_000_000 + i, []) for i in range(60)]
    data = kcodec.encode(batch, magic=magic, compression=codec, max_batch_bytes=300)
    logs = write_log(tmp_path / "legacy-0", data, segment_bytes=800, index_interval_bytes=100)
    assert len(logs) > 1
    files = [f for log in logs for f in (log, log[:-4] + ".index", log[:-4] + ".timeindex")
             if os.path.exists(f)]
    java, ours = both(broker, capsys, files, "--print-data-log")

    def normal(line):
        crc = "N" if codec != "none" else r"\2"
        return LEGACY_CRC.sub(rf" isValid: \1 crc: {crc}", line)

    lines = java.stdout.splitlines()
    assert sum(line.startswith("| offset: ") for line in lines) == len(batch)
    assert [normal(line) for line in ours.out.splitlines()] == [normal(line) for line in lines]
    assert [line for line in ours.out.splitlines() if not line.startswith("| ")] == [
        line for line in lines if not line.startswith("| ")]
    assert summary_blocks(ours.err) == summary_blocks(java.stderr)
