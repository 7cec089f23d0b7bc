"""The benchmark harness behind `kcodec bench` (and benchmarks/): a matrix of
workloads, each timed with kcodec and its peers on the same bytes, in one
process, next to the floors measured in the same run.

Workloads (`WORKLOADS`; `DEFAULT_MATRIX` is what `kcodec bench` runs): seeded
records (10-20 byte keys, JSON-like values that compress somewhat, increasing
CreateTime timestamps) encoded once with kcodec.encode:

    none gzip snappy lz4 zstd   100-byte values, v2 batches of 16 KiB (~130 records)
    none-1pb                    one record per v2 batch
    headers                     3 headers per record, 16 KiB batches
    10kb                        10 KiB values, 1 MiB batches (~100 records)
    v1-snappy                   magic-1 messages in snappy (xerial) wrappers of 16 KiB
(also <codec>-1pb and v1-<codec> for every codec.)

What is timed on each workload's bytes:
    kcodec.decode        the record set to a pyarrow.Table (CRCs checked)
    kcodec object API    read_records, every record's offset/timestamp/key/value/headers read
    aiokafka             its compiled MemoryRecords + validate_crc, the same five fields read
    kafka-python         its pure-Python reader, the same loop (on a batch-aligned prefix)
    floor                uncompressed: CRC-32C (CRC-32 for v0/v1) of the input plus a memcpy
                         of it into a preallocated buffer (the faster of kcodec's and the
                         crc32c package's CRC); compressed: the codec library's own
                         decompress of every batch's (wrapper's) records section
    threads              kcodec.decode of two copies of the input on two threads vs one
    encode               kcodec.encode(table) from the decoded Arrow table vs aiokafka's
                         compiled builder from (key, value, timestamp, headers) tuples

Every figure is the median of interleaved repeats (see `compare`), and every
implementation's output is checked once, untimed, before it is timed.
aiokafka, kafka-python, crc32c and matplotlib are optional (`pip install
'kcodec[bench]'`); the columns of a missing peer are left empty and named.

On a shared machine one run can land in a slow phase of the host's:
`kcodec bench --summarize A.json B.json ...` sets runs saved with --json side
by side, target by target.
"""
import gc
import itertools
import json
import os
import platform
import random
import statistics
import struct
import sys
import time
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import kcodec
from kcodec import compression as _compression
from kcodec._core import crc, system_codecs
from kcodec._core.columns import handed_back_batches

SEED = 20240601
BASE_TIMESTAMP = 1_700_000_000_000
N_RECORDS = 20_000              # records per 100-byte-value workload in a full run
QUICK_RECORDS = 300             # ... in --quick
PREFIX_RECORDS = 2_000          # kafka-python reads only a batch-aligned prefix this long
FULL = {"repeats": 7, "min_time": 0.1, "collect": True}
QUICK = {"repeats": 3, "min_time": 0.002, "collect": False}
V2_HEADER = 61                  # bytes before a v2 batch's records section
UNBOUNDED_BATCH = 1 << 30       # aiokafka batch_size when the boundaries are given
NO_HEADERS = []                 # shared, never mutated; kcodec reads it as (), aiokafka as []
BENCH_EXTRA = "pip install 'kcodec[bench]'"


class WorkloadError(AssertionError):
    """A workload or an implementation's output is not what it must be."""


def require(condition, message):
    """A check that also holds under `python -O` (unlike assert)."""
    if not condition:
        raise WorkloadError(message)


# ----------------------------------------------------------- optional peers

def _import_peer(name):
    """The reader/builder classes of one peer; ImportError when not installed."""
    if name == "aiokafka":
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
        from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
        from aiokafka.record.memory_records import MemoryRecords
        return {"MemoryRecords": MemoryRecords, "Builder": DefaultRecordBatchBuilder,
                "LegacyBuilder": LegacyRecordBatchBuilder}
    if name == "kafka-python":
        with warnings.catch_warnings():     # its package import warns about importlib.resources
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.record.memory_records import MemoryRecords
        return {"MemoryRecords": MemoryRecords}
    if name == "crc32c":
        import crc32c
        return {"crc32c": crc32c.crc32c}
    raise ValueError(name)


PEERS = ("aiokafka", "kafka-python")


def load_peers(names=PEERS + ("crc32c",)):
    """name -> classes, or None with the reason in the second dict."""
    found, missing = {}, {}
    for name in names:
        try:
            found[name] = _import_peer(name)
        except ImportError as exc:
            found[name] = None
            missing[name] = f"not installed ({exc}); {BENCH_EXTRA}"
    aio = found.get("aiokafka")
    if aio is not None and not aio["MemoryRecords"].__module__.startswith("aiokafka.record._crecords"):
        missing["aiokafka-compiled"] = ("aiokafka is its pure-Python fallback, not the compiled "
                                        "reader (AIOKAFKA_NO_EXTENSIONS set, or no wheel)")
    return found, missing


# ------------------------------------------------------------------ records

_EVENTS = ("page_view", "click", "add_to_cart", "checkout", "search", "login", "logout")
_PAGES = ("/", "/products", "/products/item", "/cart", "/search", "/account", "/help")
_KEY_PREFIXES = ("user", "session", "device", "account", "cust")
_SOURCES = (b"web", b"ios", b"android", b"batch-import")


@lru_cache(maxsize=None)
def make_records(n=N_RECORDS, seed=SEED, value_size=100, headers=0):
    """n (key, value, timestamp, headers) tuples, the same on every call.

    Keys and values depend only on (n, seed, value_size): the headers come
    from a second generator, so a workload with headers has the same keys and
    values as one without."""
    rng = random.Random(seed)
    hrng = random.Random(seed + 1)
    ts = BASE_TIMESTAMP
    out = []
    for i in range(n):
        prefix = rng.choice(_KEY_PREFIXES)
        width = rng.randint(5, 12)
        key = f"{prefix}-{rng.randrange(10 ** width):0{width}d}".encode()   # 10..20 bytes
        value = (f'{{"seq":{i},"event":"{rng.choice(_EVENTS)}",'
                 f'"page":"{rng.choice(_PAGES)}/{rng.randrange(1000)}",'
                 f'"ms":{rng.randrange(5000)},"score":{rng.random():.6f},"pad":"')
        pad = value_size - len(value) - 2
        require(pad >= 0, f"values of {value_size} bytes are too small")
        value = (value + "".join(rng.choices("abcdefghij", k=pad)) + '"}').encode()
        require(len(value) == value_size, f"value of {len(value)} bytes")
        ts += rng.randrange(0, 4)                                # non-decreasing, ms
        if headers:
            hdrs = [("trace-id", hrng.randbytes(8).hex().encode()),
                    ("source", hrng.choice(_SOURCES)),
                    ("schema-version", str(hrng.randrange(1, 4)).encode())][:headers]
            hdrs += [(f"h{j}", b"x" * hrng.randrange(8)) for j in range(3, headers)]
        else:
            hdrs = NO_HEADERS
        out.append((key, value, ts, hdrs))
    return out


def digest_records(records):
    """(count, crc32 of keys+values, sum of timestamps) of (key, value, ts, ...) rows."""
    crc = 0
    ts_sum = 0
    for key, value, ts, *_ in records:
        crc = zlib.crc32(value, zlib.crc32(key or b"", crc))
        ts_sum += ts
    return len(records), crc, ts_sum


def content_digest(rows):
    """(count, crc32 of keys, values and headers, sum of timestamps) of
    (key, value, timestamp, headers) rows; None, () and [] headers are alike."""
    crc = 0
    ts_sum = 0
    for key, value, ts, headers in rows:
        crc = zlib.crc32(value or b"", zlib.crc32(key or b"", crc))
        crc = zlib.crc32(b"\x00" if key is None else b"\x01", crc)
        for hkey, hvalue in headers or ():
            crc = zlib.crc32(hvalue or b"", zlib.crc32(hkey.encode(), crc))
        ts_sum += ts if ts is not None else 0
    return len(rows), crc, ts_sum


def table_rows(table, first_offset=0):
    """The (key, value, timestamp ms, headers) rows of a decode() table, its
    offsets checked to run from first_offset without a gap."""
    import numpy as np
    import pyarrow as pa

    offsets = table.column("offset").to_numpy()
    require(np.array_equal(offsets, np.arange(first_offset, first_offset + len(offsets))),
            "decode() offsets do not run without a gap")
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    headers = [None if h is None else [(x["key"], x["value"]) for x in h]
               for h in table.column("headers").to_pylist()]
    return list(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), ts, headers))


def table_digest(table, first_offset=0):
    return content_digest(table_rows(table, first_offset))


# ---------------------------------------------------------------- workloads

@dataclass(frozen=True)
class Spec:
    id: str
    label: str
    codec: str = "none"
    magic: int = 2
    value_size: int = 100
    headers: int = 0
    max_batch_bytes: int = 16384
    scale: float = 1.0          # records, relative to the run's record count

    @property
    def compressed(self):
        return self.codec != "none"


def _specs():
    specs = {}
    for codec in _compression.CODEC_NAMES:
        specs[codec] = Spec(codec, f"{codec} 100 B", codec)
        specs[f"{codec}-1pb"] = Spec(f"{codec}-1pb", f"{codec} 1/batch", codec, max_batch_bytes=1)
        if codec != "zstd":                          # zstd is not allowed before v2
            what = "wrappers" if codec != "none" else "messages"
            specs[f"v1-{codec}"] = Spec(f"v1-{codec}", f"v1 {codec} {what}", codec, magic=1)
    specs["headers"] = Spec("headers", "none 3 headers", headers=3)
    specs["10kb"] = Spec("10kb", "none 10 KB", value_size=10_240, max_batch_bytes=1 << 20,
                         scale=0.05)
    specs["10kb-lz4"] = Spec("10kb-lz4", "lz4 10 KB", "lz4", value_size=10_240,
                             max_batch_bytes=1 << 20, scale=0.05)
    return specs


WORKLOADS = _specs()
DEFAULT_MATRIX = ("none", "gzip", "snappy", "lz4", "zstd", "none-1pb", "headers", "10kb",
                  "v1-snappy")


@dataclass
class Workload:
    spec: Spec
    records: list                   # the (key, value, ts, headers) rows encoded
    data: bytes                     # the record set, encoded once with kcodec
    batch_counts: list              # records in each batch (wrapper, message), in order
    positions: list                 # (position, size) of each batch in data
    digest: tuple                   # content_digest(records)
    prefix: bytes = b""             # a batch-aligned prefix of data (>= PREFIX_RECORDS)
    prefix_count: int = 0
    prefix_digest: tuple = field(default=())

    @property
    def id(self):
        return self.spec.id

    @property
    def name(self):
        return self.spec.label

    @property
    def count(self):
        return len(self.records)


def workload_records(spec, n):
    return max(10, int(round(n * spec.scale)))


@lru_cache(maxsize=None)
def build_workload(workload_id, n=N_RECORDS):
    """The workload `workload_id` with n * spec.scale records, built and
    checked once (kcodec reads back what it wrote)."""
    try:
        spec = WORKLOADS[workload_id]
    except KeyError:
        raise ValueError(f"unknown workload {workload_id!r}; choose from "
                         f"{', '.join(WORKLOADS)}") from None
    records = make_records(workload_records(spec, n), SEED, spec.value_size, spec.headers)
    if spec.magic < 2:
        records = [(k, v, ts, NO_HEADERS) for k, v, ts, _ in records]
    data = kcodec.encode(records, magic=spec.magic, compression=spec.codec,
                         max_batch_bytes=spec.max_batch_bytes)
    counts, positions = [], []
    prefix_end = prefix_count = 0
    for batch in kcodec.read_batches(data):
        require(batch.compression == spec.codec and batch.magic == spec.magic,
                f"{spec.id}: unexpected {batch!r}")
        counts.append(batch.count)
        positions.append((batch.position, batch.size))
        if prefix_count < min(PREFIX_RECORDS, len(records)):
            prefix_count += batch.count
            prefix_end = batch.position + batch.size
    require(sum(counts) == len(records), f"{spec.id}: {sum(counts)} records read back")
    if spec.max_batch_bytes == 1:
        require(set(counts) == {1}, f"{spec.id}: a batch holds several records")
    digest = content_digest(records)
    return Workload(spec, records, data, counts, positions, digest,
                    data[:prefix_end], prefix_count, content_digest(records[:prefix_count]))


def resolve_workloads(names):
    """Workload ids from a list that may hold comma-separated ids; 'all' for every one."""
    ids = []
    for name in names or DEFAULT_MATRIX:
        for part in str(name).replace(",", " ").split():
            if part == "all":
                ids.extend(WORKLOADS)
            elif part == "default":
                ids.extend(DEFAULT_MATRIX)
            elif part in WORKLOADS:
                ids.append(part)
            else:
                raise ValueError(f"unknown workload {part!r}; choose from "
                                 f"{', '.join(WORKLOADS)} (or 'all')")
    return list(dict.fromkeys(ids))


# ---------------------------------------------- the operations being timed
#
# Each peer decode touches offset, timestamp, key, value and headers of every
# record and returns the number of records. The loops are written out, not
# through getattr, so that each reads its fields as a user's loop would.

def kcodec_decode_arrow(data):
    return kcodec.decode(data).num_rows


def kcodec_decode_many(record_sets):
    """decode_many: a list of record sets into one table."""
    return kcodec.decode_many(record_sets)[0].num_rows


def kcodec_decode_views(data):
    """decode(views=True): key/value as binary_view columns into the input."""
    return kcodec.decode(data, views=True).num_rows


def kcodec_decode(data):
    """The object API: every record's five fields read."""
    n = 0
    for r in kcodec.read_records(data, verify_crc=True):
        r.offset
        r.timestamp
        r.key
        r.value
        r.headers
        n += 1
    return n


def kcodec_decode_values(data):
    """What most consumers read: each record's offset and value."""
    n = 0
    for r in kcodec.read_records(data, verify_crc=True):
        r.offset
        r.value
        n += 1
    return n


def kcodec_iterate(data):
    """Decoding alone: every record object made, CRCs checked, no field read."""
    n = 0
    for _ in kcodec.read_records(data, verify_crc=True):
        n += 1
    return n


def checked_batches(mr):
    """A peer MemoryRecords' batches, each CRC-checked."""
    while True:
        batch = mr.next_batch()
        if batch is None:
            return
        if not batch.validate_crc():
            raise ValueError("CRC mismatch")
        yield batch


def _memory_records_decode(mr):
    n = 0
    for batch in checked_batches(mr):
        for r in batch:
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


def aiokafka_decode_values(data):
    n = 0
    for batch in checked_batches(peer("aiokafka")["MemoryRecords"](data)):
        for r in batch:
            r.offset
            r.value
            n += 1
    return n


def aiokafka_iterate(data):
    n = 0
    for batch in checked_batches(peer("aiokafka")["MemoryRecords"](data)):
        for _ in batch:
            n += 1
    return n


@lru_cache(maxsize=None)
def peer(name):
    """The classes of an installed peer (ImportError when it is not)."""
    return _import_peer(name)


def aiokafka_decode(data):
    return _memory_records_decode(peer("aiokafka")["MemoryRecords"](data))


def kafkapython_decode(data):
    return _memory_records_decode(peer("kafka-python")["MemoryRecords"](data))


def memory_records_rows(mr, relative_offsets=False):
    """(key, value, timestamp, headers) rows read with a peer's MemoryRecords,
    CRCs checked; offsets checked to count up from 0 unless relative_offsets
    (produce-style batches, each starting at 0)."""
    rows = []
    for batch in checked_batches(mr):
        for r in batch:
            if not relative_offsets:
                require(r.offset == len(rows), f"record {len(rows)} has offset {r.offset}")
            rows.append((r.key, r.value, r.timestamp, r.headers))
    return rows


AIO_CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def aiokafka_encode(records, codec_id, batch_counts, magic=2):
    """aiokafka's compiled builders: one per batch (wrapper), the records
    appended with their relative offsets (as its producer does), each built.

    The batch boundaries are given (kcodec's) rather than found from
    batch_size: aiokafka's size estimate differs slightly, and with the same
    boundaries both sides write the same batches. append still computes each
    record's size, as it always does."""
    classes = peer("aiokafka")
    out = []
    start = 0
    if magic == 2:
        builder_class = classes["Builder"]
        for count in batch_counts:
            builder = builder_class(2, codec_id, 0, -1, -1, -1, UNBOUNDED_BATCH)
            append = builder.append
            for offset in range(count):
                key, value, ts, headers = records[start + offset]
                append(offset, ts, key, value, headers)
            start += count
            out.append(builder.build())
    else:
        builder_class = classes["LegacyBuilder"]
        if codec_id == 0:                  # messages, not wrappers: one message set
            batch_counts = [len(records)]
        for count in batch_counts:
            builder = builder_class(magic, codec_id, UNBOUNDED_BATCH)
            append = builder.append
            for offset in range(count):
                key, value, ts, _ = records[start + offset]
                append(offset, ts, key, value)
            start += count
            out.append(builder.build())
    return b"".join(out)


def kcodec_encode_arrow(table, spec):
    return kcodec.encode(table, magic=spec.magic, compression=spec.codec,
                         max_batch_bytes=spec.max_batch_bytes)


# ------------------------------------------------------------------- floors

def compressed_sections(wl):
    """The compressed records section of every batch (v2) or wrapper (v0/v1)."""
    data = memoryview(wl.data)
    out = []
    for position, size in wl.positions:
        if wl.spec.magic == 2:
            out.append(bytes(data[position + V2_HEADER:position + size]))
            continue
        pos = position + 12 + 4 + 2 + (8 if wl.spec.magic == 1 else 0)   # prefix, crc, magic+attrs, ts
        (klen,) = struct.unpack_from(">i", data, pos)
        pos += 4 + max(klen, 0)
        (vlen,) = struct.unpack_from(">i", data, pos)
        out.append(bytes(data[pos + 4:pos + 4 + vlen]))
    return out


def decompress_floor(codec, sections):
    """(zero-argument callable, description): the codec library kcodec uses,
    decompressing every section, as lean as a Python loop over it gets."""
    if codec == "gzip":
        decompress = _compression._inflate.decompress
        name = _compression._inflate.__name__.rpartition(".")[2]
        return (lambda: [decompress(s, 31) for s in sections]), f"{name}.decompress(wbits=31)"
    if codec == "snappy":
        import cramjam
        blocks = [bytes(b) for s in sections for b in system_codecs.snappy_blocks(s)]
        sizes = [cramjam.snappy.decompress_raw_len(b) for b in blocks]
        # Into one buffer made beforehand, as decode() does: no object per block.
        out = memoryview(bytearray(sum(sizes)))
        ends = list(itertools.accumulate(sizes))
        outs = [out[end - size:end] for end, size in zip(ends, sizes)]
        into = cramjam.snappy.decompress_raw_into

        def floor():
            for block, piece in zip(blocks, outs):
                into(block, piece)
            return outs
        return floor, "cramjam.snappy.decompress_raw_into (xerial blocks, one buffer)"
    if codec == "lz4":
        import lz4.frame
        decompress = lz4.frame.decompress
        return (lambda: [decompress(s) for s in sections]), "lz4.frame.decompress"
    if codec == "zstd":
        module = system_codecs.core_module("zstd")
        if module is None:
            import zstandard
            decompress = zstandard.ZstdDecompressor().decompress
            return (lambda: [decompress(s) for s in sections]), "zstandard decompress"
        return _libzstd_floor(module, sections), f"ZSTD_decompressDCtx of {module} (ctypes, one buffer)"
    raise ValueError(codec)


def _libzstd_floor(module, sections):
    """ZSTD_decompressDCtx of the libzstd build in extension module `module`,
    one reused context, into one buffer made beforehand. Its Python binding
    takes a new context for every frame, which is no floor; ctypes costs
    about 0.5 us a call."""
    import ctypes
    import importlib.util
    import weakref
    lib = ctypes.CDLL(importlib.util.find_spec(module).origin)
    lib.ZSTD_createDCtx.restype = ctypes.c_void_p
    lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
    into = lib.ZSTD_decompressDCtx
    into.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                     ctypes.c_size_t]
    into.restype = ctypes.c_size_t
    sizes = [len(_compression.decompress(_compression.ZSTD, s, 1 << 30, 2)) for s in sections]
    out = (ctypes.c_char * max(sum(sizes), 1))()
    ends = list(itertools.accumulate(sizes))
    context = lib.ZSTD_createDCtx()
    calls = [(context, ctypes.addressof(out) + end - size, size, bytes(s), len(s))
             for s, size, end in zip(sections, sizes, ends)]
    pieces = [memoryview(out).cast("B")[end - size:end] for end, size in zip(ends, sizes)]

    def floor():
        for call in calls:
            into(*call)
        return pieces
    weakref.finalize(floor, lib.ZSTD_freeDCtx, context)
    return floor


def check_decompress_floor(wl, sections, floor):
    """The floor must produce exactly the bytes kcodec decompresses; returns their length."""
    codec = _compression.codec_id(wl.spec.codec)
    expected = b"".join(bytes(_compression.decompress(codec, s, 1 << 30, wl.spec.magic))
                        for s in sections)
    got = b"".join(bytes(piece) for piece in floor())
    require(got == expected, f"{wl.id}: the decompress floor does not give kcodec's bytes")
    return len(expected)


def crc_memcpy_floors(data, magic, peers):
    """name -> zero-argument callable: a CRC of the whole input plus a memcpy
    of it into a preallocated buffer, one per CRC implementation at hand
    (CRC-32C for v2, CRC-32 for v0/v1, as those formats use)."""
    src = memoryview(data)
    dst = memoryview(bytearray(len(data)))
    if magic == 2:
        crcs = {"kcodec.crc32c": kcodec.crc32c}
        if peers.get("crc32c"):
            crcs["crc32c package"] = peers["crc32c"]["crc32c"]
        expected = kcodec.crc32c(data)
    else:
        crcs = {"kcodec.crc32": kcodec.crc32, "zlib.crc32": zlib.crc32}
        expected = zlib.crc32(data)
    floors = {}
    for name, checksum in crcs.items():
        require(checksum(data) == expected, f"{name} disagrees")

        def floor(checksum=checksum):
            value = checksum(src)
            dst[:] = src
            return value
        floors[name] = floor
    return floors


# ------------------------------------------------------------------- timing

def _autorange(fn, min_time):
    """timeit-style: the number of calls that takes at least min_time."""
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time:
            return number
        number = max(number * 2, int(number * min_time / max(elapsed, 1e-9) * 1.1) + 1)


def _one_repeat(fn, number):
    """The median time of `number` calls, each timed alone: a burst of load
    from elsewhere on a shared machine slows a few calls, not the figure."""
    clock = time.perf_counter
    times = []
    for _ in range(number):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


class Timing:
    """Seconds per call: the median of `samples`, each the median of `number` calls."""
    __slots__ = ("samples", "number")

    def __init__(self, samples, number):
        self.samples = samples
        self.number = number

    @property
    def median(self):
        return statistics.median(self.samples)

    def per_second(self, items):
        """items per second at the median time (items handled per call)."""
        return items / self.median

    def __repr__(self):
        return f"Timing(median={self.median:.6g}s, repeats={len(self.samples)}, number={self.number})"


def time_per_call(fn, repeats=7, min_time=0.1):
    """Timing of one zero-argument callable (see compare)."""
    return compare({"fn": fn}, repeats, min_time)["fn"]


def compare(candidates, repeats=7, min_time=0.1, collect=True):
    """Time each candidate (name -> zero-argument callable) side by side:
    timeit-style repeats of >= min_time each, `repeats` of them, returning
    name -> Timing (quote Timing.median). Each repeat runs every candidate in
    turn (interleaved), so that background load on a shared machine hits all
    of them alike. The garbage collector stays on, as in a real consumer (and
    in pytest-benchmark's default); with `collect` a full collection runs
    before each sample (tens of ms in a big process: --quick skips it)."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    numbers = {}
    for name, fn in candidates.items():
        fn()                                        # warm up (imports, caches)
        numbers[name] = _autorange(fn, min_time)
    samples = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            if collect:
                gc.collect()
            samples[name].append(_one_repeat(fn, numbers[name]))
    return {name: Timing(samples[name], numbers[name]) for name in candidates}


# ------------------------------------------------------------- environment

def environment(peers=None):
    env = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "kcodec": kcodec.__version__,
        "kcodec_hardware_crc32c": bool(kcodec.hardware_crc32c()),
        "kcodec_crc_library": crc.library(),
        "kcodec_in_core": {codec: system_codecs.in_core(codec)
                           for codec in ("gzip", "snappy", "lz4", "zstd")},
    }
    for dist, module in (("aiokafka", "aiokafka"), ("kafka-python", "kafka"),
                         ("pyarrow", "pyarrow")):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                env[dist] = __import__(module).__version__
        except ImportError:
            env[dist] = None
    if peers is not None and peers.get("aiokafka"):
        env["aiokafka_compiled"] = peers["aiokafka"]["MemoryRecords"].__module__.startswith(
            "aiokafka.record._crecords")
    return env


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_times(stat_text=None):
    """The machine's CPU time so far, from /proc/stat (Linux): (wanted, steal)
    in ticks, wanted being the time its CPUs ran or were ready to run (all but
    idle and I/O wait), or None where there is no such file."""
    try:
        text = Path("/proc/stat").read_text() if stat_text is None else stat_text
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            # user nice system idle iowait irq softirq steal guest guest_nice;
            # guest time is already counted in user and nice.
            try:
                ticks = [int(x) for x in fields[1:9]] + [0] * (9 - len(fields))
            except ValueError:
                return None
            user, nice, system, idle, iowait, irq, softirq, steal = ticks
            return user + nice + system + irq + softirq + steal, steal
    return None


def steal_share(before, after):
    """Of the CPU time this machine wanted between two cpu_times readings, the
    share its hypervisor took (virtual CPUs ready but not run), or None."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return (after[1] - before[1]) / (after[0] - before[0])


# ------------------------------------------------------------- measurement

def _entry(timing, records):
    return {"records": records, "median_s": timing.median, "records_per_s": records / timing.median,
            "samples_s": timing.samples, "calls_per_sample": timing.number}


def check_workload(wl, peers):
    """Every implementation's output, once, untimed. Returns the decoded table."""
    handed_back = handed_back_batches()
    table = kcodec.decode(wl.data)
    require(table.num_rows == wl.count, f"{wl.id}: kcodec.decode gives {table.num_rows} rows")
    require(table_digest(table) == wl.digest, f"{wl.id}: kcodec.decode reads other records")
    require(table_digest(kcodec.decode(wl.data, views=True)) == wl.digest,
            f"{wl.id}: kcodec.decode(views=True) reads other records")
    require(handed_back_batches() == handed_back,
            f"{wl.id}: kcodec.decode's compiled scan handed batches back (the figures would "
            "time the slower path)")
    require(kcodec_decode(wl.data) == wl.count, f"{wl.id}: object API count")
    rows = [(r.key, r.value, r.timestamp, r.headers) for r in kcodec.read_records(wl.data)]
    require(content_digest(rows) == wl.digest, f"{wl.id}: the object API reads other records")
    encoded = kcodec_encode_arrow(table, wl.spec)
    require(table_digest(kcodec.decode(encoded)) == wl.digest,
            f"{wl.id}: kcodec.encode(table) writes other records")
    if peers.get("aiokafka"):
        mr = peers["aiokafka"]["MemoryRecords"]
        require(content_digest(memory_records_rows(mr(wl.data))) == wl.digest,
                f"{wl.id}: aiokafka reads other records")
        require(aiokafka_decode(wl.data) == wl.count, f"{wl.id}: aiokafka decode count")
        out = aiokafka_encode(wl.records, AIO_CODEC[wl.spec.codec], wl.batch_counts, wl.spec.magic)
        require(content_digest(memory_records_rows(mr(out), relative_offsets=True)) == wl.digest,
                f"{wl.id}: aiokafka encodes other records")
    if peers.get("kafka-python"):
        mr = peers["kafka-python"]["MemoryRecords"]
        require(content_digest(memory_records_rows(mr(wl.prefix))) == wl.prefix_digest,
                f"{wl.id}: kafka-python reads other records")
    return table


def _decode_repeatedly(data, times):
    rows = 0
    for _ in range(times):
        rows += kcodec.decode(data).num_rows
    return rows


def thread_scaling(wl, executor, single_call_s, timing):
    """kcodec.decode on 1 thread vs 2 threads, each decoding its own copy of
    the input; a task decodes its copy `times` times so that handing it to the
    pool costs little. Returns the entries and the aggregate-rate ratio."""
    copies = [bytes(bytearray(wl.data)) for _ in range(2)]
    times = max(1, int(0.002 / max(single_call_s, 1e-9)) + 1)

    def one():
        return executor.submit(_decode_repeatedly, copies[0], times).result()

    def two():
        futures = [executor.submit(_decode_repeatedly, c, times) for c in copies]
        return sum(f.result() for f in futures)

    require(one() == times * wl.count and two() == 2 * times * wl.count,
            f"{wl.id}: threaded decode gives other row counts")
    t = compare({"1 thread": one, "2 threads": two}, **timing)
    entries = {"1 thread": _entry(t["1 thread"], times * wl.count),
               "2 threads": _entry(t["2 threads"], 2 * times * wl.count)}
    ratio = entries["2 threads"]["records_per_s"] / entries["1 thread"]["records_per_s"]
    return entries, ratio, times


def measure(wl, peers, timing, executor=None):
    """All figures of one workload (a JSON-ready dict); `timing`: compare()'s
    keyword arguments (repeats, min_time, collect)."""
    table = check_workload(wl, peers)
    data, prefix = wl.data, wl.prefix
    decoders = {
        "kcodec.decode": lambda: kcodec_decode_arrow(data),
        "kcodec object API": lambda: kcodec_decode(data),
    }
    counts = {"kcodec.decode": wl.count, "kcodec object API": wl.count}
    decoders["kcodec.decode(views=True)"] = lambda: kcodec_decode_views(data)
    counts["kcodec.decode(views=True)"] = wl.count
    if peers.get("aiokafka"):
        decoders["aiokafka"] = lambda: aiokafka_decode(data)
        counts["aiokafka"] = wl.count
    if peers.get("kafka-python"):
        decoders["kafka-python"] = lambda: kafkapython_decode(prefix)
        counts["kafka-python"] = wl.prefix_count
    floors = {}
    if wl.spec.compressed:
        sections = compressed_sections(wl)
        fn, what = decompress_floor(wl.spec.codec, sections)
        decompressed = check_decompress_floor(wl, sections, fn)
        floors[f"decompress: {what}"] = fn
        floor_kind = "codec decompress"
    else:
        crc_floors = crc_memcpy_floors(data, wl.spec.magic, peers)
        floors.update({f"CRC+memcpy: {name}": fn for name, fn in crc_floors.items()})
        decompressed = len(data)
        floor_kind = "CRC-32C + memcpy" if wl.spec.magic == 2 else "CRC-32 + memcpy"
    for name in floors:
        counts[name] = wl.count
    timings = compare({**decoders, **floors}, **timing)
    entries = {name: _entry(t, counts[name]) for name, t in timings.items()}
    decode = {name: entries[name] for name in decoders}
    floor_entries = {name: entries[name] for name in floors}
    best_floor = min(floor_entries, key=lambda name: floor_entries[name]["median_s"])

    encoders = {"kcodec.encode(table)": lambda: kcodec_encode_arrow(table, wl.spec)}
    if peers.get("aiokafka"):
        records, codec_id, bc, magic = wl.records, AIO_CODEC[wl.spec.codec], wl.batch_counts, wl.spec.magic
        encoders["aiokafka builder"] = lambda: aiokafka_encode(records, codec_id, bc, magic)
    encode = {name: _entry(t, wl.count)
              for name, t in compare(encoders, **timing).items()}

    row = {
        "id": wl.id, "workload": wl.name, "codec": wl.spec.codec, "magic": wl.spec.magic,
        "value_bytes": wl.spec.value_size, "headers_per_record": wl.spec.headers,
        "max_batch_bytes": wl.spec.max_batch_bytes, "records": wl.count,
        "batches": len(wl.batch_counts),
        "records_per_batch": round(wl.count / len(wl.batch_counts), 1),
        "bytes": len(wl.data), "decompressed_bytes": decompressed,
        "decode": decode, "floors": floor_entries,
        "floor": {"kind": floor_kind, "name": best_floor, **floor_entries[best_floor]},
        "encode": encode,
    }
    if executor is not None:
        threads, scaling, times = thread_scaling(
            wl, executor, decode["kcodec.decode"]["median_s"], timing)
        row["threads"] = {**threads, "decodes_per_task": times, "scaling": scaling}
    row["ratios"] = ratios(row)
    return row


def ratios(row):
    """Speed ratios (>1: kcodec faster), and kcodec's time over the floor's."""
    d = row["decode"]
    kc = d["kcodec.decode"]["records_per_s"]
    out = {"object_api_vs_aiokafka": None, "decode_vs_aiokafka": None,
           "decode_vs_kafka_python": None}
    if "aiokafka" in d:
        out["decode_vs_aiokafka"] = kc / d["aiokafka"]["records_per_s"]
        out["object_api_vs_aiokafka"] = (d["kcodec object API"]["records_per_s"]
                                         / d["aiokafka"]["records_per_s"])
    if "kafka-python" in d:
        out["decode_vs_kafka_python"] = kc / d["kafka-python"]["records_per_s"]
    out["decode_time_vs_floor"] = d["kcodec.decode"]["median_s"] / row["floor"]["median_s"]
    e = row["encode"]
    out["encode_vs_aiokafka"] = (e["kcodec.encode(table)"]["records_per_s"]
                                 / e["aiokafka builder"]["records_per_s"]
                                 if "aiokafka builder" in e else None)
    out["threads_2_vs_1"] = row["threads"]["scaling"] if "threads" in row else None
    return out


# ------------------------------------------------------------------ targets
# (description, workload ids, ratio key, ">=" or "<=", goal). Shown, never asserted.

TARGETS = (
    ("uncompressed decode >= 8x aiokafka", ("none",), "decode_vs_aiokafka", ">=", 8.0),
    ("uncompressed decode within 3x of the CRC-32C+memcpy floor", ("none",),
     "decode_time_vs_floor", "<=", 3.0),
    ("compressed decode within 1.3x of the codec's own decompress",
     ("gzip", "snappy", "lz4", "zstd"), "decode_time_vs_floor", "<=", 1.3),
    ("compressed decode >= 3x aiokafka", ("gzip", "snappy", "lz4", "zstd"),
     "decode_vs_aiokafka", ">=", 3.0),
    ("one record per batch: decode >= 5x aiokafka", ("none-1pb",), "decode_vs_aiokafka", ">=", 5.0),
    ("encode from Arrow >= 8x aiokafka's builder", ("none",), "encode_vs_aiokafka", ">=", 8.0),
    ("object API >= 2x aiokafka", ("none",), "object_api_vs_aiokafka", ">=", 2.0),
)


def evaluate_targets(rows):
    by_id = {r["id"]: r for r in rows}
    out = []
    for text, ids, key, op, goal in TARGETS:
        for wid in ids:
            if wid not in by_id:
                continue
            value = by_id[wid]["ratios"].get(key)
            met = None if value is None else (value >= goal if op == ">=" else value <= goal)
            out.append({"target": text, "workload": wid, "metric": key, "op": op, "goal": goal,
                        "value": value, "met": met})
    return out


# ------------------------------------------------------------------- report

def _rate(entry):
    return "n/a" if entry is None else f"{entry['records_per_s']:,.0f}"


def _ratio(x, digits=2):
    return "n/a" if x is None else f"{x:.{digits}f}x"


DECODE_COLUMNS = ("workload", "records", "records/batch", "kcodec.decode rec/s",
                  "decode(views=True) rec/s", "object API rec/s", "aiokafka rec/s", "kafka-python rec/s", "floor rec/s",
                  "decode / aiokafka", "decode / kafka-python", "decode time / floor time",
                  "2 threads / 1 thread")
ENCODE_COLUMNS = ("workload", "kcodec.encode(table) rec/s", "aiokafka builder rec/s",
                  "encode / aiokafka")


def markdown(result):
    env, rows = result["environment"], result["workloads"]
    p = result["parameters"]
    crcs = env.get("kcodec_crc_library") or "kcodec's own code"
    lines = [
        f"kcodec {env['kcodec']} vs aiokafka {env.get('aiokafka') or '(missing)'} "
        f"(compiled reader: {env.get('aiokafka_compiled', 'n/a')}) and kafka-python "
        f"{env.get('kafka-python') or '(missing)'}; Python {env['python']}, pyarrow "
        f"{env['pyarrow']}, {env['cpu']} ({env['cpus']} CPUs); CRC-32C and CRC-32 in "
        f"{crcs} (hardware CRC-32C: {env['kcodec_hardware_crc32c']}); decode() decompresses "
        + (", ".join(f"{codec} with {library}" for codec, library
                     in env.get("kcodec_in_core", {}).items() if library) or "every codec")
        + (" from the compiled loop, into one reused buffer (views=True: into buffers"
           " the views point into, many batches each)"
           if any(env.get("kcodec_in_core", {}).values()) else " through the Python bindings")
        + ".",
        f"Records/s = records / median seconds per call; median of {p['repeats']} interleaved "
        f"repeats of >= {p['min_time_s']} s each, each the median of its calls timed one by one; "
        f"every implementation on the same bytes in one "
        f"process{' (--quick: tiny workloads, figures are noise)' if p['quick'] else ''}.",
    ]
    if result.get("cpu_steal") is not None:
        lines.append(
            f"Steal during the run (/proc/stat, the whole machine): {result['cpu_steal']:.0%} of "
            f"the CPU time its virtual CPUs were busy or waiting for the host.")
    for name, reason in result["missing"].items():
        if name == "crc32c":
            lines.append(f"crc32c package missing: the floor uses kcodec's CRC only ({reason}).")
        elif name == "aiokafka-compiled":
            lines.append(f"Warning: {reason}.")
        else:
            lines.append(f"Missing peer columns: {name} — {reason}.")
    lines += [
        "",
        "Decode. kcodec.decode: record set -> pyarrow.Table, CRCs checked (views=True: key and "
        "value as binary_view columns into the input, not copied). Object API, aiokafka "
        "(compiled MemoryRecords + validate_crc) and kafka-python (first ~2k records): every "
        "record's offset, timestamp, key, value, headers read. Floor: uncompressed, a CRC of the "
        "input + memcpy of it (the faster CRC); compressed, the codec library decompressing each "
        "batch's records section. 2 threads / 1 thread: aggregate records/s of kcodec.decode on "
        "two threads, each with its own copy of the input, over one thread.",
        "",
        "| " + " | ".join(DECODE_COLUMNS) + " |",
        "|---|" + "---:|" * (len(DECODE_COLUMNS) - 1),
    ]
    for r in rows:
        d, q = r["decode"], r["ratios"]
        lines.append("| " + " | ".join([
            r["workload"], f"{r['records']:,}", f"{r['records_per_batch']:g}",
            _rate(d["kcodec.decode"]), _rate(d.get("kcodec.decode(views=True)")),
            _rate(d["kcodec object API"]), _rate(d.get("aiokafka")),
            _rate(d.get("kafka-python")), f"{_rate(r['floor'])} ({r['floor']['kind']})",
            _ratio(q["decode_vs_aiokafka"]), _ratio(q["decode_vs_kafka_python"], 1),
            _ratio(q["decode_time_vs_floor"]), _ratio(q["threads_2_vs_1"]),
        ]) + " |")
    lines += [
        "",
        "Encode. kcodec.encode(table) from the Arrow table kcodec.decode gives, vs aiokafka's "
        "compiled builder from (key, value, timestamp, headers) tuples, one builder per batch "
        "at kcodec's batch boundaries (gzip level: kcodec 6, aiokafka 9).",
        "",
        "| " + " | ".join(ENCODE_COLUMNS) + " |",
        "|---|" + "---:|" * (len(ENCODE_COLUMNS) - 1),
    ]
    for r in rows:
        e = r["encode"]
        lines.append(f"| {r['workload']} | {_rate(e['kcodec.encode(table)'])} "
                     f"| {_rate(e.get('aiokafka builder'))} "
                     f"| {_ratio(r['ratios']['encode_vs_aiokafka'])} |")
    if result["targets"]:
        lines += ["", "| target | workload | measured | goal | met |", "|---|---|---:|---:|---|"]
        for t in result["targets"]:
            met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
            lines.append(f"| {t['target']} | {t['workload']} | {_ratio(t['value'])} "
                         f"| {t['op']} {t['goal']:g}x | {met} |")
    return "\n".join(lines)


def summarize(results, labels):
    """Markdown: each target as every run measured it (a column per run) and
    how many runs met it, under each run's CPU, uncompressed decode and floor
    times and steal, which show the host and the phase the run landed in."""
    def none_ns(result, figure):
        row = next((r for r in result["workloads"] if r["id"] == "none"), None)
        if row is None:
            return "n/a"
        return f"{figure(row)['median_s'] / row['records'] * 1e9:.1f}"

    def cpu(result):
        return result.get("environment", {}).get("cpu") or "n/a"

    def steal(result):
        share = result.get("cpu_steal")
        return "n/a" if share is None else f"{share:.0%}"

    keys = []
    for result in results:
        for t in result["targets"]:
            if (t["target"], t["workload"]) not in keys:
                keys.append((t["target"], t["workload"]))
    lines = ["| target | workload | goal | " + " | ".join(labels) + " | met in |",
             "|---|---|---|" + "---:|" * len(labels) + "---:|",
             "| CPU | | | " + " | ".join(cpu(r) for r in results) + " | |",
             "| uncompressed decode, ns/record | none | | "
             + " | ".join(none_ns(r, lambda row: row["decode"]["kcodec.decode"])
                          for r in results) + " | |",
             "| CRC-32C+memcpy floor, ns/record | none | | "
             + " | ".join(none_ns(r, lambda row: row["floor"]) for r in results) + " | |",
             "| steal | | | " + " | ".join(steal(r) for r in results) + " | |"]
    for text, wid in keys:
        found = [next((t for t in r["targets"] if (t["target"], t["workload"]) == (text, wid)),
                      None) for r in results]
        measured = [t for t in found if t is not None and t["met"] is not None]
        goal = next(f"{t['op']} {t['goal']:g}x" for t in found if t is not None)
        lines.append(f"| {text} | {wid} | {goal} | "
                     + " | ".join("n/a" if t is None else _ratio(t["value"]) for t in found)
                     + f" | {sum(t['met'] for t in measured)} of {len(measured)} |")
    return "\n".join(lines)


CHART_SERIES = (  # (label, where the entry is, color)
    ("kcodec.decode (Arrow)", ("decode", "kcodec.decode"), "#1f77b4"),
    ("kcodec.decode(views=True)", ("decode", "kcodec.decode(views=True)"), "#17becf"),
    ("kcodec object API", ("decode", "kcodec object API"), "#6baed6"),
    ("aiokafka (compiled)", ("decode", "aiokafka"), "#ff7f0e"),
    ("kafka-python", ("decode", "kafka-python"), "#d62728"),
    ("floor (CRC+memcpy | decompress)", ("floor", None), "#7f7f7f"),
)
ENCODE_SERIES = (
    ("kcodec.encode(table)", ("encode", "kcodec.encode(table)"), "#1f77b4"),
    ("aiokafka builder", ("encode", "aiokafka builder"), "#ff7f0e"),
)


def write_png(result, path):
    """Grouped bars of records/s (log scale) per workload: decode on top, encode below."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RuntimeError(f"the chart needs matplotlib ({exc}); {BENCH_EXTRA}") from None
    rows = result["workloads"]
    fig = Figure(figsize=(max(9, 1.5 * len(rows) + 2), 9.5), dpi=110)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 1)
    for ax, series, ratio_key, title in (
            (axes[0], CHART_SERIES, "decode_vs_aiokafka", "decode"),
            (axes[1], ENCODE_SERIES, "encode_vs_aiokafka", "encode")):
        width = 0.84 / len(series)
        values = []
        for i, (name, (group, key), color) in enumerate(series):
            xs, ys = [], []
            for j, r in enumerate(rows):
                entry = r[group] if key is None else r[group].get(key)
                if entry:
                    xs.append(j + (i - (len(series) - 1) / 2) * width)
                    ys.append(entry["records_per_s"])
            if xs:
                ax.bar(xs, ys, width, label=name, color=color)
                values += ys
        for j, r in enumerate(rows):            # kcodec / aiokafka over each group
            ratio = r["ratios"][ratio_key]
            if ratio:
                top = max(e["records_per_s"] for g, k in (s[1] for s in series)
                          for e in [r[g] if k is None else r[g].get(k)] if e)
                ax.annotate(f"{ratio:.1f}x", (j, top * 1.15), ha="center", va="bottom",
                            fontsize=8, fontweight="bold")
        ax.set_yscale("log")
        if values:
            ax.set_ylim(min(values) / 2, max(values) * 40)   # headroom for the legend
        ax.set_ylabel("records/s (log)")
        ax.set_title(f"{title}: records/s per workload; bold: kcodec / aiokafka", fontsize=10)
        ax.set_xticks(range(len(rows)))
        if ax is axes[0]:
            ax.set_xticklabels([r["workload"] + _threads_label(r) for r in rows], fontsize=8)
        else:
            ax.set_xticklabels([r["workload"] for r in rows], fontsize=8)
        ax.grid(axis="y", which="major", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(series), 6), loc="upper left", frameon=False)
    env = result["environment"]
    fig.suptitle(f"kcodec {env['kcodec']} vs aiokafka {env.get('aiokafka')} / kafka-python "
                 f"{env.get('kafka-python')} — {env['cpu']} ({env['cpus']} CPUs), "
                 f"Python {env['python']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _threads_label(row):
    if row["ratios"]["threads_2_vs_1"]:
        return f"\n2 threads: {row['ratios']['threads_2_vs_1']:.2f}x"
    return ""


def matplotlib_available():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------- run

def run(quick=False, workloads=None, records=None, repeats=None, min_time=None,
        json_path=None, png_path=None, threads=True, progress=None):
    """Build and check the workloads, time everything, and return the result
    (a JSON-ready dict, its Markdown table under "markdown"); optionally write
    it as JSON and the chart as a PNG. `progress`: a text file (stderr) or None."""
    params = dict(QUICK if quick else FULL)
    if repeats is not None:
        params["repeats"] = repeats
    if min_time is not None:
        params["min_time"] = min_time
    n = records or (QUICK_RECORDS if quick else N_RECORDS)
    ids = resolve_workloads(workloads)
    if png_path is not None and not matplotlib_available():
        raise RuntimeError(f"--png needs matplotlib; {BENCH_EXTRA}")
    peers, missing = load_peers()
    started = time.perf_counter()
    cpu_before = cpu_times()

    def say(text):
        if progress is not None:
            print(f"[{time.perf_counter() - started:6.1f}s] {text}", file=progress, flush=True)

    rows = []
    executor = ThreadPoolExecutor(2) if threads else None
    try:
        for wid in ids:
            say(f"{wid}: building")
            wl = build_workload(wid, n)
            say(f"{wid}: {wl.count:,} records in {len(wl.batch_counts):,} batches, timing")
            rows.append(measure(wl, peers, params, executor))
    finally:
        if executor is not None:
            executor.shutdown()
    result = {
        "environment": environment(peers),
        "parameters": {"quick": quick, "records": n, "repeats": params["repeats"],
                       "min_time_s": params["min_time"], "gc_collect_per_sample": params["collect"],
                       "workloads": ids, "threads": threads},
        "missing": missing,
        "workloads": rows,
        "targets": evaluate_targets(rows),
        "elapsed_s": time.perf_counter() - started,
        "cpu_steal": steal_share(cpu_before, cpu_times()),
    }
    result["markdown"] = markdown(result)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
        say(f"wrote {json_path}")
    if png_path is not None:
        write_png(result, png_path)
        say(f"wrote {png_path}")
    return result


def add_arguments(parser):
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny workloads ({QUICK_RECORDS} records), few short repeats: "
                             "checks that everything runs; the figures are noise")
    parser.add_argument("--json", metavar="FILE", help="write every figure (with samples) here")
    parser.add_argument("--png", metavar="FILE", help="write a bar chart here (needs matplotlib)")
    parser.add_argument("--workloads", nargs="+", metavar="ID",
                        help=f"workloads to run (default: {' '.join(DEFAULT_MATRIX)}; "
                             f"'all' for every one: {' '.join(WORKLOADS)})")
    parser.add_argument("--records", type=int, metavar="N",
                        help=f"records per 100-byte workload (default {N_RECORDS:,}, "
                             f"{QUICK_RECORDS} with --quick; 10 KB workloads get N/20)")
    parser.add_argument("--repeats", type=int, metavar="R",
                        help=f"repeats per figure, median quoted (default {FULL['repeats']}, "
                             f"{QUICK['repeats']} with --quick)")
    parser.add_argument("--min-time", type=float, metavar="S",
                        help=f"seconds each repeat runs at least (default {FULL['min_time']})")
    parser.add_argument("--no-threads", action="store_true", help="skip the thread-scaling figures")
    parser.add_argument("--summarize", nargs="+", metavar="RUN.json",
                        help="time nothing: print each target as the runs saved with --json "
                             "measured it, a column per run (named by its file)")


def run_from_args(args, out=None, err=None):
    """`kcodec bench`: run, print the Markdown table to `out` (stdout) and
    progress to `err` (stderr); returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if args.summarize:
        return summarize_files(args.summarize, out, err)
    if args.repeats is not None and args.repeats < 1:
        print("kcodec bench: --repeats must be at least 1", file=err)
        return 2
    try:
        resolve_workloads(args.workloads)
        result = run(quick=args.quick, workloads=args.workloads, records=args.records,
                     repeats=args.repeats, min_time=args.min_time, json_path=args.json,
                     png_path=args.png, threads=not args.no_threads, progress=err)
    except (ValueError, RuntimeError) as exc:
        print(f"kcodec bench: {exc}", file=err)
        return 2
    out.write(result["markdown"] + "\n")
    return 0


def summarize_files(paths, out, err):
    results = []
    for path in paths:
        try:
            result = json.loads(Path(path).read_text())
            if not isinstance(result, dict) or not {"targets", "workloads"} <= result.keys():
                raise ValueError("no targets or workloads in it")
        except (OSError, ValueError) as exc:
            print(f"kcodec bench: {path} is not a run saved with --json ({exc})", file=err)
            return 2
        results.append(result)
    out.write(summarize(results, [Path(path).stem for path in paths]) + "\n")
    return 0


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="benchmarks/harness.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
