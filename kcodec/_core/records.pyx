# Scanning record sets and iterating records (the object API).
#
# Record set: entries back to back, each [int64 offset][int32 size][size bytes];
# byte 16 of every entry is its magic.
#   magic 2  RecordBatch: ..., crc u32 @17 (CRC-32C of [21, 12+size)), attributes i16 @21,
#            lastOffsetDelta i32 @23, baseTimestamp i64 @27, maxTimestamp i64 @35,
#            producerId i64 @43, producerEpoch i16 @51, baseSequence i32 @53,
#            recordsCount i32 @57, records @61 (plain, or one compressed stream).
#            Record: length varint, attributes i8, timestampDelta varlong,
#            offsetDelta varint, key, value (varint length, -1 = null),
#            headersCount varint, headers (varint key length + UTF-8 key, value).
#   magic 0/1 message: crc u32 @12 (CRC-32 of [16, 12+size)), attributes i8 @17,
#            [timestamp i64 @18 if magic 1], key, value (int32 length, -1 = null).
#            A compressed message ("wrapper") holds inner entries in its value.
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBuffer_FillInfo, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject_GenericGetAttr
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t, INT64_MIN, INT64_MAX
from libc.stdlib cimport malloc, realloc, free

from kcodec._core.wire cimport *
from kcodec._core.status cimport FILL_HEADER_CHANGED, FILL_NO_MEMORY, FILL_TOO_LARGE
from kcodec._core.crc cimport crc32c_of, crc32c_raw, crc32_of, crc32_raw

from types import SimpleNamespace

from kcodec.errors import (
    KafkaFormatError, CorruptRecordError, CrcMismatchError, UnsupportedFormatError, integer_option,
    located,
)


cdef tuple TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
cdef tuple CONTROL_TYPES = ("ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER",
                            "SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS")
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")      # by Codec id (wire.pxd)

# wire.pxd's layout, for Python code that reads many entries at once with
# numpy (salvage's search for where entries could begin).
LAYOUT = SimpleNamespace(
    ENTRY_SIZE_AT=ENTRY_SIZE_AT, LOG_OVERHEAD=LOG_OVERHEAD, MAGIC_AT=MAGIC_AT,
    MIN_ENTRY_SIZE=MIN_ENTRY_SIZE, V2_MIN_ENTRY_SIZE=V2_HEADER - LOG_OVERHEAD,
    MESSAGE_ATTRIBUTES_AT=LOG_OVERHEAD + MESSAGE_ATTRIBUTES_AT,
    V2_ATTRIBUTES_LOW_BYTE_AT=V2_ATTRIBUTES_AT + 1,    # the int16's byte that holds the codec
    ATTR_CODEC_MASK=ATTR_CODEC_MASK, MAX_CODEC_ID=MAX_CODEC_ID, MAX_LEGACY_CODEC_ID=CODEC_LZ4,
)
cdef tuple CODECS = CODEC_NAMES
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 << 20

# The facade's codec registry (kcodec.compression), for what the core does not
# compress or decompress itself. It is passed in (use_python_codecs) rather
# than imported: the registry sits above the core and imports it.
cdef object python_codecs = None


def use_python_codecs(registry):
    """Make registry.decompress(codec_id, data, limit, magic) and
    registry.compress(codec_id, data, level, magic) the core's Python codecs
    (kcodec.compression passes itself when it is imported)."""
    global python_codecs
    python_codecs = registry


cdef object loaded_codecs():
    if python_codecs is None:
        raise RuntimeError("kcodec's codecs are not loaded: import kcodec, not kcodec._core alone")
    return python_codecs


cdef object decompress_in_python(int codec, data, int64_t limit, int magic):
    return loaded_codecs().decompress(codec, data, limit, magic)


cdef object compress_in_python(int codec, data, level, int magic):
    return loaded_codecs().compress(codec, data, level, magic)


# ------------------------------------------------------------------ buffers

@cython.final
cdef class Source:
    """Holds one buffer export for as long as records point into it."""

    def __cinit__(self, obj):
        PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
        self.acquired = True
        self.base = <const uint8_t*>self.view.buf
        self.length = self.view.len

    def __dealloc__(self):
        if self.acquired:
            PyBuffer_Release(&self.view)

    cdef object slice(self, Py_ssize_t pos, Py_ssize_t n):
        """A read-only memoryview of [pos, pos+n), zero-copy, keeping this alive."""
        cdef Region region = Region.__new__(Region)
        region.src = self
        region.pos = pos
        region.n = n
        return memoryview(region)


@cython.final
@cython.no_gc
cdef class Region:
    """Exports part of a Source as bytes. (A memoryview cached on the Source
    and sliced would form a reference cycle the GC cannot clear while views
    of it are exported.)"""
    cdef Source src
    cdef Py_ssize_t pos, n

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        PyBuffer_FillInfo(buffer, self, <void*>(self.src.base + self.pos), self.n, 1, flags)

    def __releasebuffer__(self, Py_buffer* buffer):
        pass


cdef Source as_source(obj):
    if type(obj) is Source:
        return <Source>obj
    return Source(obj)


# ------------------------------------------------------------------- errors

cdef dict FAULT_TEXT = {
    F_TRUNCATED: "a field runs past the end of the data",
    F_VARINT_TOO_LONG: "varint too long",
    F_RECORD_LENGTH: "record length {a} is negative or exceeds the {b} bytes remaining",
    F_RECORD_SIZE: "record declares {a} bytes but its fields take {b}",
    F_HEADER_COUNT: "headers count {a} is negative or exceeds the {b} bytes remaining",
    F_HEADER_KEY_NULL: "header key is null (length {a})",
    F_TOO_FEW_RECORDS: "batch declares {a} records but its data ends after {b}",
    F_TRAILING_BYTES: "{a} bytes remain after the batch's {b} records",
    F_FIELD_PAST_RECORD: "a field runs past the record's declared end",
}


cdef object raise_fault(FaultInfo* fi, Batch batch, bint decompressed):
    text = FAULT_TEXT[fi.code].format(a=fi.a, b=fi.b)
    if decompressed:
        text += f" (byte {fi.where} of the decompressed {batch.compression} records)"
        position = batch.position
    else:
        position = fi.where
    raise CorruptRecordError(text, position=position, offset=batch._first_offset_hint())


cdef int raise_for_status(int st, Py_ssize_t position) except -1:
    """Raise the error a FillStatus st (status.pxd) says, for the batch at
    `position`, if it is one; 0 if not."""
    if st == FILL_NO_MEMORY:
        raise MemoryError()
    if st == FILL_TOO_LARGE:
        raise ValueError("a binary column would exceed Arrow's 2 GiB limit; decode fewer "
                         "batches or record sets a call (a log: iter_decode)")
    if st == FILL_HEADER_CHANGED:
        raise CorruptRecordError("record headers no longer fit their record: the input "
                                 "buffer changed after it was read", position=position)
    return 0


# ------------------------------------------------------------ record slots

cdef int entry_size(const uint8_t* p, Py_ssize_t remaining, int64_t max_entry,
                    int32_t* size) noexcept nogil:
    """Frame the entry at p in Java's order (ByteBufferLogInputStream): a size is
    judged as soon as it can be read; only then is a short remainder a partial
    entry. *size is -1 when not even the size could be read."""
    size[0] = -1
    if remaining < LOG_OVERHEAD:
        return ENTRY_END
    size[0] = load_i32(p + ENTRY_SIZE_AT)
    if size[0] < MIN_ENTRY_SIZE:
        return F_ENTRY_TOO_SMALL
    if size[0] > max_entry:
        return F_ENTRY_TOO_LARGE
    if remaining < HEADER_UP_TO_MAGIC or size[0] > remaining - LOG_OVERHEAD:
        return ENTRY_END
    return ENTRY_OK


cdef int read_v2_header(const uint8_t* p, int32_t size, bint verify_crc,
                        V2Header* h) noexcept nogil:
    """The header fields of the v2 batch at p (a whole entry), checked in Java's
    order: length, codec id, CRC-32C, records count."""
    if size < V2_HEADER - LOG_OVERHEAD:
        return F_BATCH_SHORT
    h.base_offset = load_i64(p)
    h.leader_epoch = load_i32(p + V2_LEADER_EPOCH_AT)
    h.crc = load_u32(p + V2_CRC_AT)
    h.attributes = load_u16(p + V2_ATTRIBUTES_AT)
    h.last_offset_delta = load_i32(p + V2_LAST_OFFSET_DELTA_AT)
    h.last_offset = <int64_t>(<uint64_t>h.base_offset + <uint64_t><int64_t>h.last_offset_delta)
    h.first_timestamp = load_i64(p + V2_BASE_TIMESTAMP_AT)
    h.max_timestamp = load_i64(p + V2_MAX_TIMESTAMP_AT)
    h.producer_id = load_i64(p + V2_PRODUCER_ID_AT)
    h.producer_epoch = load_i16(p + V2_PRODUCER_EPOCH_AT)
    h.base_sequence = load_i32(p + V2_BASE_SEQUENCE_AT)
    h.count = load_i32(p + V2_RECORDS_COUNT_AT)
    if codec_of(h.attributes) > MAX_CODEC_ID:
        return F_CODEC
    if verify_crc:
        h.computed_crc = crc32c_raw(p + V2_ATTRIBUTES_AT, size - (V2_ATTRIBUTES_AT - LOG_OVERHEAD))
        if h.computed_crc != h.crc:
            return F_CRC
    if h.count < 0:
        return F_COUNT
    return ENTRY_OK


cdef bint count_fits(int32_t count, Py_ssize_t n) noexcept nogil:
    """Whether n bytes of records can hold `count` records (checked before
    anything is allocated for them)."""
    return count <= n // V2_MIN_RECORD


cdef int parse_v2_records(const uint8_t* base, const uint8_t** pp, const uint8_t* end,
                          int32_t count, int32_t first, int32_t stop, V2Base* v, Slot* slots,
                          FaultInfo* fi) noexcept nogil:
    """Validate records first to stop - 1 (of `count`) from *pp on, in
    [*pp, end), record where their fields are in slots[first:stop], and
    advance *pp past them; after the last record, nothing may follow."""
    cdef int32_t i
    cdef int st
    for i in range(first, stop):
        st = parse_v2_record(base, pp, end, count, i, v, &slots[i], fi, NULL, 0)
        if st:
            return st
        slots[i].sequence = record_sequence(v, slots[i].offset)
    return v2_records_end(base, pp[0], end, count, fi) if stop == count else OK


cdef int parse_legacy_message(const uint8_t* base, const uint8_t* p, const uint8_t* end,
                              LegacyMessage* m, FaultInfo* fi) noexcept nogil:
    """[p, end) is one message from its CRC on (size >= MIN_ENTRY_SIZE checked)."""
    m.crc = load_u32(p)
    m.magic = <int8_t>p[MESSAGE_MAGIC_AT]
    m.attributes = <int8_t>p[MESSAGE_ATTRIBUTES_AT]
    p += MESSAGE_FIELDS_AT
    m.timestamp = -1
    if m.magic == 1:
        if end - p < 8:
            return fail(fi, F_TRUNCATED, p, base, 0, 0)
        m.timestamp = load_i64(p)
        p += 8
    if end - p < 4:
        return fail(fi, F_TRUNCATED, p, base, 0, 0)
    m.key_len = load_i32(p)
    p += 4
    m.key_pos = p - base
    if m.key_len >= 0:
        if m.key_len > end - p:
            return fail(fi, F_TRUNCATED, p, base, 0, 0)
        p += m.key_len
    else:
        m.key_len = -1
    if end - p < 4:
        return fail(fi, F_TRUNCATED, p, base, 0, 0)
    m.value_len = load_i32(p)
    p += 4
    m.value_pos = p - base
    if m.value_len >= 0:
        if m.value_len > end - p:
            return fail(fi, F_TRUNCATED, p, base, 0, 0)
    else:
        m.value_len = -1
    return OK


cdef inline void message_slot(Slot* s, int64_t offset, LegacyMessage* m) noexcept nogil:
    """The record of the uncompressed v0/v1 message m, at `offset`."""
    s.offset = offset
    s.timestamp = m.timestamp
    s.ts_type = -1 if m.magic == 0 else timestamp_type_of(m.attributes)
    s.key_pos = m.key_pos
    s.key_len = m.key_len
    s.value_pos = m.value_pos
    s.value_len = m.value_len
    s.headers_pos = s.headers_end = 0
    s.headers_count = s.header_key_bytes = s.header_value_bytes = 0
    s.sequence = -1
    s.magic = m.magic


cdef bint legacy_entry_ok(const uint8_t* base, Py_ssize_t length, Py_ssize_t pos,
                          int64_t max_entry, bint verify_crc, bint compressed, LegacyMessage* m,
                          int32_t* size) noexcept nogil:
    """Whether the entry at pos is a v0/v1 message, compressed (by a codec
    magic 0/1 allows) or not as asked, that passes BatchReader's checks, the
    CRC last: m and *size are then its own. A wrapper's inner messages are
    checked apart (parse_inner)."""
    cdef const uint8_t* p = base + pos
    cdef int codec
    cdef FaultInfo fi
    if (entry_size(p, length - pos, max_entry, size) != ENTRY_OK
            or (p[MAGIC_AT] != 0 and p[MAGIC_AT] != 1)
            or parse_legacy_message(base, p + LOG_OVERHEAD, p + LOG_OVERHEAD + <Py_ssize_t>size[0],
                                    m, &fi)):
        return False
    codec = codec_of(m.attributes)
    if (codec != 0) != compressed or (compressed and (codec > 3 or m.value_len < 0)):
        return False
    return not verify_crc or crc32_raw(p + MAGIC_AT, size[0] - (MAGIC_AT - LOG_OVERHEAD)) == m.crc


cdef void wrapper_of(LegacyMessage* m, int64_t last_offset, Wrapper* w) noexcept nogil:
    w.magic = m.magic
    w.ts_type = -1 if m.magic == 0 else timestamp_type_of(m.attributes)
    w.last_offset = last_offset
    w.max_timestamp = m.timestamp


cdef int count_inner(const uint8_t* base, Py_ssize_t length, Py_ssize_t* n,
                     FaultInfo* fi) noexcept nogil:
    """How many whole inner messages a wrapper's decompressed records hold (a
    truncated last one is dropped, as Java does)."""
    cdef const uint8_t* p = base
    cdef const uint8_t* end = base + length
    cdef int32_t size
    n[0] = 0
    while end - p >= LOG_OVERHEAD:
        size = load_i32(p + ENTRY_SIZE_AT)
        if size < MIN_ENTRY_SIZE:
            return fail(fi, F_INNER_SIZE, p, base, size, 0)
        if size > end - p - LOG_OVERHEAD:
            break
        p += LOG_OVERHEAD + <Py_ssize_t>size
        n[0] += 1
    if n[0] == 0:
        return fail(fi, F_NO_INNER, p, base, 0, 0)
    return OK


cdef int parse_inner(const uint8_t* base, Py_ssize_t n, Wrapper* w, bint verify_crc, Slot* slots,
                     FaultInfo* fi) noexcept nogil:
    """The records of a wrapper's first n inner messages (count_inner's count),
    from its decompressed records at base."""
    cdef const uint8_t* p = base
    cdef const uint8_t* entry_end
    cdef int32_t size
    cdef LegacyMessage m
    cdef uint32_t computed
    cdef Py_ssize_t i
    cdef uint64_t shift
    cdef Slot* s
    for i in range(n):
        size = load_i32(p + ENTRY_SIZE_AT)
        entry_end = p + LOG_OVERHEAD + <Py_ssize_t>size
        if parse_legacy_message(base, p + LOG_OVERHEAD, entry_end, &m, fi):
            fi.code = F_INNER_FIELD                # where parse_legacy_message put it
            return F_INNER_FIELD
        if m.magic < 0 or m.magic > 1:
            return fail(fi, F_INNER_MAGIC, p + MAGIC_AT, base, m.magic, 0)
        if codec_of(m.attributes):
            return fail(fi, F_INNER_NESTED, p, base, 0, 0)
        if verify_crc:
            computed = crc32_raw(p + MAGIC_AT, size - (MAGIC_AT - LOG_OVERHEAD))
            if computed != m.crc:
                return fail(fi, F_INNER_CRC, p, base, m.crc, computed)
        s = &slots[i]
        message_slot(s, load_i64(p), &m)           # offset as stored; made absolute below
        if m.magic == 1:                           # an inner message's time is the wrapper's
            s.ts_type = w.ts_type
            s.timestamp = w.max_timestamp if w.ts_type == 1 else m.timestamp
        p = entry_end
    # magic 1: inner offsets are relative, the wrapper holds the last absolute one
    # (a wrapper offset of 0 means the inner offsets are to be used as they are).
    if w.magic == 1 and w.last_offset != 0:
        if w.last_offset < slots[n - 1].offset:
            return fail(fi, F_WRAPPER_OFFSET, p, base, slots[n - 1].offset, 0)
        shift = <uint64_t>w.last_offset - <uint64_t>slots[n - 1].offset
        for i in range(n):
            slots[i].offset = <int64_t>(<uint64_t>slots[i].offset + shift)
    return OK


cdef Py_ssize_t scan_messages(const uint8_t* base, Py_ssize_t length, Py_ssize_t* pos,
                              int64_t max_entry, bint verify_crc, int64_t start, int64_t last,
                              Slot* slots, Py_ssize_t most, Py_ssize_t most_bytes) noexcept nogil:
    """Parse the uncompressed v0/v1 messages from *pos on into `slots`, with
    no Batch object each: at most `most`, none but the first ending more than
    `most_bytes` past where it began. It stops at an entry that is not one or
    fails a check of BatchReader's, left at *pos for BatchReader to read (and
    raise what is wrong with it). Messages outside [start, last] are passed
    over. Returns how many slots it filled."""
    cdef Py_ssize_t n = 0, first = pos[0]
    cdef int32_t size
    cdef int64_t offset
    cdef LegacyMessage m
    while n < most:
        if (not legacy_entry_ok(base, length, pos[0], max_entry, verify_crc, False, &m, &size)
                or (n and pos[0] + LOG_OVERHEAD + size - first > most_bytes)):
            break
        offset = load_i64(base + pos[0])
        pos[0] += LOG_OVERHEAD + <Py_ssize_t>size
        if start <= offset <= last:
            message_slot(&slots[n], offset, &m)
            n += 1
    return n


# ------------------------------------------------------------ public objects

@cython.final
@cython.no_gc
cdef class ControlRecord:
    """The key (and, for transaction markers, value) of a control record."""
    cdef readonly str type
    cdef readonly int type_id
    cdef readonly int version
    cdef readonly object coordinator_epoch

    def __repr__(self):
        return (f"ControlRecord(type={self.type!r}, version={self.version}, "
                f"coordinator_epoch={self.coordinator_epoch})")


cdef str S_OFFSET = "offset", S_TIMESTAMP = "timestamp", S_KEY = "key", S_VALUE = "value"
cdef str S_HEADERS = "headers"


@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class Record:
    """One record. key/value are made on access; key_view/value_view are
    zero-copy views into the (possibly decompressed) buffer."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int32_t sequence
    cdef readonly int magic
    cdef readonly ControlRecord control
    cdef int8_t ts_type
    cdef Source src
    cdef Py_ssize_t key_pos, value_pos, headers_pos, headers_end
    cdef int32_t key_len, value_len, headers_count
    cdef tuple _headers

    def __init__(self, key=None, value=None, timestamp=-1, headers=(), *, offset=0):
        """A record made in Python (for encode); decoded ones skip this."""
        cdef bytes k = None if key is None else bytes(key)
        cdef bytes v = None if value is None else bytes(value)
        self.src = Source((k or b"") + (v or b""))
        self.key_pos = 0
        self.key_len = -1 if k is None else len(k)
        self.value_pos = 0 if k is None else len(k)
        self.value_len = -1 if v is None else len(v)
        self._headers = tuple((str(hk), None if hv is None else bytes(hv)) for hk, hv in headers)
        self.offset = offset
        self.timestamp = timestamp
        self.ts_type = 0 if timestamp >= 0 else -1
        self.sequence = -1
        self.magic = 2

    def __getattribute__(self, name):
        # CPython 3.11 does not specialize attribute reads through C getters;
        # answering the fields a consumer's loop reads here, by the interned
        # name's identity, skips the type lookup and descriptor call (a read
        # of offset: about 14 ns against 23). Other spellings reach the
        # properties below.
        if name is S_VALUE:
            return self._value()
        if name is S_OFFSET:
            return self.offset
        if name is S_KEY:
            return self._key()
        if name is S_TIMESTAMP:
            return self.timestamp
        if name is S_HEADERS:
            return self._headers_tuple()
        return PyObject_GenericGetAttr(self, name)

    cdef object _key(self):
        if self.key_len < 0:
            return None
        return PyBytes_FromStringAndSize(<const char*>self.src.base + self.key_pos, self.key_len)

    cdef object _value(self):
        if self.value_len < 0:
            return None
        return PyBytes_FromStringAndSize(<const char*>self.src.base + self.value_pos, self.value_len)

    @property
    def key(self):
        return self._key()

    @property
    def value(self):
        return self._value()

    @property
    def key_view(self):
        return None if self.key_len < 0 else self.src.slice(self.key_pos, self.key_len)

    @property
    def value_view(self):
        return None if self.value_len < 0 else self.src.slice(self.value_pos, self.value_len)

    @property
    def timestamp_type(self):
        return "NoTimestampType" if self.ts_type < 0 else TIMESTAMP_TYPES[self.ts_type]

    cdef tuple _headers_tuple(self):
        if self._headers is None:
            self._headers = decode_headers(self.src, self.headers_pos, self.headers_end,
                                           self.headers_count, self.offset)
        return self._headers

    @property
    def headers(self):
        return self._headers_tuple()

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r}"
                + (f", control={self.control!r})" if self.control is not None else ")"))


cdef tuple decode_headers(Source src, Py_ssize_t pos, Py_ssize_t end_pos, int32_t count,
                          int64_t offset):
    # Validated when the batch was read, but a mutable input (bytearray, mmap)
    # may have changed since: every read is bounded by the record again.
    cdef const uint8_t* p = src.base + pos
    cdef const uint8_t* end = src.base + end_pos
    cdef const uint8_t* key
    cdef const uint8_t* value
    cdef int32_t i, hk, hv
    cdef list out = []
    for i in range(count):
        if read_blob(&p, end, &key, &hk) or hk < 0 or read_blob(&p, end, &value, &hv):
            raise _changed_headers(offset)
        out.append((PyUnicode_DecodeUTF8(<const char*>key, hk, "replace"),
                    None if hv < 0 else PyBytes_FromStringAndSize(<const char*>value, hv)))
    return tuple(out)


cdef object _changed_headers(int64_t offset):
    return CorruptRecordError("record headers no longer fit the record: the input buffer "
                              "changed after it was read", offset=offset)


@cython.final
@cython.no_gc
cdef class Slots:
    """A parsed batch: where each record's fields are in `src`."""

    def __dealloc__(self):
        free(self.items)

    cdef int grow(self, Py_ssize_t count) except -1:
        cdef Slot* grown = <Slot*>realloc(self.items, count * sizeof(Slot))
        if grown == NULL:
            raise MemoryError()
        self.items = grown
        self.count = count
        return 0


cdef enum:
    FIRST_SLOTS = 4096


cdef Slots new_slots(Source src, Py_ssize_t count):
    cdef Slots slots = Slots.__new__(Slots)
    slots.src = src
    slots.count = count
    if count:
        slots.items = <Slot*>malloc(count * sizeof(Slot))
        if slots.items == NULL:
            raise MemoryError()
    return slots


cdef inline Record new_record(Source src, Slot* s):
    cdef Record r = Record.__new__(Record)
    r.src = src
    r.offset = s.offset
    r.timestamp = s.timestamp
    r.sequence = s.sequence
    r.magic = s.magic
    r.ts_type = s.ts_type
    r.key_pos = s.key_pos
    r.key_len = s.key_len
    r.value_pos = s.value_pos
    r.value_len = s.value_len
    r.headers_pos = s.headers_pos
    r.headers_end = s.headers_end
    r.headers_count = s.headers_count
    if s.headers_count == 0:
        r._headers = ()
    return r


@cython.final
@cython.no_gc
cdef class Batch:
    """One entry of a record set: a v2 record batch, or a v0/v1 message (a
    compressed v0/v1 message is a batch of its inner messages)."""
    @property
    def crc_valid(self):
        cdef Py_ssize_t start
        if self.crc_state < 0:
            start = self.position + (21 if self.magic == 2 else 16)
            if self.magic == 2:
                computed = crc32c_of(self.src.base + start, self.position + self.size - start)
            else:
                computed = crc32_of(self.src.base + start, self.position + self.size - start)
            self.crc_state = computed == self.crc
        return bool(self.crc_state)

    @property
    def compression(self):
        return CODECS[self.codec]

    @property
    def timestamp_type(self):
        return "NoTimestampType" if self.ts_type < 0 else TIMESTAMP_TYPES[self.ts_type]

    @property
    def is_transactional(self):
        return self.magic == 2 and bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self):
        return self.magic == 2 and bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self):
        if self.magic == 2 and self.attributes & ATTR_DELETE_HORIZON:
            return self.first_timestamp
        return None

    @property
    def base_offset(self):
        if self.magic < 2 and self.codec != 0:
            return self._loaded()[0].offset
        return self._base_offset

    @property
    def next_offset(self):
        return self.last_offset + 1

    @property
    def count(self):
        if self._count < 0:
            self._count = len(self._loaded())
        return self._count

    @property
    def last_sequence(self):
        return seq_add(self.base_sequence, self.last_offset_delta)

    @property
    def records_data(self):
        """Zero-copy view of the records section as stored (compressed or not)."""
        return self.src.slice(self.payload_pos, self.payload_len)

    def records(self):
        """All records of the batch (decompressing and validating once)."""
        return list(self._loaded())

    def __iter__(self):
        # A data batch's records are made as they are reached (as read_records
        # makes them), unless records() or len() has made them already.
        if self._records is not None or (self.attributes & ATTR_CONTROL and self.magic == 2):
            return iter(self._loaded())
        return RecordIterator((self,), True)

    def __len__(self):
        return self.count

    def __repr__(self):
        return (f"Batch(magic={self.magic}, offsets={self._base_offset}..{self.last_offset}, "
                f"compression={self.compression!r}, position={self.position}, size={self.size})")

    cdef object _first_offset_hint(self):
        return self._base_offset if self.magic == 2 else self.last_offset

    cdef list _loaded(self):
        cdef Slots slots
        cdef Py_ssize_t i
        if self._records is None:
            slots = self.parsed()
            records = [new_record(slots.src, &slots.items[i]) for i in range(slots.count)]
            if self.attributes & ATTR_CONTROL and self.magic == 2:
                try:
                    for r in records:
                        (<Record>r).control = parse_control(<Record>r, self)
                except KafkaFormatError as exc:
                    raise located(exc, self.source, self.first_byte) from None
            self._records = records
        return self._records

    cdef Source _decompressed(self):
        try:
            out = decompress_in_python(self.codec, self.records_data, self.max_decompressed,
                                       self.magic)
        except KafkaFormatError as exc:
            exc.position = self.position
            exc.offset = self._first_offset_hint()
            exc.args = (exc._describe(),)
            raise
        return as_source(out)

    cdef Slots parsed(self):
        """Decompress (if needed) and validate every record, once per call."""
        try:
            return self._parse()
        except KafkaFormatError as exc:
            raise located(exc, self.source, self.first_byte) from None

    cdef Slots _parse(self):
        if self.magic == 2:
            return self._parse_v2()
        if self.codec == 0:
            return self._parse_message()
        if self.msg.value_len < 0:
            raise CorruptRecordError("compressed message has a null value",
                                     position=self.position, offset=self.last_offset)
        return self._parse_wrapper(self._decompressed())

    cdef Source records_source(self, Py_ssize_t* pos, Py_ssize_t* n):
        """A v2 batch's records, decompressed if need be, at [*pos, *pos + *n) of
        the Source returned; raises when they cannot hold the declared count."""
        cdef Source data = self.src
        pos[0] = self.payload_pos
        n[0] = self.payload_len
        if self._count and self.codec != 0:
            data = self._decompressed()
            pos[0] = 0
            n[0] = data.length
        if not count_fits(self._count, n[0]):
            raise CorruptRecordError(
                f"batch declares {self._count} records but its {n[0]} bytes of records hold at "
                f"most {n[0] // V2_MIN_RECORD}", position=self.position, offset=self._base_offset)
        return data

    cdef void v2_base(self, V2Base* v):
        v.offset = self._base_offset
        v.timestamp = self.first_timestamp
        v.max_timestamp = self.max_timestamp
        v.ts_type = self.ts_type
        v.sequence = self.base_sequence

    cdef Slots _parse_v2(self):
        cdef Py_ssize_t pos, n
        cdef Source data = self.records_source(&pos, &n)
        cdef int32_t count = self._count
        cdef V2Base v
        cdef FaultInfo fi
        # A count is only known to fit the bytes (7 a record at least); a
        # slot is many times that, so the slots grow as records are found.
        cdef Slots slots = new_slots(data, min(count, FIRST_SLOTS))
        cdef const uint8_t* p = data.base + pos
        cdef int32_t done = 0
        cdef int st
        if count == 0:
            return slots
        self.v2_base(&v)
        while True:
            if n < NOGIL_MIN_BYTES:
                st = parse_v2_records(data.base, &p, data.base + pos + n, count, done,
                                      <int32_t>slots.count, &v, slots.items, &fi)
            else:
                with nogil:
                    st = parse_v2_records(data.base, &p, data.base + pos + n, count, done,
                                          <int32_t>slots.count, &v, slots.items, &fi)
            if st:
                raise_fault(&fi, self, self.codec != 0)
            if slots.count == count:
                return slots
            done = <int32_t>slots.count
            slots.grow(min(count, 4 * slots.count))

    cdef Slots _parse_message(self):
        cdef Slots slots = new_slots(self.src, 1)
        message_slot(&slots.items[0], self.last_offset, &self.msg)
        return slots

    cdef Slots _parse_wrapper(self, Source inner):
        cdef Wrapper w
        cdef FaultInfo fi
        cdef Py_ssize_t n = 0
        cdef Slots slots
        cdef int st
        wrapper_of(&self.msg, self.last_offset, &w)
        if count_inner(inner.base, inner.length, &n, &fi):
            self._inner_fault(&fi)
        slots = new_slots(inner, n)
        if inner.length < NOGIL_MIN_BYTES:
            st = parse_inner(inner.base, n, &w, self.verify_crc, slots.items, &fi)
        else:
            with nogil:
                st = parse_inner(inner.base, n, &w, self.verify_crc, slots.items, &fi)
        if st:
            self._inner_fault(&fi)
        self._count = n
        return slots

    cdef _inner_fault(self, FaultInfo* fi):
        where = f"byte {fi.where} of the decompressed {self.compression} records"
        if fi.code == F_INNER_MAGIC:
            raise UnsupportedFormatError(f"inner message has magic {fi.a} ({where})",
                                         position=self.position, offset=self.last_offset)
        if fi.code == F_INNER_CRC:
            raise CrcMismatchError(
                f"inner message CRC-32 {fi.a:#010x} != computed {fi.b:#010x} ({where})",
                stored=fi.a, computed=fi.b, position=self.position, offset=self.last_offset)
        text = {
            F_INNER_SIZE: f"inner message size {fi.a} is below {MIN_ENTRY_SIZE} ({where})",
            F_NO_INNER: "compressed message holds no inner messages",
            F_INNER_FIELD: f"inner message field runs past its end ({where})",
            F_INNER_NESTED: f"nested compression in an inner message ({where})",
            F_WRAPPER_OFFSET: f"wrapper offset {self.last_offset} is below its last inner "
                              f"offset {fi.a}",
        }[fi.code]
        raise CorruptRecordError(text, position=self.position, offset=self.last_offset)


cdef ControlRecord parse_control(Record r, Batch batch):
    cdef ControlRecord c = ControlRecord.__new__(ControlRecord)
    cdef const uint8_t* k = r.src.base + r.key_pos
    cdef const uint8_t* v = r.src.base + r.value_pos
    cdef int16_t key_version, value_version
    if r.key_len < 4:
        raise CorruptRecordError(f"control record key has {r.key_len} bytes, needs 4",
                                 position=batch.position, offset=r.offset)
    key_version = load_i16(k)
    if key_version < 0:
        raise CorruptRecordError(f"control record key version {key_version} is negative",
                                 position=batch.position, offset=r.offset)
    c.type_id = load_i16(k + 2)
    c.version = key_version
    c.type = CONTROL_TYPES[c.type_id] if 0 <= c.type_id < len(CONTROL_TYPES) else "UNKNOWN"
    if c.type_id <= 1:
        if r.value_len < 6:
            raise CorruptRecordError(
                f"end transaction marker has {r.value_len} bytes, needs 6",
                position=batch.position, offset=r.offset)
        value_version = load_i16(v)
        if value_version < 0:
            raise CorruptRecordError(
                f"end transaction marker version {value_version} is negative",
                position=batch.position, offset=r.offset)
        c.coordinator_epoch = load_i32(v + 2)
    return c


# --------------------------------------------------------------- scanning

cdef inline object int_option(str name, value):
    """integer_option, without its call for an int: decode_many makes a
    BatchReader per record set."""
    return value if type(value) is int else integer_option(name, value)


@cython.final
@cython.no_gc
cdef class BatchReader:
    """Iterates the entries of a record set, verifying CRCs as it goes. With
    `source`, the input is a slice of that file from its byte `first_byte`:
    errors, in the framing or later in a batch's records, name the file and
    the byte in it."""

    def __init__(self, data, *, bint verify_crc=True,
                 max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                 partial="stop", max_entry_bytes=None, source=None, Py_ssize_t first_byte=0):
        if partial not in ("stop", "error"):
            raise ValueError(f"partial must be 'stop' or 'error', not {partial!r}")
        max_decompressed_bytes = int_option("max_decompressed_bytes", max_decompressed_bytes)
        if max_decompressed_bytes < 0:
            raise ValueError("max_decompressed_bytes must not be negative")
        self.src = as_source(data)
        self.pos = 0
        self.verify_crc = verify_crc
        self.partial_error = partial == "error"
        self.max_decompressed = max_decompressed_bytes
        self.max_entry = (0x7FFFFFFF if max_entry_bytes is None
                          else int_option("max_entry_bytes", max_entry_bytes))
        self.source = None if source is None else str(source)
        self.first_byte = first_byte

    def __iter__(self):
        return self

    @property
    def position(self):
        """Byte position where the next entry starts (where a partial entry begins)."""
        return self.pos

    def __next__(self):
        try:
            return self._next_entry()
        except KafkaFormatError as exc:
            raise located(exc, self.source, self.first_byte) from None

    cdef Batch _next_entry(self):
        cdef const uint8_t* p = self.src.base + self.pos
        cdef Py_ssize_t remaining = self.src.length - self.pos
        cdef int32_t size
        cdef int magic
        cdef int st = entry_size(p, remaining, self.max_entry, &size)
        if st == ENTRY_END:
            self._partial(remaining, size)
            raise StopIteration
        if st == F_ENTRY_TOO_SMALL:
            raise CorruptRecordError(f"entry size {size} is below the minimum {MIN_ENTRY_SIZE}",
                                     position=self.pos, offset=load_i64(p))
        if st == F_ENTRY_TOO_LARGE:
            raise CorruptRecordError(f"entry size {size} exceeds the maximum {self.max_entry}",
                                     position=self.pos, offset=load_i64(p))
        magic = <int8_t>p[MAGIC_AT]
        if magic < 0 or magic > 2:
            raise UnsupportedFormatError(f"unknown magic {magic}", position=self.pos + MAGIC_AT,
                                         offset=load_i64(p))
        batch = self._v2(p, size) if magic == 2 else self._legacy(p, size, magic)
        self.pos += LOG_OVERHEAD + <Py_ssize_t>size
        return batch

    cdef _partial(self, Py_ssize_t remaining, int32_t size):
        if remaining and self.partial_error:
            need = (f"{max(<Py_ssize_t>size + LOG_OVERHEAD, HEADER_UP_TO_MAGIC)} bytes" if size >= 0
                    else f"at least {LOG_OVERHEAD} bytes")
            raise CorruptRecordError(
                f"partial trailing entry: {remaining} bytes left, the entry needs {need}",
                position=self.pos)

    cdef Batch _new_batch(self, const uint8_t* p, int32_t size, int magic):
        cdef Batch b = Batch.__new__(Batch)
        b.magic = magic
        b.src = self.src
        b.position = self.pos
        b.size = <Py_ssize_t>size + LOG_OVERHEAD
        b.max_decompressed = self.max_decompressed
        b.verify_crc = self.verify_crc
        b.source = self.source
        b.first_byte = self.first_byte
        b.crc = load_u32(p + LOG_OVERHEAD if magic < 2 else p + V2_CRC_AT)
        return b

    cdef Batch _v2(self, const uint8_t* p, int32_t size):
        cdef V2Header h
        cdef Batch b
        cdef int st
        if size < NOGIL_MIN_BYTES:
            st = read_v2_header(p, size, self.verify_crc, &h)
        else:
            with nogil:
                st = read_v2_header(p, size, self.verify_crc, &h)
        if st == F_BATCH_SHORT:
            raise CorruptRecordError(
                f"record batch is {size + LOG_OVERHEAD} bytes, shorter than its {V2_HEADER}-byte header",
                position=self.pos, offset=load_i64(p))
        if st == F_CODEC:
            raise UnsupportedFormatError(f"unknown compression codec id {codec_of(h.attributes)}",
                                         position=self.pos + V2_ATTRIBUTES_AT, offset=h.base_offset)
        if st == F_CRC:
            raise CrcMismatchError(
                f"record batch CRC-32C {h.crc:#010x} != computed {h.computed_crc:#010x}",
                stored=h.crc, computed=h.computed_crc, position=self.pos, offset=h.base_offset)
        if st == F_COUNT:
            raise CorruptRecordError(f"records count {h.count} is negative",
                                     position=self.pos + V2_RECORDS_COUNT_AT, offset=h.base_offset)
        b = self._new_batch(p, size, 2)
        b._base_offset = h.base_offset
        b.partition_leader_epoch = h.leader_epoch
        b.attributes = h.attributes
        b.last_offset_delta = h.last_offset_delta
        b.last_offset = h.last_offset
        b.first_timestamp = h.first_timestamp
        b.max_timestamp = h.max_timestamp
        b.producer_id = h.producer_id
        b.producer_epoch = h.producer_epoch
        b.base_sequence = h.base_sequence
        b._count = h.count
        b.payload_pos = self.pos + V2_HEADER
        b.payload_len = <Py_ssize_t>size + LOG_OVERHEAD - V2_HEADER
        b.ts_type = timestamp_type_of(h.attributes)
        b.codec = codec_of(h.attributes)
        b.crc_state = 1 if self.verify_crc else -1
        return b

    cdef Batch _legacy(self, const uint8_t* p, int32_t size, int magic):
        cdef FaultInfo fi
        cdef uint32_t computed
        cdef Batch b = self._new_batch(p, size, magic)
        cdef const uint8_t* base = self.src.base
        b.last_offset = load_i64(p)
        b._base_offset = b.last_offset
        b.partition_leader_epoch = -1
        b.producer_id = -1
        b.producer_epoch = -1
        b.base_sequence = -1
        b.last_offset_delta = 0
        if parse_legacy_message(base, p + LOG_OVERHEAD, p + LOG_OVERHEAD + <Py_ssize_t>size, &b.msg, &fi):
            raise CorruptRecordError(f"message field runs past the end of the {size}-byte message",
                                     position=fi.where, offset=b.last_offset)
        b.attributes = <uint8_t>b.msg.attributes
        b.codec = codec_of(b.attributes)
        if b.codec > MAX_CODEC_ID:
            raise UnsupportedFormatError(f"unknown compression codec id {b.codec}",
                                         position=self.pos + LOG_OVERHEAD + MESSAGE_ATTRIBUTES_AT,
                                         offset=b.last_offset)
        if b.codec == CODEC_ZSTD:
            raise UnsupportedFormatError(f"zstd is not allowed in magic {magic} messages",
                                         position=self.pos + LOG_OVERHEAD + MESSAGE_ATTRIBUTES_AT,
                                         offset=b.last_offset)
        b.ts_type = -1 if magic == 0 else timestamp_type_of(b.attributes)
        b.first_timestamp = b.msg.timestamp
        b.max_timestamp = b.msg.timestamp
        b._count = 1 if b.codec == 0 else -1
        b.payload_pos = b.msg.value_pos
        b.payload_len = max(b.msg.value_len, 0)
        b.crc_state = -1
        if self.verify_crc:
            computed = crc32_of(p + MAGIC_AT, size - (MAGIC_AT - LOG_OVERHEAD))
            b.crc_state = computed == b.crc
            if not b.crc_state:
                raise CrcMismatchError(f"message CRC-32 {b.crc:#010x} != computed {computed:#010x}",
                                       stored=b.crc, computed=computed, position=self.pos,
                                       offset=b.last_offset)
        return b


def overlaps(Batch batch, start_offset, end_offset):
    """Whether `batch` may hold an offset in [start_offset, end_offset)
    (None: unbounded; any integers), by batch_in_bounds, the rule every reader
    applies."""
    if ((start_offset is not None and start_offset > INT64_MAX)
            or (end_offset is not None and end_offset <= INT64_MIN)):
        return False
    if start_offset is not None and start_offset < INT64_MIN:
        start_offset = None
    if end_offset is not None and end_offset > INT64_MAX:
        end_offset = None
    return batch_in_bounds(batch._base_offset, batch.last_offset,
                           not (batch.magic < 2 and batch.codec != 0),
                           INT64_MIN if start_offset is None else start_offset,
                           last_offset_below(end_offset))


cdef int64_t last_offset_below(end_offset) except? -1:
    """The last offset an exclusive end_offset (as offset_bounds in
    kcodec/records.py fits it) lets through: the core's offset bounds are
    inclusive, since INT64_MAX is an offset too, not "no bound"."""
    return INT64_MAX if end_offset is None else end_offset - 1


@cython.final
cdef class RecordIterator:
    """Flattens batches into records (skipping control batches unless asked,
    and records outside [start_offset, end_offset)) without a Python
    generator frame per record. A data batch's records are made one at a time
    from its parsed slots, so each is made just before it is used."""
    cdef object batches
    cdef bint include_control
    cdef int64_t start_offset, last_offset
    cdef Slots slots                     # the current data batch's
    cdef list controls                   # or the current control batch's records
    cdef Py_ssize_t index, count

    def __init__(self, batches, bint include_control=False, start_offset=None, end_offset=None):
        self.batches = iter(batches)
        self.include_control = include_control
        self.start_offset = INT64_MIN if start_offset is None else start_offset
        self.last_offset = last_offset_below(end_offset)
        self.index = self.count = 0

    def __iter__(self):
        return self

    def __next__(self):
        cdef Batch batch
        cdef Slot* s
        cdef Record record
        while True:
            while self.index >= self.count:
                batch = next(self.batches)
                self.index = self.count = 0
                if batch.attributes & ATTR_CONTROL and batch.magic == 2:
                    if not self.include_control:
                        continue
                    self.slots = None
                    self.controls = batch._loaded()      # validates every control key
                    self.count = len(self.controls)
                else:
                    self.slots = batch.parsed()
                    self.count = self.slots.count
            if self.slots is not None:
                s = &self.slots.items[self.index]
                self.index += 1
                if self.start_offset <= s.offset <= self.last_offset:
                    return new_record(self.slots.src, s)
            else:
                record = self.controls[self.index]
                self.index += 1
                if self.start_offset <= record.offset <= self.last_offset:
                    return record
