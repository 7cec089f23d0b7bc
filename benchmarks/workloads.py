"""Benchmark workloads and the operations timed on them, shared by the pytest
benchmarks (test_bench_object_api.py) and the side-by-side report (report.py).

A workload is one record set: ~20k deterministic records (seeded; keys of
10-20 bytes, 100-byte JSON-like values that compress somewhat, increasing
CreateTime timestamps, no headers), encoded ONCE with kcodec.encode as v2
batches, for one codec and one batch shape:

* "130/batch": max_batch_bytes=16384 (Kafka's default batch.size), which
  holds ~130 of these records per batch;
* "1/batch": max_batch_bytes=1, one record per batch.

Every reader is timed on those exact bytes, and the bytes are checked once,
when built, to decode with aiokafka's compiled reader to the same records.

The timing helpers (`time_per_call`, `compare`) live here too, so that the
report and anything else measure the same way.
"""
import gc
import random
import statistics
import time
import warnings
import zlib
from dataclasses import dataclass, field
from functools import lru_cache

import kcodec
from aiokafka.record.default_records import DefaultRecordBatch as _AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords

try:                                    # the pure-Python reference reader
    with warnings.catch_warnings():     # its package import warns about importlib.resources
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords
except ImportError:                     # pragma: no cover - optional
    KafkaPythonMemoryRecords = None

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BATCH_BYTES = {130: 16384, 1: 1}        # records per batch (about) -> max_batch_bytes
SHAPES = (130, 1)
N_RECORDS = 20_000                      # per workload, when timing
SMOKE_RECORDS = 4_000                   # per workload, when only checking (--benchmark-disable)
PREFIX_RECORDS = 2_000                  # kafka-python reads only a batch-aligned prefix
SEED = 20240601
BASE_TIMESTAMP = 1_700_000_000_000
VALUE_SIZE = 100

AIO_CODEC = {
    "none": 0, "gzip": _AioBatch.CODEC_GZIP, "snappy": _AioBatch.CODEC_SNAPPY,
    "lz4": _AioBatch.CODEC_LZ4, "zstd": _AioBatch.CODEC_ZSTD,
}

UNBOUNDED_BATCH = 1 << 30  # aiokafka batch_size when the boundaries are given
NO_HEADERS = []     # shared, never mutated; kcodec reads it as (), aiokafka as []


class WorkloadError(AssertionError):
    """A workload or a codec's output is not what it must be."""


def require(condition, message):
    """A check that also holds under `python -O` (unlike assert)."""
    if not condition:
        raise WorkloadError(message)


# ------------------------------------------------------------------ records

_EVENTS = ("page_view", "click", "add_to_cart", "checkout", "search", "login", "logout")
_PAGES = ("/", "/products", "/products/item", "/cart", "/search", "/account", "/help")
_KEY_PREFIXES = ("user", "session", "device", "account", "cust")


@lru_cache(maxsize=None)
def make_records(n=N_RECORDS, seed=SEED):
    """n (key, value, timestamp, headers) tuples; the same ones on every call."""
    rng = random.Random(seed)
    ts = BASE_TIMESTAMP
    out = []
    for i in range(n):
        prefix = rng.choice(_KEY_PREFIXES)
        width = rng.randint(5, 12)
        key = f"{prefix}-{rng.randrange(10 ** width):0{width}d}".encode()   # 10..20 bytes
        value = (f'{{"seq":{i},"event":"{rng.choice(_EVENTS)}",'
                 f'"page":"{rng.choice(_PAGES)}/{rng.randrange(1000)}",'
                 f'"ms":{rng.randrange(5000)},"score":{rng.random():.6f},"pad":"')
        pad = VALUE_SIZE - len(value) - 2
        value = (value + "".join(rng.choices("abcdefghij", k=pad)) + '"}').encode()
        require(len(value) == VALUE_SIZE, f"value of {len(value)} bytes")
        ts += rng.randrange(0, 4)                                # non-decreasing, ms
        out.append((key, value, ts, NO_HEADERS))
    return out


def digest_records(records):
    """(count, crc32 of keys+values, sum of timestamps) of (key, value, ts, ...) rows."""
    crc = 0
    ts_sum = 0
    for key, value, ts, *_ in records:
        crc = zlib.crc32(value, zlib.crc32(key or b"", crc))
        ts_sum += ts
    return len(records), crc, ts_sum


# ----------------------------------------------------------------- workloads

@dataclass
class Workload:
    codec: str
    per_batch: int                  # 130 (about) or 1
    records: list                   # the (key, value, ts, headers) rows encoded
    data: bytes                     # the record set, encoded once with kcodec
    batch_counts: list              # records in each batch, in order
    digest: tuple                   # digest_records(records)
    prefix: bytes = b""             # a batch-aligned prefix of data (>= PREFIX_RECORDS)
    prefix_count: int = 0
    prefix_digest: tuple = field(default=())

    @property
    def name(self):
        return f"{self.codec} {self.per_batch}/batch"

    @property
    def id(self):
        return workload_id(self.codec, self.per_batch)

    @property
    def count(self):
        return len(self.records)

    @property
    def max_batch_bytes(self):
        return BATCH_BYTES[self.per_batch]


@lru_cache(maxsize=None)
def get_workload(codec, per_batch, n=N_RECORDS):
    records = make_records(n)
    data = kcodec.encode(records, compression=codec, max_batch_bytes=BATCH_BYTES[per_batch])
    batch_counts = []
    prefix_end = prefix_count = 0
    for batch in kcodec.read_batches(data):
        require(batch.compression == codec and batch.magic == 2, f"unexpected {batch!r}")
        batch_counts.append(batch.count)
        if prefix_count < min(PREFIX_RECORDS, n):
            prefix_count += batch.count
            prefix_end = batch.position + batch.size
    require(sum(batch_counts) == n, f"{sum(batch_counts)} records read back, not {n}")
    mean = n / len(batch_counts)
    if per_batch == 1:
        require(set(batch_counts) == {1}, "a 1/batch workload has a batch of several records")
    else:
        require(100 <= mean <= 160, f"{mean:.1f} records per batch, not about {per_batch}")
    wl = Workload(codec, per_batch, records, data, batch_counts, digest_records(records),
                  data[:prefix_end], prefix_count, digest_records(records[:prefix_count]))
    verify_with_aiokafka(wl)
    return wl


WORKLOAD_KEYS = [(codec, shape) for shape in SHAPES for codec in CODECS]


def workload_id(codec, per_batch):
    return f"{codec}-{per_batch}pb"


def verify_with_aiokafka(wl):
    """aiokafka's compiled reader must see exactly the records we encoded."""
    rows = []
    mr = AioMemoryRecords(wl.data)
    n_batches = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        n_batches += 1
        require(batch.validate_crc(), f"{wl.name}: aiokafka rejects the CRC of batch {n_batches}")
        require(batch.compression_type == AIO_CODEC[wl.codec],
                f"{wl.name}: aiokafka sees codec {batch.compression_type}")
        for r in batch:
            rows.append((r.offset, r.key, r.value, r.timestamp, tuple(r.headers)))
    require(n_batches == len(wl.batch_counts),
            f"{wl.name}: aiokafka sees {n_batches} batches, not {len(wl.batch_counts)}")
    expected = [(i, k, v, ts, tuple(h)) for i, (k, v, ts, h) in enumerate(wl.records)]
    require(rows == expected, f"{wl.name}: aiokafka decodes different records")


# ---------------------------------------------- the operations being timed
#
# Each decode touches offset, timestamp, key, value and headers of every
# record and returns the number of records; the *_digest twins walk the same
# API once to check the content (outside any timed code).

def kcodec_decode(data):
    n = 0
    for r in kcodec.read_records(data, verify_crc=True):
        r.offset
        r.timestamp
        r.key
        r.value
        r.headers
        n += 1
    return n


def aiokafka_decode(data):
    n = 0
    mr = AioMemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise ValueError("CRC mismatch")
        for r in batch:
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


# The decode loops below are written out one by one, not through getattr, so
# that each reads its fields exactly as a user's loop would and both libraries
# pay the same interpreter costs.

def kcodec_iterate(data):
    """Decoding alone: every record object made, CRCs checked, no field read."""
    n = 0
    for _ in kcodec.read_records(data, verify_crc=True):
        n += 1
    return n


def aiokafka_iterate(data):
    n = 0
    mr = AioMemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise ValueError("CRC mismatch")
        for _ in batch:
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


def aiokafka_decode_values(data):
    n = 0
    mr = AioMemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise ValueError("CRC mismatch")
        for r in batch:
            r.offset
            r.value
            n += 1
    return n


def kafkapython_decode(data):
    n = 0
    mr = KafkaPythonMemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise ValueError("CRC mismatch")
        for r in batch:
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


def _check_offsets(rows):
    for i, row in enumerate(rows):
        if row[0] != i:
            raise WorkloadError(f"record {i} has offset {row[0]}")
    return [row[1:] for row in rows]


def kcodec_digest(data):
    rows = [(r.offset, r.key, r.value, r.timestamp, r.headers)
            for r in kcodec.read_records(data, verify_crc=True)]
    return digest_records(_check_offsets(rows))


def _memory_records_digest(mr, relative_offsets=False):
    rows = []
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        require(batch.validate_crc(), "CRC mismatch")
        for r in batch:
            rows.append((r.offset, r.key, r.value, r.timestamp, r.headers))
    if relative_offsets:          # produce-style batches all start at offset 0
        return digest_records([row[1:] for row in rows])
    return digest_records(_check_offsets(rows))


def aiokafka_digest(data, relative_offsets=False):
    return _memory_records_digest(AioMemoryRecords(data), relative_offsets)


def kafkapython_digest(data):
    return _memory_records_digest(KafkaPythonMemoryRecords(data))


def kcodec_encode(records, codec, max_batch_bytes):
    return kcodec.encode(records, compression=codec, max_batch_bytes=max_batch_bytes)


def aiokafka_encode(records, codec_id, batch_counts):
    """aiokafka's DefaultRecordBatchBuilder: one builder per batch, the records
    appended with their relative offsets (as its producer does), each built.

    The batch boundaries are given (kcodec's, from the workload) rather than
    found from batch_size: aiokafka's size estimate differs slightly, and with
    the same boundaries both sides write the same batches. append still
    computes each record's size, as it always does."""
    out = []
    start = 0
    for count in batch_counts:
        builder = AioBuilder(2, codec_id, 0, -1, -1, -1, UNBOUNDED_BATCH)
        append = builder.append
        for offset in range(count):
            key, value, ts, headers = records[start + offset]
            append(offset, ts, key, value, headers)
        start += count
        out.append(builder.build())
    return b"".join(out)


def batch_counts(data):
    return [b.count for b in kcodec.read_batches(data)]


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
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


class Timing:
    """Seconds per call: the median of `samples`, each the mean of `number` calls."""
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


def compare(candidates, repeats=7, min_time=0.1):
    """Time each candidate (name -> zero-argument callable) side by side:
    timeit-style repeats of >= min_time each, `repeats` of them, returning
    name -> Timing (quote Timing.median). Each repeat runs every candidate in
    turn (interleaved), so that background load on a shared machine hits all
    of them alike. The garbage collector stays on, as in a real consumer (and
    in pytest-benchmark's default)."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    numbers = {}
    for name, fn in candidates.items():
        fn()                                        # warm up (imports, caches)
        numbers[name] = _autorange(fn, min_time)
    samples = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            gc.collect()
            samples[name].append(_one_repeat(fn, numbers[name]))
    return {name: Timing(samples[name], numbers[name]) for name in candidates}
