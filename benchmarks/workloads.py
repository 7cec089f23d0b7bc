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

The record generator, the decode/encode loops timed on both sides and the
timing helpers (`time_per_call`, `compare`) are kcodec.bench's, the harness
behind `kcodec bench` (installed with kcodec, so the CLI can use them), so
that the report, the pytest benchmarks and `kcodec bench` measure the same
things the same way.
"""
import warnings
from dataclasses import dataclass, field
from functools import lru_cache

import kcodec
from aiokafka.record.default_records import DefaultRecordBatch as _AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kcodec import bench
from kcodec.bench import (  # noqa: F401  (re-exported: report.py and the tests use them)
    BASE_TIMESTAMP, NO_HEADERS, PREFIX_RECORDS, SEED, UNBOUNDED_BATCH, Timing, WorkloadError,
    aiokafka_decode, aiokafka_decode_values, aiokafka_encode, aiokafka_iterate, compare,
    digest_records, kafkapython_decode, kcodec_decode, kcodec_decode_values, kcodec_iterate,
    require, time_per_call,
)

try:                                    # the pure-Python reference reader
    with warnings.catch_warnings():     # its package import warns about importlib.resources
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords
except ImportError:                     # pragma: no cover - optional
    KafkaPythonMemoryRecords = None

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BATCH_BYTES = {130: 16384, 1: 1}        # records per batch (about) -> max_batch_bytes
SHAPES = (130, 1)
N_RECORDS = bench.N_RECORDS             # per workload, when timing (20k)
SMOKE_RECORDS = 4_000                   # per workload, when only checking (--benchmark-disable)
VALUE_SIZE = 100

AIO_CODEC = {
    "none": 0, "gzip": _AioBatch.CODEC_GZIP, "snappy": _AioBatch.CODEC_SNAPPY,
    "lz4": _AioBatch.CODEC_LZ4, "zstd": _AioBatch.CODEC_ZSTD,
}


# ------------------------------------------------------------------ records

def make_records(n=N_RECORDS, seed=SEED):
    """n (key, value, timestamp, headers) tuples (100-byte values, no headers);
    the same ones on every call (kcodec.bench.make_records, cached)."""
    return bench.make_records(n, seed, VALUE_SIZE, 0)


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
# record and returns the number of records (kcodec_decode, aiokafka_decode and
# kafkapython_decode are kcodec.bench's); the *_digest twins walk the same API
# once to check the content (outside any timed code).


def kcodec_digest(data):
    rows = []
    for r in kcodec.read_records(data, verify_crc=True):
        require(r.offset == len(rows), f"record {len(rows)} has offset {r.offset}")
        rows.append((r.key, r.value, r.timestamp, r.headers))
    return digest_records(rows)


def aiokafka_digest(data, relative_offsets=False):
    """relative_offsets: produce-style batches, each starting at offset 0."""
    return digest_records(bench.memory_records_rows(AioMemoryRecords(data), relative_offsets))


def kafkapython_digest(data):
    return digest_records(bench.memory_records_rows(KafkaPythonMemoryRecords(data)))


def kcodec_encode(records, codec, max_batch_bytes):
    return kcodec.encode(records, compression=codec, max_batch_bytes=max_batch_bytes)


def batch_counts(data):
    return [b.count for b in kcodec.read_batches(data)]
