"""Decode the shared real-world fixtures and compare with their expectations.

The fixtures (see README.md in the fixtures folder, given by the `fixtures_path`
session fixture) are byte-exact Kafka record data taken from the test suites of
kafka-go, rskafka, kafka-python, sarama and franz-go, each with a JSON file
that lists every entry and every record. Every fixture is decoded here with
kcodec's public API and compared field by field with that JSON, and, where the
JSON says kafka-python agrees with it, with kafka-python's MemoryRecords.

Where the JSON and Apache Kafka's Java reader disagree, the Java reader (as
restated in shared/spec/kafka-formats.md) wins: see SPEC_OVERRIDES.
"""
import copy
import functools
import hashlib
import json
import struct
import tracemalloc
import warnings
from dataclasses import dataclass

import pytest

import kcodec
from kcodec import compression
from kcodec.errors import (
    CorruptRecordError, CrcMismatchError, DecompressionError, KafkaFormatError,
    UnsupportedFormatError,
)

from kafka_bytes import wrap_sequence

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its protocol schemas with deprecated importlib.resources calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.codec import snappy_decode as kafka_python_snappy_decode
    from kafka.record import MemoryRecords

# Every fixture of index.json, listed here so that collection does not depend on
# where the fixtures live; test_index_lists_exactly_these_fixtures keeps the two
# in step.
FIXTURES = (
    "franz-go/xerial_chunk_truncated",
    "franz-go/xerial_header_only_truncated",
    "franz-go/xerial_missing_header_snappy_framed_stream",
    "franz-go/xerial_ok_hello_world",
    "kafka-go/v1-v1",
    "kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc",
    "kafka-go/v1c-v1-v1c",
    "kafka-go/v1c-v1c",
    "kafka-go/v2-v2",
    "kafka-go/v2b-v1",
    "kafka-go/v2bc-v1-v1c",
    "kafka-go/v2bc-v1",
    "kafka-go/v2bc-v1c",
    "kafka-go/v2c-v2-v2c",
    "kafka-go/v2c-v2c",
    "kafka-python/control_batch_abort_v2",
    "kafka-python/corrupt_length3",
    "kafka-python/records_v0",
    "kafka-python/records_v1",
    "kafka-python/records_v2",
    "kafka-python/truncated_3bytes",
    "rskafka/gzip",
    "rskafka/lz4",
    "rskafka/malformed_java_snappy_oom_body",
    "rskafka/nocompression",
    "rskafka/null_key",
    "rskafka/snappy",
    "rskafka/snappy_java",
    "rskafka/zstd",
    "sarama/fetch_v0_message_set_overflow",
    "sarama/fetch_v0_one_message_set",
    "sarama/fetch_v11_empty_batch",
    "sarama/fetch_v4_one_record_batch",
    "sarama/fetch_v4_partial_batch",
    "sarama/legacy_magic2_invalid",
    "sarama/legacy_v0_empty",
    "sarama/legacy_v0_gzip_bulk",
    "sarama/legacy_v0_gzip_empty",
    "sarama/legacy_v0_snappy_xerial_bulk",
    "sarama/legacy_v1_empty",
    "sarama/legacy_v1_lz4_bulk",
    "sarama/legacy_v1_lz4_empty",
    "sarama/legacy_v1_zstd_bulk",
    "sarama/legacy_v1_zstd_empty",
    "sarama/v2_control_empty",
    "sarama/v2_empty",
    "sarama/v2_gzip",
    "sarama/v2_lz4",
    "sarama/v2_snappy_xerial",
    "sarama/v2_uncompressed",
)

# expected_error.kind -> the kcodec error it must raise.
ERROR_KINDS = {
    "corrupt": CorruptRecordError,            # entry size 3 < 14
    # A legacy message with magic 2: wrapped in a log prefix it is a 26-byte v2
    # batch, shorter than the 61-byte header (the fixture's `why`: "corrupt").
    "unknown_magic": CorruptRecordError,
    "malformed": DecompressionError,          # xerial chunk length 0xFC000009
    "malformed_xerial": DecompressionError,
}

_NO_INNER = ("a compressed wrapper with no inner messages: Java's DeepRecordsIterator throws "
             "'Found invalid compressed record set with no inner records' (spec §2, §7 rule 9)")
_ZSTD_LEGACY = ("zstd inside a magic-1 message: Kafka allows zstd only in magic 2 (KIP-110); Java "
                "throws InvalidRecordException, no peer decodes it (spec §2, §3, §7 rule 9)")

# Fixtures whose JSON expects a successful decode that Apache Kafka rejects.
# kcodec follows Kafka; the test asserts the error, and still checks the JSON's
# records against kcodec's decoding of the inner message set, decompressed here
# the way the fixture's own validation did it.
SPEC_OVERRIDES = {
    "sarama/legacy_v0_gzip_empty": (CorruptRecordError, _NO_INNER),
    "sarama/legacy_v1_lz4_empty": (CorruptRecordError, _NO_INNER),
    "sarama/legacy_v1_zstd_bulk": (UnsupportedFormatError, _ZSTD_LEGACY),
    "sarama/legacy_v1_zstd_empty": (UnsupportedFormatError, _ZSTD_LEGACY),
}

# The fixtures' validation logs: what kafka-python made of each fixture.
KAFKA_PYTHON = "kafka-python 3.0.12 (kafka.record.MemoryRecords, pure Python)"
KAFKA_PYTHON_SNAPPY = "kafka-python codec.snappy_decode"
TIMESTAMP_TYPES = {None: "NoTimestampType", "create_time": "CreateTime",
                   "log_append_time": "LogAppendTime"}
LIMIT = compression.DEFAULT_MAX_DECOMPRESSED_BYTES


# ------------------------------------------------------------------ loading

@dataclass
class Fixture:
    name: str
    index: dict      # its index.json row
    meta: dict       # its .json
    data: bytes      # its .bin

    @property
    def framing(self):
        return self.meta["framing"]

    @property
    def error_kind(self):
        error = self.meta.get("expected_error")
        return error["kind"] if error else None


@dataclass
class RecordSet:
    """A record set to decode, and which JSON entries and records it holds."""
    data: object         # buffer handed to kcodec
    file_start: int      # byte of the .bin at data[0] (for byte_range)
    entries: list        # JSON entries, in order
    records: list        # (entry index within `entries`, JSON record), in order
    partial_start: object  # position in `data` of a partial trailing entry, or None
    wrapped: bool = False  # a legacy message given a 12-byte log prefix here


@functools.lru_cache(maxsize=None)
def _index(root):
    with open(f"{root}/index.json") as f:
        return {row["fixture"]: row for row in json.load(f)["fixtures"]}


def load(fixtures_path, name):
    root = str(fixtures_path)
    row = _index(root)[name]
    return _load(root, name, row["json"], row["bin"])


@functools.lru_cache(maxsize=None)
def _load(root, name, json_path, bin_path):
    with open(f"{root}/{json_path}") as f:
        meta = json.load(f)
    with open(f"{root}/{bin_path}", "rb") as f:
        data = f.read()
    return Fixture(name, _index(root)[name], meta, data)


def record_sets(fx):
    """The record sets of a fixture, found as its framing says."""
    meta, data = fx.meta, fx.data
    entries = meta.get("entries", [])
    records = [(r.get("entry_index", 0), r) for r in meta.get("records", [])]
    if fx.framing in ("record_set", "v2_record_batch"):
        span = meta.get("record_set") or {"start": 0, "end": len(data)}
        assert (span["start"], span["end"]) == (0, len(data))
        if fx.framing == "v2_record_batch":
            assert len(entries) == 1 and len(data) == 12 + entries[0]["batch_length"]
        partial = meta.get("partial_trailing")
        if fx.error_kind == "partial_trailing_only":
            partial = {"start": span["start"]}
        return [RecordSet(memoryview(data)[span["start"]:span["end"]], span["start"], entries,
                          records, None if partial is None else partial["start"] - span["start"])]
    if fx.framing == "legacy_message_no_log_prefix":
        wrapped = struct.pack(">qi", meta["suggested_wrapper_offset"], len(data)) + data
        return [RecordSet(wrapped, -12, entries, records, None, wrapped=True)]
    if fx.framing == "v2_record_batch_body_from_attributes":
        # baseOffset, batchLength, partitionLeaderEpoch, magic, then the CRC-32C of
        # everything after it (the body), so that decoding gets past the CRC.
        header = struct.pack(">qiib", 0, len(data) + 9, 0, 2)
        batch = header + struct.pack(">I", kcodec.crc32c(data)) + data
        assert kcodec.crc32c(batch[21:]) == struct.unpack_from(">I", batch, 17)[0]
        return [RecordSet(batch, -21, [], [], None)]
    if fx.framing == "fetch_response_v10_framed":
        expected = copy.deepcopy(meta["fetch_response"])
        assert (expected.pop("api_key"), expected.pop("api_version")) == (1, 10)
        partials = []
        for topic in expected["topics"]:
            for partition in topic["partitions"]:
                partials.append(partition.pop("partial_trailing"))
        parsed = parse_fetch_v10(data)
        assert parsed == expected
        ranges = [p["record_set"] for t in parsed["topics"] for p in t["partitions"]]
        out = []
        for span, partial in zip(ranges, partials):
            start, end = span["start"], span["end"]
            mine = [i for i, e in enumerate(entries)
                    if start <= e["byte_range"][0] < e["byte_range"][1] <= end]
            out.append(RecordSet(
                memoryview(data)[start:end], start, [entries[i] for i in mine],
                [(mine.index(i), r) for i, r in records if i in mine],
                None if partial is None else partial["start"] - start))
        assert sum(len(rs.entries) for rs in out) == len(entries)
        assert sum(len(rs.records) for rs in out) == len(records)
        return out
    raise AssertionError(f"{fx.name}: no record set in framing {fx.framing!r}")


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value


def parse_fetch_v10(data):
    """The fields of a Fetch v10 response (header v0, body not flexible), with the
    [start, end) of each partition's records, in the fixture JSON's layout."""
    r = _Reader(data)
    out = {"size_prefix": r.take(">i")}
    assert out["size_prefix"] == len(data) - 4
    out["correlation_id"] = r.take(">i")
    out["throttle_time_ms"] = r.take(">i")
    out["error_code"] = r.take(">h")
    out["session_id"] = r.take(">i")
    out["topics"] = []
    for _ in range(r.take(">i")):
        name_len = r.take(">h")
        topic = {"topic": data[r.pos:r.pos + name_len].decode(), "partitions": []}
        r.pos += name_len
        for _ in range(r.take(">i")):
            p = {"partition": r.take(">i"), "error_code": r.take(">h"),
                 "high_watermark": r.take(">q"), "last_stable_offset": r.take(">q"),
                 "log_start_offset": r.take(">q")}
            n = r.take(">i")
            p["aborted_transactions"] = None if n < 0 else [
                {"producer_id": r.take(">q"), "first_offset": r.take(">q")} for _ in range(n)]
            p["records_length_field_at"] = r.pos
            p["records_length"] = length = r.take(">i")
            assert 0 <= length <= len(data) - r.pos
            p["record_set"] = {"start": r.pos, "end": r.pos + length}
            r.pos += length
            topic["partitions"].append(p)
        out["topics"].append(topic)
    assert r.pos == len(data)
    return out


# --------------------------------------------------- expected vs. actual

def _hex(value):
    return None if value is None else bytes.fromhex(value)


def expected_record(rec, entry):
    magic = rec["magic"]
    out = {
        "offset": rec["offset"],
        "timestamp": -1 if rec["timestamp"] is None else rec["timestamp"],
        "timestamp_type": TIMESTAMP_TYPES[rec["timestamp_type"]],
        "key": _hex(rec["key"]),
        "value": _hex(rec["value"]),
        "key_view": _hex(rec["key"]),
        "value_view": _hex(rec["value"]),
        "headers": tuple((bytes.fromhex(h["key"]).decode("utf-8"), _hex(h["value"]))
                         for h in rec["headers"]),
        "magic": magic,
        "sequence": (wrap_sequence(entry["base_sequence"], rec["offset_delta"]) if magic == 2
                     else -1),
        "control": None,
    }
    control = rec.get("control")
    if control is not None:
        if "coordinator_epoch" in control:
            epoch = control["coordinator_epoch"]
        elif control["type_name"] in ("ABORT", "COMMIT"):
            # Not in the JSON: the end-transaction marker value is int16 version,
            # int32 coordinatorEpoch (spec §1).
            epoch = struct.unpack_from(">i", _hex(rec["value"]), 2)[0]
        else:
            epoch = None
        out["control"] = {"type": control["type_name"], "type_id": control["type"],
                          "version": control["key_version"], "coordinator_epoch": epoch}
    return out


def actual_record(r):
    c = r.control
    return {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": r.timestamp_type,
        "key": r.key,
        "value": r.value,
        "key_view": None if r.key_view is None else bytes(r.key_view),
        "value_view": None if r.value_view is None else bytes(r.value_view),
        "headers": r.headers,
        "magic": r.magic,
        "sequence": r.sequence,
        "control": None if c is None else {"type": c.type, "type_id": c.type_id,
                                           "version": c.version,
                                           "coordinator_epoch": c.coordinator_epoch},
    }


def expected_batch(rs, entry, records):
    """Batch fields of one JSON entry; `records` are its JSON records."""
    if rs.wrapped:
        position, size = 0, entry["byte_range_in_file"][1] - entry["byte_range_in_file"][0] + 12
    else:
        position = entry["byte_range"][0] - rs.file_start
        size = entry["byte_range"][1] - entry["byte_range"][0]
    common = {
        "magic": entry["magic"],
        "compression": entry["codec"],
        "timestamp_type": TIMESTAMP_TYPES[entry["timestamp_type"]],
        "crc": entry["crc"],
        "crc_valid": entry["crc_valid"],
        "position": position,
        "size": size,
    }
    if entry["magic"] == 2:
        last = entry["base_offset"] + entry["last_offset_delta"]
        attributes = entry["attributes"]
        assert len(records) == entry["record_count"]
        return {**common,
                "base_offset": entry["base_offset"],
                "last_offset": last,
                "next_offset": last + 1,
                "count": entry["record_count"],
                "first_timestamp": entry["first_timestamp"],
                "max_timestamp": entry["max_timestamp"],
                "producer_id": entry["producer_id"],
                "producer_epoch": entry["producer_epoch"],
                "base_sequence": entry["base_sequence"],
                "last_sequence": wrap_sequence(entry["base_sequence"], entry["last_offset_delta"]),
                "partition_leader_epoch": entry["partition_leader_epoch"],
                "is_transactional": entry["is_transactional"],
                "is_control": entry["is_control"],
                "delete_horizon_ms": entry["first_timestamp"] if attributes & 0x40 else None}
    offset = entry["offset"]
    if offset is None:          # legacy_message_no_log_prefix: the offset given in the prefix
        assert rs.wrapped
        offset = struct.unpack_from(">q", rs.data)[0]
    compressed = entry["codec"] != "none"
    count = entry["inner_count"] if compressed else 1
    assert len(records) == count
    timestamp = -1 if entry["timestamp"] is None else entry["timestamp"]
    return {**common,
            # a wrapper's offset is its last inner message's; its base is the first's
            "base_offset": records[0]["offset"] if compressed else offset,
            "last_offset": offset,
            "next_offset": offset + 1,
            "count": count,
            "first_timestamp": timestamp,
            "max_timestamp": timestamp,
            "producer_id": -1,
            "producer_epoch": -1,
            "base_sequence": -1,
            "last_sequence": -1,
            "partition_leader_epoch": -1,
            "is_transactional": False,
            "is_control": False,
            "delete_horizon_ms": None}


BATCH_FIELDS = (
    "magic", "base_offset", "last_offset", "next_offset", "count", "compression",
    "timestamp_type", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "last_sequence", "partition_leader_epoch", "is_transactional",
    "is_control", "delete_horizon_ms", "crc", "crc_valid", "position", "size",
)


def actual_batch(b):
    return {name: getattr(b, name) for name in BATCH_FIELDS}


def expected_batches(rs):
    return [expected_batch(rs, entry, [r for i, r in rs.records if i == n])
            for n, entry in enumerate(rs.entries)]


def expected_records(rs, *, include_control=True):
    return [expected_record(r, rs.entries[i]) for i, r in rs.records
            if include_control or not rs.entries[i].get("is_control")]


def complete_end(rs):
    """Position in rs.data just after the last complete JSON entry."""
    if not rs.entries:
        return 0
    last = expected_batches(rs)[-1]
    return last["position"] + last["size"]


# ------------------------------------------------------------------ tests

@pytest.fixture(scope="module")
def fixture_index(fixtures_path):
    return _index(str(fixtures_path))


def test_index_lists_exactly_these_fixtures(fixture_index):
    assert tuple(fixture_index) == FIXTURES


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_identity(fixtures_path, name):
    """The bytes are the ones the JSON describes (guards the reading, not kcodec)."""
    fx = load(fixtures_path, name)
    digest = hashlib.sha256(fx.data).hexdigest()
    assert (len(fx.data), digest) == (fx.meta["size"], fx.meta["sha256"])
    assert (fx.index["size"], fx.index["sha256"]) == (fx.meta["size"], fx.meta["sha256"])
    assert fx.index["framing"] == fx.framing
    assert fx.index["expected_error"] == fx.error_kind
    summary = fx.meta["summary"]
    assert (fx.index["record_count"], fx.index["entry_count"]) == (
        summary["record_count"], summary["entry_count"])
    assert len(fx.meta.get("records", [])) == summary["record_count"]
    assert len(fx.meta.get("entries", [])) == summary["entry_count"]


def _check_xerial(fx):
    data = fx.data
    expected = fx.meta["expected_decompressed"]
    if fx.error_kind is None:
        out = compression.decompress(compression.SNAPPY, data, LIMIT, 2)
        assert bytes(out) == bytes.fromhex(expected["hex"])
    else:
        assert expected is None
        with pytest.raises(ERROR_KINDS[fx.error_kind]):
            compression.decompress(compression.SNAPPY, data, LIMIT, 2)


def _check_error(fx, rs, error, failing_start):
    """Decoding fails with `error`, positioned in the failing entry (the last one
    in every negative fixture), however it is read."""
    start, end = failing_start, len(rs.data)
    for verify_crc in (True, False):
        with pytest.raises(error) as exc:
            for batch in kcodec.read_batches(rs.data, verify_crc=verify_crc):
                list(batch)
        assert start <= exc.value.position < end, (exc.value, start, end)
        with pytest.raises(error) as exc:
            list(kcodec.read_records(rs.data, verify_crc=verify_crc, include_control=True))
        assert start <= exc.value.position < end, (exc.value, start, end)


def _legacy_wrapper_value(message):
    """Attributes and value of one legacy message (from its CRC on)."""
    magic, attributes = message[4], message[5]
    pos = 6 + (8 if magic == 1 else 0)
    (key_len,) = struct.unpack_from(">i", message, pos)
    pos += 4 + max(key_len, 0)
    (value_len,) = struct.unpack_from(">i", message, pos)
    pos += 4
    assert 0 <= value_len == len(message) - pos
    return magic, attributes, message[pos:pos + value_len]


def _check_override(fx, rs):
    error, _why = SPEC_OVERRIDES[fx.name]
    _check_error(fx, rs, error, 0)
    # The JSON's records, as the fixture's own validation got them: decompress
    # the wrapper's value here, then decode the inner message set.
    (entry,) = rs.entries
    magic, attributes, value = _legacy_wrapper_value(fx.data)
    assert not attributes & 0x08   # CreateTime: inner records keep their own timestamps
    codec = attributes & 0x07
    assert compression.CODEC_NAMES[codec] == entry["codec"] != "none"
    inner = compression.decompress(codec, value, LIMIT, 2 if codec == compression.ZSTD else magic)
    got = list(kcodec.read_records(inner))
    assert [r.offset for r in got] == entry["inner_offsets_raw"]
    wrapper_offset = struct.unpack_from(">q", rs.data)[0]
    shift = 0
    if magic == 1 and wrapper_offset != 0 and got:
        shift = wrapper_offset - got[-1].offset
    expected = [expected_record(r, entry) for _, r in rs.records]
    actual = [dict(actual_record(r), offset=r.offset + shift) for r in got]
    assert actual == expected


def _check_records(rs, verify_crc):
    batches = list(kcodec.read_batches(rs.data, verify_crc=verify_crc))
    assert [actual_batch(b) for b in batches] == expected_batches(rs)
    for n, batch in enumerate(batches):
        assert len(batch) == batch.count
        assert [actual_record(r) for r in batch] == [
            expected_record(r, rs.entries[n]) for i, r in rs.records if i == n]
    got = kcodec.read_records(rs.data, verify_crc=verify_crc, include_control=True)
    assert [actual_record(r) for r in got] == expected_records(rs)
    got = kcodec.read_records(rs.data, verify_crc=verify_crc)
    assert [actual_record(r) for r in got] == expected_records(rs, include_control=False)
    return batches


@pytest.mark.parametrize("name", FIXTURES)
def test_decode(fixtures_path, name):
    """Every entry and record decodes as the fixture's JSON says, or fails as it says."""
    fx = load(fixtures_path, name)
    if fx.framing == "xerial_snappy_payload":
        _check_xerial(fx)
        return
    for rs in record_sets(fx):
        if fx.name in SPEC_OVERRIDES:
            _check_override(fx, rs)
            continue
        if fx.error_kind in ERROR_KINDS:
            _check_error(fx, rs, ERROR_KINDS[fx.error_kind], complete_end(rs))
            continue
        assert fx.error_kind in (None, "partial_trailing_only"), fx.error_kind
        bad = [n for n, e in enumerate(rs.entries) if not e["crc_valid"]]
        if bad:
            # A CRC-checking reader rejects the first bad entry...
            position = expected_batches(rs)[bad[0]]["position"]
            for read in (kcodec.read_batches, kcodec.read_records):
                with pytest.raises(CrcMismatchError) as exc:
                    list(read(rs.data))
                assert exc.value.position == position
                assert exc.value.stored == rs.entries[bad[0]]["crc"] != exc.value.computed
        else:
            _check_records(rs, verify_crc=True)
        # ...and without checking, the bytes decode as the JSON says (crc_valid
        # is then computed on request).
        batches = _check_records(rs, verify_crc=False)
        next_offset = fx.meta.get("upstream_expectations", {}).get("recordsNextOffset")
        if next_offset is not None:   # an empty batch still moves the fetch position
            assert batches[-1].next_offset == next_offset


def test_malformed_snappy_body_allocates_nothing_like_its_claim(fixtures_path):
    """rskafka's fuzzer-found body declares a 4227860745-byte xerial chunk."""
    (rs,) = record_sets(load(fixtures_path, "rskafka/malformed_java_snappy_oom_body"))
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionError) as exc:
            list(kcodec.read_records(rs.data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exc.value.position == 0
    assert peak < 16 << 20


def _decoded(data, partial):
    """Entry positions and record offsets that kcodec reads from `data`."""
    positions = [b.position for b in kcodec.read_batches(data, verify_crc=False,
                                                          partial=partial)]
    offsets = [r.offset for r in kcodec.read_records(data, verify_crc=False,
                                                     include_control=True, partial=partial)]
    return positions, offsets


def _expected_decoded(rs):
    return [b["position"] for b in expected_batches(rs)], [r["offset"] for _, r in rs.records]


# franz-go's fixtures are bare snappy payloads, not record sets.
RECORD_SET_FIXTURES = tuple(name for name in FIXTURES if not name.startswith("franz-go/"))

# kafka-python 3.0.12 cannot decode these (its validation log says why: inner
# magic 0 in a v1 lz4 wrapper; zstd below magic 2); test_kafka_python_fails_where_logged
# keeps that claim honest instead of skipping them.
KAFKA_PYTHON_CANNOT_DECODE = (
    "sarama/legacy_v1_lz4_bulk", "sarama/legacy_v1_lz4_empty",
    "sarama/legacy_v1_zstd_bulk", "sarama/legacy_v1_zstd_empty",
)


@pytest.mark.parametrize("name", RECORD_SET_FIXTURES)
def test_partial_trailing(fixtures_path, name):
    """By default a partial trailing entry ends the data silently; partial="error"
    reports it at its start, after yielding the complete entries."""
    fx = load(fixtures_path, name)
    if fx.name in SPEC_OVERRIDES:
        error = SPEC_OVERRIDES[fx.name][0]
    else:
        error = ERROR_KINDS.get(fx.error_kind)
    for rs in record_sets(fx):
        if error is not None:
            # a negative fixture fails with its own error in either mode
            for partial in ("stop", "error"):
                with pytest.raises(error):
                    list(kcodec.read_records(rs.data, include_control=True, verify_crc=False,
                                             partial=partial))
            continue
        expected = _expected_decoded(rs)
        assert _decoded(rs.data, "stop") == expected
        if rs.partial_start is None:
            assert _decoded(rs.data, "error") == expected
        else:
            assert rs.partial_start == complete_end(rs)
            seen = []
            with pytest.raises(CorruptRecordError) as exc:
                for batch in kcodec.read_batches(rs.data, verify_crc=False, partial="error"):
                    seen.append(batch.position)
            assert seen == expected[0]
            assert exc.value.position == rs.partial_start
            with pytest.raises(CorruptRecordError) as exc:
                list(kcodec.read_records(rs.data, verify_crc=False, partial="error"))
            assert exc.value.position == rs.partial_start
        # kafka-python's own tests append 4 zero bytes: an incomplete entry.
        padded = fx.meta.get("upstream_expectations", {}).get("with_4_zero_bytes_appended")
        if padded is not None:
            data = bytes(rs.data) + bytes(4)
            assert len(data) == padded["size_in_bytes"]
            assert _decoded(data, "stop") == expected
            with pytest.raises(CorruptRecordError) as exc:
                list(kcodec.read_batches(data, verify_crc=False, partial="error"))
            assert exc.value.position == padded["valid_bytes"]


_TS_TYPE_IDS = {"NoTimestampType": None, "CreateTime": 0, "LogAppendTime": 1}


def _view(record):
    """What kafka-python also tells: from an expected_record/actual_record dict."""
    c = record["control"]
    return (record["offset"], None if record["timestamp_type"] == "NoTimestampType"
            else record["timestamp"], _TS_TYPE_IDS[record["timestamp_type"]], record["key"],
            record["value"], record["headers"], None if c is None else (c["version"], c["type_id"]))


def _peer_view(r):
    """The same from a kafka-python record (ControlRecord has .abort)."""
    control = (r.version, r.type) if hasattr(r, "abort") else None
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
            tuple(tuple(h) for h in r.headers or ()), control)


@pytest.mark.parametrize("name", KAFKA_PYTHON_CANNOT_DECODE)
def test_kafka_python_fails_where_logged(fixtures_path, name):
    fx = load(fixtures_path, name)
    verdict = fx.meta["validation"]["results"][KAFKA_PYTHON]
    assert "records MATCH" not in verdict and verdict != "no error, 0 records"
    for rs in record_sets(fx):
        with pytest.raises(Exception):
            [r for batch in MemoryRecords(bytes(rs.data)) for r in batch]


@pytest.mark.parametrize("name", [n for n in FIXTURES if n not in KAFKA_PYTHON_CANNOT_DECODE])
def test_kafka_python_agrees(fixtures_path, name):
    """kcodec decodes what kafka-python decodes, the same way, and rejects what it
    rejects, wherever the fixture's validation log says kafka-python handled it
    like the JSON (the log's other entries are known kafka-python limitations)."""
    fx = load(fixtures_path, name)
    results = fx.meta["validation"]["results"]
    if fx.framing == "xerial_snappy_payload":
        verdict = results[KAFKA_PYTHON_SNAPPY]
        if verdict.startswith("error"):
            with pytest.raises(Exception):
                kafka_python_snappy_decode(fx.data)
            with pytest.raises(DecompressionError):
                compression.decompress(compression.SNAPPY, fx.data, LIMIT, 2)
        else:
            assert "MATCH" in verdict
            assert bytes(compression.decompress(compression.SNAPPY, fx.data, LIMIT, 2)) == (
                kafka_python_snappy_decode(fx.data))
        return
    verdict = results[KAFKA_PYTHON]
    for rs in record_sets(fx):
        if verdict.startswith("raised"):
            # kafka-python rejects it too
            with pytest.raises(Exception):
                [r for batch in MemoryRecords(bytes(rs.data)) for r in batch]
            with pytest.raises(KafkaFormatError):
                list(kcodec.read_records(rs.data, verify_crc=False, include_control=True))
            continue
        assert "records MATCH" in verdict or verdict == "no error, 0 records", verdict
        peer = [_peer_view(r) for batch in MemoryRecords(bytes(rs.data)) for r in batch]
        assert peer == [_view(r) for r in expected_records(rs)]
        if fx.name in SPEC_OVERRIDES:
            # kafka-python is more lenient than Kafka here; kcodec follows Kafka.
            with pytest.raises(SPEC_OVERRIDES[fx.name][0]):
                list(kcodec.read_records(rs.data, verify_crc=False, include_control=True))
            continue
        mine = kcodec.read_records(rs.data, verify_crc=False, include_control=True)
        assert [_view(actual_record(r)) for r in mine] == peer
