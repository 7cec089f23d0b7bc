"""One focused test per decoder validation rule of spec §7 (rules 1-11) and per
leniency Kafka's reader has, each built from a valid record set made by
kcodec.encode / kcodec.encode_control with exactly the offending bytes patched.

Checksums are recomputed after a patch (unless the rule is about the checksum),
so that the decoder gets past the CRC and reaches the rule under test.
"""
import gzip
import pickle
import struct
import zlib

import cramjam
import pytest
import xxhash
import zstandard

import kcodec
from kcodec import (
    CorruptRecordError, CrcMismatchError, DecompressionError, DecompressionLimitError,
    KafkaFormatError, UnsupportedFormatError,
)

from kafka_bytes import (
    XERIAL_MAGIC, compress, decompress, entries, fix_crc, i32, legacy_fields,
    parse_v2_records, put_i32, read_varint, with_legacy_value, with_v2_section, xerial,
    zigzag_varint, zstd_frame,
)

# ------------------------------------------------------------------ helpers

def u32(buf, pos):
    return struct.unpack_from(">I", buf, pos)[0]


def put_varint(buf, pos, value):
    """Overwrite the varint at pos with one of the same width."""
    _, end = read_varint(buf, pos)
    new = zigzag_varint(value)
    assert len(new) == end - pos, "test bug: varint width changes"
    buf[pos:end] = new


def records_of(data, **kw):
    return [(r.offset, r.key, r.value, r.headers, r.timestamp)
            for b in kcodec.read_batches(data, **kw) for r in b]


def raises(exc_class, data, **kw):
    """Decode everything (batches, records, fields); return the raised error."""
    with pytest.raises(KafkaFormatError) as info:
        for b in kcodec.read_batches(data, **kw):
            for r in b:
                r.key, r.value, r.headers, r.control
    err = info.value
    assert type(err) is exc_class, f"{type(err).__name__}: {err}"
    return err


RECORDS = [(b"key-%d" % i, b"value-%d" % i * (i + 1), 1_600_000_000_000 + i,
            [("h%d" % i, b"hv"), ("n", None)]) for i in range(4)]
LEGACY_RECORDS = [(k, v, ts, None) for k, v, ts, _ in RECORDS]

# A valid entry placed first so that positions are absolute in the whole input.
PREFIX = kcodec.encode([(b"p", b"q", 1_500_000_000_000, None)], base_offset=0)
P = len(PREFIX)


def v2(**kw):
    """PREFIX + one v2 batch of RECORDS (at position P)."""
    kw.setdefault("base_offset", 1)
    return bytearray(PREFIX + kcodec.encode(RECORDS, **kw))


def legacy(magic, **kw):
    kw.setdefault("base_offset", 1)
    return bytearray(PREFIX + kcodec.encode(LEGACY_RECORDS, magic=magic, **kw))


def test_helpers_agree_with_the_encoder():
    data = v2()
    assert entries(data) == [(0, P), (P, len(data))]
    recs = parse_v2_records(data, P + 61, len(RECORDS))
    assert recs[-1]["end"] == len(data)
    assert data[recs[0]["key"]:recs[0]["key"] + 5] == b"key-0"
    assert records_of(bytes(data))[1:] == [
        (i + 1, k, v, tuple(h), ts) for i, (k, v, ts, h) in enumerate(RECORDS)]
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        batch = kcodec.encode(RECORDS, compression=codec)
        assert decompress(codec, batch[61:]) == kcodec.encode(RECORDS)[61:]


# ------------------------------------------------------- rule 1: entry size

@pytest.mark.parametrize("size", [13, 0, -1, -(1 << 31)])
def test_rule1_entry_size_below_14(size):
    data = v2()
    put_i32(data, P + 8, size)
    err = raises(CorruptRecordError, bytes(data))
    assert err.position in (P, P + 8)


def test_rule1_entry_size_14_is_accepted_for_a_v0_message():
    # The smallest legal entry: a v0 message with null key and value.
    entry = kcodec.encode([(None, None)], magic=0)
    assert i32(entry, 8) == 14
    assert records_of(entry) == [(0, None, None, (), -1)]


def test_rule1_entry_size_over_the_configured_maximum():
    data = bytes(v2())
    size = i32(data, P + 8)
    assert len(records_of(data, max_entry_bytes=size)) == 5
    with pytest.raises(CorruptRecordError) as info:
        list(kcodec.read_batches(data, max_entry_bytes=size - 1))
    assert info.value.position in (P, P + 8)


# ------------------------------------------------------------ rule 2: magic

@pytest.mark.parametrize("magic", [3, 4, 0x7F, 0x80, 0xFF])
def test_rule2_unknown_magic(magic):
    data = v2()
    data[P + 16] = magic
    err = raises(UnsupportedFormatError, bytes(data))
    assert err.position in (P, P + 16)


# ------------------------------------------------- rule 3: short v2 batches

@pytest.mark.parametrize("size", [14, 30, 48])
def test_rule3_v2_batch_shorter_than_its_header(size):
    data = v2()
    entry = bytearray(data[P:P + 12 + size])
    put_i32(entry, 8, size)
    # Followed by more data, so that it is not a partial trailing entry.
    err = raises(CorruptRecordError, PREFIX + bytes(entry) + PREFIX)
    assert err.position == P


def test_rule3_empty_v2_batch_of_exactly_61_bytes_is_valid():
    data = v2()
    batch = with_v2_section(data[P:], b"", count=0)
    assert len(batch) == 61
    assert records_of(PREFIX + batch)[1:] == []


# --------------------------------------------------------------- rule 4: CRC

def test_rule4_v2_crc_mismatch_names_stored_and_computed():
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[2]
    stored = u32(data, P + 17)
    data[rec["value"]] ^= 0x01
    computed = kcodec.crc32c(bytes(data[P + 21:]))
    err = raises(CrcMismatchError, bytes(data))
    assert (err.stored, err.computed) == (stored, computed)
    assert stored != computed
    assert err.position == P
    assert f"{stored:#010x}" in str(err) and f"{computed:#010x}" in str(err)
    # Without verification the batch decodes, and says its CRC is invalid.
    batches = list(kcodec.read_batches(bytes(data), verify_crc=False))
    assert [b.crc_valid for b in batches] == [True, False]
    assert len(list(batches[1])) == 4


@pytest.mark.parametrize("magic", [0, 1])
def test_rule4_legacy_crc_mismatch(magic):
    data = legacy(magic)
    start = entries(data)[2][0]
    f = legacy_fields(data, start)
    stored = u32(data, start + 12)
    data[f["value"]] ^= 0x40
    computed = zlib.crc32(bytes(data[start + 16:f["end"]]))
    err = raises(CrcMismatchError, bytes(data))
    assert (err.stored, err.computed) == (stored, computed)
    assert err.position == start
    assert f"{stored:#010x}" in str(err) and f"{computed:#010x}" in str(err)


def test_rule4_crc_field_itself_corrupted():
    data = v2()
    data[P + 20] ^= 0x80
    err = raises(CrcMismatchError, bytes(data))
    assert err.stored == u32(data, P + 17)
    assert err.computed == kcodec.crc32c(bytes(data[P + 21:]))


def test_rule4_inner_message_crc_mismatch_in_a_wrapper():
    data = legacy(1, compression="gzip")
    inner = bytearray(decompress("gzip", data[legacy_fields(data, P)["value"]:]))
    inner[legacy_fields(inner, 0)["value"]] ^= 0x01          # first inner message's value
    stored = u32(inner, 12)
    computed = zlib.crc32(bytes(inner[16:12 + i32(inner, 8)]))
    wrapped = PREFIX + with_legacy_value(data[P:], gzip.compress(bytes(inner)))
    err = raises(CrcMismatchError, wrapped)
    assert (err.stored, err.computed) == (stored, computed)
    assert err.position == P


# ------------------------------------------------------------ rule 5: count

def test_rule5_negative_records_count():
    data = v2()
    put_i32(data, P + 57, -1)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position in (P, P + 57)


def test_rule5_batch_ends_before_count_records():
    data = v2()
    put_i32(data, P + 57, 5)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position in (P, P + 57, len(data))


def test_rule5_batch_ends_before_count_records_with_a_plausible_count():
    # Two records declared, only the first present: not caught by a size bound.
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    batch = with_v2_section(data[P:], data[recs[0]["start"]:recs[0]["end"]], count=2)
    err = raises(CorruptRecordError, PREFIX + batch)
    assert err.position in (P, P + 57, len(PREFIX + batch))


def test_rule5_bytes_left_after_count_records():
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    put_i32(data, P + 57, 3)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position in (P, P + 57, recs[3]["start"])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("count", [3, 5])
def test_rule5_compressed_count_mismatch(codec, count):
    data = v2(compression=codec)
    put_i32(data, P + 57, count)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == P


def test_rule5_compressed_stream_with_trailing_bytes():
    data = v2()
    section = bytes(data[P + 61:]) + b"\x00"
    batch = kcodec.encode(RECORDS, compression="gzip", base_offset=1)
    err = raises(CorruptRecordError, PREFIX + with_v2_section(batch, gzip.compress(section)))
    assert err.position == P


# ------------------------------------------------------ rule 6: record length

def test_rule6_record_length_beyond_the_batch():
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[3]
    assert rec["end"] - rec["body"] < 63
    put_varint(data, rec["start"], 63)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == rec["start"]


def test_rule6_negative_record_length():
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[1]
    put_varint(data, rec["start"], -5)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == rec["start"]


def test_rule6_record_declares_more_than_its_fields_take():
    # Record 1 claims one byte more; the fields end one byte before its declared end.
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    rec = recs[1]
    put_varint(data, rec["start"], rec["end"] - rec["body"] + 1)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert "declares" in str(err)
    assert err.position == rec["start"]


def test_rule6_record_declares_less_than_its_fields_take():
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[0]
    put_varint(data, rec["start"], rec["end"] - rec["body"] - 1)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    # The headers count's last header value runs past the record's declared end.
    assert err.position in (rec["start"], rec["headers"][1]["value_len"])


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_rule6_compressed_record_length_mismatch_names_the_entry(codec):
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[1]
    put_varint(data, rec["start"], rec["end"] - rec["body"] + 1)
    batch = kcodec.encode(RECORDS, compression=codec, base_offset=1)
    err = raises(CorruptRecordError,
                 PREFIX + with_v2_section(batch, compress(codec, bytes(data[P + 61:]))))
    assert err.position == P


# ------------------------------------------------------------ rule 7: headers

def test_rule7_negative_headers_count():
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[2]
    put_varint(data, rec["headers_count"], -1)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == rec["headers_count"]


def test_rule7_headers_count_larger_than_the_remaining_bytes():
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[2]
    assert rec["end"] - rec["headers_count"] < 60
    put_varint(data, rec["headers_count"], 60)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == rec["headers_count"]


@pytest.mark.parametrize("length", [-1, -2])
def test_rule7_negative_header_key_length(length):
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[2]
    h = rec["headers"][1]                    # ("n", None): key length 1 -> negative
    assert data[h["key"]:h["key"] + 1] == b"n"
    put_varint(data, h["key_len"], length)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == h["key_len"]


# --------------------------------------------- rule 8: fields past the end

@pytest.mark.parametrize("record,header,field,length", [
    (1, None, "key", 40),
    (0, None, "value", 60),
    (3, 0, "value", 50),
    (3, 1, "key", 30),
], ids=["key", "value", "header_value", "header_key"])
def test_rule8_field_runs_past_the_record(record, header, field, length):
    """Record `record`'s key or value (or that of its header `header`) declares
    `length` bytes, more than the record has left."""
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[record]
    f = rec if header is None else rec["headers"][header]
    put_varint(data, f[field + "_len"], length)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position in (f[field + "_len"], f[field])


def test_rule8_varint_cut_by_the_end_of_the_batch():
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    section = bytes(data[P + 61:recs[3]["start"]]) + b"\x80"      # continuation, then nothing
    batch = PREFIX + with_v2_section(data[P:], section)
    err = raises(CorruptRecordError, batch)
    assert err.position == recs[3]["start"]


def test_rule8_varint_cut_by_the_end_of_the_record():
    # The record's last byte (its last header's value length, -1) becomes a
    # continuation byte: that varint runs past the record's declared end.
    data = v2()
    rec = parse_v2_records(data, P + 61, 4)[0]
    h = rec["headers"][1]
    assert h["value_len"] == rec["end"] - 1
    data[h["value_len"]] = 0x81
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position == h["value_len"]


def test_rule8_varint_too_long():
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    section = bytes(data[P + 61:recs[3]["start"]]) + b"\xff" * 6 + b"\x01"
    err = raises(CorruptRecordError, PREFIX + with_v2_section(data[P:], section))
    assert "too long" in str(err)
    assert err.position == recs[3]["start"]


def test_rule8_varint_of_five_bytes_is_not_too_long():
    # Five bytes, the last without continuation: a valid (if absurd) record length.
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    section = bytes(data[P + 61:recs[3]["start"]]) + b"\xfe\xff\xff\xff\x0f"
    err = raises(CorruptRecordError, PREFIX + with_v2_section(data[P:], section))
    assert "too long" not in str(err)


def test_rule8_varlong_too_long():
    # Record 3's timestampDelta becomes an 11-byte varlong.
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    rec = recs[3]
    body = b"\x00" + b"\x80" * 10 + b"\x00" + bytes(data[rec["offset_delta"]:rec["end"]])
    section = bytes(data[P + 61:rec["start"]]) + zigzag_varint(len(body)) + body
    err = raises(CorruptRecordError, PREFIX + with_v2_section(data[P:], section))
    assert "too long" in str(err)
    assert err.position == rec["start"] + len(zigzag_varint(len(body))) + 1


def test_rule8_ten_byte_varlong_is_accepted():
    data = v2()
    recs = parse_v2_records(data, P + 61, 4)
    rec = recs[3]
    ten = b"\x80" * 9 + b"\x00"                                      # zero in ten bytes
    body = b"\x00" + ten + bytes(data[rec["offset_delta"]:rec["end"]])
    section = bytes(data[P + 61:rec["start"]]) + zigzag_varint(len(body)) + body
    got = records_of(PREFIX + with_v2_section(data[P:], section))
    assert got[-1][4] == struct.unpack_from(">q", data, P + 27)[0]      # baseTimestamp + 0


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("field", ["key_len", "value_len"])
def test_rule8_legacy_length_runs_past_the_message(magic, field):
    data = legacy(magic)
    start = entries(data)[2][0]
    f = legacy_fields(data, start)
    put_i32(data, f[field], 1000)
    err = raises(CorruptRecordError, bytes(fix_crc(data, start)))
    assert err.position in (f[field], f[field] + 4)


@pytest.mark.parametrize("size", [14, 18, 21])
def test_rule8_v1_message_too_short_for_its_fields(size):
    data = legacy(1)
    start = entries(data)[1][0]
    entry = bytearray(data[start:start + 12 + size])
    put_i32(entry, 8, size)
    fix_crc(entry)
    err = raises(CorruptRecordError, PREFIX + bytes(entry) + PREFIX)
    # The field that does not fit starts at or before the message end.
    assert P + 18 <= err.position <= P + 12 + size


# ----------------------------------------------------------- rule 9: codecs

@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_rule9_unknown_codec_v2(codec_id):
    data = v2()
    data[P + 22] = (data[P + 22] & ~0x07) | codec_id
    err = raises(UnsupportedFormatError, bytes(fix_crc(data, P)))
    assert err.position in (P, P + 21, P + 22)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec_id", [4, 5, 6, 7])
def test_rule9_unknown_codec_or_zstd_in_legacy(magic, codec_id):
    data = legacy(magic)
    start = entries(data)[1][0]
    data[start + 17] |= codec_id
    err = raises(UnsupportedFormatError, bytes(fix_crc(data, start)))
    assert err.position in (start, start + 17)


def test_rule9_nested_compression():
    data = legacy(1, compression="gzip")
    inner = bytearray(decompress("gzip", data[legacy_fields(data, P)["value"]:]))
    inner[17] |= 0x01                                    # first inner message says gzip
    fix_crc(inner, 0)
    err = raises(CorruptRecordError,
                 PREFIX + with_legacy_value(data[P:], gzip.compress(bytes(inner))))
    assert err.position == P


@pytest.mark.parametrize("magic", [0, 1])
def test_rule9_wrapper_with_null_value(magic):
    data = legacy(magic, compression="gzip")
    err = raises(CorruptRecordError, PREFIX + with_legacy_value(data[P:], None))
    assert err.position == P


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_rule9_wrapper_with_no_inner_messages(magic, codec):
    data = legacy(magic, compression=codec)
    err = raises(CorruptRecordError,
                 PREFIX + with_legacy_value(data[P:], compress(codec, b"", magic)))
    assert err.position == P


def test_rule9_wrapper_holding_only_a_truncated_inner_message():
    data = legacy(1, compression="gzip")
    inner = decompress("gzip", data[legacy_fields(data, P)["value"]:])
    cut = inner[:12 + i32(inner, 8) - 1]
    err = raises(CorruptRecordError, PREFIX + with_legacy_value(data[P:], gzip.compress(cut)))
    assert err.position == P


def test_rule9_v1_wrapper_offset_below_its_last_inner_offset():
    data = legacy(1, compression="gzip", base_offset=0)
    data = bytearray(data)
    assert struct.unpack_from(">q", data, P)[0] == 3              # 4 inner, relative 0..3
    struct.pack_into(">q", data, P, 2)
    err = raises(CorruptRecordError, bytes(data))
    assert err.position == P


@pytest.mark.parametrize("magic", [2, 3, 0x80])
def test_rule9_inner_message_of_a_bad_magic(magic):
    data = legacy(1, compression="gzip")
    inner = bytearray(decompress("gzip", data[legacy_fields(data, P)["value"]:]))
    inner[16] = magic
    fix_crc(inner, 0)
    with pytest.raises((UnsupportedFormatError, CorruptRecordError)) as info:
        list(kcodec.read_records(PREFIX + with_legacy_value(data[P:], gzip.compress(bytes(inner)))))
    assert info.value.position == P


# ------------------------------------------------------- rule 10: control

def control(kind="COMMIT", coordinator_epoch=7):
    return bytearray(PREFIX + kcodec.encode_control(kind, producer_id=11, producer_epoch=2,
                                                    offset=1, coordinator_epoch=coordinator_epoch,
                                                    timestamp=1_600_000_000_000))


def as_control(data, start):
    """Set the control and transactional bits of the v2 batch at start."""
    data[start + 22] |= 0x30
    return bytes(fix_crc(data, start))


def test_control_batch_decodes():
    data = bytes(control("ABORT", 9))
    (rec,) = list(kcodec.read_records(data, include_control=True))[1:]
    assert (rec.control.type, rec.control.version, rec.control.coordinator_epoch) == ("ABORT", 0, 9)


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x01"])
def test_rule10_control_key_shorter_than_4_bytes(key):
    data = bytearray(PREFIX + kcodec.encode([(key, b"\x00\x00\x00\x00\x00\x01", 5, None)],
                                            base_offset=1))
    err = raises(CorruptRecordError, as_control(data, P))
    rec = parse_v2_records(data, P + 61, 1)[0]
    assert err.position in (P, rec["key_len"], rec["key"])


def test_rule10_control_key_with_negative_version():
    data = control()
    rec = parse_v2_records(data, P + 61, 1)[0]
    struct.pack_into(">h", data, rec["key"], -1)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position in (P, rec["key_len"], rec["key"])


@pytest.mark.parametrize("value", [None, b"", b"\x00\x00\x00\x00\x01"])
@pytest.mark.parametrize("type_id", [0, 1])
def test_rule10_end_txn_marker_shorter_than_6_bytes(value, type_id):
    data = bytearray(PREFIX + kcodec.encode([(struct.pack(">hh", 0, type_id), value, 5, None)],
                                            base_offset=1))
    err = raises(CorruptRecordError, as_control(data, P))
    rec = parse_v2_records(data, P + 61, 1)[0]
    assert err.position in (P, rec["value_len"], rec["value"])


def test_rule10_end_txn_marker_with_negative_version():
    data = control("ABORT")
    rec = parse_v2_records(data, P + 61, 1)[0]
    struct.pack_into(">h", data, rec["value"], -3)
    err = raises(CorruptRecordError, bytes(fix_crc(data, P)))
    assert err.position in (P, rec["value_len"], rec["value"])


def test_rule10_higher_versions_are_read_as_version_0():
    data = control("COMMIT", 5)
    rec = parse_v2_records(data, P + 61, 1)[0]
    struct.pack_into(">h", data, rec["key"], 3)
    struct.pack_into(">h", data, rec["value"], 2)
    (got,) = list(kcodec.read_records(bytes(fix_crc(data, P)), include_control=True))[1:]
    assert (got.control.type, got.control.coordinator_epoch) == ("COMMIT", 5)


def test_rule10_other_control_types_need_no_marker_value():
    data = bytearray(PREFIX + kcodec.encode([(struct.pack(">hh", 0, 2), None, 5, None),
                                             (struct.pack(">hh", 0, 99), b"", 5, None)],
                                            base_offset=1))
    recs = list(kcodec.read_records(as_control(data, P), include_control=True))[1:]
    assert [r.control.type for r in recs] == ["LEADER_CHANGE", "UNKNOWN"]


# ------------------------------------------------- rule 11: decompression

def corrupt_gzip(payload):
    out = bytearray(payload)
    out[len(out) // 2] ^= 0xFF
    return bytes(out)


def _stream_errors(codec, raw, magic=2):
    """Broken streams of `raw` for one codec."""
    good = compress(codec, raw, magic)
    cases = {"garbage": b"\x00\x01\x02\x03garbage, not a stream" * 3,
             "truncated": good[:len(good) * 2 // 3]}
    if codec == "gzip":
        tail = bytearray(good)
        tail[-8] ^= 0x01                                      # trailer CRC-32
        cases["trailer_crc"] = bytes(tail)
        isize = bytearray(good)
        isize[-1] ^= 0x01                                     # trailer ISIZE
        cases["trailer_isize"] = bytes(isize)
        cases["no_trailer"] = good[:-8]
        cases["flipped"] = corrupt_gzip(good)
    elif codec == "snappy":
        cases["xerial_bad_block"] = XERIAL_MAGIC + struct.pack(">iii", 1, 1, 6) + b"\xff" * 6
        cases["xerial_short_header"] = XERIAL_MAGIC + b"\x00\x00"
        cases["xerial_chunk_length_past_end"] = good[:16] + struct.pack(">i", 1 << 20) + good[20:]
        cases["raw_garbage"] = b"\x40" + b"\xff" * 12          # 64 bytes promised, bad tags
    elif codec == "lz4":
        cases["no_end_mark"] = good[:-4]
        if magic != 0:
            bad_hc = bytearray(good)
            bad_hc[6] ^= 0xFF
            cases["header_checksum"] = bytes(bad_hc)
        cases["bad_magic"] = b"\x05\x22\x4d\x18" + good[4:]
    elif codec == "zstd":
        cases["truncated_no_content_size"] = zstd_frame(raw, False)[:-3]
        checked = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(raw))
        checked[-1] ^= 0x01                                   # content checksum
        cases["content_checksum"] = bytes(checked)
    return cases


V2_STREAM_CASES = [(codec, name) for codec in ("gzip", "snappy", "lz4", "zstd")
                   for name in _stream_errors(codec, b"x" * 300)]


@pytest.mark.parametrize("codec,case", V2_STREAM_CASES)
def test_rule11_v2_decompression_stream_error(codec, case):
    data = v2(compression=codec)
    raw = bytes(v2()[P + 61:])
    payload = _stream_errors(codec, raw)[case]
    err = raises(DecompressionError, PREFIX + with_v2_section(data[P:], payload))
    assert err.position == P


LEGACY_STREAM_CASES = [(magic, codec, name) for magic in (0, 1) for codec in ("gzip", "snappy", "lz4")
                       for name in _stream_errors(codec, b"x" * 300, magic)]


@pytest.mark.parametrize("magic,codec,case", LEGACY_STREAM_CASES)
def test_rule11_legacy_wrapper_decompression_stream_error(magic, codec, case):
    data = legacy(magic, compression=codec)
    raw = decompress(codec, data[legacy_fields(data, P)["value"]:], magic)
    payload = _stream_errors(codec, raw, magic)[case]
    err = raises(DecompressionError, PREFIX + with_legacy_value(data[P:], payload))
    assert err.position == P


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_rule11_v2_decompressed_size_limit(codec):
    data = bytes(v2(compression=codec))
    size = len(v2()) - P - 61
    assert len(records_of(data, max_decompressed_bytes=size)) == 5
    err = raises(DecompressionLimitError, data, max_decompressed_bytes=size - 1)
    assert err.position == P
    assert str(size - 1) in str(err)
    with pytest.raises(DecompressionLimitError):
        list(kcodec.read_records(data, max_decompressed_bytes=size - 1))


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_rule11_legacy_decompressed_size_limit(magic, codec):
    data = bytes(legacy(magic, compression=codec))
    size = len(decompress(codec, data[legacy_fields(data, P)["value"]:], magic))
    assert len(records_of(data, max_decompressed_bytes=size)) == 5
    err = raises(DecompressionLimitError, data, max_decompressed_bytes=size - 1)
    assert err.position == P


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_rule11_decompression_bomb_stops_at_the_limit(codec):
    # 16 MiB of zeros; limit 1 MiB.
    raw = b"\x00" * (16 << 20)
    data = v2(compression=codec)
    if codec == "snappy":
        payload = b"".join([xerial(b"")[:16]] + [
            struct.pack(">i", len(blk)) + blk
            for blk in [bytes(cramjam.snappy.compress_raw(raw[:32 << 10]))] * 512])
    elif codec == "zstd":
        payload = zstd_frame(raw, content_size=False)
    else:
        payload = compress(codec, raw)
    err = raises(DecompressionLimitError, PREFIX + with_v2_section(data[P:], payload),
                 max_decompressed_bytes=1 << 20)
    assert err.position == P


@pytest.mark.parametrize("lie", [-10, +10, "zero"])
def test_rule11_zstd_lying_content_size(lie):
    # libzstd (and so Java's zstd-jni) checks the decoded size against the
    # frame's declared content size.
    data = v2(compression="zstd")
    raw = bytes(v2()[P + 61:])
    frame = bytearray(zstd_frame(raw))
    fhd = frame[4]
    assert fhd >> 6 == 0 and fhd & 0x20                # single segment, 1-byte content size
    frame[5] = 0 if lie == "zero" else frame[5] + lie
    err = raises(DecompressionError, PREFIX + with_v2_section(data[P:], bytes(frame)))
    assert err.position == P


def test_rule11_zstd_window_over_2_pow_27_is_refused():
    data = v2(compression="zstd")
    raw = bytes(v2()[P + 61:])
    params = zstandard.ZstdCompressionParameters(window_log=28)
    cobj = zstandard.ZstdCompressor(compression_params=params).compressobj()
    frame = cobj.compress(raw) + cobj.flush()
    assert zstandard.get_frame_parameters(frame).window_size == 1 << 28
    err = raises(DecompressionError, PREFIX + with_v2_section(data[P:], frame))
    assert err.position == P
    # 2^27 is still accepted.
    params = zstandard.ZstdCompressionParameters(window_log=27)
    cobj = zstandard.ZstdCompressor(compression_params=params).compressobj()
    frame = cobj.compress(raw) + cobj.flush()
    assert records_of(PREFIX + with_v2_section(data[P:], frame)) == records_of(bytes(v2()))


# ------------------------------------------------------------- leniencies

def test_partial_trailing_entry_stops_silently_or_raises_on_request():
    data = bytes(v2())
    for cut in (1, 5, 12, 16, 17, 40, len(data) - P - 1):
        got = records_of(data[:P + cut])
        assert got == records_of(PREFIX)
        with pytest.raises(CorruptRecordError) as info:
            list(kcodec.read_batches(data[:P + cut], partial="error"))
        assert info.value.position == P
        with pytest.raises(CorruptRecordError):
            list(kcodec.read_records(data[:P + cut], partial="error"))
    assert len(records_of(data, partial="error")) == 5


def test_partial_reader_position_names_the_partial_entry():
    data = bytes(v2())
    reader = kcodec.read_batches(data[:-3])
    assert len(list(reader)) == 1
    assert reader.position == P


@pytest.mark.parametrize("length", [-1, -2, -100, -(1 << 31)])
def test_any_negative_v2_length_is_null(length):
    # Record 0's key, value and the 2nd header's value become null-by-any-negative.
    data = bytearray(PREFIX + kcodec.encode(
        [(None, None, 10, [("a", b"1"), ("b", None)])], base_offset=1))
    rec = parse_v2_records(data, P + 61, 1)[0]
    body = bytes(data[rec["body"]:rec["end"]])
    # Rebuild the record with each null length written as `length`.
    rel = lambda pos: pos - rec["body"]                     # noqa: E731
    new = bytearray()
    last = 0
    for pos in (rec["key_len"], rec["value_len"], rec["headers"][1]["value_len"]):
        new += body[last:rel(pos)] + zigzag_varint(length)
        last = rel(pos) + 1
    new += body[last:]
    batch = PREFIX + with_v2_section(data[P:], zigzag_varint(len(new)) + bytes(new))
    (r,) = list(kcodec.read_records(batch))[1:]
    assert (r.key, r.value, r.key_view, r.value_view) == (None, None, None, None)
    assert r.headers == (("a", b"1"), ("b", None))


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("length", [-2, -(1 << 31)])
def test_any_negative_legacy_length_is_null(magic, length):
    data = bytearray(PREFIX + kcodec.encode([(None, None, 10, None)], magic=magic, base_offset=1))
    f = legacy_fields(data, P)
    put_i32(data, f["key_len"], length)
    put_i32(data, f["value_len"], length)
    (r,) = list(kcodec.read_records(bytes(fix_crc(data, P))))[1:]
    assert (r.key, r.value) == (None, None)


def test_unused_v2_attribute_bits_are_ignored():
    base = v2(timestamp_type="LogAppendTime")
    data = bytearray(base)
    data[P + 21] |= 0xFF                 # bits 8-15
    data[P + 22] |= 0x80                 # bit 7
    for rec in parse_v2_records(data, P + 61, 4):
        data[rec["attr"]] = 0xFF          # record attributes: unused
    fix_crc(data, P)
    assert records_of(bytes(data)) == records_of(bytes(base))
    b = list(kcodec.read_batches(bytes(data)))[1]
    assert (b.compression, b.timestamp_type, b.is_transactional, b.is_control) == \
        ("none", "LogAppendTime", False, False)


@pytest.mark.parametrize("magic", [0, 1])
def test_unused_legacy_attribute_bits_are_ignored(magic):
    base = legacy(magic)
    data = bytearray(base)
    for start, _ in entries(data)[1:]:
        data[start + 17] |= 0xF0
        fix_crc(data, start)
    assert records_of(bytes(data)) == records_of(bytes(base))


def test_delete_horizon_batches_decode_with_negative_deltas():
    data = v2()
    data[P + 22] |= 0x40
    base_ts = struct.unpack_from(">q", data, P + 27)[0]
    struct.pack_into(">q", data, P + 27, base_ts + 2)        # cleaner-set horizon
    fix_crc(data, P)
    b = list(kcodec.read_batches(bytes(data)))[1]
    assert b.delete_horizon_ms == base_ts + 2
    assert [r.timestamp for r in b] == [base_ts + 2 + i for i in range(4)]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_magic0_lz4_writes_the_legacy_header_checksum_and_kafka_python_reads_it():
    from kafka.record import MemoryRecords

    data = bytes(kcodec.encode(LEGACY_RECORDS, magic=0, compression="lz4"))
    frame = data[legacy_fields(data, 0)["value"]:]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    hlen = 7 + (8 if frame[4] & 0x08 else 0) + (4 if frame[4] & 0x01 else 0)
    assert frame[hlen - 1] == (xxhash.xxh32_intdigest(frame[0:hlen - 1]) >> 8) & 0xFF
    assert frame[hlen - 1] != (xxhash.xxh32_intdigest(frame[4:hlen - 1]) >> 8) & 0xFF
    got = []
    records = MemoryRecords(data)
    while records.has_next():
        for rec in records.next_batch():
            got.append((rec.offset, rec.key, rec.value))
    assert got == [(i, k, v) for i, (k, v, _, _) in enumerate(LEGACY_RECORDS)]


@pytest.mark.parametrize("hc", [0x00, 0x5A, 0xFF])
def test_magic0_lz4_header_checksum_is_not_checked(hc):
    data = legacy(0, compression="lz4")
    value = legacy_fields(data, P)["value"]
    # Both the broken (Kafka 0.8) checksum and a correct or random one are accepted.
    for checksum in (hc, (xxhash.xxh32_intdigest(bytes(data[value + 4:value + 6])) >> 8) & 0xFF):
        data[value + 6] = checksum
        fix_crc(data, P)
        assert [r[1:3] for r in records_of(bytes(data))[1:]] == [r[:2] for r in LEGACY_RECORDS]


def test_magic1_lz4_header_checksum_is_checked():
    data = legacy(1, compression="lz4")
    value = legacy_fields(data, P)["value"]
    data[value + 6] ^= 0xFF
    err = raises(DecompressionError, bytes(fix_crc(data, P)))
    assert err.position == P


def test_snappy_without_xerial_magic_is_raw_snappy():
    data = v2(compression="snappy")
    raw = bytes(v2()[P + 61:])
    batch = PREFIX + with_v2_section(data[P:], bytes(cramjam.snappy.compress_raw(raw)))
    assert records_of(batch) == records_of(bytes(v2()))
    wrapper = legacy(1, compression="snappy")
    inner = decompress("snappy", wrapper[legacy_fields(wrapper, P)["value"]:])
    raw_wrapper = PREFIX + with_legacy_value(wrapper[P:], bytes(cramjam.snappy.compress_raw(inner)))
    assert records_of(raw_wrapper) == records_of(bytes(legacy(1)))


@pytest.mark.parametrize("version", [struct.pack(">ii", 1, 1), struct.pack("<ii", 1, 1)])
def test_xerial_snappy_multi_chunk_and_little_endian_versions(version):
    data = v2(compression="snappy")
    raw = bytes(v2()[P + 61:])
    batch = PREFIX + with_v2_section(data[P:], xerial(raw, chunk=7, version=version))
    assert records_of(batch) == records_of(bytes(v2()))


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_empty_batch_is_valid_and_its_payload_is_never_read(codec):
    data = v2(compression=codec)
    # count 0 with a payload that is not a valid stream of anything: never read.
    batch = PREFIX + with_v2_section(data[P:], b"\xde\xad\xbe\xef" * 3, count=0)
    (b,) = list(kcodec.read_batches(batch))[1:]
    assert (b.count, list(b), b.base_offset, b.last_offset) == (0, [], 1, 4)
    assert list(kcodec.read_records(batch))[1:] == []


def test_v1_wrapper_offset_zero_keeps_inner_offsets():
    data = legacy(1, compression="gzip")
    struct.pack_into(">q", data, P, 0)
    fix_crc(data, P)                         # offset is outside the CRC; harmless
    got = [r[0] for r in records_of(bytes(data))]
    assert got == [0, 0, 1, 2, 3]


def test_v1_wrapper_offsets_are_shifted_to_the_wrapper_offset():
    data = legacy(1, compression="gzip")
    struct.pack_into(">q", data, P, 1000)
    got = [r[0] for r in records_of(bytes(data))]
    assert got == [0, 997, 998, 999, 1000]


def test_v0_wrapper_inner_offsets_are_absolute():
    data = legacy(0, compression="gzip", base_offset=40)
    got = [r[0] for r in records_of(bytes(data))]
    assert got == [0, 40, 41, 42, 43]


def test_log_append_time_wrapper_gives_inner_records_its_timestamp():
    data = legacy(1, compression="gzip", timestamp_type="LogAppendTime")
    struct.pack_into(">q", data, P + 18, 1_700_000_000_000)
    fix_crc(data, P)
    (b,) = list(kcodec.read_batches(bytes(data)))[1:]
    assert b.timestamp_type == "LogAppendTime"
    assert [(r.timestamp, r.timestamp_type) for r in b] == [(1_700_000_000_000, "LogAppendTime")] * 4
    create = legacy(1, compression="gzip")
    assert [r[4] for r in records_of(bytes(create))[1:]] == [r[2] for r in LEGACY_RECORDS]


def test_v2_log_append_time_gives_records_the_max_timestamp():
    data = v2(timestamp_type="LogAppendTime")
    struct.pack_into(">q", data, P + 35, 1_700_000_000_123)
    fix_crc(data, P)
    assert [r[4] for r in records_of(bytes(data))[1:]] == [1_700_000_000_123] * 4


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_several_frames(content_size):
    data = v2(compression="zstd")
    raw = bytes(v2()[P + 61:])
    payload = b"".join(zstd_frame(raw[i:i + 20], content_size) for i in range(0, len(raw), 20))
    assert records_of(PREFIX + with_v2_section(data[P:], payload)) == records_of(bytes(v2()))


def test_zstd_single_frame_without_content_size():
    data = v2(compression="zstd")
    raw = bytes(v2()[P + 61:])
    payload = zstd_frame(raw, content_size=False)
    assert zstandard.frame_content_size(payload) == -1
    assert records_of(PREFIX + with_v2_section(data[P:], payload)) == records_of(bytes(v2()))


def test_zstd_mixed_frames_with_and_without_content_size():
    data = v2(compression="zstd")
    raw = bytes(v2()[P + 61:])
    payload = zstd_frame(raw[:30], True) + zstd_frame(raw[30:], False)
    assert records_of(PREFIX + with_v2_section(data[P:], payload)) == records_of(bytes(v2()))


def test_gzip_concatenated_members():
    data = v2(compression="gzip")
    raw = bytes(v2()[P + 61:])
    payload = b"".join(gzip.compress(raw[i:i + 25]) for i in range(0, len(raw), 25))
    assert records_of(PREFIX + with_v2_section(data[P:], payload)) == records_of(bytes(v2()))
    wrapper = legacy(1, compression="gzip")
    inner = decompress("gzip", wrapper[legacy_fields(wrapper, P)["value"]:])
    members = gzip.compress(inner[:30]) + gzip.compress(inner[30:])
    assert records_of(PREFIX + with_legacy_value(wrapper[P:], members)) == records_of(
        bytes(wrapper))


def test_many_gzip_members_are_fed_the_input_about_once(monkeypatch):
    """An inflater copies what it was fed and did not use: feeding each of
    many members the whole rest would copy it once a member (time of the
    square of their count)."""
    raw = bytes(range(256)) * 40
    stream = b"".join(gzip.compress(raw[i:i + 4]) for i in range(0, len(raw), 4))
    real = kcodec.compression._inflate
    fed = []

    class Counted:
        error = real.error

        @staticmethod
        def decompressobj(wbits):
            inflater = real.decompressobj(wbits)

            class Inflater:
                def decompress(self, data, max_length):
                    fed.append(len(data))
                    return inflater.decompress(data, max_length)

                def __getattr__(self, name):
                    return getattr(inflater, name)
            return Inflater()

    monkeypatch.setattr(kcodec.compression, "_inflate", Counted)
    assert bytes(kcodec.compression.decompress(kcodec.compression.GZIP, stream, 1 << 20)) == raw
    assert len(fed) >= len(raw) // 4
    assert sum(fed) < 4 * len(stream)
    with pytest.raises(DecompressionError, match="ends before its last block"):
        kcodec.compression.decompress(kcodec.compression.GZIP, stream[:-3], 1 << 20)


# ----------------------------------------------------------------- pickling

def _error_cases():
    crc = v2()
    crc[P + 70] ^= 1
    count = v2()
    put_i32(count, P + 57, -1)
    magic = v2()
    magic[P + 16] = 9
    stream = v2(compression="gzip")
    limit = bytes(v2(compression="zstd"))
    return [
        (bytes(crc), {}, CrcMismatchError),
        (bytes(fix_crc(count, P)), {}, CorruptRecordError),
        (bytes(magic), {}, UnsupportedFormatError),
        (PREFIX + with_v2_section(stream[P:], b"not gzip at all"), {}, DecompressionError),
        (limit, {"max_decompressed_bytes": 10}, DecompressionLimitError),
    ]


@pytest.mark.parametrize("data,kw,cls", _error_cases(),
                         ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_errors_pickle_round_trip(data, kw, cls):
    err = raises(cls, data, **kw)
    assert err.position is not None
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(err, protocol))
        assert type(back) is cls
        assert isinstance(back, (KafkaFormatError, ValueError))
        assert str(back) == str(err)
        assert back.args == err.args
        assert (back.message, back.position, back.offset) == (err.message, err.position, err.offset)
        if cls is CrcMismatchError:
            assert (back.stored, back.computed) == (err.stored, err.computed)
            assert back.stored != back.computed
