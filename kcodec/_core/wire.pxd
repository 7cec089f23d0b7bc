# Byte-level helpers shared by every core module: big-endian loads/stores and
# bounded zigzag varints. Every read takes an end pointer; a read that would pass
# it returns a fault code instead of touching memory.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t
from libc.string cimport memcpy

cdef enum Fault:
    OK = 0
    F_TRUNCATED = 1          # a field runs past the end of its enclosing region
    F_VARINT_TOO_LONG = 2



# Kafka's record sets, as offsets from the start of an entry. A record set is
# entries back to back, each [int64 offset][int32 size][size bytes], and byte
# MAGIC_AT of every entry is its magic (see records.pyx for the fields).
cdef enum:
    ENTRY_SIZE_AT = 8              # int32: the bytes after LOG_OVERHEAD
    LOG_OVERHEAD = 12              # the offset and size, before an entry's bytes
    MAGIC_AT = 16                  # int8, in every format
    HEADER_UP_TO_MAGIC = 17
    # magic 2: a RecordBatch
    V2_LEADER_EPOCH_AT = 12        # int32
    V2_CRC_AT = 17                 # uint32: CRC-32C of [V2_ATTRIBUTES_AT, the end)
    V2_ATTRIBUTES_AT = 21          # int16
    V2_LAST_OFFSET_DELTA_AT = 23   # int32
    V2_BASE_TIMESTAMP_AT = 27      # int64
    V2_MAX_TIMESTAMP_AT = 35       # int64
    V2_PRODUCER_ID_AT = 43         # int64
    V2_PRODUCER_EPOCH_AT = 51      # int16
    V2_BASE_SEQUENCE_AT = 53       # int32
    V2_RECORDS_COUNT_AT = 57       # int32
    V2_HEADER = 61                 # the records (or their compressed stream) start here
    # magic 0 and 1: a message, from its CRC (entry byte LOG_OVERHEAD) on
    MESSAGE_MAGIC_AT = 4           # int8; the CRC-32 covers the message from here
    MESSAGE_ATTRIBUTES_AT = 5      # int8
    MESSAGE_FIELDS_AT = 6          # [int64 timestamp, magic 1 only], key, value


# The attribute bits: a v2 batch's int16, a message's int8.
cdef enum:
    ATTR_CODEC_MASK = 0x07         # the compression codec's id
    ATTR_LOG_APPEND_TIME = 0x08    # the timestamp type: set, LogAppendTime; clear, CreateTime
    ATTR_TRANSACTIONAL = 0x10      # v2 only
    ATTR_CONTROL = 0x20            # v2 only
    ATTR_DELETE_HORIZON = 0x40     # v2 only: the base timestamp is a delete horizon


cdef enum:                         # Codec: the ids under ATTR_CODEC_MASK
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4                 # magic 2 only
    MAX_CODEC_ID = 4


cdef inline int codec_of(int attributes) noexcept nogil:
    return attributes & ATTR_CODEC_MASK

cdef inline int8_t timestamp_type_of(int attributes) noexcept nogil:
    """0 CreateTime, 1 LogAppendTime (what timestampType columns hold)."""
    return 1 if attributes & ATTR_LOG_APPEND_TIME else 0

cdef inline uint16_t load_u16(const uint8_t* p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]

cdef inline uint32_t load_u32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) |
            (<uint32_t>p[2] << 8) | <uint32_t>p[3])

cdef inline uint64_t load_u64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>load_u32(p) << 32) | load_u32(p + 4)

cdef inline int16_t load_i16(const uint8_t* p) noexcept nogil:
    return <int16_t>load_u16(p)

cdef inline int32_t load_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>load_u32(p)

cdef inline int64_t load_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>load_u64(p)


cdef inline void store_u16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void store_u32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void store_u64(uint8_t* p, uint64_t v) noexcept nogil:
    store_u32(p, <uint32_t>(v >> 32))
    store_u32(p + 4, <uint32_t>v)


cdef inline int read_uvarint(const uint8_t** pp, const uint8_t* end, int max_bytes,
                             uint64_t* out) noexcept nogil:
    """An unsigned base-128 varint of at most max_bytes bytes; advances *pp."""
    cdef const uint8_t* p = pp[0]
    cdef const uint8_t* last = p + max_bytes
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef uint8_t b
    # Most lengths and deltas take one or two bytes. One byte is tried on its
    # own first: a record's last field, its header count, is one byte with
    # nothing after it before the record's end.
    if p < end and p[0] < 0x80:
        out[0] = p[0]
        pp[0] = p + 1
        return OK
    if end - p >= 2 and p[1] < 0x80:
        out[0] = (p[0] & 0x7F) | (<uint64_t>p[1] << 7)
        pp[0] = p + 2
        return OK
    while True:
        if p >= end:
            return F_TRUNCATED
        if p >= last:
            return F_VARINT_TOO_LONG
        b = p[0]
        p += 1
        raw |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            break
        shift += 7
    pp[0] = p
    out[0] = raw
    return OK


cdef inline int read_varlong(const uint8_t** pp, const uint8_t* end, int64_t* out) noexcept nogil:
    cdef uint64_t raw = 0
    cdef int st = read_uvarint(pp, end, 10, &raw)
    out[0] = <int64_t>((raw >> 1) ^ (0 - (raw & 1)))
    return st


cdef inline int read_varint(const uint8_t** pp, const uint8_t* end, int32_t* out) noexcept nogil:
    """Java's ByteUtils.readVarint: at most 5 bytes; bits past 32 are dropped."""
    cdef uint64_t raw = 0
    cdef int st = read_uvarint(pp, end, 5, &raw)
    cdef uint32_t low = <uint32_t>raw
    out[0] = <int32_t>((low >> 1) ^ (0 - (low & 1)))
    return st


cdef inline int read_blob(const uint8_t** pp, const uint8_t* end, const uint8_t** data,
                          int32_t* length) noexcept nogil:
    """A varint length and that many bytes (a negative length is null: -1, no
    bytes); *data is where the bytes start. Advances past them."""
    cdef int st = read_varint(pp, end, length)
    if st:
        return st
    data[0] = pp[0]
    if length[0] < 0:
        length[0] = -1
    elif length[0] > end - pp[0]:
        return F_TRUNCATED
    else:
        pp[0] += length[0]
    return OK


cdef extern from *:
    int clzll "__builtin_clzll" (unsigned long long) noexcept nogil


cdef inline int varlong_size(int64_t v) noexcept nogil:
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    if z < 0x80:                        # deltas and lengths: mostly one or two bytes
        return 1
    if z < 0x4000:
        return 2
    return (64 - clzll(z) + 6) // 7

cdef inline uint8_t* write_varlong(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while z >= 0x80:
        p[0] = <uint8_t>(z | 0x80)
        p += 1
        z >>= 7
    p[0] = <uint8_t>z
    return p + 1


cdef inline void copy_bytes(uint8_t* dst, const uint8_t* src, Py_ssize_t n) noexcept nogil:
    """memcpy, inlined for the short keys and values most records have (a call
    to memcpy costs more than copying them). A fixed-size memcpy compiles to
    moves, no call: lengths of 4-128 bytes take two that overlap."""
    cdef Py_ssize_t i
    if n > 128:
        if n > 256:
            memcpy(dst, src, n)
            return
        i = 0
        while i + 16 < n:
            memcpy(dst + i, src + i, 16)
            i += 16
        memcpy(dst + n - 16, src + n - 16, 16)      # the tail, overlapping
    elif n > 64:                                    # two copies that overlap in the middle
        memcpy(dst, src, 64)
        memcpy(dst + n - 64, src + n - 64, 64)
    elif n > 32:
        memcpy(dst, src, 32)
        memcpy(dst + n - 32, src + n - 32, 32)
    elif n >= 16:
        memcpy(dst, src, 16)
        memcpy(dst + n - 16, src + n - 16, 16)
    elif n >= 8:
        memcpy(dst, src, 8)
        memcpy(dst + n - 8, src + n - 8, 8)
    elif n >= 4:
        memcpy(dst, src, 4)
        memcpy(dst + n - 4, src + n - 4, 4)
    else:
        for i in range(n):
            dst[i] = src[i]


cdef enum:
    COPY_SLACK = 32          # bytes copy_over may write past the end of what it copies


cdef inline void copy_over(uint8_t* dst, const uint8_t* src, Py_ssize_t n,
                           const uint8_t* src_end) noexcept nogil:
    """copy_bytes into a buffer with COPY_SLACK bytes to spare past dst + n:
    a key or value of up to 32 bytes, where the source has 32 (before
    src_end), is copied whole in one move, taking no branch on its length."""
    if n <= 32 and src_end - src >= 32:
        memcpy(dst, src, 32)
    else:
        copy_bytes(dst, src, n)


# Fault codes of the record parsers; kcodec/_core/records.pyx turns each into
# a typed exception in one place (raise_fault).
cdef enum RecordFault:
    F_RECORD_LENGTH = 10         # record length negative or past the batch end
    F_RECORD_SIZE = 11           # bytes consumed != declared record length
    F_HEADER_COUNT = 12          # headers count negative or beyond the remaining bytes
    F_HEADER_KEY_NULL = 13
    F_TOO_FEW_RECORDS = 14       # batch ends before `count` records
    F_TRAILING_BYTES = 15        # bytes left after `count` records
    F_FIELD_PAST_RECORD = 16     # a field runs past its record's declared end


cdef struct FaultInfo:
    int code
    Py_ssize_t where        # byte position (relative to the parsed buffer) of the failing field
    int64_t a               # numbers for the message
    int64_t b
