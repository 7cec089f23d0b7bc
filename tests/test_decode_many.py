"""kcodec.decode_many: many record sets in one call, row for row what decode()
gives each of them, one after another."""
import numpy as np
import pyarrow as pa
import pytest

import kcodec
from kcodec.errors import CorruptRecordError, CrcMismatchError, KafkaFormatError

RECORDS = [
    (b"k0", b"v0", 1_700_000_000_000, [("h", b"x"), ("null", None)]),
    (None, b"", 1_700_000_000_005, None),
    (b"", None, 1_699_999_999_000, [("\u00e9t\u00e9", b"\xff")]),
] * 4
PID = 31


def transactions():
    """An aborted and a committed transaction, with their markers."""
    return b"".join([
        kcodec.encode(RECORDS[:3], base_offset=0, producer_id=PID, producer_epoch=1,
                      base_sequence=0, transactional=True),
        kcodec.encode_control("ABORT", producer_id=PID, producer_epoch=1, offset=3, timestamp=9),
        kcodec.encode(RECORDS[:2], base_offset=4, producer_id=PID, producer_epoch=1,
                      base_sequence=3, transactional=True),
        kcodec.encode_control("COMMIT", producer_id=PID, producer_epoch=1, offset=6, timestamp=9),
    ])


def record_sets():
    """Every magic and codec, v0/v1 wrappers, transactions, a partial batch
    at the end, nothing, and empty."""
    sets = []
    for magic in (0, 1, 2):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            if magic < 2 and codec == "zstd":
                continue
            records = RECORDS if magic == 2 else [r[:3] for r in RECORDS]
            sets.append(kcodec.encode(records, magic=magic, compression=codec,
                                      base_offset=100 * len(sets), max_batch_bytes=150))
    whole = kcodec.encode(RECORDS, base_offset=7)
    sets += [None, transactions(), b"", whole + whole[:40], None]
    return sets


def each_decoded(sets, **options):
    tables = [kcodec.decode(data, **options) for data in sets if data is not None]
    rows = [0 if data is None else kcodec.decode(data, **options).num_rows for data in sets]
    return pa.concat_tables(tables), rows


OPTIONS = [
    {},
    {"views": True},
    {"batch_columns": True, "include_control": True},
    {"isolation": "read_committed"},
    {"isolation": "read_committed", "batch_columns": True, "views": True},
    {"topic": "orders", "partition": 3},
    {"verify_crc": False, "max_decompressed_bytes": 1 << 16},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_rows_are_each_decode_one_after_another(options):
    sets = record_sets()
    table, rows = kcodec.decode_many(sets, **options)
    table.validate(full=True)
    expected, expected_rows = each_decoded(sets, **options)
    assert table.schema == expected.schema
    assert table.equals(expected)
    assert isinstance(rows, np.ndarray) and rows.dtype == np.int64
    assert rows.tolist() == expected_rows
    assert sum(expected_rows) > 0 and 0 in expected_rows


def test_the_fixtures_in_one_call(fixture_record_sets):
    sets = [data for _, data in fixture_record_sets]
    # One fixture's control batch has no CRC (as in test_arrow).
    options = {"include_control": True, "verify_crc": False}
    table, rows = kcodec.decode_many(sets, **options)
    expected, expected_rows = each_decoded(sets, **options)
    assert rows.tolist() == [entry["record_count"] for entry, _ in fixture_record_sets]
    assert table.equals(expected)
    assert rows.tolist() == expected_rows


def test_no_record_sets():
    table, rows = kcodec.decode_many([])
    assert table.num_rows == 0 and table.schema == kcodec.decode(b"").schema
    assert rows.tolist() == []
    table, rows = kcodec.decode_many(iter([None, b""]))
    assert table.num_rows == 0 and rows.tolist() == [0, 0]


def test_buffers_and_memoryviews_are_record_sets():
    data = kcodec.encode(RECORDS)
    table, rows = kcodec.decode_many([pa.py_buffer(data), memoryview(data), bytearray(data)])
    assert rows.tolist() == [len(RECORDS)] * 3
    assert table.equals(pa.concat_tables([kcodec.decode(data)] * 3))


def flipped(data, at):
    damaged = bytearray(data)
    damaged[at] ^= 0x01
    return bytes(damaged)


@pytest.mark.invalid_input
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("verify_crc,error", [(True, CrcMismatchError),
                                              (False, CorruptRecordError)])
def test_an_error_names_its_record_set_and_its_byte_there(isolation, verify_crc, error):
    good = kcodec.encode(RECORDS)
    second = kcodec.encode(RECORDS, base_offset=50)
    # A record's length, in the second batch: its CRC fails, or without the
    # check its record no longer fits.
    bad = second + flipped(second, 61 + 0)
    with pytest.raises(KafkaFormatError) as alone:
        kcodec.decode(bad, verify_crc=verify_crc, isolation=isolation)
    with pytest.raises(error) as raised:
        kcodec.decode_many([good, None, bad, good], verify_crc=verify_crc, isolation=isolation)
    err, expected = raised.value, alone.value
    assert type(err) is type(expected)
    assert err.source == "record set 2"
    assert err.position == expected.position >= len(second)
    assert err.offset == expected.offset
    assert f"record set 2, byte {expected.position}" in str(err)


@pytest.mark.invalid_input
def test_first_index_numbers_a_list_that_goes_on_from_another():
    bad = flipped(kcodec.encode(RECORDS), 30)
    with pytest.raises(CrcMismatchError) as raised:
        kcodec.decode_many([None, bad], first_index=4096)
    assert raised.value.source == "record set 4097"


def test_what_is_not_a_list_of_record_sets_is_refused():
    data = kcodec.encode(RECORDS)
    with pytest.raises(TypeError, match="iterable of record sets"):
        kcodec.decode_many(data)
    for isolation in ("read_uncommitted", "read_committed"):
        with pytest.raises(TypeError, match="record set 1: "):
            kcodec.decode_many([data, "not bytes"], isolation=isolation)
    with pytest.raises(ValueError, match="partial"):
        kcodec.decode_many([None], partial="bogus")       # checked with no record set read


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_offset_bounds_past_int64_are_bounds_all_the_same(isolation):
    data = kcodec.encode(RECORDS, base_offset=5)
    every = [r.offset for r in kcodec.read_records(data)]
    for start, end, expected in ((None, 1 << 70, every), (-(1 << 70), None, every),
                                 (None, -(1 << 70), []), (1 << 63, None, []),
                                 (-(1 << 70), 7, every[:2])):
        got = [r.offset for r in kcodec.read_records(data, isolation=isolation,
                                                      start_offset=start, end_offset=end)]
        table = kcodec.decode(data, isolation=isolation, start_offset=start, end_offset=end)
        assert got == table.column("offset").to_pylist() == expected
