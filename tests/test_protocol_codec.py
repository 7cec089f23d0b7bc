"""kcodec.protocol's schema-driven codec: every API and version round-trips,
agrees with an independent implementation that reads Kafka's own JSON
schemas (kafka-python 3's protocol package), and matches hand-built bytes."""
import importlib
import os
import struct
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protocol_helpers import MESSAGE_VERSIONS, MESSAGES, plain, random_body  # noqa: E402
from needs import require_module  # noqa: E402

import kcodec  # noqa: E402
from kcodec.protocol import (  # noqa: E402
    AbortedTransaction, ProtocolError, UnsupportedVersionError, decode_request,
    decode_response, encode_request, encode_response, request_header_version,
    response_header_version,
)
from kcodec.protocol.messages import FETCH_RESPONSE, REQUESTS, RESPONSES  # noqa: E402
from kcodec.protocol.schema import Versions, write_uvarint  # noqa: E402

EXPECTED_VERSIONS = {  # Apache Kafka 4.1's validVersions, plus the versions 4.0 dropped
    "ApiVersions": (0, 4), "Metadata": (0, 13), "Produce": (0, 13), "Fetch": (0, 18),
    "ListOffsets": (0, 11), "FindCoordinator": (0, 6), "InitProducerId": (0, 6),
    "AddPartitionsToTxn": (0, 5), "EndTxn": (0, 5),
}
FLEXIBLE_FROM = {"ApiVersions": 3, "Metadata": 9, "Produce": 9, "Fetch": 12, "ListOffsets": 6,
                 "FindCoordinator": 3, "InitProducerId": 2, "AddPartitionsToTxn": 3,
                 "EndTxn": 3}


def _id(item):
    message, version = item
    return f"{message.api}{message.kind.title()}-v{version}"


def test_catalogue_covers_every_version():
    for table in (REQUESTS, RESPONSES):
        assert {m.api: (m.valid.low, m.valid.high) for m in table.values()} == EXPECTED_VERSIONS
        assert {m.api: m.flexible.low for m in table.values()} == FLEXIBLE_FROM


@pytest.mark.parametrize("item", MESSAGE_VERSIONS, ids=_id)
def test_round_trip(item):
    message, version = item
    for seed in range(3):
        body = random_body(message, version, seed)
        encoded = message.encode(body, version)
        decoded, end = message.decode(encoded, version)
        assert end == len(encoded)
        assert plain(decoded) == plain(body)
        assert message.encode(decoded, version) == encoded


@pytest.mark.parametrize("item", MESSAGE_VERSIONS, ids=_id)
def test_frame_round_trip(item):
    """Whole frames: size prefix, the header version the API/version implies."""
    message, version = item
    body = random_body(message, version, 7)
    if message.kind == "request":
        frame = encode_request(message.api, version, body, 123, client_id="cli")
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        got = decode_request(frame[4:])
        assert (got.api_key, got.api_version, got.correlation_id, got.client_id) == \
            (message.api_key, version, 123, "cli")
    else:
        frame = encode_response(message.api, version, body, 321)
        got = decode_response(frame[4:], message.api, version)
        assert got.correlation_id == 321
    assert plain(got.body) == plain(body)


def _kafka_python_class(message):
    kafka_protocol = require_module("kafka.protocol.api_message")
    modules = ["kafka.protocol.metadata", "kafka.protocol.producer", "kafka.protocol.consumer"]
    for name in modules:
        module = importlib.import_module(name)
        for attr in dir(module):
            cls = getattr(module, attr)
            if (isinstance(cls, type) and issubclass(cls, kafka_protocol.ApiMessage)
                    and cls is not kafka_protocol.ApiMessage
                    and getattr(cls, "_json", None)
                    and cls.API_KEY == message.api_key and cls.type == message.kind):
                return cls
    pytest.fail(f"kafka-python has no {message.api} {message.kind}")


def _present_fields(struct_type, version, flexible):
    regular, tagged = struct_type.present(version, flexible)
    return {f.name for f, _, _ in regular + tagged}


def _agrees(ours, theirs, schema, version, flexible, path="body"):
    """kafka-python's dict (fields of this version only; None for a default
    tagged struct or a zero uuid) against ours."""
    from kcodec.protocol.schema import Array, Struct
    if "authorized_operations" in theirs:     # kafka-python renames Metadata's bitfields
        ours_name = [f.name for f in schema.fields if f.name.endswith("authorized_operations")
                     and f.name in _present_fields(schema, version, flexible)]
        theirs = dict(theirs)
        theirs[ours_name[0]] = theirs.pop("authorized_operations")
    assert set(theirs) == _present_fields(schema, version, flexible), path
    for f in schema.fields:
        if f.name not in theirs:
            continue
        mine, other = ours[f.name], theirs[f.name]
        where = f"{path}.{f.name}"
        if isinstance(f.type, Struct):
            if other is None:
                assert mine == f.make_default(), where
            else:
                _agrees(mine, other, f.type, version, flexible, where)
        elif isinstance(f.type, Array) and isinstance(f.type.element, Struct) and mine:
            assert len(mine) == len(other), where
            for i, (a, b) in enumerate(zip(mine, other)):
                a = a._asdict() if isinstance(a, tuple) else a
                _agrees(a, b, f.type.element, version, flexible, f"{where}[{i}]")
        elif isinstance(mine, uuid.UUID):
            assert (other is None and mine.int == 0) or uuid.UUID(str(other)) == mine, where
        elif isinstance(mine, memoryview):
            assert bytes(other) == mine.tobytes(), where
        elif f.name.endswith("_authorized_operations") and isinstance(other, (set, type(None))):
            bits = {bit for bit in range(32) if (mine & 0xFFFFFFFF) >> bit & 1}
            assert other == (None if mine == -2**31 else bits), where   # kafka-python's view
        else:
            assert plain(mine) == plain(other), where


@pytest.mark.parametrize("item", MESSAGE_VERSIONS, ids=_id)
def test_agrees_with_kafka_json_schemas(item):
    """What we encode, kafka-python (driven by Kafka's JSON files) decodes to
    the same fields and values: field order, types, version ranges and tags
    transcribed right. Unknown tags are left out (it drops them)."""
    message, version = item
    cls = _kafka_python_class(message)
    if version > cls.max_version:
        pytest.skip(f"kafka-python knows {message.api} up to v{cls.max_version}")
    flexible = version in message.flexible
    for seed in range(3):
        body = _without_unknown_tags(random_body(message, version, seed))
        if message.api == "ApiVersions" and message.kind == "response":
            body["error_code"] = 0         # kafka-python reads any error as a v0 body
        encoded = message.encode(body, version)
        theirs = cls.decode(encoded, version=version).to_dict(json=False)
        ours, _ = message.decode(encoded, version)
        _agrees(ours, theirs, message, version, flexible)


def _without_unknown_tags(value):
    if isinstance(value, dict):
        return {k: _without_unknown_tags(v) for k, v in value.items() if k != "_unknown_tags"}
    if isinstance(value, list):
        return [_without_unknown_tags(v) for v in value]
    return value


# ----------------------------------------------------------------------------
# Hand-built bytes (from the protocol guide's layouts)
# ----------------------------------------------------------------------------

def test_api_versions_v0_request_bytes():
    frame = encode_request("ApiVersions", 0, {}, correlation_id=1, client_id="ab")
    assert frame == bytes.fromhex("0000000c" "0012" "0000" "00000001" "0002") + b"ab"


def test_metadata_v12_request_bytes_compact_and_tagged():
    topic_id = uuid.UUID(int=0)
    frame = encode_request("Metadata", 12, {"topics": [{"name": "t", "topic_id": topic_id}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": True},
                           correlation_id=2, client_id=None)
    header = bytes.fromhex("0003" "000c" "00000002" "ffff" "00")     # v2: int16 client_id, tags
    body = bytes.fromhex("02") + bytes(16) + bytes.fromhex("02") + b"t" + bytes.fromhex(
        "00" "00" "01" "00")  # topic tags, auto-create false, topic-auth true, tags
    assert frame[4:] == header + body


def test_api_versions_response_header_is_always_v0():
    assert response_header_version("ApiVersions", 3) == 0
    assert response_header_version("Metadata", 9) == 1 and response_header_version("Metadata", 8) == 0
    assert request_header_version("ApiVersions", 3) == 2 and request_header_version("Fetch", 11) == 1
    frame = encode_response("ApiVersions", 3, {"api_keys": []}, correlation_id=9)
    assert frame[4:8] == bytes.fromhex("00000009") and frame[8:10] == b"\x00\x00"


def test_tagged_fields_written_only_when_not_default_and_in_tag_order():
    body = {"responses": [{"topic": "t", "partitions": [{
        "records": None, "snapshot_id": {"end_offset": 5, "epoch": 1},
        "current_leader": {"leader_id": 2, "leader_epoch": 3}}]}]}
    encoded = FETCH_RESPONSE.encode(body, 12)
    tail = encoded[-(1 + 1 + 1 + 1 + 8 + 1 + 4 + 1 + 1 + 1 + 1):]
    # partition tags: count 2, tag 1 (current_leader, 9 bytes), tag 2 (snapshot_id, 13 bytes)
    assert bytes.fromhex("02" "01" "09") + struct.pack(">ii", 2, 3) + b"\x00" in encoded
    assert bytes.fromhex("02" "0d") + struct.pack(">qi", 5, 1) + b"\x00" in encoded
    assert encoded.index(b"\x01\x09") < encoded.index(b"\x02\x0d")
    assert tail[-2:] == b"\x00\x00"        # topic tags, top-level tags: none
    default = FETCH_RESPONSE.encode({"responses": [{"topic": "t", "partitions": [{}]}]}, 12)
    assert len(default) < len(encoded)


def test_unknown_tags_survive_decode_and_encode():
    body = {"topics": [{"name": "x", "_unknown_tags": {7: b"\x01\x02"}}],
            "_unknown_tags": {50: b"", 3: b"abc"}}
    message = REQUESTS[3]
    encoded = message.encode(body, 12)
    decoded, _ = message.decode(encoded, 12)
    assert decoded["_unknown_tags"] == {3: b"abc", 50: b""}
    assert decoded["topics"][0]["_unknown_tags"] == {7: b"\x01\x02"}
    assert message.encode(decoded, 12) == encoded


def test_records_are_views_into_the_frame_and_decode_with_aborted():
    data = kcodec.encode([(b"k%d" % i, b"v%d" % i, 1_700_000_000_000 + i, []) for i in range(5)],
                         base_offset=10)
    body = {"responses": [{"topic": "t", "partitions": [{
        "partition_index": 0, "high_watermark": 15, "last_stable_offset": 15,
        "aborted_transactions": [AbortedTransaction(7, 100)], "records": data}]}]}
    frame = encode_response("Fetch", 11, body, 5)[4:]
    part = decode_response(frame, "Fetch", 11).body["responses"][0]["partitions"][0]
    records = part["records"]
    assert isinstance(records, memoryview) and records.obj is frame
    assert part["aborted_transactions"] == [(7, 100)]
    assert part["aborted_transactions"][0].producer_id == 7
    table = kcodec.decode(records, isolation="read_committed",
                          aborted=part["aborted_transactions"])
    assert table.column("offset").to_pylist() == list(range(10, 15))


def test_partial_record_set_at_the_end_of_a_fetch_response():
    """A broker cuts the last batch at max_bytes: the fetch decodes, and the
    record codec stops before the partial batch."""
    batches = [kcodec.encode([(None, b"x" * 50, 1_700_000_000_000, [])], base_offset=i)
               for i in range(3)]
    cut = b"".join(batches)[:-20]
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0,
                                                        "records": cut}]}]}
    for version in (4, 12, 16):
        frame = encode_response("Fetch", version, body, 1)[4:]
        part = decode_response(frame, "Fetch", version).body["responses"][0]["partitions"][0]
        assert len(part["records"]) == len(cut)
        assert [b.base_offset for b in kcodec.read_batches(part["records"])] == [0, 1]
        assert kcodec.decode(part["records"]).column("offset").to_pylist() == [0, 1]
        with pytest.raises(kcodec.KafkaFormatError):
            list(kcodec.read_batches(part["records"], partial="error"))


def test_missing_fields_take_defaults_and_absent_versions_are_skipped():
    request = REQUESTS[1]
    minimal = request.encode({"topics": []}, 4)
    decoded, _ = request.decode(minimal, 4)
    assert decoded["max_bytes"] == 0x7FFFFFFF and decoded["replica_id"] == -1
    assert decoded["session_id"] == 0 and decoded["rack_id"] == ""    # not in v4
    assert len(minimal) == 4 * 4 + 1 + 4


def test_versions_notation():
    assert list(Versions("3-5")) == [3, 4, 5] and 7 in Versions("0+")
    assert list(Versions("none")) == [] and list(Versions("2")) == [2]


def test_bad_versions_and_values_are_typed_errors():
    with pytest.raises(UnsupportedVersionError, match="Fetch request v19"):
        encode_request("Fetch", 19, {}, 1)
    with pytest.raises(UnsupportedVersionError):
        encode_request("NoSuchApi", 0, {}, 1)
    with pytest.raises(UnsupportedVersionError, match="no schema"):
        decode_request(struct.pack(">hhi", 11, 0, 1) + b"\x00\x00")   # JoinGroup: not covered
    with pytest.raises(ProtocolError, match=r"topic_data\[0\]\.name"):
        REQUESTS[0].encode({"topic_data": [{"name": None}]}, 3)          # not nullable
    with pytest.raises(ProtocolError, match="acks"):
        REQUESTS[0].encode({"acks": 70000}, 3)                           # int16 overflow
    with pytest.raises(ProtocolError, match="left after the message"):
        decode_response(encode_response("EndTxn", 0, {}, 1)[4:] + b"\x00", "EndTxn", 0)
    frame = encode_response("EndTxn", 0, {}, 1)[4:] + b"\x00"
    assert decode_response(frame, "EndTxn", 0, trailing="ignore").correlation_id == 1


def test_uvarint_limits():
    out = bytearray()
    write_uvarint(out, 2**32 - 1)
    assert out == b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ValueError):
        write_uvarint(bytearray(), 2**32)
    message = REQUESTS[3]
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        message.decode(b"\xff" * 6, 12)


def test_every_message_has_unique_snake_case_names():
    for message in MESSAGES:
        stack = [message]
        while stack:
            struct_type = stack.pop()
            for f in struct_type.fields:
                assert f.name == f.name.lower() and " " not in f.name
                inner = getattr(f.type, "element", f.type)
                if hasattr(inner, "fields"):
                    stack.append(inner)


# ----------------------------------------------------------------------------
# The generated code (kcodec.protocol.codegen)
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("item", MESSAGE_VERSIONS, ids=_id)
def test_generated_source_is_what_runs(item):
    """Each version's decoder and encoder is generated once, cached, and its
    text is inspectable; tagged-field code appears only in flexible versions."""
    from kcodec.protocol.codegen import source
    message, version = item
    for direction in ("decode", "encode"):
        text = source(message, version, direction)
        codec = message.codec(version, direction)
        assert codec is message.codec(version, direction)
        assert text.startswith(f"def {codec.__name__}(")
        assert codec.__code__.co_filename == f"<kcodec.protocol {codec.__name__}>"
    decoder = source(message, version, "decode")
    assert ("_too_many_tags" in decoder) == (version in message.flexible)


@pytest.mark.parametrize("size", [0, 126, 127, 128, 16382, 16383, 16384, 70000])
def test_compact_lengths_of_every_varint_width(size):
    """Record sets whose compact length takes one, two and three varint bytes
    decode as views of the right bytes (the generator inlines one and two)."""
    records = bytes(range(256)) * (size // 256) + bytes(size % 256)
    body = {"responses": [{"topic": "t", "partitions": [{"records": records}]}]}
    frame = encode_response("Fetch", 12, body, 1)[4:]
    part = decode_response(frame, "Fetch", 12).body["responses"][0]["partitions"][0]
    assert isinstance(part["records"], memoryview) and part["records"] == records


def test_default_tagged_array_is_not_written():
    message = RESPONSES[18]
    without = message.encode({"api_keys": []}, 3)
    assert message.encode({"api_keys": [], "supported_features": []}, 3) == without
    with_one = message.encode({"api_keys": [], "supported_features": [
        {"name": "f", "min_version": 1, "max_version": 2}]}, 3)
    assert len(with_one) > len(without)
    assert message.decode(with_one, 3)[0]["supported_features"][0]["name"] == "f"
