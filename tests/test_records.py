"""Behaviour of the object API that the fixture and peer suites do not pin down."""
import gc
import tracemalloc

import numpy as np
import pytest

import kcodec


def test_zero_copy_views_point_into_the_input():
    data = bytearray(kcodec.encode([(b"key", b"value-bytes", 1, [])]))
    record = next(kcodec.read_records(data))
    view = record.value_view
    assert bytes(view) == b"value-bytes" and view.readonly
    data[data.index(b"value-bytes")] = ord("V")     # a view, not a copy
    assert bytes(view) == b"Value-bytes"


def test_views_outlive_records_and_gc_of_memoryview_inputs():
    data = memoryview(kcodec.encode([(b"k", b"v" * 10, 1, [])] * 3, compression="gzip"))
    records = list(kcodec.read_records(data))
    views = [r.key_view for r in records] + [r.value_view for r in records]
    del records
    gc.collect()                        # no "Exception ignored in tp_clear"
    assert [bytes(v) for v in views] == [b"k"] * 3 + [b"v" * 10] * 3


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, dtype=np.uint8)])
def test_any_buffer_is_input(wrap):
    data = kcodec.encode([(b"a", b"b", 5, [("h", None)])], compression="lz4")
    (record,) = kcodec.read_records(wrap(data))
    assert (record.key, record.value, record.timestamp, record.headers) == (
        b"a", b"b", 5, (("h", None),))


FIELDS = ("offset", "timestamp", "key", "value", "headers")


def uninterned(name):
    """The same name as a string object of its own, which Record's fast path
    (matching interned names by identity) does not recognise."""
    return "".join(list(name))


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_fields_read_by_name_or_by_a_built_string_agree(magic):
    headers = [("h", b"x"), ("n", None)] if magic == 2 else []
    data = kcodec.encode([(b"k", b"v", 10), (None, None, 11, headers)], magic=magic)
    records = list(kcodec.read_records(data)) + [kcodec.Record(b"a", None, 5, [("h", b"y")])]
    for record in records:
        for name in FIELDS:
            assert uninterned(name) is not name
            assert getattr(record, uninterned(name)) == getattr(record, name)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (0, 10 if magic else -1, b"k", b"v"), (1, 11 if magic else -1, None, None), (0, 5, b"a", None)]
    assert records[1].headers == tuple(headers)
    with pytest.raises(AttributeError):
        getattr(records[0], uninterned("no_such_field"))


def test_complete_entry_with_size_below_minimum_is_corrupt_not_partial():
    data = bytes.fromhex("0000000000000003" "00000003" "feb01d")
    with pytest.raises(kcodec.CorruptRecordError) as err:
        list(kcodec.read_batches(data))
    assert err.value.position == 0


def test_decompression_limit_is_per_batch():
    data = kcodec.encode([(None, b"x" * 100_000)] * 3, compression="zstd", max_batch_bytes=150_000)
    assert len(list(kcodec.read_records(data, max_decompressed_bytes=200_000))) == 3
    with pytest.raises(kcodec.DecompressionLimitError) as err:
        list(kcodec.read_records(data, max_decompressed_bytes=50_000))
    assert err.value.position == 0


def test_zstd_batches_are_a_new_compressors_frames_whatever_came_before():
    """encode keeps a thread's zstd compressor for its next batches: what it
    writes must depend neither on the batches before nor on their level."""
    import zstandard
    records = [(b"k%d" % i, b"value %d " % i * 20, i) for i in range(300)]
    for level in (3, 1, 3, 19, -5):
        data = kcodec.encode(records, compression="zstd", compression_level=level,
                             max_batch_bytes=2000)
        batches = list(kcodec.read_batches(data))
        assert len(batches) > 1
        for batch in batches:
            section = bytes(batch.records_data)
            records_bytes = zstandard.ZstdDecompressor().decompress(section)
            assert section == zstandard.ZstdCompressor(level=level).compress(records_bytes)


def test_a_thread_keeps_its_zstd_compressor_only_while_its_context_is_small():
    from kcodec import compression
    values = [b"%d " % i * 30 for i in range(20_000)]
    kcodec.encode([(None, v, i) for i, v in enumerate(values[:100])], compression="zstd")
    level, kept = compression._per_thread.zstd_compressor
    assert level == 3 and kept.memory_size() <= compression.ZSTD_KEPT_CONTEXT
    kcodec.encode([(None, v, i) for i, v in enumerate(values)], compression="zstd",
                  compression_level=19, max_batch_bytes=1 << 20)
    assert compression._per_thread.zstd_compressor == (19, None)     # about 18 MiB


def test_python_made_records_encode():
    records = [kcodec.Record(b"k", None, 10, [("a", b"1")]), kcodec.Record(None, b"v", 11)]
    decoded = list(kcodec.read_records(kcodec.encode(records, base_offset=3)))
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (3, b"k", None, 10, (("a", b"1"),)), (4, None, b"v", 11, ())]


def test_encode_from_an_arrow_table():
    import datetime

    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    table = pa.table({
        "key": pa.array([b"a", None], pa.binary()),
        "value": pa.array([b"1", b"2"], pa.binary()),
        "timestamp": pa.array([datetime.datetime(2024, 1, 1, 0, 0, 0, 123000,
                                                 tzinfo=datetime.timezone.utc), None],
                              pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": b"x"}], None], pa.list_(header)),
    })
    records = list(kcodec.read_records(kcodec.encode(table)))
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"a", b"1", (("h", b"x"),)), (None, b"2", ())]
    assert records[0].timestamp == 1_704_067_200_123
    assert records[1].timestamp > 1_704_067_200_123          # no timestamp: now


def test_offset_bounds_skip_batches_before_decompressing_them():
    data = bytearray(kcodec.encode([(None, b"v%d" % i, i) for i in range(30)],
                                   compression="gzip", base_offset=100, max_batch_bytes=150))
    batches = list(kcodec.read_batches(data))
    assert len(batches) >= 4
    # break the compressed stream of the first batch only: it must not be read
    first = batches[0]
    data[first.position + 61: first.position + first.size] = bytes(first.size - 61)
    records = kcodec.read_records(data, verify_crc=False, start_offset=batches[1].base_offset + 1,
                                  end_offset=batches[-1].base_offset)
    offsets = [r.offset for r in records]
    assert offsets == list(range(batches[1].base_offset + 1, batches[-1].base_offset))
    with pytest.raises(kcodec.DecompressionError):
        list(kcodec.read_records(data, verify_crc=False))


def test_threads_decode_compressed_data_at_once():
    from concurrent.futures import ThreadPoolExecutor

    inputs = {codec: kcodec.encode([(b"k%d" % i, b"value %d " % i * 20) for i in range(3000)],
                                   compression=codec, max_batch_bytes=4096)
              for codec in ("gzip", "snappy", "lz4", "zstd")}
    expected = {codec: kcodec.decode(data) for codec, data in inputs.items()}
    work = [codec for codec in inputs for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda codec: (codec, kcodec.decode(inputs[codec])), work))
    assert all(table.equals(expected[codec]) for codec, table in results)


def test_a_batch_makes_its_records_as_they_are_reached():
    data = kcodec.encode([(b"k%d" % i, b"v" * 100, 1000 + i, []) for i in range(20_000)],
                         max_batch_bytes=1 << 30)
    (batch,) = kcodec.read_batches(data)
    tracemalloc.start()
    try:
        records = iter(batch)
        first = next(records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (first.offset, first.key, first.timestamp) == (0, b"k0", 1000)
    assert peak < 64 << 10                  # 20,000 record objects take megabytes
    assert [r.offset for r in records] == list(range(1, 20_000))
    assert [r.key for r in batch] == [r.key for r in batch.records()]
    assert list(batch) == batch.records()   # once made, the same objects each time
