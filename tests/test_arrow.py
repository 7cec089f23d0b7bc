"""kcodec.decode: the same rows as read_records, as Arrow columns."""

import inspect
import os
import resource
import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import kcodec
from kcodec.arrow import schema

from arrow_rows import rows_of_records, rows_of_table

def assert_same_rows(data, **options):
    table = kcodec.decode(data, **options)
    table.validate(full=True)
    got = [{k: r[k] for k in ("key", "value", "offset", "timestamp", "timestampType", "headers")}
           for r in rows_of_table(table)]
    assert got == rows_of_records(data, **options)
    return table


RECORDS = [
    (b"k0", b"v0", 1_700_000_000_000, [("h", b"x"), ("null", None), ("empty", b"")]),
    (None, b"", 1_700_000_000_005, None),
    (b"", None, 1_699_999_999_000, [("\u00e9t\u00e9", b"\xff")]),
] * 7


@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1, 2)
                                         for c in ("none", "gzip", "snappy", "lz4", "zstd")
                                         if not (m < 2 and c == "zstd")])
def test_rows_equal_read_records(magic, codec):
    records = RECORDS if magic == 2 else [r[:3] for r in RECORDS]
    data = kcodec.encode(records, magic=magic, compression=codec, base_offset=40,
                         max_batch_bytes=200)
    table = assert_same_rows(data)
    assert table.num_rows == len(records)
    assert table.schema == schema()


def test_transactions_control_records_and_batch_columns():
    pid = 77
    data = b"".join([
        kcodec.encode(RECORDS[:3], base_offset=0, producer_id=pid, producer_epoch=2,
                      base_sequence=0, transactional=True),
        kcodec.encode_control("ABORT", producer_id=pid, producer_epoch=2, offset=3, timestamp=9),
        kcodec.encode(RECORDS[:2], base_offset=4, producer_id=pid, producer_epoch=2,
                      base_sequence=3, transactional=True, partition_leader_epoch=5),
        kcodec.encode_control("COMMIT", producer_id=pid, producer_epoch=2, offset=6, timestamp=9),
        kcodec.encode(RECORDS[:1], base_offset=7),
    ])
    everything = assert_same_rows(data, include_control=True)
    assert everything.column("offset").to_pylist() == list(range(8))
    committed = assert_same_rows(data, isolation="read_committed")
    assert committed.column("offset").to_pylist() == [4, 5, 7]
    given_list = assert_same_rows(data, isolation="read_committed", aborted=[(pid, 0)])
    assert given_list.equals(committed)

    table = kcodec.decode(data, batch_columns=True, topic="orders", partition=3)
    assert table.schema == schema(topic=True, partition=True, batch_columns=True)
    rows = table.to_pylist()
    assert {r["topic"] for r in rows} == {"orders"} and {r["partition"] for r in rows} == {3}
    assert [(r["producerId"], r["producerEpoch"], r["sequence"], r["isTransactional"],
             r["leaderEpoch"]) for r in rows] == [
        (pid, 2, 0, True, -1), (pid, 2, 1, True, -1), (pid, 2, 2, True, -1),
        (pid, 2, 3, True, 5), (pid, 2, 4, True, 5), (-1, -1, -1, False, -1)]


def test_fixture_record_sets(fixture_record_sets):
    for entry, data in fixture_record_sets:
        # CRCs are the object API's business (one fixture's control batch has none)
        table = assert_same_rows(data, include_control=True, verify_crc=False)
        assert table.num_rows == entry["record_count"]


@pytest.mark.invalid_input
def test_errors_are_the_object_apis():
    data = bytearray(kcodec.encode(RECORDS, compression="none"))
    data[61] = 0x01                        # the first record's length: -1
    with pytest.raises(kcodec.CrcMismatchError):
        kcodec.decode(bytes(data))
    with pytest.raises(kcodec.KafkaFormatError) as from_records:
        list(kcodec.read_records(bytes(data), verify_crc=False))
    with pytest.raises(type(from_records.value)) as from_decode:
        kcodec.decode(bytes(data), verify_crc=False)
    assert from_decode.value.position == from_records.value.position


def test_empty_input_gives_an_empty_table_of_the_schema():
    table = kcodec.decode(b"", topic="t", partition=0, batch_columns=True)
    assert table.num_rows == 0
    assert table.schema == schema(topic=True, partition=True, batch_columns=True)


blobs = st.one_of(st.none(), st.binary(max_size=40))
header_lists = st.lists(st.tuples(st.text(max_size=6), blobs), max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(blobs, blobs, st.integers(0, 2**41), header_lists), max_size=30),
       st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]), st.integers(64, 2000))
def test_random_records(records, codec, max_batch_bytes):
    data = kcodec.encode(records, compression=codec, max_batch_bytes=max_batch_bytes)
    table = assert_same_rows(data)
    assert table.num_rows == len(records)


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_headers_starting_mid_batch_and_batches_without_them_after(codec, isolation):
    """A batch's records are added by a loop without header columns until one
    has headers; the rest of that batch, and every later batch, by the loop
    with them. (read_uncommitted re-reads a batch whose fast path faults
    through the object API; read_committed has no such fallback.)"""
    def batch(first, with_headers):
        return kcodec.encode(
            [(b"k%d" % i, b"v" * (i % 7), 10 + i, [("h", b"%d" % i)] if with_headers(i) else None)
             for i in range(first, first + 20)],
            compression=codec, base_offset=first, max_batch_bytes=1 << 20)
    data = (batch(0, lambda i: False) + batch(20, lambda i: i >= 31)
            + batch(40, lambda i: False) + batch(60, lambda i: i % 2 == 0))
    table = assert_same_rows(data, isolation=isolation)
    headers = table.column("headers").to_pylist()
    assert [i for i, h in enumerate(headers) if h] == (list(range(31, 40))
                                                       + list(range(60, 80, 2)))
    assert headers[31] == [{"key": "h", "value": b"31"}]


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("views", [False, True])
def test_records_with_more_headers_than_the_parse_keeps_the_place_of(codec, views):
    """The parse keeps where a record's first 8 headers are for the copy; the
    copy reads any after those again. Counts on both sides of 8, keys of
    every kind (empty, repeated, not ASCII), values null, empty and long."""
    import random
    rng = random.Random(8)
    keys = ["", "k", "trace-id", "\u00e9t\u00e9", "a-much-longer-header-key-than-32-bytes"]
    values = [None, b"", b"v", bytes(range(40)), b"x" * 300]
    records = [(b"k%d" % i, b"v" * (i % 50), 1_700_000_000_000 + i,
                [(rng.choice(keys), rng.choice(values)) for _ in range(count)])
               for i, count in enumerate([0, 1, 7, 8, 9, 10, 16, 17, 40, 8, 9, 0, 120] * 6)]
    data = kcodec.encode(records, compression=codec, max_batch_bytes=3000)
    table = assert_same_rows(data)
    if views:
        viewed = kcodec.decode(data, views=True)
        viewed.validate(full=True)
        assert viewed.cast(schema()).equals(table)
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[3]] or None for r in records]


def test_a_header_key_not_ascii_in_the_last_record_only_makes_the_keys_text():
    """Whether header keys need decoding as UTF-8 is found over the whole
    column once the records are in: one key not ASCII, the last of 3000
    records, is text like the others; one not UTF-8 is replaced as Java
    replaces it."""
    records = [(None, b"v", i, [("h", b"%d" % i)]) for i in range(2999)]
    for last_key, expected in ((b"\xc3\xa9", "\u00e9"), (b"\xff", "\ufffd"), (b"z", "z")):
        data = kcodec.encode(records + [(None, b"v", 2999, [(last_key, b"x")])],
                             max_batch_bytes=5000)
        keys = [h[0]["key"] for h in kcodec.decode(data).column("headers").to_pylist()]
        assert keys == ["h"] * 2999 + [expected]


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("magic", [1, 2])
@pytest.mark.parametrize("views", [False, True])
def test_columns_grow_past_what_the_first_batch_suggests(codec, magic, views):
    if magic < 2 and codec == "zstd":
        pytest.skip("zstd needs magic 2")
    first = kcodec.encode([(b"k", b"v", 1, None)], compression=codec, magic=magic)
    rest = [(b"key-%d" % i, bytes([i % 251]) * (5000 + i), 2 + i,
             [("h%d" % j, b"x" * (j * 300)) for j in range(i % 4)] if magic == 2 else None)
            for i in range(300)]
    data = first + kcodec.encode(rest, compression=codec, base_offset=1, magic=magic,
                                 max_batch_bytes=1 << 16)
    table = kcodec.decode(data, views=views)
    table.validate(full=True)
    assert table.num_rows == 301
    assert table.cast(schema()).equals(assert_same_rows(data))
    bounded = kcodec.decode(data, start_offset=150, views=views)
    assert bounded.column("offset").to_pylist() == list(range(150, 301))


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_a_batch_too_large_to_reserve_whole_decodes_like_read_records(codec):
    """decode reserves column room for the rest of a batch up to 64 MiB of
    records, then skips the per-record room checks; past that it checks each
    record. Both, and null keys (reserved as many bytes as the batch has)."""
    small = kcodec.encode([(None, b"v" * 100, i, None) for i in range(3000)], compression=codec)
    large = kcodec.encode([(None if i % 3 else b"k%d" % i, bytes([i]) * (1 << 20), i, None)
                           for i in range(70)], compression=codec, base_offset=3000,
                          max_batch_bytes=1 << 30)
    assert len(list(kcodec.read_batches(large))) == 1
    table = assert_same_rows(small + large + small)
    assert table.num_rows == 6070
    assert table.column("key").null_count == 6000 + 46


def _batch_with_bad_record(codec, base_offset):
    """A v2 batch of 200 records whose 120th has a headers count past its end,
    with a CRC that matches: only the record's own checks catch it."""
    plain = kcodec.encode([(b"k%d" % i, b"v" * 20, i, None) for i in range(200)],
                          base_offset=base_offset)
    header, records = bytearray(plain[:61]), bytearray(plain[61:])
    record = 0
    for _ in range(119):
        record += 1 + records[record] // 2         # a one-byte zigzag length: records < 64 bytes
    length = records[record] // 2
    assert records[record] < 0x80 and records[record + length] == 0
    records[record + length] = 0x02                # its headers count: 1, but no bytes follow
    if codec != "none":
        records = kcodec.compression.compress(kcodec.compression.codec_id(codec), bytes(records))
        header[22] |= kcodec.compression.codec_id(codec)
    batch = header + records
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    batch[17:21] = kcodec.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


@pytest.mark.invalid_input
@pytest.mark.parametrize("codec", ["none", "lz4", "gzip"])
@pytest.mark.parametrize("views", [False, True])
def test_a_record_failing_its_checks_mid_batch_raises_what_read_records_raises(codec, views):
    good = kcodec.encode([(b"k", b"v" * 100, i, None) for i in range(500)],
                         compression=codec, max_batch_bytes=4096)
    data = good + _batch_with_bad_record(codec, 500)
    with pytest.raises(kcodec.CorruptRecordError) as from_records:
        list(kcodec.read_records(data))
    with pytest.raises(kcodec.CorruptRecordError) as from_decode:
        kcodec.decode(data, views=views)
    assert str(from_decode.value) == str(from_records.value)
    assert from_decode.value.position == from_records.value.position >= len(good)
    assert from_decode.value.offset == 500
    assert kcodec.decode(good, views=views).num_rows == 500


def test_live_columns_keep_their_memory_while_later_decodes_reuse_freed_memory():
    inputs = [kcodec.encode([(b"k%d" % i, bytes([n]) * 100, i, [("h", bytes([n]))])
                             for i in range(2000)]) for n in range(3)]
    kept = [kcodec.decode(data).column("value") for data in inputs]   # the tables are gone
    for _ in range(5):
        for data in inputs:
            kcodec.decode(data)
    for n, column in enumerate(kept):
        assert column.to_pylist() == [bytes([n]) * 100] * 2000


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.footprint
def test_small_tables_give_all_their_memory_back():
    """A small table's columns go to Arrow in one import, let go when the
    last of them goes: 20,000 decodes, each table dropped at once or one of
    its columns kept until the next decode, leave the resident size where it
    was."""
    data = kcodec.encode([(b"k%d" % i, b"v" * 100, i, [("h", b"x")]) for i in range(50)])
    for _ in range(100):
        kcodec.decode(data)
    before = resident_bytes()
    for n in range(20000):
        column = kcodec.decode(data, views=bool(n % 2), batch_columns=bool(n % 3)).column(n % 6)
    assert resident_bytes() - before < 16 << 20
    assert column.to_pylist() == kcodec.decode(data).column(n % 6).to_pylist()


@pytest.mark.parametrize("options", [{}, {"views": True}, {"batch_columns": True}],
                         ids=["copies", "views", "batch_columns"])
def test_small_and_large_tables_decode_alike(options, restored_kept_memory_limit):
    """A table whose columns take under 1 MiB goes to Arrow in one import,
    a larger one column by column: the same records give the same rows."""
    records = [(None if i % 7 == 0 else b"k%d" % i, None if i % 11 == 0 else b"v" * (i % 90),
                1000 + i, [("h%d" % j, None if i % 5 == 0 else b"x" * j) for j in range(i % 3)])
               for i in range(40_000)]                   # 32 bytes a row and more: over 1 MiB
    data = kcodec.encode(records, max_batch_bytes=16384)
    small = [kcodec.decode(data[b.position:b.position + b.size], **options)
             for b in kcodec.read_batches(data)]
    assert pa.concat_tables(small).equals(kcodec.decode(data, **options))
    # The large table's columns went one by one: dropping all but one gives
    # the others' blocks back to the pool while that one lives.
    from kcodec._core.columns import kept_memory_bytes
    kcodec.kept_memory_limit(64 << 20)        # (ci/asan.sh runs with no pool)
    table = kcodec.decode(data, **options)
    pooled = kept_memory_bytes()
    offsets = table.column("offset")
    del table
    assert kept_memory_bytes() > pooled
    assert offsets.to_pylist() == list(range(40_000))


@pytest.mark.footprint
def test_dropped_columns_give_their_memory_back_while_kept_ones_keep_theirs():
    """Each column's memory goes when that column goes: 200 decodes of 2 MB
    of values each, with only their offsets kept, leave the resident size
    where it was (the kept offsets are 16 KB each)."""
    data = kcodec.encode([(b"k", b"v" * 1000, i, [("h", b"x")]) for i in range(2000)])
    for _ in range(5):
        kcodec.decode(data, views=False)
    before = resident_bytes()
    kept = [kcodec.decode(data, views=bool(n % 2)).column("offset") for n in range(200)]
    assert resident_bytes() - before < 64 << 20
    assert all(column.to_pylist() == list(range(2000)) for column in kept)


@pytest.fixture
def restored_kept_memory_limit():
    previous = kcodec.kept_memory_limit()
    yield
    kcodec.kept_memory_limit(previous)


@pytest.mark.memory_pool                  # its default limit
def test_kept_memory_stays_within_its_limit_and_a_lower_one_frees_the_rest(
        restored_kept_memory_limit):
    from kcodec._core.columns import kept_memory_bytes
    data = kcodec.encode([(b"k", b"v" * 1000, i) for i in range(2000)])
    assert kcodec.kept_memory_limit() == 64 << 20
    kcodec.decode(data)
    assert 0 < kept_memory_bytes() <= 64 << 20          # the table's columns, given back
    assert kcodec.kept_memory_limit(1 << 20) == 64 << 20
    assert kept_memory_bytes() <= 1 << 20
    assert kcodec.kept_memory_limit(0) == 1 << 20
    assert kept_memory_bytes() == 0
    table = kcodec.decode(data)
    del table
    assert kept_memory_bytes() == 0
    assert kcodec.kept_memory_limit() == 0
    assert kcodec.decode(data).column("value").to_pylist() == [b"v" * 1000] * 2000
    with pytest.raises(ValueError, match=">= 0"):
        kcodec.kept_memory_limit(-1)
    with pytest.raises(TypeError):
        kcodec.kept_memory_limit(2.5)
    assert kcodec.kept_memory_limit() == 0


def test_encode_takes_its_working_memory_from_the_kept_pool_and_gives_it_back(
        restored_kept_memory_limit):
    """An encode's per-row arrays are as big as a decode's columns: taken
    from the pool and given back, their pages are not faulted in again."""
    from kcodec._core.columns import kept_memory_bytes
    table = kcodec.decode(kcodec.encode([(None, b"v" * 10, i) for i in range(50_000)]))
    kcodec.kept_memory_limit(0)
    kcodec.kept_memory_limit(64 << 20)
    first = kcodec.encode(table)
    pooled = kept_memory_bytes()
    assert pooled >= 50_000 * 48                # a row's pointers, lengths, offset and time
    assert kcodec.encode(table) == first
    assert kept_memory_bytes() == pooled        # the same blocks, taken and given back
    kcodec.kept_memory_limit(0)
    assert kcodec.encode(table) == first
    assert kept_memory_bytes() == 0


def test_a_column_using_little_of_a_kept_block_leaves_the_block_to_the_pool(
        restored_kept_memory_limit):
    """A decode's room for a column can be far above what it uses (1-byte
    keys in an input of 100-byte values). Those few bytes move to a block of
    their own and the big block goes back to the pool whole: shrinking it in
    place would make the next decode of another shape fault a new one in."""
    from kcodec._core.columns import kept_memory_bytes
    wide = kcodec.encode([(b"key-%06d" % i, b"v" * 100, i,
                           [("trace-id", b"%016x" % i), ("source", b"web"), ("v", b"2")])
                          for i in range(20000)], max_batch_bytes=16384)
    narrow = kcodec.encode([(b"k", b"v" * 100, i, []) for i in range(3000)])
    kcodec.kept_memory_limit(0)
    kcodec.kept_memory_limit(64 << 20)
    kcodec.decode(wide)
    pooled = kept_memory_bytes()
    table = kcodec.decode(narrow)
    assert table.column("key").to_pylist() == [b"k"] * 3000
    del table
    assert kept_memory_bytes() >= pooled


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.footprint
def test_a_big_block_reserved_past_its_use_goes_back_to_the_pool_whole(
        restored_kept_memory_limit):
    """A 1 MB batch reserves room for 1 MB of keys; 10-byte keys use a tenth
    of it. Those bytes move to a block of their own (from the pool) and the
    big block goes back to the pool whole, for the next decode. Shrunk in
    place, its pages went back to the OS and every decode of such batches
    faulted about 2 MB in again, four times the cost of the decode itself;
    it still is when the pool has no room for it."""
    data = kcodec.encode([(b"key-%06d" % i, b"v" * 100, i) for i in range(20000)],
                         max_batch_bytes=1 << 20)
    kcodec.kept_memory_limit(0)
    kcodec.kept_memory_limit(64 << 20)
    for _ in range(3):
        table = kcodec.decode(data)          # as below: one table alive while the next decodes
    before = minor_faults()
    for _ in range(10):
        table = kcodec.decode(data)
    assert (minor_faults() - before) / 10 < 20         # pages; shrunk in place: about 490
    keys = [b"key-%06d" % i for i in range(20000)]
    assert table.column("key").to_pylist() == keys
    kcodec.kept_memory_limit(0)                         # no room in the pool: shrunk in place
    assert kcodec.decode(data).column("key").to_pylist() == keys


@pytest.mark.footprint
@pytest.mark.parametrize("views", [False, True], ids=["copies", "views"])
def test_a_batch_decompressing_past_its_buffer_grows_it_from_the_pool(
        restored_kept_memory_limit, views):
    """A batch that decompresses to more than the buffer holds grows it with
    memory from the pool, faulted in already. Grown by realloc, new memory
    from the OS was faulted in on every decode of such batches: lz4 batches
    of 2.5 MB with views, about 255 pages a decode."""
    keys = [b"key-%06d" % i for i in range(20000)]
    data = kcodec.encode([(key, b"v" * 100, i) for i, key in enumerate(keys)],
                         compression="lz4", max_batch_bytes=8 << 20)
    kcodec.kept_memory_limit(0)
    kcodec.kept_memory_limit(64 << 20)
    for _ in range(3):
        table = kcodec.decode(data, views=views)
    before = minor_faults()
    for _ in range(10):
        table = kcodec.decode(data, views=views)
    assert (minor_faults() - before) / 10 < 20
    assert table.column("key").to_pylist() == keys


# ------------------------------------------------------------ encode(table)

def test_encode_decode_round_trip_is_byte_identical():
    data = kcodec.encode(RECORDS, base_offset=5, max_batch_bytes=300)
    table = kcodec.decode(data)
    assert kcodec.encode(table, max_batch_bytes=300) == data
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        again = kcodec.decode(kcodec.encode(table, compression=codec))
        assert again.equals(table)


def magic_of(data):
    magics = {batch.magic for batch in kcodec.read_batches(data, verify_crc=False)}
    assert len(magics) <= 1
    return max(magics, default=2)


def test_encode_of_decode_round_trips_the_fixtures(fixture_record_sets):
    """Every fixture (broker logs with offset gaps, LogAppendTime,
    transactions, producers, leader epochs) re-encoded from its decoded table
    in its own magic and every codec of that magic decodes to the same table."""
    for entry, data in fixture_record_sets:
        table = kcodec.decode(data, batch_columns=True, verify_crc=False)
        magic = magic_of(data)
        codecs = ("none", "gzip", "snappy", "lz4") + (("zstd",) if magic == 2 else ())
        for codec in codecs:
            again = kcodec.encode(table, magic=magic, compression=codec)
            assert kcodec.decode(again, batch_columns=True).equals(table), (entry["bin"], codec)


def table_of_batches(*parts, **options):
    return kcodec.decode(b"".join(kcodec.encode(records, **kw) for records, kw in parts),
                         batch_columns=True, **options)


def batch_fields(data):
    return [(b.base_offset, b.last_offset, b.count, b.timestamp_type, b.producer_id,
             b.producer_epoch, b.base_sequence, b.is_transactional, b.partition_leader_epoch)
            for b in kcodec.read_batches(data)]


def test_encode_breaks_batches_where_the_columns_change():
    table = table_of_batches(
        (RECORDS[:3], dict(base_offset=0, producer_id=7, producer_epoch=2, base_sequence=5,
                           transactional=True)),
        (RECORDS[3:5], dict(base_offset=3, producer_id=7, producer_epoch=2, base_sequence=8,
                            transactional=True)),                    # continues the first
        (RECORDS[5:7], dict(base_offset=9, producer_id=7, producer_epoch=2, base_sequence=9)),
        (RECORDS[7:9], dict(base_offset=11, producer_id=8, base_sequence=INT32_MAX - 1,
                            partition_leader_epoch=4)),
        (RECORDS[9:11], dict(base_offset=13, producer_id=8, base_sequence=0,
                             partition_leader_epoch=4)),             # wrapped: continues
        (RECORDS[11:13], dict(base_offset=15, timestamp_type="LogAppendTime")),
        (RECORDS[13:15], dict(base_offset=17, timestamp_type="LogAppendTime")),
        (RECORDS[15:17], dict(base_offset=19)))
    data = kcodec.encode(table)
    lat_0, lat_1 = (b.max_timestamp for b in kcodec.read_batches(data)
                    if b.timestamp_type == "LogAppendTime")
    assert lat_0 != lat_1
    assert batch_fields(data) == [
        (0, 4, 5, "CreateTime", 7, 2, 5, True, -1),
        (9, 10, 2, "CreateTime", 7, 2, 9, False, -1),      # the transaction ended
        (11, 14, 4, "CreateTime", 8, -1, INT32_MAX - 1, False, 4),
        (15, 16, 2, "LogAppendTime", -1, -1, -1, False, -1),
        (17, 18, 2, "LogAppendTime", -1, -1, -1, False, -1),   # another append time
        (19, 20, 2, "CreateTime", -1, -1, -1, False, -1)]
    assert kcodec.decode(data, batch_columns=True).equals(table)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_encode_writes_many_runs_each_with_its_own_attributes(codec):
    """A table whose batch columns change every few rows: each run of rows
    becomes its own batches, split again by max_batch_bytes, each batch with
    its first row's attributes and base sequence."""
    import numpy as np
    n = 3000
    rows = np.arange(n)
    table = pa.table({
        "value": pa.array([b"v" * (i % 50) for i in range(n)]),
        "offset": pa.array(rows * 2, pa.int64()),
        "timestamp": pa.array(rows + 10_000, pa.timestamp("ms", "UTC")),
        "timestampType": pa.array((rows // 500) % 2, pa.int32()),
        "producerId": pa.array(rows // 7, pa.int64()),
        "producerEpoch": pa.array(rows // 11 % 3, pa.int16()),
        "sequence": pa.array(rows // 7 * 1000 + rows % 7 * 2, pa.int32()),
        "isTransactional": pa.array(rows // 13 % 2 == 1),
        "leaderEpoch": pa.array(rows // 17, pa.int32()),
    })
    batch_columns = ("producerId", "producerEpoch", "isTransactional", "leaderEpoch")
    data = kcodec.encode(table, compression=codec, max_batch_bytes=300)
    assert kcodec.decode(data, batch_columns=True).select(table.column_names).equals(table)
    expected_runs = 1 + sum(any(table[c][i] != table[c][i - 1] for c in batch_columns)
                            or table["timestampType"][i] != table["timestampType"][i - 1]
                            for i in range(1, n))
    batches = list(kcodec.read_batches(data))
    assert len(batches) > expected_runs             # max_batch_bytes splits runs too
    if codec == "none":
        assert all(b.size <= 300 or b.count == 1 for b in batches)
    first = 0
    for b in batches:
        assert (b.producer_id, b.producer_epoch, b.is_transactional,
                b.partition_leader_epoch, b.base_sequence) == (
            table["producerId"][first].as_py(), table["producerEpoch"][first].as_py(),
            table["isTransactional"][first].as_py(), table["leaderEpoch"][first].as_py(),
            table["sequence"][first].as_py())
        first += b.count
    assert first == n


INT32_MAX = (1 << 31) - 1


def test_encode_v2_checks_its_runs():
    import numpy as np
    from kcodec._core.build import encode_v2, rows_from_records
    rows = rows_from_records([(b"k", b"v", 1)] * 4, 0, kcodec.Record, 0)

    def runs(starts, **lengths):
        k = len(starts)
        return dict(timestamp_type=np.zeros(lengths.get("timestamp_type", k), np.int32),
                    transactional=np.zeros(k, np.uint8), producer_id=np.full(k, -1, np.int64), producer_epoch=np.full(k, -1, np.int16),
                    base_sequence=np.full(k, -1, np.int32),
                    partition_leader_epoch=np.full(k, -1, np.int32))

    def encode(starts, **lengths):
        return encode_v2(rows, np.array(starts, np.int64), codec=0, level=None,
                         max_batch_bytes=1 << 20, **runs(starts, **lengths))

    assert [b.count for b in kcodec.read_batches(encode([0, 1, 3]))] == [1, 2, 1]
    for starts in ([], [1], [0, 0], [0, 2, 1], [0, 4]):
        with pytest.raises(ValueError, match="run"):
            encode(starts)
    with pytest.raises(ValueError, match="1 run attributes for 2 runs"):
        encode([0, 2], timestamp_type=1)


def breaks_by_the_rules(n, offsets, timestamps, types, sequences, attributes):
    """Where encode must start a batch, row by row, as the docs state it."""
    offsets, timestamps, types, sequences = (
        None if a is None else a.tolist() for a in (offsets, timestamps, types, sequences))
    attributes = [a.tolist() for a in attributes]
    starts = [0]
    for i in range(1, n):
        step = offsets[i] - offsets[i - 1] if offsets is not None else 1
        breaks = step <= 0 or any(column[i] != column[i - 1] for column in attributes)
        if types is not None:
            breaks |= (types[i] == 1) != (types[i - 1] == 1)
            breaks |= types[i] == 1 and timestamps[i] != timestamps[i - 1]
        if sequences is not None:
            follows = -1 if sequences[i - 1] < 0 else (sequences[i - 1] + step) % (INT32_MAX + 1)
            breaks |= sequences[i] != follows
        if breaks:
            starts.append(i)
    return starts


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_batch_starts_follows_each_rule(data):
    import numpy as np
    from kcodec._core.build import batch_starts

    n = data.draw(st.integers(1, 30))

    def column(values, dtype, maybe=True):
        if maybe and data.draw(st.booleans()):
            return None
        return np.array(data.draw(st.lists(values, min_size=n, max_size=n)), dtype)

    # Few distinct values, so that neighbours often agree.
    offsets = column(st.integers(0, 9), np.int64)
    if offsets is not None and data.draw(st.booleans()):
        offsets = np.cumsum(offsets) + 3            # increasing: only gaps
    timestamps = column(st.integers(0, 2), np.int64, maybe=False)
    types = column(st.sampled_from([-1, 0, 1]), np.int32)
    sequences = column(st.sampled_from([-1, 0, 1, 2, 5, INT32_MAX]), np.int32)
    attributes = [column(st.integers(0, 1), np.int64, maybe=False)
                  for _ in range(data.draw(st.integers(0, 4)))]
    assert batch_starts(n, offsets, timestamps, types, sequences, attributes) == \
        breaks_by_the_rules(n, offsets, timestamps, types, sequences, attributes)


@pytest.mark.parametrize("magic,codec", [(0, "none"), (0, "gzip"), (1, "none"), (1, "lz4"),
                                         (2, "none"), (2, "zstd")])
def test_encode_keeps_offset_gaps_a_compacted_log_has(magic, codec):
    offsets = [5, 7, 8, 40, 41, 5_000_000_000, 5_000_000_001]
    table = pa.table({"value": pa.array([b"v%d" % o for o in offsets]),
                      "offset": pa.array(offsets, pa.int64()),
                      "timestamp": pa.array(range(len(offsets)), pa.timestamp("ms", "UTC"))})
    data = kcodec.encode(table, magic=magic, compression=codec)
    assert [r.offset for r in kcodec.read_records(data)] == offsets
    if magic == 2:
        # a batch's offset deltas are int32: the gap past 2**31 starts another
        assert [(b.base_offset, b.last_offset, b.count) for b in kcodec.read_batches(data)] == [
            (5, 41, 5), (5_000_000_000, 5_000_000_001, 2)]
    renumbered = kcodec.encode(table, magic=magic, compression=codec, base_offset=100)
    assert [r.offset for r in kcodec.read_records(renumbered)] == list(range(100, 107))


def test_encode_keywords_override_the_columns():
    table = table_of_batches((RECORDS[:4], dict(base_offset=30, producer_id=7, producer_epoch=2,
                                                base_sequence=5, transactional=True,
                                                timestamp_type="LogAppendTime")))
    data = kcodec.encode(table, base_offset=0, producer_id=-1, producer_epoch=-1,
                         base_sequence=-1, transactional=False, timestamp_type="CreateTime",
                         partition_leader_epoch=3)
    assert batch_fields(data) == [(0, 3, 4, "CreateTime", -1, -1, -1, False, 3)]


def test_offsets_that_do_not_increase_start_another_batch():
    # Clients build produce record sets whose batches each start at 0.
    table = kcodec.decode(kcodec.encode([r[:3] for r in RECORDS[:3]]))
    twice = pa.concat_tables([table, table])
    for magic, codec in ((2, "none"), (2, "lz4"), (1, "gzip"), (0, "none")):
        data = kcodec.encode(twice, magic=magic, compression=codec)
        assert [r.offset for r in kcodec.read_records(data)] == [0, 1, 2, 0, 1, 2]
    assert batch_fields(kcodec.encode(twice))[1][:3] == (0, 2, 3)
    assert [r.offset for r in kcodec.read_records(kcodec.encode(twice, base_offset=0))] == \
        list(range(6))


def test_encode_rejects_offsets_and_timestamp_types_kafka_cannot_hold():
    with pytest.raises(ValueError, match="'offset' may not hold nulls"):
        kcodec.encode(pa.table({"value": [b"a"], "offset": pa.array([None], pa.int64())}))
    with pytest.raises(ValueError, match="-1 is negative"):
        kcodec.encode(pa.table({"value": [b"a", b"b"], "offset": pa.array([3, -1], pa.int64())}))
    with pytest.raises(ValueError, match="timestampType"):
        kcodec.encode(pa.table({"value": [b"a"], "timestampType": pa.array([2], pa.int32())}))
    with pytest.raises(ValueError, match=r"timestampType -2 is none of .* \(row 3\)"):
        kcodec.encode(pa.table({"value": [b"a"] * 5,
                                "timestampType": pa.array([0, 1, -1, -2, 0], pa.int32())}))
    with pytest.raises(ValueError, match="'producerId' may not hold nulls"):
        kcodec.encode(pa.table({"value": [b"a"], "producerId": pa.array([None], pa.int64())}))
    # A wider column's value that the field cannot hold raises, not wraps
    # (2**32 + 1 would be timestampType 1).
    with pytest.raises(ValueError, match="'timestampType'"):
        kcodec.encode(pa.table({"value": [b"a"],
                                "timestampType": pa.array([2**32 + 1], pa.int64())}))
    with pytest.raises(ValueError, match="'sequence'"):
        kcodec.encode(pa.table({"value": [b"a"], "sequence": pa.array([2**31], pa.int64())}))
    for rows in ([(b"k", b"v")], pa.table({"value": [b"v"]})):
        with pytest.raises(ValueError, match="do not fit"):
            kcodec.encode(rows, base_offset=2**63)
    with pytest.raises(ValueError, match="'producerEpoch'"):
        kcodec.encode(pa.table({"value": [b"a"], "producerEpoch": pa.array([70000], pa.int64())}))
    # -1 is "no sequence"; a lower one is no sequence Kafka writes.
    with pytest.raises(ValueError, match=r"sequence -5 is below -1, Kafka's 'no sequence' \(row 1\)"):
        kcodec.encode(pa.table({"value": [b"a", b"b"], "producerId": pa.array([1, 1], pa.int64()),
                                "sequence": pa.array([-1, -5], pa.int32())}))
    with pytest.raises(ValueError, match=r"base_sequence -5 is outside -1\.\.2147483647"):
        kcodec.encode(pa.table({"value": [b"a"]}), producer_id=1, base_sequence=-5)
    for rows in ([(b"k", b"v")], pa.table({"value": [b"v"]})):
        with pytest.raises(TypeError, match="float"):
            kcodec.encode(rows, producer_id=1.5)            # not 1


@pytest.mark.parametrize("call, option", [
    (call, option) for call in ("decode", "decode_many", "read_records")
    for option in ("max_decompressed_bytes", "start_offset", "end_offset", "partition")
    if option in inspect.signature(getattr(kcodec, call)).parameters])
def test_integer_options_of_decoding_take_no_float(call, option):
    """A C conversion would cut 1.5 to 1 without a word: each option names itself."""
    data = kcodec.encode(RECORDS)
    decoders = {"decode": kcodec.decode,
                "decode_many": lambda data, **options: kcodec.decode_many([data], **options),
                "read_records": lambda data, **options: list(kcodec.read_records(data, **options))}
    with pytest.raises(TypeError, match=f"^{option} must be an integer, not float$"):
        decoders[call](data, **{option: 1.5})
    decoders[call](data, **{option: 1})


def test_topic_and_partition_are_checked_before_decoding():
    data = kcodec.encode(RECORDS)
    with pytest.raises(TypeError, match="topic must be a str, not int"):
        kcodec.decode(data, topic=7)
    with pytest.raises(ValueError, match="partition 2147483648 does not fit"):
        kcodec.decode_many([data], partition=1 << 31)
    assert kcodec.decode(data, partition=(1 << 31) - 1).column("partition")[0].as_py() == 2**31 - 1


@pytest.mark.parametrize("aborted", [5, [(1,)], [(1, 2, 3)], [1], "xy", [("a", 0)], [(1.5, 0)]])
def test_aborted_takes_integer_pairs_only(aborted):
    data = kcodec.encode(RECORDS)
    for decode in (kcodec.decode, lambda data, **options: list(kcodec.read_records(data, **options))):
        with pytest.raises(TypeError, match=r"aborted must be a list of \(producer_id, "
                                            r"first_offset\) pairs of integers"):
            decode(data, isolation="read_committed", aborted=aborted)
    assert kcodec.decode(data, isolation="read_committed", aborted=[(1, 0)]).num_rows == len(RECORDS)


@pytest.mark.parametrize("option", ["max_batch_bytes", "base_offset", "compression_level",
                                    "producer_id", "base_sequence", "partition_leader_epoch"])
def test_integer_options_of_encoding_take_no_float(option):
    table = kcodec.decode(kcodec.encode(RECORDS))
    extra = {"producer_id": 1} if option == "base_sequence" else {}
    whole = 5 if option == "compression_level" else 1000
    for rows in (RECORDS, table):
        with pytest.raises(TypeError, match=f"^{option} must be an integer, not float$"):
            kcodec.encode(rows, compression="gzip", **extra, **{option: whole + 0.5})
        assert kcodec.decode(kcodec.encode(rows, compression="gzip", **extra, **{option: whole}))


def test_magic_0_rows_keep_no_timestamp_in_newer_magics():
    """A magic-0 record has no timestamp; written as magic 1 or 2 it gets
    Kafka's NO_TIMESTAMP (-1), as a broker up-converting it writes it, not
    the time of encoding."""
    table = kcodec.decode(kcodec.encode([r[:2] for r in RECORDS[:3]], magic=0))
    assert table.column("timestamp").null_count == 3
    for magic in (1, 2):
        records = list(kcodec.read_records(kcodec.encode(table, magic=magic)))
        assert [(r.timestamp, r.timestamp_type) for r in records] == [(-1, "CreateTime")] * 3


def varied_records(n, seed):
    """Keys, values and headers of every length class the copies treat apart
    (empty, up to 8, 16, 32, 64, 128, 256, longer, null), in random order."""
    import random
    rng = random.Random(seed)
    lengths = [0, 1, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 129, 255, 256, 257, 300]

    def blob():
        size = rng.choice(lengths + [None])
        return None if size is None else rng.randbytes(size)
    return [(blob(), blob() or b"", 1_700_000_000_000 + i,
             [(f"h{j}" * rng.choice([0, 1, 9, 20]), blob()) for j in range(rng.randrange(3))])
            for i in range(n)]


def exact_size(array):
    """A binary array whose buffers hold its bytes and nothing after them
    (pyarrow pads the buffers it allocates)."""
    assert array.offset == 0
    validity, offsets, data = array.buffers()
    offsets = offsets.to_pybytes()[:4 * (len(array) + 1)]
    end = int.from_bytes(offsets[-4:], "little")
    return pa.Array.from_buffers(
        pa.binary(), len(array),
        [validity, pa.py_buffer(offsets), pa.py_buffer(data.to_pybytes()[:end])],
        array.null_count)


@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("max_batch_bytes", [1, 3000, 1 << 20])
def test_keys_values_and_headers_of_every_length_class_the_copies_treat_apart(codec,
                                                                            max_batch_bytes):
    records = varied_records(500, max_batch_bytes)
    data = kcodec.encode(records, compression=codec, max_batch_bytes=max_batch_bytes)
    table = assert_same_rows(data)
    assert table.column("key").to_pylist() == [r[0] for r in records]
    assert table.column("value").to_pylist() == [r[1] for r in records]


@pytest.mark.parametrize("compression", ["none", "lz4"])
@pytest.mark.parametrize("max_batch_bytes", [1, 500, 1 << 20])
def test_encode_table_writes_the_bytes_of_encode_records(compression, max_batch_bytes):
    # Copies from Arrow buffers may read past a value to its buffer's end and
    # write past it into the next record or batch header: the bytes must still
    # be those written from Python records, which copy exactly.
    records = varied_records(400, max_batch_bytes)
    expected = kcodec.encode(records, compression=compression, max_batch_bytes=max_batch_bytes)
    decoded = kcodec.decode(expected)
    built = pa.table({
        "key": pa.array([r[0] for r in records], pa.binary()),
        "value": pa.array([r[1] for r in records], pa.binary()),
        "timestamp": pa.array([r[2] for r in records], pa.int64()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[3]] for r in records],
                            decoded.schema.field("headers").type)})
    exact = built.set_column(0, "key", exact_size(built.column("key").chunk(0)))
    exact = exact.set_column(1, "value", exact_size(built.column("value").chunk(0)))
    for table, start in ((decoded, 0), (built, 0), (decoded.slice(1), 1),
                         (built.slice(3, 200), 3), (exact, 0), (exact.slice(5), 5)):
        assert kcodec.encode(table, compression=compression, base_offset=0,
                             max_batch_bytes=max_batch_bytes) == \
            kcodec.encode(records[start:start + len(table)], compression=compression,
                          max_batch_bytes=max_batch_bytes)


CONTENT = ("key", "value", "timestamp", "headers")


def content(table):
    return [{k: r[k] for k in CONTENT} for r in rows_of_table(table)]


@pytest.mark.parametrize("binary_type", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_encode_from_sliced_chunked_tables(binary_type):
    table = kcodec.decode(kcodec.encode(RECORDS, base_offset=0))
    part = pa.concat_tables([table.slice(2, 5), table.slice(10, 6)])     # two chunks, sliced
    assert part.column("headers").num_chunks == 2
    for name in ("key", "value"):
        part = part.set_column(part.schema.get_field_index(name), name,
                               part.column(name).cast(binary_type))
    assert content(kcodec.decode(kcodec.encode(part))) == content(part)


@pytest.mark.parametrize("binary_type", [pa.binary(), pa.string()])
def test_chunks_too_long_for_int32_offsets_are_joined_with_int64_ones(monkeypatch, binary_type):
    # Arrow's combine_chunks leaves such a column in two chunks. 2 GiB is too
    # much for a test: the bound is lowered to the size of one chunk here.
    table = kcodec.decode(kcodec.encode(RECORDS, base_offset=0))
    part = pa.concat_tables([table.slice(0, 8), table.slice(8)])
    part = part.set_column(part.schema.get_field_index("value"), "value",
                           part.column("value").cast(binary_type))
    monkeypatch.setattr(kcodec.arrow, "INT32_MAX", part.column("value").chunk(0).nbytes)
    joined = kcodec.arrow._one_array(part.column("value"))
    assert joined.type == {pa.binary(): pa.large_binary(), pa.string(): pa.large_string()}[binary_type]
    assert joined.to_pylist() == part.column("value").to_pylist()
    assert content(kcodec.decode(kcodec.encode(part))) == content(table)


def test_header_chunks_too_long_for_int32_offsets_are_joined_with_int64_ones(monkeypatch):
    table = kcodec.decode(kcodec.encode(RECORDS, base_offset=0))
    part = pa.concat_tables([table.slice(0, 8), table.slice(8)])
    headers = part.column("headers")
    assert headers.chunk(0).values.field("value").null_count      # nulls survive the cast
    monkeypatch.setattr(kcodec.arrow, "INT32_MAX", headers.chunk(0).nbytes)
    joined = kcodec.arrow._one_array(headers)
    assert [(f.name, f.type) for f in joined.type.value_type] == [
        ("key", pa.large_string()), ("value", pa.large_binary())]
    assert joined.type.value_field.name == headers.type.value_field.name
    assert joined.to_pylist() == headers.to_pylist()
    assert content(kcodec.decode(kcodec.encode(part))) == content(table)


def test_encode_from_a_record_batch_as_from_its_table():
    table = kcodec.decode(kcodec.encode(RECORDS, base_offset=3), batch_columns=True)
    (batch,) = table.combine_chunks().to_batches()
    assert kcodec.encode(batch) == kcodec.encode(table)
    assert content(kcodec.decode(kcodec.encode(batch))) == content(table)


def test_encode_of_a_table_whose_columns_have_no_chunks_is_empty():
    table = kcodec.decode(kcodec.encode(RECORDS))
    empty = table.filter(pa.array([False] * table.num_rows))
    assert empty.column("value").num_chunks == 0
    assert kcodec.encode(empty) == b""


def test_a_transactional_column_is_true_where_it_is_not_zero():
    table = pa.table({"value": pa.array([b"a", b"b", b"c"]),
                      "isTransactional": pa.array([0, 2, -1], pa.int8())})
    assert [(b.count, b.is_transactional) for b in kcodec.read_batches(kcodec.encode(table))] == [
        (1, False), (2, True)]


def test_rows_from_arrow_takes_columns_of_its_row_count_only():
    import numpy as np
    from kcodec._core.build import rows_from_arrow
    three, two = pa.array([b"a", b"b", b"c"]), pa.array([b"a", b"b"])
    timestamps = np.zeros(3, np.int64)
    assert rows_from_arrow(three, three, timestamps, None, 3, None, 0) is not None
    for key, value in ((two, three), (three, two)):
        with pytest.raises(ValueError, match="for other than 3 rows"):
            rows_from_arrow(key, value, timestamps, None, 3, None, 0)
    headers = pa.array([[], []], pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    with pytest.raises(ValueError, match="for other than 3 rows"):
        rows_from_arrow(three, three, timestamps, headers, 3, None, 0)


def test_encode_from_string_columns():
    table = pa.table({"key": pa.array(["k1", None], pa.string()),
                      "value": pa.array(["v\u00e9", ""], pa.large_string()),
                      "timestamp": pa.array([1, 2], pa.timestamp("s"))})
    got = content(kcodec.decode(kcodec.encode(table)))
    assert [(r["key"], r["value"], r["timestamp"]) for r in got] == [
        (b"k1", "v\u00e9".encode(), 1000), (None, b"", 2000)]


def test_encode_table_with_only_values_and_null_timestamps():
    table = pa.table({"value": pa.array([b"a", None, b"c"]),
                      "timestamp": pa.array([5, None, 7], pa.int64())})
    before = kcodec.encode([(None, b"x")])            # a "now" reference
    got = rows_of_table(kcodec.decode(kcodec.encode(table, base_offset=9)))
    now = rows_of_table(kcodec.decode(before))[0]["timestamp"]
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (9, None, b"a"), (10, None, None), (11, None, b"c")]
    assert got[0]["timestamp"] == 5 and got[2]["timestamp"] == 7
    assert got[1]["timestamp"] >= now


def test_encode_table_with_spark_microsecond_timestamps_sliced():
    # Spark hands timestamps as timestamp[us, UTC]; a slice has a buffer offset.
    micros = pa.array([None, 1_700_000_000_001_000, None, 1_700_000_000_003_000],
                      pa.timestamp("us", tz="UTC"))
    table = pa.table({"value": pa.array([b"a", b"b", b"c", b"d"]), "timestamp": micros}).slice(1)
    got = rows_of_table(kcodec.decode(kcodec.encode(table)))
    assert [r["value"] for r in got] == [b"b", b"c", b"d"]
    assert got[0]["timestamp"] == 1_700_000_000_001 and got[2]["timestamp"] == 1_700_000_000_003
    assert got[1]["timestamp"] > 1_700_000_000_003           # null: the time of encoding


def test_encode_table_rejects_what_kafka_cannot_hold():
    with pytest.raises(ValueError, match="value"):
        kcodec.encode(pa.table({"key": pa.array([b"k"])}))
    with pytest.raises(TypeError, match="binary or string"):
        kcodec.encode(pa.table({"value": pa.array([1, 2])}))
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    bad = pa.table({"value": pa.array([b"v"]),
                    "headers": pa.array([[{"key": None, "value": b"x"}]], pa.list_(header))})
    with pytest.raises(ValueError, match="header key"):
        kcodec.encode(bad)
    for headers in (pa.array([[1]]), pa.array([["h"]]),
                    pa.array([[{"k": "h"}]], pa.list_(pa.struct([("k", pa.string())])))):
        with pytest.raises(TypeError, match="must be list<struct<key, value>>"):
            kcodec.encode(pa.table({"value": pa.array([b"v"]), "headers": headers}))


def test_offset_bounds_equal_read_records():
    data = kcodec.encode(RECORDS, compression="lz4", base_offset=100, max_batch_bytes=150)
    for start, end in ((None, None), (103, None), (None, 110), (101, 117), (200, 300)):
        table = kcodec.decode(data, start_offset=start, end_offset=end)
        expected = [r.offset for r in kcodec.read_records(data, start_offset=start,
                                                          end_offset=end)]
        assert table.column("offset").to_pylist() == expected
        assert all((start or 0) <= o < (end or 1 << 62) for o in expected)


INT64_MAX = (1 << 63) - 1


@pytest.mark.parametrize("magic,codec", [(2, "none"), (2, "lz4"), (1, "none"), (1, "gzip"),
                                         (0, "none")])
def test_offset_int64_max_is_an_offset_like_any_other(magic, codec):
    # Unbounded reads used INT64_MAX as an exclusive end: the record at that
    # offset was dropped, by decode and read_records alike.
    records = [(b"k%d" % i, b"v") for i in range(3)]
    data = kcodec.encode(records, magic=magic, compression=codec, base_offset=INT64_MAX - 2)
    last = [INT64_MAX - 2, INT64_MAX - 1, INT64_MAX]
    for start, end, expected in ((None, None, last), (INT64_MAX, None, last[2:]),
                                 (None, INT64_MAX, last[:2]), (None, 1 << 63, last),
                                 (INT64_MAX - 1, 1 << 63, last[1:])):
        assert [r.offset for r in kcodec.read_records(data, start_offset=start,
                                                      end_offset=end)] == expected
        table = kcodec.decode(data, start_offset=start, end_offset=end)
        assert table.column("offset").to_pylist() == expected
    assert_same_rows(data)


@pytest.mark.invalid_input
def test_a_batch_at_int64_max_whose_offsets_wrap_as_javas_long_does():
    # Found by test_corrupt's fuzzing: offsets past INT64_MAX wrap to INT64_MIN
    # (Java's long arithmetic), and every reader keeps the batch.
    data = bytearray(kcodec.encode([(b"k%d" % i, b"v") for i in range(3)], base_offset=0))
    data[0:8] = INT64_MAX.to_bytes(8, "big")
    table = assert_same_rows(bytes(data), verify_crc=False)
    assert table.column("offset").to_pylist() == [INT64_MAX, -(1 << 63), -(1 << 63) + 1]


def _with_count_zero(batch):
    """The batch, declaring no records (CRC fixed): readers skip its payload."""
    batch = bytearray(batch)
    batch[57:61] = (0).to_bytes(4, "big")
    batch[17:21] = kcodec.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


@pytest.mark.parametrize("first", ["outside the bounds", "declaring no records"])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_batches_skipped_before_plain_ones_leave_views_whole(first, isolation):
    skipped = kcodec.encode([(b"k", b"v" * 20, 1, None)], compression="gzip")
    if first == "declaring no records":
        skipped = _with_count_zero(skipped)
    plain = kcodec.encode([(b"key-longer-than-12-%d" % i, b"value-%d" % i * 5, 1, None)
                           for i in range(3)], base_offset=1)
    start = 1 if first == "outside the bounds" else None
    expected = list(kcodec.read_records(skipped + plain, start_offset=start, isolation=isolation))
    for views in (False, True):
        table = kcodec.decode(skipped + plain, start_offset=start, views=views,
                              isolation=isolation)
        table.validate(full=True)
        assert table.column("value").to_pylist() == [r.value for r in expected]
        assert table.column("key").to_pylist() == [r.key for r in expected]


@pytest.mark.parametrize("views", [False, True])
def test_offset_bounds_on_offsets_out_of_order(views):
    # Not a log's order, but a record set may hold it: the rows kept are not
    # one run, so they are filtered (binary_view columns through large_binary).
    rows = [(key, value, ts, None) for key, value, ts, _ in RECORDS[:5]]
    data = b"".join(kcodec.encode(rows, base_offset=base, magic=1, compression="gzip")
                    for base in (100, 0, 105))
    table = kcodec.decode(data, start_offset=3, views=views)
    table.validate(full=True)
    expected = [r for r in kcodec.read_records(data, start_offset=3)]
    assert table.column("offset").to_pylist() == [r.offset for r in expected]
    assert table.column("value").to_pylist() == [r.value for r in expected]
    assert table.schema == schema(views=views)


def _message_runs():
    """v0 and v1 messages in runs longer than the core takes at once (1024),
    between wrappers and v2 batches; offsets rising throughout."""
    parts, offset = [], 0
    for magic, codec, n, ts_type in ((0, "none", 1500, "CreateTime"), (1, "gzip", 30, "CreateTime"),
                                     (1, "none", 2100, "CreateTime"), (2, "none", 40, "CreateTime"),
                                     (1, "none", 5, "LogAppendTime")):
        records = [(b"k%d" % i if i % 3 else None, b"v" * (i % 50) if i % 7 else None,
                    1_700_000_000_000 + i) for i in range(n)]
        parts.append(kcodec.encode(records, magic=magic, compression=codec, base_offset=offset,
                                   timestamp_type=ts_type))
        offset += n
    return b"".join(parts), offset


@pytest.mark.parametrize("views", [False, True])
def test_runs_of_v0_and_v1_messages_decode_like_read_records(views):
    data, count = _message_runs()
    copies = assert_same_rows(data)
    assert copies.num_rows == count
    assert set(copies.column("timestampType").to_pylist()) == {-1, 0, 1}
    if views:
        table = kcodec.decode(data, views=True)
        table.validate(full=True)
        assert table.cast(copies.schema).equals(copies)
    for start, end in ((None, 700), (1499, 1531), (1000, 3700), (3650, None), (9000, None)):
        table = kcodec.decode(data, views=views, start_offset=start, end_offset=end)
        expected = [r.offset for r in kcodec.read_records(data, start_offset=start,
                                                          end_offset=end)]
        assert table.column("offset").to_pylist() == expected


def _wrappers(magic, codec):
    """Compressed v0/v1 wrappers: one of more inner messages than the core's
    first allocation of slots (1024), then smaller ones, LogAppendTime last."""
    parts, offset = [], 0
    for n, batch_bytes, ts_type in ((1500, 1 << 20, "CreateTime"), (300, 2000, "CreateTime"),
                                    (40, 1 << 20, "LogAppendTime")):
        records = [(b"k%d" % i if i % 3 else None, b"v%d" % i * (i % 9) if i % 7 else None,
                    1_700_000_000_000 + i) for i in range(n)]
        parts.append(kcodec.encode(records, magic=magic, compression=codec, base_offset=offset,
                                   max_batch_bytes=batch_bytes, timestamp_type=ts_type))
        offset += n
    return b"".join(parts), offset


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("magic,codec", [(0, "gzip"), (0, "snappy"), (0, "lz4"), (1, "gzip"),
                                         (1, "snappy"), (1, "lz4")])
def test_compressed_wrappers_decode_like_read_records(magic, codec, views):
    data, count = _wrappers(magic, codec)
    assert len(list(kcodec.read_batches(data))) > 5
    copies = assert_same_rows(data)
    assert copies.num_rows == count
    if views:
        assert kcodec.decode(data, views=True).cast(copies.schema).equals(copies)
    for start, end in ((None, 700), (1499, 1531), (1700, None), (5000, None)):
        table = kcodec.decode(data, views=views, start_offset=start, end_offset=end)
        expected = [r.offset for r in kcodec.read_records(data, start_offset=start,
                                                          end_offset=end)]
        assert table.column("offset").to_pylist() == expected


@pytest.mark.invalid_input
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_a_wrapper_failing_its_checks_raises_what_read_records_raises(codec):
    from kcodec.compression import codec_id, compress, decompress
    data, count = _wrappers(1, codec)
    first = 12 + int.from_bytes(data[8:12], "big")
    second = data[first:first + 12 + int.from_bytes(data[first + 8:first + 12], "big")]
    value_at = 12 + 4 + 2 + 8 + 4 + 4           # a v1 wrapper: null key, then its value
    assert second[value_at - 8:value_at - 4] == b"\xff\xff\xff\xff"
    inner = bytearray(decompress(codec_id(codec), second[value_at:], 1 << 30, 1))
    at = 12 + int.from_bytes(inner[8:12], "big")   # the second inner message
    inner[at + 30] ^= 0xFF                          # in its value: its CRC no longer matches
    value = compress(codec_id(codec), bytes(inner), magic=1)
    wrapper = bytearray(second[:value_at - 4] + len(value).to_bytes(4, "big") + value)
    wrapper[8:12] = (len(wrapper) - 12).to_bytes(4, "big")
    wrapper[12:16] = zlib.crc32(wrapper[16:]).to_bytes(4, "big")
    bad = data[:first] + bytes(wrapper) + data[first + len(second):]
    for verify_crc in (True, False):
        try:
            expected = [r.value for r in kcodec.read_records(bad, verify_crc=verify_crc)]
        except kcodec.CrcMismatchError as exc:
            assert verify_crc
            with pytest.raises(kcodec.CrcMismatchError) as from_decode:
                kcodec.decode(bad, verify_crc=verify_crc)
            assert str(from_decode.value) == str(exc)
            assert from_decode.value.position == exc.position == first
            assert "inner message" in str(exc)
        else:
            assert not verify_crc and len(expected) == count
            assert kcodec.decode(bad, verify_crc=False).column("value").to_pylist() == expected


@pytest.mark.invalid_input
@pytest.mark.parametrize("views", [False, True])
def test_a_message_failing_its_checks_mid_run_raises_what_read_records_raises(views):
    data, count = _message_runs()
    bad = bytearray(data)
    at = 0
    for _ in range(700):                       # the 701st message of the first run
        at += 12 + int.from_bytes(bad[at + 8:at + 12], "big")
    bad[at + 22] ^= 0xFF                       # its key (magic 0): the CRC no longer matches
    with pytest.raises(kcodec.CrcMismatchError) as from_records:
        list(kcodec.read_records(bytes(bad)))
    with pytest.raises(kcodec.CrcMismatchError) as from_decode:
        kcodec.decode(bytes(bad), views=views)
    assert str(from_decode.value) == str(from_records.value)
    assert from_decode.value.position == from_records.value.position == at
    assert from_decode.value.offset == 700
    unchecked = kcodec.decode(bytes(bad), views=views, verify_crc=False)
    assert unchecked.num_rows == count
    assert (unchecked.column("value")[700].as_py()
            == list(kcodec.read_records(bytes(bad), verify_crc=False))[700].value)

    cut = data[:at + 20]                       # the 701st message cut short
    assert assert_same_rows(cut).num_rows == 700
    with pytest.raises(kcodec.CorruptRecordError) as from_records:
        list(kcodec.read_records(cut, partial="error"))
    with pytest.raises(kcodec.CorruptRecordError) as from_decode:
        kcodec.decode(cut, partial="error", views=views)
    assert str(from_decode.value) == str(from_records.value)


def test_a_control_batchs_numbers_take_no_float():
    for name in ("producer_id", "producer_epoch", "offset", "coordinator_epoch", "timestamp",
                 "partition_leader_epoch"):
        numbers = dict(producer_id=7, producer_epoch=1, offset=3, timestamp=1_700_000_000_000)
        with pytest.raises(TypeError, match=f"^{name} must be an integer, not float$"):
            kcodec.encode_control("COMMIT", **{**numbers, name: 2.5})
    (batch,) = kcodec.read_batches(kcodec.encode_control("ABORT", producer_id=7, producer_epoch=1,
                                                         offset=3))
    assert (batch.producer_id, batch.base_offset, batch.is_control) == (7, 3, True)
