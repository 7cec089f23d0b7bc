from libc.stdint cimport uint8_t, uint32_t

cdef extern from "crc_impl.h":
    void kc_crc_init()
    uint32_t kc_crc32c(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    uint32_t kc_crc32(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    int kc_have_hw_crc32c

cdef uint32_t crc32c_of(const uint8_t* p, size_t n) noexcept
cdef uint32_t crc32_of(const uint8_t* p, size_t n) noexcept
