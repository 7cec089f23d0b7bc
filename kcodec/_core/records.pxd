# Shared layouts of the decoding core, for the modules that cimport it
# (columns.pyx builds Arrow columns from the same parsed batches).
from libc.stdint cimport uint8_t, uint32_t, int8_t, int16_t, int32_t, int64_t

from kcodec._core.wire cimport FaultInfo


cdef enum:
    LOG_OVERHEAD = 12             # an entry's offset and size, before its bytes
    HEADER_UP_TO_MAGIC = 17
    MIN_ENTRY_SIZE = 14           # smallest v0 message; Java enforces it for every magic
    V2_HEADER = 61
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
    int32_t sequence
    int8_t magic
    int8_t ts_type                # -1 none, 0 CreateTime, 1 LogAppendTime


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
cdef int parse_v2_records(const uint8_t* base, const uint8_t* p, const uint8_t* end,
                          int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
                          int8_t ts_type, int32_t base_seq, Slot* slots,
                          FaultInfo* fi) noexcept nogil


cdef struct LegacyMessage:
    uint32_t crc
    int8_t magic
    int8_t attributes
    int64_t timestamp
    Py_ssize_t key_pos
    Py_ssize_t value_pos
    int32_t key_len
    int32_t value_len


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

    cdef object _first_offset_hint(self)
    cdef list _loaded(self)
    cdef Source _decompressed(self)
    cdef Slots parsed(self)
    cdef Slots _parse_v2(self)
    cdef Slots _parse_message(self)
    cdef Slots _parse_wrapper(self, Source inner)
    cdef _inner_error(self, str text, Py_ssize_t where)


cdef class BatchReader:
    cdef Source src
    cdef Py_ssize_t pos
    cdef bint verify_crc
    cdef bint partial_error
    cdef int64_t max_decompressed
    cdef int64_t max_entry

    cdef _partial(self, Py_ssize_t remaining, int32_t size)
    cdef Batch _new_batch(self, const uint8_t* p, int32_t size, int magic)
    cdef Batch _v2(self, const uint8_t* p, int32_t size)
    cdef Batch _legacy(self, const uint8_t* p, int32_t size, int magic)
