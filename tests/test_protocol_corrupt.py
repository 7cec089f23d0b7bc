"""Damaged protocol input: truncations, bit flips, lying lengths and counts,
random bytes. Decoding either succeeds or raises ProtocolError naming where
(API, version, field, byte); never another exception, a hang, or an
allocation sized by a lying length."""
import os
import random
import struct
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protocol_helpers import MESSAGE_VERSIONS, random_body  # noqa: E402

from kcodec.errors import KafkaFormatError  # noqa: E402
from kcodec.protocol import (  # noqa: E402
    FrameSplitter, ProtocolError, decode_request, decode_response, encode_request,
    encode_response,
)
from kcodec.protocol.messages import (  # noqa: E402
    FETCH_RESPONSE, METADATA_RESPONSE, PRODUCE_REQUEST,
)


def _id(item):
    return f"{item[0].api}{item[0].kind.title()}-v{item[1]}"


def decode_or_protocol_error(message, data, version):
    try:
        message.decode(data, version)
    except ProtocolError as exc:
        assert exc.api == message.api and exc.version == version
        assert exc.position is not None and 0 <= exc.position <= len(data)
        return exc
    return None


@pytest.mark.parametrize("item", MESSAGE_VERSIONS, ids=_id)
def test_truncations_flips_and_lying_lengths(item):
    message, version = item
    rng = random.Random(f"{_id(item)}-corrupt")
    encoded = message.encode(random_body(message, version, 1), version)
    for cut in range(len(encoded)):                        # every truncation
        error = decode_or_protocol_error(message, encoded[:cut], version)
        assert error is not None, f"a {cut}-byte prefix decoded"
    for _ in range(60):                                     # bit flips
        data = bytearray(encoded)
        for _ in range(rng.choice([1, 1, 3])):
            bit = rng.randrange(len(data) * 8) if data else 0
            if data:
                data[bit // 8] ^= 1 << (bit % 8)
        decode_or_protocol_error(message, bytes(data), version)
    lies = [struct.pack(">i", 0x7FFFFFFF), struct.pack(">h", 0x7FFF), b"\xff\xff\xff\xff\x0f",
            struct.pack(">i", -5), struct.pack(">h", -3)]
    for _ in range(40):                                     # lying lengths and counts
        if not encoded:
            break
        lie = rng.choice(lies)
        at = rng.randrange(len(encoded))
        data = encoded[:at] + lie + encoded[at + len(lie):]
        decode_or_protocol_error(message, data[:len(encoded)], version)


def test_error_names_field_path_and_position():
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0,
                                                         "records": b"x" * 10}]}]}
    encoded = FETCH_RESPONSE.encode(body, 11)
    records_length_at = len(encoded) - 10 - 4
    data = bytearray(encoded)
    struct.pack_into(">i", data, records_length_at, 11)      # one byte more than there is
    with pytest.raises(ProtocolError) as info:
        FETCH_RESPONSE.decode(bytes(data), 11)
    error = info.value
    assert error.field == "responses[0].partitions[0].records"
    assert error.position == records_length_at + 4
    assert isinstance(error, KafkaFormatError) and isinstance(error, ValueError)
    assert "Fetch v11" in str(error) and "responses[0].partitions[0].records" in str(error)


def test_lying_array_count_is_refused_before_allocating():
    # throttle, brokers: 2^31-1 claimed, 8 bytes present
    data = struct.pack(">ii", 0, 0x7FFFFFFF) + b"\x00" * 8
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="cannot fit"):
            METADATA_RESPONSE.decode(data, 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    compact = b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 8
    with pytest.raises(ProtocolError, match="cannot fit"):
        METADATA_RESPONSE.decode(compact, 9)


def test_invalid_utf8_and_negative_lengths():
    with pytest.raises(ProtocolError, match="invalid UTF-8") as info:
        METADATA_RESPONSE.decode(struct.pack(">ii", 0, 1) + struct.pack(">ih", 1, 2) + b"\xff\xfe"
                                 + struct.pack(">i", 0) + b"\x00" * 6, 3)
    assert info.value.field == "brokers[0].host" and info.value.position == 14
    with pytest.raises(ProtocolError, match="negative length -2"):
        METADATA_RESPONSE.decode(struct.pack(">ii", 0, -2), 3)
    with pytest.raises(ProtocolError, match="null in a non-nullable field"):
        METADATA_RESPONSE.decode(struct.pack(">ii", 0, -1), 3)


def test_a_nullable_field_of_any_negative_length_is_null_as_java_reads_it():
    body = (struct.pack(">ii", 0, 1) + struct.pack(">ih", 1, 1) + b"h" + struct.pack(">ih", 9092, -2)
            + struct.pack(">hi", -300, 1) + struct.pack(">i", 0))
    decoded, end = METADATA_RESPONSE.decode(body, 3)
    assert end == len(body)
    assert decoded["brokers"][0]["rack"] is None and decoded["brokers"][0]["port"] == 9092
    assert decoded["cluster_id"] is None and decoded["controller_id"] == 1
    with pytest.raises(ProtocolError, match="negative length -2"):
        METADATA_RESPONSE.decode(struct.pack(">ii", 0, 1) + struct.pack(">ih", 1, -2) + bytes(20), 3)


def test_tagged_field_with_wrong_size():
    body = {"responses": [{"topic": "t", "partitions": [
        {"current_leader": {"leader_id": 1, "leader_epoch": 2}}]}]}
    encoded = bytearray(FETCH_RESPONSE.encode(body, 12))
    at = encoded.index(b"\x01\x09")                          # tag 1, 9 bytes
    for size, reason in ((10, "1 bytes left over"), (8, "runs past the end")):
        encoded[at + 1] = size                               # one byte more, one less
        with pytest.raises(ProtocolError, match=reason) as info:
            FETCH_RESPONSE.decode(bytes(encoded), 12)
        assert info.value.field == "responses[0].partitions[0].current_leader"


def test_frame_splitter_refuses_huge_and_negative_frames():
    splitter = FrameSplitter(max_frame_bytes=1000)
    assert splitter.feed(struct.pack(">i", 3) + b"abc" + struct.pack(">i", 5) + b"de") == [b"abc"]
    assert splitter.pending == 6
    assert splitter.feed(b"fgh") == [b"defgh"] and splitter.pending == 0
    with pytest.raises(ProtocolError, match="exceeds the 1000-byte limit") as info:
        splitter.feed(struct.pack(">i", 1001))
    assert info.value.position == 4 + 3 + 4 + 5
    with pytest.raises(ProtocolError, match="negative frame size"):
        FrameSplitter().feed(struct.pack(">i", -1))


@given(chunks=st.lists(st.integers(1, 40), min_size=1, max_size=30), seed=st.integers(0, 99))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_frame_splitter_any_chunking(chunks, seed):
    rng = random.Random(seed)
    frames = [rng.randbytes(rng.randrange(0, 50)) for _ in range(rng.randrange(1, 8))]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    splitter, got, at = FrameSplitter(), [], 0
    for size in chunks * (len(stream) // max(1, sum(chunks)) + 1):
        got += splitter.feed(stream[at:at + size])
        at += size
        if at >= len(stream):
            break
    assert got == frames and splitter.pending == 0


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_random_request_frames(data):
    try:
        decode_request(data)
    except ProtocolError:
        pass


@given(st.binary(max_size=300), st.sampled_from(
    [("Fetch", 4), ("Fetch", 12), ("Fetch", 18), ("Produce", 9), ("Metadata", 13),
     ("ApiVersions", 3), ("ListOffsets", 0)]))
@settings(max_examples=300, deadline=None)
def test_random_response_frames(data, api_version):
    try:
        decode_response(data, *api_version)
    except ProtocolError:
        pass


def test_mutated_whole_frames():
    rng = random.Random(5)
    frames = [encode_request("Produce", 9, random_body(PRODUCE_REQUEST, 9, 2), 4)[4:],
        encode_response("Fetch", 16, {"responses": [{"partitions": [
            {"records": b"r" * 64, "aborted_transactions": [(1, 2)]}]}]}, 8)[4:]]
    for frame in frames:
        for _ in range(300):
            data = bytearray(frame)
            data[rng.randrange(len(data))] = rng.randrange(256)
            try:
                if frame is frames[0]:
                    decode_request(bytes(data))
                else:
                    decode_response(bytes(data), "Fetch", 16)
            except ProtocolError:
                pass


def test_encode_errors_name_the_element_and_the_byte():
    from kcodec.protocol.messages import FETCH_REQUEST, METADATA_REQUEST
    with pytest.raises(ProtocolError, match=r"cannot encode int 5") as info:
        METADATA_REQUEST.encode({"topics": [{"name": "a"}, 5]}, 1)
    assert info.value.field == "topics[1]" and info.value.position == 4 + 2 + 1
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 2**31}   # int32 overflow
    with pytest.raises(ProtocolError, match="cannot encode int") as info:
        PRODUCE_REQUEST.encode(body, 3)
    assert info.value.field == "timeout_ms" and info.value.position == 2 + 2
    assert (info.value.api, info.value.version) == ("Produce", 3)
    with pytest.raises(ProtocolError, match="required") as info:
        FETCH_REQUEST.encode({"topics": [{"topic_id": 2**40}]}, 13)   # not 2**40 zero bytes
    assert info.value.field == "topics[0].topic_id"
