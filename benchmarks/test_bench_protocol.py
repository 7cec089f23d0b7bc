"""Fetch-response decoding: kcodec.protocol.decode_response (record sets stay
views into the frame) beside kafka-python 3's schema-driven decoder (which
copies them), on a few large partitions and on many small ones; and the whole
path to Arrow (decode_response, then kcodec.decode of every partition).

    python -m pytest benchmarks/test_bench_protocol.py --benchmark-only -q
    python -m pytest benchmarks/test_bench_protocol.py --benchmark-disable   # once each

Compare members of a group, never absolute times; nothing here asserts a speed.
"""
import pytest

import kcodec
from kcodec.protocol import decode_response, encode_response

VERSION = 12
SHAPES = {  # name: (partitions, records per partition, value bytes)
    "4x4096x200B": (4, 4096, 200),
    "1000x4x200B": (1000, 4, 200),
}


def _fetch_frame(partitions, records, value_size):
    data = kcodec.encode([(b"key-%d" % i, bytes([i % 251]) * value_size, 1_700_000_000_000 + i,
                           []) for i in range(records)], compression="none")
    body = {"responses": [{"topic": "bench", "partitions": [
        {"partition_index": p, "high_watermark": records, "last_stable_offset": records,
         "aborted_transactions": [], "records": data} for p in range(partitions)]}]}
    return encode_response("Fetch", VERSION, body, 1)[4:]


@pytest.fixture(scope="module", params=list(SHAPES))
def frame(request):
    partitions, records, value_size = SHAPES[request.param]
    return request.param, _fetch_frame(partitions, records, value_size), partitions * records


def _records(body):
    return [part["records"] for topic in body["responses"] for part in topic["partitions"]]


def test_decode_fetch_response_kcodec(benchmark, frame):
    name, data, total = frame
    benchmark.group = f"fetch-response-decode {name}"
    body = benchmark(lambda: decode_response(data, "Fetch", VERSION).body)
    assert sum(kcodec.decode(r).num_rows for r in _records(body)) == total


def test_decode_fetch_response_kafka_python(benchmark, frame):
    fetch = pytest.importorskip("kafka.protocol.consumer.fetch")
    name, data, total = frame
    benchmark.group = f"fetch-response-decode {name}"
    header = 5                                   # correlation id, header tags (v1)
    decoded = benchmark(lambda: fetch.FetchResponse.decode(data[header:], version=VERSION))
    records = [p.records for t in decoded.responses for p in t.partitions]
    assert sum(kcodec.decode(r).num_rows for r in records) == total


def test_fetch_response_to_arrow(benchmark, frame):
    name, data, total = frame
    benchmark.group = f"fetch-response-to-arrow {name}"

    def run():
        body = decode_response(data, "Fetch", VERSION).body
        return sum(kcodec.decode(r).num_rows for r in _records(body))
    assert benchmark(run) == total
