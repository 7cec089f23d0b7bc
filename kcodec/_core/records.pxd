# Shared layouts of the decoding core, for the modules that cimport it
# (columns.pyx builds Arrow columns from the same parsed batches).
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t

from kcodec._core.wire cimport (
    HEADER_UP_TO_MAGIC, LOG_OVERHEAD, V2_HEADER, FaultInfo, OK, F_TRUNCATED, F_RECORD_LENGTH,
    F_RECORD_SIZE, F_HEADER_COUNT, F_HEADER_KEY_NULL,
    F_TOO_FEW_RECORDS, F_TRAILING_BYTES, F_FIELD_PAST_RECORD, read_blob, read_varint, read_varlong,
)


cdef enum:
    MIN_ENTRY_SIZE = 14           # smallest v0 message; Java enforces it for every magic
    V2_MIN_RECORD = 7             # length, attributes, ts, offset, key, value, headers: 1 byte each
    NOGIL_MIN_BYTES = 4096        # below this, releasing the GIL costs more than it frees


cdef struct Slot:                 # where one record's fields are in its Source
    int64_t offset
    int64_t timestamp
    Py_ssize_t key_pos
    Py_ssize_t value_pos
    Py_ssize_t headers_pos
    Py_ssize_t headers_end        # the record's end
    int32_t key_len               # -1: null
    int32_t value_len
    int32_t headers_count
    int32_t header_key_bytes      # all its header keys' bytes
    int32_t header_value_bytes    # all its (non-null) header values' bytes
    int32_t sequence              # set by parse_v2_records and message_slot, not parse_v2_record
    int8_t magic
    int8_t ts_type                # -1 none, 0 CreateTime, 1 LogAppendTime


cdef struct HeaderAt:             # where one header's key and value are (length -1: null)
    const uint8_t* key
    const uint8_t* value
    int32_t key_len
    int32_t value_len


cdef struct V2Base:               # what a v2 batch's records are relative to
    int64_t offset
    int64_t timestamp
    int64_t max_timestamp         # every record's timestamp under LogAppendTime
    int8_t ts_type
    int32_t sequence


cdef enum EntryStatus:           # what entry_size / read_v2_header find
    ENTRY_OK = 0
    ENTRY_END = 20                # nothing, or only part of an entry, is left
    F_ENTRY_TOO_SMALL = 21
    F_ENTRY_TOO_LARGE = 22
    F_BATCH_SHORT = 23            # a v2 batch shorter than its header
    F_CODEC = 24
    F_CRC = 25
    F_COUNT = 26


cdef struct V2Header:
    int64_t base_offset
    int32_t leader_epoch
    uint32_t crc
    uint32_t computed_crc         # only when verified
    int attributes
    int32_t last_offset_delta
    int64_t last_offset           # base_offset + last_offset_delta, wrapping as Java's long does
    int64_t first_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t count


cdef int entry_size(const uint8_t* p, Py_ssize_t remaining, int64_t max_entry,
                    int32_t* size) noexcept nogil
cdef int read_v2_header(const uint8_t* p, int32_t size, bint verify_crc,
                        V2Header* h) noexcept nogil
cdef bint count_fits(int32_t count, Py_ssize_t n) noexcept nogil
cdef inline int fail(FaultInfo* fi, int code, const uint8_t* at, const uint8_t* base,
                     int64_t a, int64_t b) noexcept nogil:
    fi.code = code
    fi.where = at - base
    fi.a = a
    fi.b = b
    return code


cdef inline int32_t seq_add(int32_t base, int32_t delta) noexcept nogil:
    # Producer sequences wrap from INT32_MAX back to 0.
    cdef int64_t s
    if base < 0:
        return -1
    s = <int64_t>base + delta
    if s > 0x7FFFFFFF:
        s -= <int64_t>0x7FFFFFFF + 1
    return <int32_t>s


cdef inline int32_t record_sequence(V2Base* v, int64_t offset) noexcept nogil:
    """The sequence of a v2 record at `offset`: its batch's base sequence
    advanced by its offset delta. Not part of parse_v2_record, which would pay
    for it on every record: most readers never ask for it."""
    return seq_add(v.sequence, <int32_t>(<uint64_t>offset - <uint64_t>v.offset))


cdef inline int32_t seq_advance(int32_t base, int64_t step) noexcept nogil:
    """base advanced by `step` (>= 0) offsets, a step that may pass INT32_MAX."""
    return seq_add(base, <int32_t>(step % (<int64_t>0x7FFFFFFF + 1)))


cdef inline int past_record(int st) noexcept nogil:
    return F_FIELD_PAST_RECORD if st == F_TRUNCATED else st


cdef inline int parse_v2_record(const uint8_t* base, const uint8_t** pp, const uint8_t* end,
                                int32_t count, int32_t i, V2Base* v, Slot* s,
                                FaultInfo* fi, HeaderAt* kept,
                                int32_t kept_room) noexcept nogil:
    """Validate record i (of count) of a v2 batch, at *pp in [*pp, end), and
    record where its fields are, and its first kept_room headers in kept;
    advances *pp past it. The one parser of v2 records: the object API and
    the Arrow columns both call it."""
    cdef int32_t j, length, key_len, value_len, n_headers, offset_delta, hk, hv
    cdef int32_t key_bytes = 0, value_bytes = 0
    cdef int64_t ts_delta
    cdef const uint8_t* p = pp[0]
    cdef const uint8_t* rec_end
    cdef const uint8_t* start = p    # the record's first byte (its length varint)
    cdef const uint8_t* field        # the field being read, for error positions
    cdef const uint8_t* key
    cdef const uint8_t* value
    cdef const uint8_t* header_key
    cdef const uint8_t* header_value
    cdef int st
    if p >= end:
        return fail(fi, F_TOO_FEW_RECORDS, p, base, count, i)
    st = read_varint(&p, end, &length)
    if st:
        return fail(fi, st, start, base, 0, 0)
    if length < 0 or length > end - p:
        return fail(fi, F_RECORD_LENGTH, start, base, length, end - p)
    rec_end = p + length
    field = p
    if p >= rec_end:
        return fail(fi, F_FIELD_PAST_RECORD, p, base, 0, 0)
    p += 1                                      # attributes: unused
    field = p
    st = read_varlong(&p, rec_end, &ts_delta)
    if st == OK:
        field = p
        st = read_varint(&p, rec_end, &offset_delta)
    if st == OK:
        field = p
        st = read_blob(&p, rec_end, &key, &key_len)
    if st == OK:
        field = p
        st = read_blob(&p, rec_end, &value, &value_len)
    if st == OK:
        field = p
        st = read_varint(&p, rec_end, &n_headers)
    if st:
        return fail(fi, past_record(st), field, base, 0, 0)
    if n_headers < 0 or n_headers > rec_end - p:
        return fail(fi, F_HEADER_COUNT, field, base, n_headers, rec_end - p)
    s.headers_pos = p - base
    for j in range(n_headers):
        field = p
        st = read_blob(&p, rec_end, &header_key, &hk)
        if st == OK and hk < 0:
            return fail(fi, F_HEADER_KEY_NULL, field, base, hk, 0)
        if st == OK:
            field = p
            st = read_blob(&p, rec_end, &header_value, &hv)
        if st:
            return fail(fi, past_record(st), field, base, 0, 0)
        if j < kept_room:
            kept[j].key = header_key
            kept[j].key_len = hk
            kept[j].value = header_value
            kept[j].value_len = hv
        key_bytes += hk
        if hv > 0:
            value_bytes += hv
    if p != rec_end:
        return fail(fi, F_RECORD_SIZE, start, base, length, p - (rec_end - length))
    s.headers_end = rec_end - base
    s.key_pos = key - base
    s.value_pos = value - base
    s.offset = <int64_t>(<uint64_t>v.offset + <uint64_t><int64_t>offset_delta)
    s.timestamp = v.max_timestamp if v.ts_type == 1 else <int64_t>(<uint64_t>v.timestamp + <uint64_t>ts_delta)
    s.ts_type = v.ts_type
    s.key_len = key_len
    s.value_len = value_len
    s.headers_count = n_headers
    s.header_key_bytes = key_bytes
    s.header_value_bytes = value_bytes
    s.magic = 2
    pp[0] = rec_end     # p, as checked: the next record need not wait on this one's fields
    return OK


cdef inline int v2_records_end(const uint8_t* base, const uint8_t* p, const uint8_t* end,
                               int32_t count, FaultInfo* fi) noexcept nogil:
    """After a batch's last record: nothing may follow it."""
    if p != end:
        return fail(fi, F_TRAILING_BYTES, p, base, end - p, count)
    return OK


cdef struct LegacyMessage:
    uint32_t crc
    int8_t magic
    int8_t attributes
    int64_t timestamp
    Py_ssize_t key_pos
    Py_ssize_t value_pos
    int32_t key_len
    int32_t value_len


cdef struct Wrapper:              # what a compressed v0/v1 message gives its inner messages
    int8_t magic
    int8_t ts_type
    int64_t last_offset
    int64_t max_timestamp


cdef enum InnerFault:             # what count_inner / parse_inner find wrong in a wrapper
    F_INNER_SIZE = 30             # a: the size
    F_NO_INNER = 31
    F_INNER_FIELD = 32
    F_INNER_MAGIC = 33            # a: the magic
    F_INNER_NESTED = 34
    F_INNER_CRC = 35              # a: stored, b: computed
    F_WRAPPER_OFFSET = 36         # a: the last inner offset


cdef bint legacy_entry_ok(const uint8_t* base, Py_ssize_t length, Py_ssize_t pos,
                          int64_t max_entry, bint verify_crc, bint compressed, LegacyMessage* m,
                          int32_t* size) noexcept nogil
cdef void wrapper_of(LegacyMessage* m, int64_t last_offset, Wrapper* w) noexcept nogil
cdef int count_inner(const uint8_t* base, Py_ssize_t length, Py_ssize_t* n,
                     FaultInfo* fi) noexcept nogil
cdef int parse_inner(const uint8_t* base, Py_ssize_t n, Wrapper* w, bint verify_crc, Slot* slots,
                     FaultInfo* fi) noexcept nogil
cdef int64_t last_offset_below(end_offset) except? -1
cdef object decompress_in_python(int codec, data, int64_t limit, int magic)
cdef object compress_in_python(int codec, data, level, int magic)


cdef inline bint batch_in_bounds(int64_t first, int64_t last, bint first_known, int64_t start,
                                 int64_t last_wanted) noexcept nogil:
    """The offset-bounds rule for whole entries, one place for every reader:
    whether a batch (or v0/v1 entry) whose offsets run from `first` to `last`
    may hold an offset in [start, last_wanted], so must be read. A compressed
    v0/v1 wrapper's first offset is known only inside it (first_known false),
    and a wrapper whose last offset is 0 (as producers write them) tells
    nothing of its offsets."""
    if not first_known and last == 0:
        return True
    return last >= start and (not first_known or first <= last_wanted)
cdef Py_ssize_t scan_messages(const uint8_t* base, Py_ssize_t length, Py_ssize_t* pos,
                              int64_t max_entry, bint verify_crc, int64_t start, int64_t last,
                              Slot* slots, Py_ssize_t most, Py_ssize_t most_bytes) noexcept nogil


cdef class Source:
    cdef Py_buffer view
    cdef bint acquired
    cdef const unsigned char* base
    cdef Py_ssize_t length
    cdef object slice(self, Py_ssize_t pos, Py_ssize_t n)


cdef class Slots:
    cdef Source src
    cdef Slot* items
    cdef Py_ssize_t count
    cdef int grow(self, Py_ssize_t count) except -1


cdef class Batch:
    cdef readonly int magic
    cdef readonly int64_t last_offset
    cdef readonly int64_t first_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t partition_leader_epoch
    cdef readonly uint32_t crc
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size
    cdef readonly int attributes
    cdef int8_t crc_state          # 1 valid, 0 invalid, -1 not checked yet
    cdef int codec
    cdef int8_t ts_type
    cdef int64_t _base_offset
    cdef int32_t _count            # -1 until known (legacy wrappers)
    cdef int32_t last_offset_delta
    cdef Source src
    cdef Py_ssize_t payload_pos, payload_len
    cdef LegacyMessage msg         # legacy entries only
    cdef int64_t max_decompressed
    cdef bint verify_crc
    cdef list _records
    cdef object source             # the file it was read from, when known (for errors)
    cdef Py_ssize_t first_byte     # ... and that file's byte where its input starts

    cdef object _first_offset_hint(self)
    cdef list _loaded(self)
    cdef Source _decompressed(self)
    cdef Slots parsed(self)
    cdef Slots _parse(self)
    cdef Source records_source(self, Py_ssize_t* pos, Py_ssize_t* n)
    cdef void v2_base(self, V2Base* v)
    cdef Slots _parse_v2(self)
    cdef Slots _parse_message(self)
    cdef Slots _parse_wrapper(self, Source inner)
    cdef _inner_fault(self, FaultInfo* fi)


cdef object raise_fault(FaultInfo* fi, Batch batch, bint decompressed)
cdef int raise_for_status(int st, Py_ssize_t position) except -1


cdef class BatchReader:
    cdef Source src
    cdef Py_ssize_t pos
    cdef bint verify_crc
    cdef bint partial_error
    cdef int64_t max_decompressed
    cdef int64_t max_entry
    cdef object source
    cdef Py_ssize_t first_byte

    cdef Batch _next_entry(self)
    cdef _partial(self, Py_ssize_t remaining, int32_t size)
    cdef Batch _new_batch(self, const uint8_t* p, int32_t size, int magic)
    cdef Batch _v2(self, const uint8_t* p, int32_t size)
    cdef Batch _legacy(self, const uint8_t* p, int32_t size, int magic)
