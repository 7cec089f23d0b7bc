"""kcodec.decode(views=True): key and value as binary_view columns that point
into the input and the decompressed buffers instead of copies of them."""
import gc
import importlib.util
import mmap
import struct
import sys

import numpy as np
import pyarrow as pa
import pytest

import kcodec
from kafka_bytes import INT32_MAX, entries, zigzag_varint
from kcodec._core import system_codecs
from needs import unavailable

LOG_OVERHEAD = 12
# One Arrow binary view: length, then (length > 12) prefix, buffer index, offset.
VIEW = np.dtype([("length", "<i4"), ("prefix", "S4"), ("buffer", "<i4"), ("offset", "<i4")])

RECORDS = [
    (b"key-0", b"a value longer than twelve bytes", 1_700_000_000_000, [("h", b"x")]),
    (None, b"", 1_700_000_000_005, None),
    (b"a key longer than twelve bytes", None, 1_699_999_999_000, [("\u00e9t\u00e9", None)]),
    (b"", b"twelve bytes", 1_700_000_000_010, None),
    (b"thirteen byte", b"v" * 300, 1_700_000_000_020, [("k", b"")]),
] * 5

CODECS = [(m, c) for m in (0, 1, 2) for c in ("none", "gzip", "snappy", "lz4", "zstd")
          if not (m < 2 and c == "zstd")]


def assert_views_match_copies(data, **options):
    """decode(views=True) is decode() but for the key and value types."""
    copies = kcodec.decode(data, **options)
    views = kcodec.decode(data, views=True, **options)
    views.validate(full=True)
    assert views.schema == pa.schema(
        [pa.field(f.name, pa.binary_view()) if f.name in ("key", "value") else f
         for f in copies.schema])
    as_binary = views
    for name in ("key", "value"):
        i = views.schema.get_field_index(name)
        as_binary = as_binary.set_column(i, name, views.column(i).cast(pa.binary()))
    assert as_binary.equals(copies)
    return views


def views_of(column):
    (chunk,) = column.chunks
    return np.frombuffer(chunk.buffers()[1], VIEW, count=len(chunk), offset=chunk.offset * 16)


def data_buffers(column):
    (chunk,) = column.chunks
    return chunk.buffers()[2:]


@pytest.mark.parametrize("magic,codec", CODECS)
def test_values_equal_copies(magic, codec):
    records = RECORDS if magic == 2 else [r[:3] for r in RECORDS]
    data = kcodec.encode(records, magic=magic, compression=codec, base_offset=40,
                         max_batch_bytes=400)
    table = assert_views_match_copies(data)
    assert table.num_rows == len(records)
    assert_views_match_copies(data, batch_columns=True, topic="orders", partition=3)
    if importlib.util.find_spec("polars"):
        import polars as pl
        assert pl.from_arrow(table)["value"].to_list() == [r[1] for r in records]


def test_transactions_and_control_records():
    pid = 77
    data = b"".join([
        kcodec.encode(RECORDS[:3], base_offset=0, producer_id=pid, producer_epoch=2,
                      base_sequence=0, transactional=True, compression="lz4"),
        kcodec.encode_control("ABORT", producer_id=pid, producer_epoch=2, offset=3, timestamp=9),
        kcodec.encode(RECORDS[:2], base_offset=4, producer_id=pid, producer_epoch=2,
                      base_sequence=3, transactional=True),
        kcodec.encode_control("COMMIT", producer_id=pid, producer_epoch=2, offset=6, timestamp=9),
        kcodec.encode(RECORDS[:1], base_offset=7, compression="zstd"),
    ])
    for options in ({"include_control": True}, {"isolation": "read_committed"},
                    {"isolation": "read_committed", "aborted": [(pid, 0)]}):
        assert_views_match_copies(data, batch_columns=True, **options)


def test_fixture_record_sets(fixture_record_sets):
    for entry, data in fixture_record_sets:
        table = assert_views_match_copies(data, include_control=True, verify_crc=False)
        assert table.num_rows == entry["record_count"]


def test_empty_input():
    table = kcodec.decode(b"", views=True, topic="t", partition=0, batch_columns=True)
    table.validate(full=True)
    assert table.num_rows == 0
    assert table.schema == kcodec.arrow.schema(topic=True, partition=True, batch_columns=True,
                                               views=True)


@pytest.mark.parametrize("first_with_headers", [None, 0, 1, 7, 29])
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_records_without_headers_then_with_them(first_with_headers, codec):
    """Views equal copies across the switch from the loop for records
    without headers to the one that reads them, at the first record that
    has some: in the first batch, mid-batch, in a later batch, or never."""
    records = [(b"k%d" % i, b"value %d, longer than twelve bytes" % i, 1_700_000_000_000 + i,
                [("h", b"x" * i), ("g", None)]
                if first_with_headers is not None and (
                    i == first_with_headers or i > first_with_headers and i % 3) else None)
               for i in range(30)]
    data = kcodec.encode(records, compression=codec, max_batch_bytes=600)
    assert len(list(kcodec.read_batches(data))) > 2
    views = assert_views_match_copies(data)
    assert views.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[3]] if r[3] else None for r in records]


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_values_point_into_the_input_not_a_copy(magic):
    records = RECORDS if magic == 2 else [r[:3] for r in RECORDS]
    data = np.frombuffer(kcodec.encode(records, magic=magic, max_batch_bytes=400),
                         np.uint8).copy()
    assert len(list(kcodec.read_batches(data))) > 1
    table = kcodec.decode(data, views=True)
    start = data.ctypes.data
    for name, expected in (("key", [r[0] for r in records]), ("value", [r[1] for r in records])):
        (buffer,) = data_buffers(table.column(name))
        assert buffer.address == start and buffer.size == data.nbytes
        views = views_of(table.column(name))
        assert list(views["length"]) == [0 if v is None else len(v) for v in expected]
        out_of_line = views["length"] > 12
        assert out_of_line.any() and (views["buffer"][out_of_line] == 0).all()
        for view, value in zip(views[out_of_line], np.array(expected, object)[out_of_line]):
            offset, length = int(view["offset"]), int(view["length"])
            assert 0 <= offset and offset + length <= data.nbytes
            assert data[offset:offset + length].tobytes() == value

    at = views_of(table.column("value"))[0]["offset"] + 20      # past the 4-byte prefix
    data[at] ^= 0xFF
    assert table.column("value")[0].as_py()[20] == data[at]


def test_bytes_input_is_the_data_buffer():
    data = kcodec.encode(RECORDS)
    table = kcodec.decode(data, views=True)
    (buffer,) = data_buffers(table.column("value"))
    assert buffer.address == pa.py_buffer(data).address


def test_each_decompressed_buffer_is_a_data_buffer():
    plain = kcodec.encode(RECORDS[:4])
    data = b"".join([plain, kcodec.encode(RECORDS[:4], compression="gzip", base_offset=4),
                     kcodec.encode(RECORDS[:4], compression="zstd", base_offset=8),
                     kcodec.encode([r[:3] for r in RECORDS[:4]], magic=1, compression="snappy",
                                   base_offset=12)])
    table = assert_views_match_copies(data)
    input_address = pa.py_buffer(data).address
    buffers = data_buffers(table.column("value"))
    # Batches the core decompresses (gzip, zstd) share its buffer; the
    # snappy wrapper, read through BatchReader with views, has its own.
    shared = all(system_codecs.in_core(codec) for codec in ("gzip", "zstd"))
    expected = [0, 1, 1, 2] if shared else [0, 1, 2, 3]
    assert len(buffers) == expected[-1] + 1 and buffers[0].address == input_address
    for buffer in buffers[1:]:
        assert not input_address <= buffer.address < input_address + len(data)
    views = views_of(table.column("value"))
    assert list(views["buffer"][views["length"] > 12]) == expected


def in_core(codec):
    if system_codecs.in_core(codec) is None:
        unavailable(f"decode() does not decompress {codec} itself here")
    return codec


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_batches_the_core_decompresses_share_a_data_buffer(codec):
    records = RECORDS * 8
    data = np.frombuffer(kcodec.encode(records, compression=in_core(codec), max_batch_bytes=400),
                         np.uint8)
    assert len(entries(data.tobytes())) > 20
    table = assert_views_match_copies(data)
    (buffer,) = data_buffers(table.column("value"))
    start = data.ctypes.data
    assert not start <= buffer.address < start + data.nbytes
    decompressed = buffer.to_pybytes()
    views = views_of(table.column("value"))
    out_of_line = views["length"] > 12
    assert out_of_line.sum() > 20 and (views["buffer"][out_of_line] == 0).all()
    for view, (_, value, *_) in zip(views, records):
        if view["length"] > 12:
            offset = int(view["offset"])
            assert decompressed[offset:offset + len(value)] == value


def test_decompressed_batches_past_one_buffer_go_on_in_another():
    records = [(b"k%d" % i, bytes([i % 251]) * 1000, 1_700_000_000_000 + i, None)
               for i in range(10_000)]                  # 10 MB decompressed, 16 KB batches
    data = kcodec.encode(records, compression=in_core("lz4"), max_batch_bytes=16384)
    table = assert_views_match_copies(data)
    buffers = data_buffers(table.column("value"))
    assert 2 <= len(buffers) <= len(entries(data)) // 20
    views = views_of(table.column("value"))
    assert sorted(set(views["buffer"])) == list(range(len(buffers)))


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
@pytest.mark.parametrize("wrap", [bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8)])
def test_table_outlives_the_input(codec, wrap):
    encoded = kcodec.encode(RECORDS, compression=codec, max_batch_bytes=400)
    expected = kcodec.decode(encoded)
    data = wrap(bytearray(encoded))
    table = kcodec.decode(data, views=True)
    del data
    gc.collect()
    garbage = [bytearray(b"\xee" * len(encoded)) for _ in range(20)]
    table.validate(full=True)
    assert table.column("key").to_pylist() == expected.column("key").to_pylist()
    assert table.column("value").to_pylist() == expected.column("value").to_pylist()
    del garbage


def test_table_holds_the_export_of_an_mmap(tmp_path):
    path = tmp_path / "records"
    path.write_bytes(kcodec.encode(RECORDS))
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    table = kcodec.decode(mm, views=True)
    with pytest.raises(BufferError):
        mm.close()
    values = table.column("value").to_pylist()
    del table
    gc.collect()
    mm.close()
    assert values == [r[1] for r in RECORDS]


def test_input_over_2_gib_is_addressed_through_windows(tmp_path):
    # A sparse file: one batch of a single all-zero value filling the first
    # 2 GiB, then batches whose values lie past int32 offsets.
    size = INT32_MAX - 16
    value_len = size - 64
    rest = b"".join(kcodec.encode(RECORDS[:5], base_offset=1 + i * 5) for i in range(2))
    record = (zigzag_varint(value_len + 10) + b"\x00" + zigzag_varint(0) + zigzag_varint(0)
              + zigzag_varint(-1) + zigzag_varint(value_len))
    header = struct.pack(">qiibIhiqqqhii", 0, size, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
    path = tmp_path / "big"
    with open(path, "wb") as f:
        f.write(header + record)
        f.seek(LOG_OVERHEAD + size)
        f.write(rest)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    assert len(mm) - len(rest) + 61 > INT32_MAX

    table = kcodec.decode(mm, views=True, verify_crc=False)
    table.validate(full=True)
    values = table.column("value")
    assert views_of(values)[0]["length"] == value_len
    assert values.slice(1).to_pylist() == [r[1] for r in RECORDS[:5]] * 2
    assert table.column("offset").to_pylist() == list(range(11))
    start = pa.py_buffer(mm).address
    assert [b.address - start for b in data_buffers(values)] == [
        0, LOG_OVERHEAD + size + LOG_OVERHEAD]
    with pytest.raises(ValueError, match="2 GiB"):
        kcodec.decode(mm, verify_crc=False)           # the copies would not fit
    del table, values
    gc.collect()
    mm.close()
    path.unlink()


def test_a_column_kept_alone_does_not_keep_the_input_its_views_point_into():
    """A small table goes to Arrow in one import, which a column kept alone
    keeps whole, only when its views point into no input but bytes objects:
    how much a slice keeps alive is not known. A record set at the end of a
    3 MiB buffer, decoded through a memoryview of it, its offsets kept: they
    must not keep the view (nor with it the 3 MiB)."""
    records = kcodec.encode([(b"k", b"v" * 100, i) for i in range(3)])
    data = memoryview(b"\0" * (3 << 20) + records)[3 << 20:]
    before = sys.getrefcount(data)
    offsets = kcodec.decode(data, views=True).column("offset")
    assert sys.getrefcount(data) == before
    assert offsets.to_pylist() == [0, 1, 2]


def test_a_small_table_over_small_bytes_goes_to_arrow_whole():
    """Views into a small bytes input: the input keeps nothing more than its
    own bytes alive, so the table takes the one import, and a column kept
    alone keeps the input (and the rest of the table). The same input past
    the small table bound takes one import a column."""
    for n, whole in ((3, True), (12_000, False)):
        data = kcodec.encode([(b"k", b"v" * 100, i) for i in range(n)])
        before = sys.getrefcount(data)
        table = kcodec.decode(data, views=True)
        assert sys.getrefcount(data) > before
        offsets = table.column("offset")
        del table
        assert (sys.getrefcount(data) > before) == whole
        assert offsets.to_pylist() == list(range(n))
        del offsets
        assert sys.getrefcount(data) == before


class BytesWithMore(bytes):
    """A bytes subclass may hold more than its bytes (an attribute here)."""


def test_only_an_exact_bytes_input_counts_as_small():
    data = BytesWithMore(kcodec.encode([(b"k", b"v" * 100, i) for i in range(3)]))
    data.extra = b"\0" * (3 << 20)
    before = sys.getrefcount(data)
    offsets = kcodec.decode(data, views=True).column("offset")
    assert sys.getrefcount(data) == before
    assert offsets.to_pylist() == [0, 1, 2]
