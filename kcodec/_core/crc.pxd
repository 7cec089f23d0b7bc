from libc.stdint cimport uint8_t, uint32_t

# For other core modules: CRCs of raw memory (the GIL released for large inputs).
cdef uint32_t crc32c_of(const uint8_t* p, size_t n) noexcept
cdef uint32_t crc32_of(const uint8_t* p, size_t n) noexcept
cdef uint32_t crc32c_raw(const uint8_t* p, size_t n) noexcept nogil   # never releases the GIL
cdef uint32_t crc32_raw(const uint8_t* p, size_t n) noexcept nogil    # never releases the GIL
