"""The coordinators' records (__consumer_offsets, __transaction_state) as the
dump's offsets and transaction-log decoders print them; the records are built
byte by byte here, independently of the schemas that decode them."""
import json
import struct
from types import SimpleNamespace

import pytest

from kcodec.log.coordinator import offsets_key_value, transaction_key_value
from kcodec.protocol.errors import ProtocolError
from kcodec.protocol.schema import Message, String, field


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def uvarint(v):
    out = bytearray()
    while v > 0x7F:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s, flexible=False):
    if s is None:
        return uvarint(0) if flexible else i16(-1)
    raw = s.encode() if isinstance(s, str) else s
    return (uvarint(len(raw) + 1) if flexible else i16(len(raw))) + raw


def blob(b, flexible=False):
    return (uvarint(len(b) + 1) if flexible else i32(len(b))) + b


def array(items, flexible=False):
    if items is None:
        return uvarint(0) if flexible else i32(-1)
    return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)


def tags(fields=None):
    """A tagged-field section: {tag: payload}."""
    fields = fields or {}
    out = uvarint(len(fields))
    for tag, payload in sorted(fields.items()):
        out += uvarint(tag) + uvarint(len(payload)) + payload
    return out


def record(key, value, offset=5):
    return SimpleNamespace(key=key, value=value, offset=offset)


def offsets(key, value, offset=5):
    return offsets_key_value(record(key, value, offset))


def transactions(key, value, offset=5):
    return transaction_key_value(record(key, value, offset))


COMMIT_KEY = i16(1) + string("grp") + string("orders") + i32(3)
GROUP_KEY = i16(2) + string("grp")
TXN_KEY = i16(0) + string("tx-1")
UUID_BYTES = bytes(range(16))


# ---------------------------------------------------------------- keys

@pytest.mark.parametrize("kind", [0, 1])
def test_offset_commit_key_of_either_type(kind):
    key = i16(kind) + string("grp") + string("orders") + i32(3)
    text, value = offsets(key, None)
    assert text == ('{"type":"%d","data":{"group":"grp","topic":"orders","partition":3}}' % kind)
    assert value == "<DELETE>"


def test_group_metadata_key_and_tombstone():
    assert offsets(GROUP_KEY, None) == ('{"type":"2","data":{"group":"grp"}}', "<DELETE>")


def test_transaction_log_key_and_tombstone():
    assert transactions(TXN_KEY, None) == ('{"type":"0","data":{"transactionalId":"tx-1"}}',
                                           "<DELETE>")


def test_unknown_record_types_are_skipped_with_their_offset():
    value = i16(0) + i64(1) + string("") + i64(2)
    assert offsets(i16(3) + string("grp"), value, offset=17) == (
        "Unknown record type 3 at offset 17, skipping.", None)
    assert transactions(i16(1) + string("tx"), value, offset=18) == (
        "Unknown record type 1 at offset 18, skipping.", None)


def test_an_offsets_record_without_key_is_an_error_of_the_dump():
    with pytest.raises(ValueError, match="at offset 9 using offset topic decoder"):
        offsets(None, b"", offset=9)


def test_a_transaction_record_without_key_is_an_error_line():
    text, value = transactions(None, None, offset=9)
    assert text.startswith("Error at offset 9, skipping. ")
    assert value is None


# ---------------------------------------------------------------- offset commit values

def offset_commit_value(version):
    flexible = version >= 4
    body = i64(42)
    if version >= 3:
        body += i32(5)
    body += string("meta", flexible) + i64(1700)
    if version == 1:
        body += i64(1800)
    if flexible:
        body += tags({0: UUID_BYTES, 9: b"\x01\x02"})
    return i16(version) + body


@pytest.mark.parametrize("version, data", [
    (0, '{"offset":42,"metadata":"meta","commitTimestamp":1700}'),
    (1, '{"offset":42,"metadata":"meta","commitTimestamp":1700,"expireTimestamp":1800}'),
    (2, '{"offset":42,"metadata":"meta","commitTimestamp":1700}'),
    (3, '{"offset":42,"leaderEpoch":5,"metadata":"meta","commitTimestamp":1700}'),
    (4, '{"offset":42,"leaderEpoch":5,"metadata":"meta","commitTimestamp":1700,'
        '"topicId":"AAECAwQFBgcICQoLDA0ODw"}'),
])
def test_offset_commit_value_lists_the_fields_of_its_version(version, data):
    key, value = offsets(COMMIT_KEY, offset_commit_value(version))
    assert key == '{"type":"1","data":{"group":"grp","topic":"orders","partition":3}}'
    assert value == '{"version":"%d","data":%s}' % (version, data)


def test_offset_commit_value_v4_without_tagged_fields():
    value = i16(4) + i64(-1) + i32(-1) + string("", True) + i64(0) + tags()
    assert offsets(COMMIT_KEY, value)[1] == (
        '{"version":"4","data":{"offset":-1,"leaderEpoch":-1,"metadata":"","commitTimestamp":0}}')


def test_bytes_after_a_value_are_ignored():
    value = offset_commit_value(3) + b"\x00\x01\x02"
    assert json.loads(offsets(COMMIT_KEY, value)[1])["data"]["commitTimestamp"] == 1700


def test_invalid_utf8_in_a_string_is_replaced():
    value = i16(0) + i64(1) + string(b"a\xffb") + i64(2)
    assert json.loads(offsets(COMMIT_KEY, value)[1])["data"]["metadata"] == "a\ufffdb"


def test_an_encoded_surrogate_is_replaced_once_as_java_does():
    """Java's decoder replaces ED A0 80 (a UTF-16 surrogate's encoding) with
    one U+FFFD; Python's "replace" would give one per byte."""
    value = i16(0) + i64(1) + string(b"\xed\xa0\x80x") + i64(2)
    assert json.loads(offsets(COMMIT_KEY, value)[1])["data"]["metadata"] == "\ufffdx"


# ---------------------------------------------------------------- group metadata values

def member(version, instance_id, flexible):
    out = string("m-1", flexible)
    if version >= 3:
        out += string(instance_id, flexible)
    out += string("client", flexible) + string("/127.0.0.1", flexible)
    if version >= 1:
        out += i32(300000)
    out += i32(45000) + blob(b"\x00\x01sub", flexible) + blob(b"", flexible)
    if flexible:
        out += tags({4: b"xyz"})
    return out


def group_metadata_value(version, members, protocol="range", leader="m-1", instance_id=None):
    flexible = version >= 4
    body = string("consumer", flexible) + i32(7) + string(protocol, flexible) + \
        string(leader, flexible)
    if version >= 2:
        body += i64(1700)
    body += array(None if members is None else
                  [member(version, instance_id, flexible) for _ in range(members)], flexible)
    if flexible:
        body += tags({0: b"\x05"})
    return i16(version) + body


MEMBER_JSON = {
    0: '{"memberId":"m-1","clientId":"client","clientHost":"/127.0.0.1","sessionTimeout":45000,'
       '"subscription":"AAFzdWI=","assignment":""}',
    1: '{"memberId":"m-1","clientId":"client","clientHost":"/127.0.0.1",'
       '"rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":"AAFzdWI=",'
       '"assignment":""}',
    3: '{"memberId":"m-1","groupInstanceId":null,"clientId":"client","clientHost":"/127.0.0.1",'
       '"rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":"AAFzdWI=",'
       '"assignment":""}',
}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_lists_the_fields_of_its_version(version):
    _, value = offsets(GROUP_KEY, group_metadata_value(version, members=2))
    head = '{"protocolType":"consumer","generation":7,"protocol":"range","leader":"m-1"'
    if version >= 2:
        head += ',"currentStateTimestamp":1700'
    one = MEMBER_JSON[0 if version == 0 else 1 if version < 3 else 3]
    assert value == '{"version":"%d","data":%s,"members":[%s,%s]}}' % (version, head, one, one)


@pytest.mark.parametrize("version", [0, 3, 4])
def test_group_metadata_value_with_nulls_and_no_members(version):
    _, value = offsets(GROUP_KEY, group_metadata_value(version, members=0, protocol=None,
                                                       leader=None))
    data = json.loads(value)["data"]
    assert (data["protocol"], data["leader"], data["members"]) == (None, None, [])


@pytest.mark.parametrize("version", [3, 4])
def test_group_instance_id(version):
    _, value = offsets(GROUP_KEY, group_metadata_value(version, members=1, instance_id="inst"))
    assert json.loads(value)["data"]["members"][0]["groupInstanceId"] == "inst"


@pytest.mark.parametrize("version", [0, 4])
def test_group_metadata_value_with_null_members_is_an_error_line(version):
    text, value = offsets(GROUP_KEY, group_metadata_value(version, members=None), offset=11)
    assert text.startswith("Error at offset 11, skipping. ") and "members" in text
    assert value is None


# ---------------------------------------------------------------- transaction log values

def transaction_log_value(version, partitions):
    flexible = version >= 1
    body = i64(9) + i16(1) + i32(60000) + i8(2)
    items = None
    if partitions is not None:
        items = [string(topic, flexible) + array([i32(p) for p in ids], flexible)
                 + (tags({1: b"\x00"}) if flexible else b"")
                 for topic, ids in partitions]
    body += array(items, flexible) + i64(1700) + i64(1600)
    if flexible:
        body += tags({0: i64(8), 1: i64(10), 2: i16(2), 3: i16(0)})
    return i16(version) + body


TXN_HEAD = ('"producerId":9,"producerEpoch":1,"transactionTimeoutMs":60000,'
            '"transactionStatus":2')
TXN_TAIL = '"transactionLastUpdateTimestampMs":1700,"transactionStartTimestampMs":1600'


TXN_TAGS = {1: (',"previousProducerId":8,"nextProducerId":10', ',"nextProducerEpoch":0',
                 ',"clientTransactionVersion":2')}


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("partitions, listed", [
    ([("t", [0, 1]), ("u", [])], '[{"topic":"t","partitionIds":[0,1]},'
                                 '{"topic":"u","partitionIds":[]}]'),
    ([], "[]"),
    (None, "null"),
])
def test_transaction_log_value(version, partitions, listed):
    key, value = transactions(TXN_KEY, transaction_log_value(version, partitions))
    assert key == '{"type":"0","data":{"transactionalId":"tx-1"}}'
    after_id, after_epoch, last = TXN_TAGS.get(version, ("", "", ""))
    head = TXN_HEAD.replace('"producerId":9', '"producerId":9' + after_id).replace(
        '"producerEpoch":1', '"producerEpoch":1' + after_epoch)
    assert value == ('{"version":"%d","data":{%s,"transactionPartitions":%s,%s%s}}'
                     % (version, head, listed, TXN_TAIL, last))


def test_tagged_fields_at_their_defaults_are_not_listed():
    value = transaction_log_value(1, [])[:-len(tags({0: i64(8), 1: i64(10), 2: i16(2),
                                                     3: i16(0)}))]
    value += tags({0: i64(-1), 1: i64(-1), 2: i16(0), 3: i16(-1)})
    assert transactions(TXN_KEY, value)[1] == (
        '{"version":"1","data":{%s,"transactionPartitions":[],%s}}' % (TXN_HEAD, TXN_TAIL))


def test_a_tagged_field_of_the_wrong_size_is_an_error_line():
    value = offset_commit_value(4)[:-len(tags({0: UUID_BYTES, 9: b"\x01\x02"}))]
    text, rest = offsets(COMMIT_KEY, value + tags({0: UUID_BYTES + b"\x00"}))
    assert text.startswith("Error at offset 5, skipping. ") and "topicId" in text
    assert rest is None


# ---------------------------------------------------------------- bad input

def test_unknown_value_versions_are_error_lines():
    assert offsets(COMMIT_KEY, i16(5) + offset_commit_value(4)[2:], offset=3) == (
        "Error at offset 3, skipping. unknown value version 5", None)
    assert transactions(TXN_KEY, i16(-1), offset=4) == (
        "Error at offset 4, skipping. unknown value version -1", None)


VALUES = ([(offsets, COMMIT_KEY, offset_commit_value(v)) for v in range(5)]
          + [(offsets, GROUP_KEY, group_metadata_value(v, members=2)) for v in range(5)]
          + [(transactions, TXN_KEY, transaction_log_value(v, [("t", [0, 1])]))
             for v in range(2)])


@pytest.mark.parametrize("decode, key, value", VALUES)
def test_every_truncated_value_is_an_error_line(decode, key, value):
    # a flexible value's last byte is its (empty or not) tag count
    for size in range(len(value)):
        text, rest = decode(key, value[:size], offset=12)
        assert text.startswith("Error at offset 12, skipping. "), (size, text)
        assert rest is None


@pytest.mark.parametrize("decode, key, value", [VALUES[0], VALUES[5]])
def test_every_truncated_key_is_an_error_line(decode, key, value):
    for size in range(len(key)):
        text, rest = decode(key[:size], value, offset=13)
        assert text.startswith("Error at offset 13, skipping. "), (size, text)
        assert rest is None


@pytest.mark.parametrize("decode, key, value", VALUES)
def test_corrupt_bytes_give_json_or_an_error_line(decode, key, value):
    for at in range(len(value)):
        for byte in (0x00, 0x7F, 0x80, 0xFF):
            corrupt = value[:at] + bytes([byte]) + value[at + 1:]
            text, rest = decode(key, corrupt, offset=14)
            if text.startswith("Error at offset 14, skipping. "):
                assert rest is None
            else:
                json.loads(text)
                assert json.loads(rest)["version"] == str(struct.unpack(">h", corrupt[:2])[0])


def test_huge_counts_and_lengths_are_error_lines_not_allocations():
    huge_array = i16(0) + string("consumer") + i32(1) + string(None) + string(None) + \
        i32(0x7FFFFFFF)
    text, _ = offsets(GROUP_KEY, huge_array)
    assert text.startswith("Error at offset 5, skipping. ") and "members" in text
    huge_tags = offset_commit_value(4)[:-len(tags({0: UUID_BYTES, 9: b"\x01\x02"}))] + \
        uvarint(0xFFFFFFF)
    assert offsets(COMMIT_KEY, huge_tags)[0].startswith("Error at offset 5, skipping. ")
    huge_string = i16(0) + i64(1) + i16(0x7FFF) + b"ab"
    assert offsets(COMMIT_KEY, huge_string)[0].startswith("Error at offset 5, skipping. ")


def test_a_null_in_a_non_nullable_field_is_an_error_line():
    text, value = offsets(COMMIT_KEY, i16(0) + i64(1) + string(None) + i64(2))
    assert text.startswith("Error at offset 5, skipping. ") and "metadata" in text
    assert value is None


# ---------------------------------------------------------------- the codec's lenient strings

LENIENT = Message(None, "Lenient", "record", "0-1", "1+", [
    field("name", String(errors="replace"), "0+"),
    field("strict", "string", "0+"),
])


@pytest.mark.parametrize("version", [0, 1])
def test_a_string_type_may_replace_invalid_utf8(version):
    flexible = version == 1
    data = string(b"\xe4\xb8x", flexible) + string("ok", flexible) + (tags() if flexible else b"")
    body, end = LENIENT.decode(data, version)
    assert (body["name"], body["strict"], end) == ("\ufffdx", "ok", len(data))
    assert LENIENT.encode({"name": "\ufffdx", "strict": "ok"}, version) == \
        string("\ufffdx", flexible) + string("ok", flexible) + (tags() if flexible else b"")


def test_strict_strings_still_reject_invalid_utf8():
    data = string("fine") + string(b"\xff")
    with pytest.raises(ProtocolError, match="invalid UTF-8.*field strict"):
        LENIENT.decode(data, 0)
