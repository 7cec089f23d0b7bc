"""Keys and values of the coordinators' internal topics, as JSON lines like
kafka-dump-log's --offsets-decoder (`__consumer_offsets`) and
--transaction-log-decoder (`__transaction_state`) print them:
key {"type": "<record type>", "data": {...}}, value {"version": "<v>", "data": {...}},
"<DELETE>" for a tombstone.

A key is an int16 record type then its fields; a value is an int16 version
then the fields of that version. The schemas below follow Apache Kafka's
record definitions (OffsetCommitKey/Value, GroupMetadataKey/Value,
TransactionLogKey/Value), with field names as the JSON spells them, and are
decoded by kcodec.protocol's codec: flexible versions (offset commit v4, group
metadata v4, transaction value v1) have compact lengths and tagged fields.
The JSON lists the fields of the record's version in schema order, tagged
ones only when they differ from their default (as Kafka's JSON converters
do; a uuid in Kafka's base64url text). Bytes after a value's last field are
ignored.
"""
import base64
import json
import struct

from ..protocol.errors import ProtocolError
from ..protocol.schema import Array, Bytes, Message, String, Struct, Uuid, field as f, many
from .java_text import JAVA_REPLACE

# Kafka reads stored strings without validating them: invalid UTF-8 is replaced,
# as Java's decoder replaces it.
_TEXT = String(errors=JAVA_REPLACE)


def _record(name, versions, flexible, fields):
    return Message(None, name, "record", versions, flexible, fields)


OFFSET_COMMIT_KEY = _record("OffsetCommitKey", "0", "none", [
    f("group", _TEXT, "0+"),
    f("topic", _TEXT, "0+"),
    f("partition", "int32", "0+"),
])

GROUP_METADATA_KEY = _record("GroupMetadataKey", "0", "none", [
    f("group", _TEXT, "0+"),
])

OFFSET_COMMIT_VALUE = _record("OffsetCommitValue", "0-4", "4+", [
    f("offset", "int64", "0+"),
    f("leaderEpoch", "int32", "3+", default=-1),
    f("metadata", _TEXT, "0+"),
    f("commitTimestamp", "int64", "0+"),
    f("expireTimestamp", "int64", "1", default=-1),
    f("topicId", "uuid", "4+", tag=0),
])

GROUP_METADATA_VALUE = _record("GroupMetadataValue", "0-4", "4+", [
    f("protocolType", _TEXT, "0+"),
    f("generation", "int32", "0+"),
    f("protocol", _TEXT, "0+", nullable="0+"),
    f("leader", _TEXT, "0+", nullable="0+"),
    f("currentStateTimestamp", "int64", "2+", default=-1),
    f("members", many(
        f("memberId", _TEXT, "0+"),
        f("groupInstanceId", _TEXT, "3+", nullable="3+", default=None),
        f("clientId", _TEXT, "0+"),
        f("clientHost", _TEXT, "0+"),
        f("rebalanceTimeout", "int32", "1+", default=-1),
        f("sessionTimeout", "int32", "0+"),
        f("subscription", "bytes", "0+"),
        f("assignment", "bytes", "0+"),
    ), "0+"),
])

TRANSACTION_LOG_KEY = _record("TransactionLogKey", "0", "none", [
    f("transactionalId", _TEXT, "0+"),
])

TRANSACTION_LOG_VALUE = _record("TransactionLogValue", "0-1", "1+", [
    f("producerId", "int64", "0+"),
    f("previousProducerId", "int64", "1+", tag=0, default=-1),
    f("nextProducerId", "int64", "1+", tag=1, default=-1),
    f("producerEpoch", "int16", "0+"),
    f("nextProducerEpoch", "int16", "1+", tag=3, default=-1),
    f("transactionTimeoutMs", "int32", "0+"),
    f("transactionStatus", "int8", "0+"),
    f("transactionPartitions", many(
        f("topic", _TEXT, "0+"),
        f("partitionIds", "[]int32", "0+"),
    ), "0+", nullable="0+"),
    f("transactionLastUpdateTimestampMs", "int64", "0+"),
    f("transactionStartTimestampMs", "int64", "0+"),
    f("clientTransactionVersion", "int16", "1+", tag=2),
])

OFFSETS_KEYS = {0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
                1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
                2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE)}
TRANSACTION_KEYS = {0: (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}

_INT16 = struct.Struct(">h")


def _int16_prefix(data, what):
    if len(data) < 2:
        raise ProtocolError(f"2 bytes needed for the {what}, {len(data)} left", position=0)
    return _INT16.unpack_from(data)[0]


def _json_struct(struct_, data, version, flexible):
    regular, tagged = struct_.present(version, flexible)
    listed = {field.name for field, _, _ in regular}
    listed.update(field.name for field, _, _ in tagged
                  if data[field.name] != field.make_default())
    return {field.name: _json_value(field.type, data[field.name], version, flexible)
            for field in struct_.fields if field.name in listed}


def _json_value(type_, value, version, flexible):
    if value is None:
        return None
    if isinstance(type_, Struct):
        return _json_struct(type_, value, version, flexible)
    if isinstance(type_, Array):
        return [_json_value(type_.element, item, version, flexible) for item in value]
    if isinstance(type_, Bytes):
        return base64.b64encode(value).decode()
    if isinstance(type_, Uuid):
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    return value


def _decode(schema, data, version):
    """JSON object of a record's fields at `version`, which start at byte 2."""
    body, _ = schema.decode(data, version, 2)
    return _json_struct(schema, body, version, version in schema.flexible)


def _json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _key_value(record, schemas):
    key = memoryview(record.key or b"")
    kind = _int16_prefix(key, "record type")
    if kind not in schemas:
        return f"Unknown record type {kind} at offset {record.offset}, skipping.", None
    key_schema, value_schema = schemas[kind]
    key_text = _json({"type": str(kind), "data": _decode(key_schema, key, 0)})
    if record.value is None:
        return key_text, "<DELETE>"
    value = memoryview(record.value)
    version = _int16_prefix(value, "value version")
    if version not in value_schema.valid:
        raise ProtocolError(f"unknown value version {version}")
    return key_text, _json({"version": str(version),
                            "data": _decode(value_schema, value, version)})


def offsets_key_value(record):
    """(key text, value text or None) of a __consumer_offsets record."""
    if record.key is None:
        raise ValueError(f"Failed to decode message at offset {record.offset} using offset "
                         "topic decoder (message had a missing key)")
    try:
        return _key_value(record, OFFSETS_KEYS)
    except ProtocolError as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None


def transaction_key_value(record):
    """(key text, value text) of a __transaction_state record."""
    try:
        return _key_value(record, TRANSACTION_KEYS)
    except ProtocolError as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None
