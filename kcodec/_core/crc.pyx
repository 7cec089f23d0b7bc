# CRC-32C (record batches, magic 2) and CRC-32 (messages, magic 0 and 1).
from libc.stdint cimport uint8_t, uint32_t
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE

# The tables and the CPU check live in this module only: other modules call
# crc32c_of / crc32_of (crc.pxd), never these directly.
cdef extern from "crc_impl.h":
    void kc_crc_init()
    uint32_t kc_crc32c(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    uint32_t kc_crc32(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    int kc_have_hw_crc32c
    int kc_have_hw_crc32

kc_crc_init()

# Below this size releasing the GIL costs more than the CRC itself.

cdef size_t NOGIL_THRESHOLD = 4096


cdef uint32_t crc32c_of(const uint8_t* p, size_t n) noexcept:
    cdef uint32_t c
    if n < NOGIL_THRESHOLD:
        return kc_crc32c(0, p, n)
    with nogil:
        c = kc_crc32c(0, p, n)
    return c


cdef uint32_t crc32_of(const uint8_t* p, size_t n) noexcept:
    cdef uint32_t c
    if n < NOGIL_THRESHOLD:
        return kc_crc32(0, p, n)
    with nogil:
        c = kc_crc32(0, p, n)
    return c


cdef uint32_t crc32c_raw(const uint8_t* p, size_t n) noexcept nogil:
    return kc_crc32c(0, p, n)


cdef uint32_t crc32_raw(const uint8_t* p, size_t n) noexcept nogil:
    return kc_crc32(0, p, n)


ctypedef uint32_t (*crc_fn)(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil


cdef uint32_t crc_of_buffer(crc_fn fn, object data, uint32_t value) except? 0:
    cdef Py_buffer view
    cdef uint32_t c
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            c = fn(value, <const uint8_t*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32c(data, uint32_t value=0):
    """CRC-32C of any buffer, continuing from `value`."""
    return crc_of_buffer(kc_crc32c, data, value)


def crc32(data, uint32_t value=0):
    """CRC-32 (the zlib polynomial) of any buffer, continuing from `value`."""
    return crc_of_buffer(kc_crc32, data, value)


def hardware_crc32c():
    """True when CRC-32C runs on the CPU's crc32 instruction."""
    return bool(kc_have_hw_crc32c)


def hardware_crc32():
    """True when CRC-32 runs on the CPU's carry-less multiply (PCLMULQDQ)."""
    return bool(kc_have_hw_crc32)
