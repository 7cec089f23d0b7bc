# Encoders: v2 record batches (data and control) and v0/v1 messages, plain or
# in compressed wrappers. Layouts as in records.pyx. Records arrive as parallel
# lists (keys, values, timestamps, headers) already normalised by the facade.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int16_t, int32_t, int64_t
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from libc.string cimport memcpy

from kcodec._core.wire cimport *
from kcodec._core.crc cimport crc32c_of, crc32_of

from kcodec import compression as _compression

cdef object _compress = _compression.compress
cdef tuple NO_HEADERS = ()


cdef object as_blob(object value, str what):
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return (<str>value).encode()
    try:
        return bytes(memoryview(value))
    except TypeError:
        raise TypeError(f"record {what} must be bytes-like, str or None, not "
                        f"{type(value).__name__}") from None


cdef tuple as_headers(object headers):
    if not headers:
        return NO_HEADERS
    out = []
    for hk, hv in headers:
        if hk is None:
            raise ValueError("a header key may not be None")
        out.append((as_blob(hk, "header key"), as_blob(hv, "header value")))
    return tuple(out)


def columns(records, int64_t default_timestamp, record_type):
    """Split records into keys, values, timestamps and headers lists. A record
    is a `record_type` (kcodec.Record), a (key, value[, timestamp[, headers]])
    tuple, or a dict with those names."""
    cdef list keys = [], values = [], timestamps = [], headers = []
    cdef Py_ssize_t width
    for r in records:
        if isinstance(r, tuple):
            width = len(<tuple>r)
            if width == 4:
                key, value, ts, hdrs = <tuple>r
            elif width == 2:
                key, value = <tuple>r
                ts = hdrs = None
            elif width == 3:
                key, value, ts = <tuple>r
                hdrs = None
            else:
                raise TypeError(f"a record tuple has 2, 3 or 4 items, not {width}")
        elif isinstance(r, record_type):
            key, value, ts, hdrs = r.key, r.value, r.timestamp, r.headers
        elif isinstance(r, dict):
            key, value = r.get("key"), r.get("value")
            ts, hdrs = r.get("timestamp"), r.get("headers")
        else:
            raise TypeError("a record is a kcodec.Record, a (key, value[, timestamp[, headers]]) "
                            "tuple, or a dict of those names")
        keys.append(key if key is None or type(key) is bytes else as_blob(key, "key"))
        values.append(value if value is None or type(value) is bytes else as_blob(value, "value"))
        timestamps.append(default_timestamp if ts is None else int(ts))
        headers.append(NO_HEADERS if not hdrs else as_headers(hdrs))
    return keys, values, timestamps, headers

cdef enum:
    LOG_OVERHEAD = 12
    V2_HEADER = 61
    LEGACY_V0_OVERHEAD = 14      # crc, magic, attributes, key length, value length
    LEGACY_V1_OVERHEAD = 22      # ... plus the timestamp


cdef inline Py_ssize_t blob_len(object b):
    return -1 if b is None else PyBytes_GET_SIZE(b)


cdef inline uint8_t* write_blob_varint(uint8_t* p, object b):
    cdef Py_ssize_t n
    if b is None:
        return write_varlong(p, -1)
    n = PyBytes_GET_SIZE(b)
    p = write_varlong(p, n)
    memcpy(p, PyBytes_AS_STRING(b), n)
    return p + n


cdef inline Py_ssize_t blob_varint_size(object b):
    cdef Py_ssize_t n
    if b is None:
        return 1
    n = PyBytes_GET_SIZE(b)
    return varlong_size(n) + n


cdef Py_ssize_t record_body_size(object key, object value, tuple headers,
                                 int64_t ts_delta, int64_t offset_delta):
    cdef Py_ssize_t n = 1 + varlong_size(ts_delta) + varlong_size(offset_delta)
    n += blob_varint_size(key) + blob_varint_size(value)
    n += varlong_size(len(headers))
    for hk, hv in headers:
        n += blob_varint_size(hk) + blob_varint_size(hv)
    return n


cdef bytes v2_records(list keys, list values, list timestamps, list headers,
                      Py_ssize_t start, Py_ssize_t stop, int64_t base_ts, Py_ssize_t size,
                      const Py_ssize_t* bodies):
    """The records section of one batch; bodies[i] is record i's body size."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t i
    cdef tuple hdrs
    for i in range(start, stop):
        hdrs = <tuple>headers[i]
        p = write_varlong(p, bodies[i])
        p[0] = 0
        p += 1
        p = write_varlong(p, <int64_t>timestamps[i] - base_ts)
        p = write_varlong(p, i - start)
        p = write_blob_varint(p, keys[i])
        p = write_blob_varint(p, values[i])
        p = write_varlong(p, len(hdrs))
        for hk, hv in hdrs:
            p = write_blob_varint(p, hk)
            p = write_blob_varint(p, hv)
    return out


cdef bytes v2_batch(object records, int32_t count, int64_t base_offset, int attributes,
                    int32_t last_offset_delta, int64_t base_ts, int64_t max_ts,
                    int64_t producer_id, int producer_epoch, int32_t base_sequence,
                    int32_t partition_leader_epoch):
    """Header + records section (already compressed if the attributes say so)."""
    cdef const uint8_t[::1] body = records
    cdef Py_ssize_t n = body.shape[0]
    cdef bytes out = PyBytes_FromStringAndSize(NULL, V2_HEADER + n)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    store_u64(p, <uint64_t>base_offset)
    store_u32(p + 8, <uint32_t>(V2_HEADER - LOG_OVERHEAD + n))
    store_u32(p + 12, <uint32_t>partition_leader_epoch)
    p[16] = 2
    store_u16(p + 21, <uint16_t>attributes)
    store_u32(p + 23, <uint32_t>last_offset_delta)
    store_u64(p + 27, <uint64_t>base_ts)
    store_u64(p + 35, <uint64_t>max_ts)
    store_u64(p + 43, <uint64_t>producer_id)
    store_u16(p + 51, <uint16_t>producer_epoch)
    store_u32(p + 53, <uint32_t>base_sequence)
    store_u32(p + 57, <uint32_t>count)
    if n:
        memcpy(p + V2_HEADER, &body[0], n)
    store_u32(p + 17, crc32c_of(p + 21, V2_HEADER - 21 + n))
    return out


def encode_v2(list keys, list values, list timestamps, list headers, *,
              int64_t base_offset, int codec, level, int attributes,
              int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
              int32_t partition_leader_epoch, Py_ssize_t max_batch_bytes):
    """Encode records as v2 batches of at most max_batch_bytes each (before
    compression; a batch always takes at least one record). Returns a list."""
    cdef Py_ssize_t n = len(keys)
    cdef Py_ssize_t start = 0, stop, size, rec
    cdef int64_t base_ts, max_ts, ts
    cdef int32_t seq
    cdef list batches = []
    cdef Py_ssize_t* bodies = <Py_ssize_t*>PyMem_Malloc(max(n, 1) * sizeof(Py_ssize_t))
    if bodies == NULL:
        raise MemoryError()
    attributes |= codec
    try:
        while start < n:
            base_ts = timestamps[start]
            max_ts = base_ts
            size = 0
            stop = start
            while stop < n:
                ts = timestamps[stop]
                bodies[stop] = record_body_size(keys[stop], values[stop], <tuple>headers[stop],
                                                ts - base_ts, stop - start)
                rec = varlong_size(bodies[stop]) + bodies[stop]
                if stop > start and V2_HEADER + size + rec > max_batch_bytes:
                    break
                size += rec
                if ts > max_ts:
                    max_ts = ts
                stop += 1
            records = v2_records(keys, values, timestamps, headers, start, stop, base_ts, size,
                                 bodies)
            if codec:
                records = _compress(codec, records, level, 2)
            seq = base_sequence
            if base_sequence >= 0:
                seq = <int32_t>((<int64_t>base_sequence + start) % (<int64_t>0x7FFFFFFF + 1))
            batches.append(v2_batch(records, <int32_t>(stop - start), base_offset + start,
                                    attributes, <int32_t>(stop - start - 1), base_ts, max_ts,
                                    producer_id, producer_epoch, seq, partition_leader_epoch))
            start = stop
    finally:
        PyMem_Free(bodies)
    return batches


def encode_control(int type_id, *, int64_t producer_id, int16_t producer_epoch, int64_t offset,
                   int32_t coordinator_epoch, int64_t timestamp, int32_t partition_leader_epoch=-1):
    """An end-transaction marker batch (ABORT = 0, COMMIT = 1)."""
    cdef bytes key = PyBytes_FromStringAndSize(NULL, 4)
    cdef bytes value = PyBytes_FromStringAndSize(NULL, 6)
    store_u16(<uint8_t*>PyBytes_AS_STRING(key), 0)
    store_u16(<uint8_t*>PyBytes_AS_STRING(key) + 2, <uint16_t>type_id)
    store_u16(<uint8_t*>PyBytes_AS_STRING(value), 0)
    store_u32(<uint8_t*>PyBytes_AS_STRING(value) + 2, <uint32_t>coordinator_epoch)
    cdef Py_ssize_t body = record_body_size(key, value, (), 0, 0)
    records = v2_records([key], [value], [timestamp], [()], 0, 1, timestamp,
                         varlong_size(body) + body, &body)
    return v2_batch(records, 1, offset, 0x30, 0, timestamp, timestamp, producer_id,
                    producer_epoch, -1, partition_leader_epoch)


cdef Py_ssize_t legacy_message_size(int magic, object key, object value):
    cdef Py_ssize_t n = LEGACY_V1_OVERHEAD if magic == 1 else LEGACY_V0_OVERHEAD
    if key is not None:
        n += PyBytes_GET_SIZE(key)
    if value is not None:
        n += PyBytes_GET_SIZE(value)
    return n


cdef uint8_t* write_legacy_entry(uint8_t* p, int64_t offset, int magic, int attributes,
                                 int64_t timestamp, object key, object value):
    cdef Py_ssize_t size = legacy_message_size(magic, key, value)
    cdef uint8_t* msg = p + LOG_OVERHEAD
    cdef uint8_t* q = msg + 6
    cdef Py_ssize_t n
    store_u64(p, <uint64_t>offset)
    store_u32(p + 8, <uint32_t>size)
    msg[4] = magic
    msg[5] = attributes
    if magic == 1:
        store_u64(q, <uint64_t>timestamp)
        q += 8
    for blob in (key, value):
        if blob is None:
            store_u32(q, 0xFFFFFFFF)
            q += 4
        else:
            n = PyBytes_GET_SIZE(blob)
            store_u32(q, <uint32_t>n)
            memcpy(q + 4, PyBytes_AS_STRING(blob), n)
            q += 4 + n
    store_u32(msg, crc32_of(msg + 4, size - 4))
    return q


cdef bytes legacy_entries(list keys, list values, list timestamps, Py_ssize_t start,
                          Py_ssize_t stop, int magic, int attributes, int64_t first_offset):
    cdef Py_ssize_t i, size = 0
    for i in range(start, stop):
        size += LOG_OVERHEAD + legacy_message_size(magic, keys[i], values[i])
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    for i in range(start, stop):
        p = write_legacy_entry(p, first_offset + (i - start), magic, attributes,
                               timestamps[i], keys[i], values[i])
    return out


def encode_legacy(list keys, list values, list timestamps, *, int magic, int64_t base_offset,
                  int codec, level, int timestamp_type, Py_ssize_t max_batch_bytes):
    """Encode records as v0/v1 messages: one entry per record when uncompressed,
    else wrappers of at most max_batch_bytes of inner entries each."""
    cdef Py_ssize_t n = len(keys)
    cdef Py_ssize_t start = 0, stop, size, entry
    cdef int ts_bit = 0x08 if (magic == 1 and timestamp_type == 1) else 0
    cdef int64_t max_ts
    cdef bytes inner, wrapper
    cdef list out = []
    if codec == 0:
        return [legacy_entries(keys, values, timestamps, 0, n, magic, ts_bit, base_offset)]
    while start < n:
        stop = start
        size = 0
        max_ts = timestamps[start]
        while stop < n:
            entry = LOG_OVERHEAD + legacy_message_size(magic, keys[stop], values[stop])
            if stop > start and size + entry > max_batch_bytes:
                break
            size += entry
            max_ts = max(max_ts, <int64_t>timestamps[stop])
            stop += 1
        # Inner offsets: relative (0..n-1) in magic 1, absolute in magic 0.
        inner = legacy_entries(keys, values, timestamps, start, stop, magic, 0,
                               0 if magic == 1 else base_offset + start)
        compressed = _compress(codec, inner, level, magic)
        wrapper = PyBytes_FromStringAndSize(
            NULL, LOG_OVERHEAD + legacy_message_size(magic, None, compressed))
        write_legacy_entry(<uint8_t*>PyBytes_AS_STRING(wrapper), base_offset + stop - 1, magic,
                           codec | ts_bit, max_ts, None, bytes(compressed))
        out.append(wrapper)
        start = stop
    return out
