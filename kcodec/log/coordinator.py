"""Keys and values of the coordinators' internal topics, as JSON lines like
kafka-dump-log's --offsets-decoder (`__consumer_offsets`) and
--transaction-log-decoder (`__transaction_state`) print them:
key {"type": "<record type>", "data": {...}}, value {"version": "<v>", "data": {...}},
"<DELETE>" for a tombstone.

    OffsetCommitKey (types 0, 1)   group string, topic string, partition int32
    GroupMetadataKey (type 2)      group string
    OffsetCommitValue v0-v4        offset int64, [v3+ leaderEpoch int32], metadata string,
                                   commitTimestamp int64, [v1 expireTimestamp int64]
    GroupMetadataValue v0-v4       protocolType, generation int32, protocol?, leader?,
                                   [v2+ currentStateTimestamp int64], members [memberId,
                                   [v3+ groupInstanceId?], clientId, clientHost,
                                   [v1+ rebalanceTimeout int32], sessionTimeout int32,
                                   subscription bytes, assignment bytes]
    TransactionLogKey (type 0)     transactionalId string
    TransactionLogValue v0-v1      producerId int64, producerEpoch int16,
                                   transactionTimeoutMs int32, transactionStatus int8,
                                   transactionPartitions? [topic, partitionIds [int32]],
                                   transactionLastUpdateTimestampMs int64,
                                   transactionStartTimestampMs int64
Versions marked flexible (offset commit v4, group metadata v4, transaction
value v1) use compact lengths and end structs with tagged fields.
"""
import base64
import json
import struct


class _Reader:
    def __init__(self, data, flexible=False):
        self.data, self.pos, self.flexible = bytes(data), 0, flexible

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"record ends at byte {len(self.data)}, field needs {size} more "
                             f"from byte {self.pos}")
        (value,) = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += size
        return value

    def uvarint(self):
        value = shift = 0
        while True:
            byte = self.take("B")
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("unsigned varint too long")

    def _length(self, wide):
        if self.flexible:
            return self.uvarint() - 1
        return self.take("i" if wide else "h")

    def raw(self, wide=False):
        n = self._length(wide)
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ValueError(f"a {n}-byte field runs past the end of the record")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def string(self):
        value = self.raw()
        return None if value is None else value.decode("utf-8", "replace")

    def bytes_b64(self):
        value = self.raw(wide=True)
        return None if value is None else base64.b64encode(value).decode()

    def array(self, read_item):
        n = self._length(wide=True)
        if n < 0:
            return None
        if n > len(self.data) - self.pos:
            raise ValueError(f"array of {n} items in a record of {len(self.data)} bytes")
        items = [read_item() for _ in range(n)]
        return items

    def tagged_fields(self):
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()


def _json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _offset_commit_value(r, version):
    data = {"offset": r.take("q")}
    if version >= 3:
        data["leaderEpoch"] = r.take("i")
    data["metadata"] = r.string()
    data["commitTimestamp"] = r.take("q")
    if version == 1:
        data["expireTimestamp"] = r.take("q")
    r.tagged_fields()
    return data


def _group_metadata_value(r, version):
    data = {"protocolType": r.string(), "generation": r.take("i"), "protocol": r.string(),
            "leader": r.string()}
    if version >= 2:
        data["currentStateTimestamp"] = r.take("q")

    def member():
        m = {"memberId": r.string()}
        if version >= 3:
            m["groupInstanceId"] = r.string()
        m["clientId"] = r.string()
        m["clientHost"] = r.string()
        if version >= 1:
            m["rebalanceTimeout"] = r.take("i")
        m["sessionTimeout"] = r.take("i")
        m["subscription"] = r.bytes_b64()
        m["assignment"] = r.bytes_b64()
        r.tagged_fields()
        return m

    data["members"] = r.array(member)
    r.tagged_fields()
    return data


def _transaction_value(r, version):
    data = {"producerId": r.take("q"), "producerEpoch": r.take("h"),
            "transactionTimeoutMs": r.take("i"), "transactionStatus": r.take("b")}

    def partitions():
        topic = r.string()
        ids = r.array(lambda: r.take("i"))
        r.tagged_fields()
        return {"topic": topic, "partitionIds": ids}

    data["transactionPartitions"] = r.array(partitions)
    data["transactionLastUpdateTimestampMs"] = r.take("q")
    data["transactionStartTimestampMs"] = r.take("q")
    r.tagged_fields()
    return data


def _value(value, readers):
    if value is None:
        return "<DELETE>"
    version = _Reader(value).take("h")
    if version not in readers:
        raise ValueError(f"unknown value version {version}")
    read, flexible_from = readers[version]
    r = _Reader(value, flexible=version >= flexible_from)
    r.pos = 2
    return _json({"version": str(version), "data": read(r, version)})


_OFFSET_VALUES = {v: (_offset_commit_value, 4) for v in range(5)}
_GROUP_VALUES = {v: (_group_metadata_value, 4) for v in range(5)}
_TXN_VALUES = {v: (_transaction_value, 1) for v in range(2)}


def offsets_key_value(record):
    """(key text, value text or None) of a __consumer_offsets record."""
    if record.key is None:
        raise ValueError(f"Failed to decode message at offset {record.offset} using offset "
                         "topic decoder (message had a missing key)")
    try:
        r = _Reader(record.key)
        kind = r.take("h")
        if kind in (0, 1):
            data = {"group": r.string(), "topic": r.string(), "partition": r.take("i")}
            values = _OFFSET_VALUES
        elif kind == 2:
            data = {"group": r.string()}
            values = _GROUP_VALUES
        else:
            return f"Unknown record type {kind} at offset {record.offset}, skipping.", None
        return _json({"type": str(kind), "data": data}), _value(record.value, values)
    except ValueError as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None


def transaction_key_value(record):
    """(key text, value text) of a __transaction_state record."""
    try:
        r = _Reader(record.key or b"")
        kind = r.take("h")
        if kind != 0:
            return f"Unknown record type {kind} at offset {record.offset}, skipping.", None
        key = _json({"type": "0", "data": {"transactionalId": r.string()}})
        return key, _value(record.value, _TXN_VALUES)
    except ValueError as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None
