"""Object-API benchmarks: kcodec side by side with aiokafka's compiled codec
(and kafka-python's pure-Python reader, for reference) on the same bytes.

    python -m pytest benchmarks/test_bench_object_api.py --benchmark-only -q
    python -m pytest benchmarks/test_bench_object_api.py --benchmark-disable   # as CI: once each

One pytest-benchmark group per operation and workload; compare the members
of a group (or read the records/s summary printed at the end), never the
absolute times. Every benchmark checks its result outside the timed code, so
that it cannot silently measure nothing. benchmarks/report.py prints the
same comparison as a Markdown table.
"""
import sys
from pathlib import Path

import pytest

import workloads as w

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from needs import require_module, unavailable  # noqa: E402

require_module("aiokafka.record._crecords")    # the compiled peer, not its fallback

DECODE = {"kcodec": (w.kcodec_decode, w.kcodec_digest),
          "aiokafka": (w.aiokafka_decode, w.aiokafka_digest)}


def test_peer_is_compiled():
    """The aiokafka side must be its Cython reader, not the pure-Python fallback."""
    assert w.AioMemoryRecords.__module__.startswith("aiokafka.record._crecords")
    assert w.AioBuilder.__module__.startswith("aiokafka.record._crecords")


@pytest.mark.parametrize("impl", list(DECODE))
def test_decode(benchmark, record_rate, workload, impl):
    """Every record of the workload, CRCs checked, offset/timestamp/key/value/headers read."""
    decode, digest = DECODE[impl]
    assert digest(workload.data) == workload.digest         # content, once, untimed
    benchmark.group = f"decode {workload.name}"
    n = benchmark(decode, workload.data)
    assert n == workload.count
    record_rate(benchmark, "decode", workload.name, impl, n)


READS = {  # what the loop reads of each record: (kcodec loop, aiokafka loop)
    "offset+value": (w.kcodec_decode_values, w.aiokafka_decode_values),
    "no field": (w.kcodec_iterate, w.aiokafka_iterate),
}


@pytest.mark.parametrize("impl", ["kcodec", "aiokafka"])
@pytest.mark.parametrize("reads", list(READS))
def test_decode_reading_less(benchmark, record_rate, workload, reads, impl):
    """Every record decoded, CRCs checked; the loop reads only some fields."""
    decode = READS[reads][impl == "aiokafka"]
    benchmark.group = f"decode reading {reads} {workload.name}"
    n = benchmark(decode, workload.data)
    assert n == workload.count
    record_rate(benchmark, f"decode reading {reads}", workload.name, impl, n)


def test_decode_kafkapython(benchmark, record_rate, workload):
    """The pure-Python reader, for reference: only the first ~2k records."""
    if w.KafkaPythonMemoryRecords is None:
        unavailable("kafka-python is not installed")
    assert w.kafkapython_digest(workload.prefix) == workload.prefix_digest
    benchmark.group = f"decode {workload.name}, first {workload.prefix_count} records"
    n = benchmark(w.kafkapython_decode, workload.prefix)
    assert n == workload.prefix_count
    record_rate(benchmark, "decode", workload.name, "kafka-python", n)


def test_encode_kcodec(benchmark, record_rate, workload):
    """kcodec.encode of the (key, value, timestamp, headers) rows, batches split at
    max_batch_bytes (16384: ~130 records a batch; 1: one record a batch)."""
    benchmark.group = f"encode {workload.name}"
    out = benchmark(w.kcodec_encode, workload.records, workload.codec, workload.max_batch_bytes)
    assert out == workload.data                  # deterministic: the workload's own bytes
    assert w.aiokafka_digest(out) == workload.digest
    record_rate(benchmark, "encode", workload.name, "kcodec", workload.count)


def test_encode_aiokafka(benchmark, record_rate, workload):
    """aiokafka's DefaultRecordBatchBuilder, one per batch (the same batch
    boundaries as kcodec's), records appended, each built."""
    benchmark.group = f"encode {workload.name}"
    out = benchmark(w.aiokafka_encode, workload.records, w.AIO_CODEC[workload.codec],
                    workload.batch_counts)
    # produce-style batches all start at offset 0: compare content, not offsets
    assert w.aiokafka_digest(out, relative_offsets=True) == workload.digest
    assert w.batch_counts(out) == workload.batch_counts
    record_rate(benchmark, "encode", workload.name, "aiokafka", workload.count)
