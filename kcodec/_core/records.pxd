# Shared layouts of the decoding core, for the modules that cimport it
# (columns.pyx builds Arrow columns from the same parsed batches).
from libc.stdint cimport uint32_t, int8_t, int32_t, int64_t


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
