"""Decode to Arrow (`kcodec.decode`) and encode from Arrow (`kcodec.encode(table)`)
on every workload of `kcodec bench`'s matrix, side by side with aiokafka's
compiled reader and builder and with the floors measured in the same run:

* uncompressed: a CRC of the whole input (CRC-32C for v2) plus a memcpy of it,
  once per CRC implementation at hand (kcodec's, the crc32c package's);
* compressed: the codec library kcodec uses decompressing each batch's
  records section (zlib wbits 31, cramjam snappy blocks, lz4.frame, and
  ZSTD_decompressDCtx of the libzstd build the core calls).

    python -m pytest benchmarks/test_bench_arrow.py --benchmark-only -q
    python -m pytest benchmarks/test_bench_arrow.py --benchmark-disable   # as CI: once each

Compare the members of a group (or the records/s summary printed at the end),
never absolute times. Every benchmark checks its output once, outside the
timed code (row count and a content checksum), so that it cannot silently
measure nothing; nothing here asserts a speed. `kcodec bench` (kcodec/bench.py)
times the same operations with interleaved repeats and prints the ratios.
"""
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import kcodec
from kcodec import bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from needs import unavailable  # noqa: E402

MATRIX = bench.DEFAULT_MATRIX
COMPRESSED = [w for w in MATRIX if bench.WORKLOADS[w].compressed]
UNCOMPRESSED = [w for w in MATRIX if not bench.WORKLOADS[w].compressed]
CRCS = {2: ("kcodec.crc32c", "crc32c package"), 1: ("kcodec.crc32", "zlib.crc32"),
        0: ("kcodec.crc32", "zlib.crc32")}
CRC_FLOORS = [(w, crc) for w in UNCOMPRESSED for crc in CRCS[bench.WORKLOADS[w].magic]]


@pytest.fixture(scope="module")
def peers():
    return bench.load_peers()[0]


def _aiokafka(peers):
    if peers.get("aiokafka") is None:
        unavailable("aiokafka is not installed")
    return peers["aiokafka"]


DECODES = {"kcodec.decode": ({}, bench.kcodec_decode_arrow),
           "kcodec.decode(views=True)": ({"views": True}, bench.kcodec_decode_views)}


@pytest.mark.parametrize("workload_id", MATRIX)
@pytest.mark.parametrize("impl", list(DECODES))
def test_decode_arrow(benchmark, record_rate, bench_workload, impl):
    """The record set to a pyarrow.Table, CRCs checked (views=True: key and
    value as binary_view columns pointing into the input)."""
    options, decode = DECODES[impl]
    wl = bench_workload
    table = kcodec.decode(wl.data, **options)                   # once, untimed
    assert table.num_rows == wl.count
    assert bench.table_digest(table) == wl.digest
    benchmark.group = f"decode to Arrow {wl.name}"
    n = benchmark(decode, wl.data)
    assert n == wl.count
    record_rate(benchmark, "decode to Arrow", wl.name, impl, n)


@pytest.mark.parametrize("workload_id", MATRIX)
def test_decode_arrow_two_threads(benchmark, record_rate, bench_workload):
    """Two threads, each decoding its own copy of the input: the aggregate rate."""
    wl = bench_workload
    copies = [bytes(bytearray(wl.data)) for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        def both():
            return sum(f.result() for f in [pool.submit(bench.kcodec_decode_arrow, c)
                                            for c in copies])
        tables = list(pool.map(kcodec.decode, copies))          # once, untimed
        assert [bench.table_digest(t) for t in tables] == [wl.digest, wl.digest]
        benchmark.group = f"decode to Arrow {wl.name}"
        n = benchmark(both)
    assert n == 2 * wl.count
    record_rate(benchmark, "decode to Arrow", wl.name, "kcodec.decode 2 threads", n)


@pytest.mark.parametrize("workload_id", MATRIX)
def test_decode_aiokafka(benchmark, record_rate, bench_workload, peers):
    """aiokafka's compiled MemoryRecords + validate_crc; every record's offset,
    timestamp, key, value and headers read."""
    mr = _aiokafka(peers)["MemoryRecords"]
    assert mr.__module__.startswith("aiokafka.record._crecords")   # the compiled peer
    wl = bench_workload
    assert bench.content_digest(bench.memory_records_rows(mr(wl.data))) == wl.digest
    benchmark.group = f"decode to Arrow {wl.name}"
    n = benchmark(bench.aiokafka_decode, wl.data)
    assert n == wl.count
    record_rate(benchmark, "decode to Arrow", wl.name, "aiokafka", n)


@pytest.mark.parametrize("workload_id,crc", CRC_FLOORS)
def test_floor_crc_memcpy(benchmark, record_rate, bench_workload, peers, crc):
    """Floor of an uncompressed decode: CRC of the input + memcpy of it."""
    wl = bench_workload
    floors = bench.crc_memcpy_floors(wl.data, wl.spec.magic, peers)
    if crc not in floors:
        unavailable(f"{crc} is not installed")
    floor = floors[crc]
    expected = kcodec.crc32c(wl.data) if wl.spec.magic == 2 else kcodec.crc32(wl.data)
    assert floor() == expected                                  # once, untimed
    benchmark.group = f"decode to Arrow {wl.name}"
    assert benchmark(floor) == expected
    record_rate(benchmark, "decode to Arrow", wl.name, f"floor CRC+memcpy ({crc})", wl.count)


@pytest.mark.parametrize("workload_id", COMPRESSED)
def test_floor_decompress(benchmark, record_rate, bench_workload):
    """Floor of a compressed decode: the codec library's own decompress of every
    batch's records section, checked to give the bytes kcodec decompresses."""
    wl = bench_workload
    sections = bench.compressed_sections(wl)
    assert len(sections) == len(wl.batch_counts)
    floor, what = bench.decompress_floor(wl.spec.codec, sections)
    size = bench.check_decompress_floor(wl, sections, floor)   # once, untimed
    assert size > 0
    benchmark.group = f"decode to Arrow {wl.name}"
    benchmark.extra_info["floor"] = what
    out = benchmark(floor)
    assert sum(len(piece) for piece in out) == size
    record_rate(benchmark, "decode to Arrow", wl.name, "floor decompress", wl.count)


SMALL_SETS = [1, 10, 200]


@pytest.fixture(scope="module")
def small_sets():
    records = bench.make_records(max(SMALL_SETS))
    return {n: (kcodec.encode(records[:n]), bench.content_digest(records[:n]))
            for n in SMALL_SETS}


@pytest.mark.parametrize("records", SMALL_SETS)
@pytest.mark.parametrize("impl", ["kcodec.decode", "aiokafka"])
def test_decode_small_record_set(benchmark, record_rate, peers, small_sets, records, impl):
    """A decode's fixed cost: one batch of a few records, as a UDF called per
    record set or a small mapInArrow chunk meets it."""
    data, digest = small_sets[records]
    if impl == "aiokafka":
        mr = _aiokafka(peers)["MemoryRecords"]
        assert bench.content_digest(bench.memory_records_rows(mr(data))) == digest
        decode = bench.aiokafka_decode
    else:
        assert bench.table_digest(kcodec.decode(data)) == digest
        decode = bench.kcodec_decode_arrow
    benchmark.group = f"decode a record set of {records}"
    assert benchmark(decode, data) == records
    record_rate(benchmark, "decode a small record set", f"{records} records", impl, records)


MANY_SETS = 2000
MANY_SET_RECORDS = [1, 10, 100]


@pytest.fixture(scope="module")
def many_sets():
    """MANY_SETS record sets of n records each, as a Spark column of fetched
    payloads holds them, and the digest of all their records."""
    records = bench.make_records(MANY_SETS * max(MANY_SET_RECORDS))
    out = {}
    for n in MANY_SET_RECORDS:
        sets = [kcodec.encode(records[i * n:(i + 1) * n], base_offset=i * n)
                for i in range(MANY_SETS)]
        out[n] = (sets, bench.content_digest(records[:MANY_SETS * n]))
    return out


def _each_set(decode):
    return lambda sets: sum(decode(data) for data in sets)


@pytest.mark.parametrize("records", MANY_SET_RECORDS)
@pytest.mark.parametrize("impl", ["kcodec.decode_many", "kcodec.decode per record set",
                                  "aiokafka"])
def test_decode_many_record_sets(benchmark, record_rate, peers, many_sets, records, impl):
    """2,000 record sets in one call (what explode_records and the decode UDF
    do with a column of them) against a decode call per record set."""
    sets, digest = many_sets[records]
    if impl == "aiokafka":
        mr = _aiokafka(peers)["MemoryRecords"]
        rows = [row for data in sets
                for row in bench.memory_records_rows(mr(data), relative_offsets=True)]
        assert bench.content_digest(rows) == digest
        decode = _each_set(bench.aiokafka_decode)
    elif impl == "kcodec.decode per record set":
        assert bench.table_digest(kcodec.decode(b"".join(sets))) == digest
        decode = _each_set(bench.kcodec_decode_arrow)
    else:
        table, rows = kcodec.decode_many(sets)
        assert bench.table_digest(table) == digest and rows.tolist() == [records] * MANY_SETS
        decode = bench.kcodec_decode_many
    benchmark.group = f"decode {MANY_SETS:,} record sets of {records}"
    assert benchmark(decode, sets) == records * MANY_SETS
    record_rate(benchmark, "decode many record sets", f"{MANY_SETS:,} sets of {records}",
                impl, records * MANY_SETS)


@pytest.mark.parametrize("workload_id", MATRIX)
def test_encode_arrow(benchmark, record_rate, bench_workload):
    """kcodec.encode(table) from the table kcodec.decode gives, same codec and batch size."""
    wl = bench_workload
    table = kcodec.decode(wl.data)
    benchmark.group = f"encode from Arrow {wl.name}"
    out = benchmark(bench.kcodec_encode_arrow, table, wl.spec)
    decoded = kcodec.decode(out)                                # untimed
    assert decoded.num_rows == wl.count
    assert bench.table_digest(decoded) == wl.digest
    record_rate(benchmark, "encode from Arrow", wl.name, "kcodec.encode(table)", wl.count)


@pytest.mark.parametrize("workload_id", MATRIX)
def test_encode_aiokafka(benchmark, record_rate, bench_workload, peers):
    """aiokafka's compiled builder, one per batch at kcodec's batch boundaries,
    from (key, value, timestamp, headers) tuples."""
    mr = _aiokafka(peers)["MemoryRecords"]
    wl = bench_workload
    benchmark.group = f"encode from Arrow {wl.name}"
    out = benchmark(bench.aiokafka_encode, wl.records, bench.AIO_CODEC[wl.spec.codec],
                    wl.batch_counts, wl.spec.magic)
    # produce-style batches all start at offset 0: compare content, not offsets
    rows = bench.memory_records_rows(mr(out), relative_offsets=True)
    assert bench.content_digest(rows) == wl.digest
    record_rate(benchmark, "encode from Arrow", wl.name, "aiokafka", wl.count)
