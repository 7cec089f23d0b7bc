"""Protocol codec: kcodec.protocol's generated decoders and encoders beside
kafka-python 3's (the same messages, run side by side), on a few large
partitions and on many small ones; and the whole path to Arrow
(decode_response, then kcodec.decode of every partition).

    python -m pytest benchmarks/test_bench_protocol.py --benchmark-only -q
    python -m pytest benchmarks/test_bench_protocol.py --benchmark-disable   # once each

Record sets stay views into the frame in kcodec (kafka-python copies them).
Compare members of a group, never absolute times; nothing here asserts a speed.
"""
import sys
from pathlib import Path

import pytest

import kcodec
from kcodec.protocol import decode_response, encode_response
from kcodec.protocol.messages import FETCH_RESPONSE, PRODUCE_REQUEST

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from needs import require_module  # noqa: E402

FETCH_VERSION = 12
PRODUCE_VERSION = 9
SHAPES = {  # name: (partitions, records per partition, value bytes)
    "4x4096x200B": (4, 4096, 200),
    "1000x4x200B": (1000, 4, 200),
}
RESPONSE_HEADER = 5                 # correlation id, header tags (v1)


def _record_set(records, value_size):
    return kcodec.encode([(b"key-%d" % i, bytes([i % 251]) * value_size,
                           1_700_000_000_000 + i, []) for i in range(records)],
                         compression="none")


def _fetch_body(partitions, records, value_size):
    data = _record_set(records, value_size)
    return {"responses": [{"topic": "bench", "partitions": [
        {"partition_index": p, "high_watermark": records, "last_stable_offset": records,
         "aborted_transactions": [], "records": data} for p in range(partitions)]}]}


def _produce_body(partitions, records, value_size):
    data = _record_set(records, value_size)
    return {"acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "bench", "partition_data": [
        {"index": p, "records": data} for p in range(partitions)]}]}


def _fetch_frame(partitions, records, value_size):
    body = _fetch_body(partitions, records, value_size)
    return encode_response("Fetch", FETCH_VERSION, body, 1)[4:]


@pytest.fixture(scope="module", params=list(SHAPES))
def shape(request):
    return request.param, SHAPES[request.param]


@pytest.fixture(scope="module")
def frame(shape):
    name, (partitions, records, value_size) = shape
    return name, _fetch_frame(partitions, records, value_size), partitions * records


def _records(body):
    return [part["records"] for topic in body["responses"] for part in topic["partitions"]]


def test_decode_fetch_response_kcodec(benchmark, frame):
    name, data, total = frame
    benchmark.group = f"fetch-response-decode {name}"
    body = benchmark(lambda: decode_response(data, "Fetch", FETCH_VERSION).body)
    assert sum(kcodec.decode(r).num_rows for r in _records(body)) == total


def test_decode_fetch_response_kafka_python(benchmark, frame):
    fetch = require_module("kafka.protocol.consumer.fetch")
    name, data, total = frame
    benchmark.group = f"fetch-response-decode {name}"
    decoded = benchmark(lambda: fetch.FetchResponse.decode(data[RESPONSE_HEADER:],
                                                           version=FETCH_VERSION))
    records = [p.records for t in decoded.responses for p in t.partitions]
    assert sum(kcodec.decode(r).num_rows for r in records) == total


def test_fetch_response_to_arrow(benchmark, frame):
    name, data, total = frame
    benchmark.group = f"fetch-response-to-arrow {name}"

    def run():
        body = decode_response(data, "Fetch", FETCH_VERSION).body
        return sum(kcodec.decode(r).num_rows for r in _records(body))
    assert benchmark(run) == total


# ----------------------------------------------------------------------------
# Encoding: a broker's Fetch response, a producer's Produce request. Both
# encoders get the message they would build (kafka-python's object decoded
# from kcodec's bytes) and must write the same bytes.
# ----------------------------------------------------------------------------

ENCODE_CASES = {  # name: (message, version, body builder)
    "fetch-response": (FETCH_RESPONSE, FETCH_VERSION, _fetch_body),
    "produce-request": (PRODUCE_REQUEST, PRODUCE_VERSION, _produce_body),
}


@pytest.fixture(scope="module", params=list(ENCODE_CASES))
def to_encode(request, shape):
    name, (partitions, records, value_size) = shape
    message, version, build = ENCODE_CASES[request.param]
    body = build(partitions, records, value_size)
    return f"{request.param}-encode {name}", message, version, body


def test_encode_kcodec(benchmark, to_encode):
    group, message, version, body = to_encode
    benchmark.group = group
    encoded = benchmark(message.encode, body, version)
    decoded, end = message.decode(encoded, version)
    assert end == len(encoded) and message.encode(decoded, version) == encoded


def test_encode_kafka_python(benchmark, to_encode):
    require_module("kafka.protocol.api_message")
    from kafka.protocol.consumer.fetch import FetchResponse
    from kafka.protocol.producer import ProduceRequest
    group, message, version, body = to_encode
    benchmark.group = group
    cls = FetchResponse if message is FETCH_RESPONSE else ProduceRequest
    expected = message.encode(body, version)
    decoded = cls.decode(expected, version=version)      # a top-level object carries a header
    theirs = cls(version=version, **{k: getattr(decoded, k) for k in decoded.to_dict(json=False)})
    assert benchmark(theirs.encode, version=version) == expected

