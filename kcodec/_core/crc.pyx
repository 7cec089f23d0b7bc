# CRC-32C (record batches, magic 2) and CRC-32 (messages, magic 0 and 1).
from libc.stdint cimport uint8_t, uint32_t, uint64_t, uintptr_t
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE

from kcodec._core.bindings cimport exported

# The tables and the CPU check live in this module only: other modules call
# crc32c_of / crc32_of (crc.pxd), never these directly.
cdef extern from "crc_impl.h":
    ctypedef uint32_t (*kc_lib_crc32_fn)(uint32_t crc, const unsigned char* p,
                                         uint64_t n) noexcept nogil
    ctypedef unsigned int (*kc_lib_crc32c_fn)(unsigned char* p, int n,
                                              unsigned int reg) noexcept nogil
    void kc_crc_init()
    uint32_t kc_crc32c(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    uint32_t kc_crc32(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    int kc_have_hw_crc32c
    int kc_have_hw_crc32
    kc_lib_crc32_fn kc_lib_crc32
    kc_lib_crc32c_fn kc_lib_crc32c

kc_crc_init()

# ISA-L, from the isal package (a dependency: kcodec's gzip), used where its
# extension exports its CRC functions and they agree with kcodec's own on a
# sample of every length up to 300 bytes and a few longer ones.
cdef kc_lib_crc32_fn isal_crc32 = NULL
cdef kc_lib_crc32c_fn isal_crc32c = NULL
cdef str isal_name = None


cdef bint agrees_with_own_code(const uint8_t* sample) noexcept:
    global kc_lib_crc32, kc_lib_crc32c
    cdef size_t length
    cdef uint32_t own32, own32c
    for length in list(range(301)) + [1000, 4097, 65536]:
        kc_lib_crc32 = kc_lib_crc32c = NULL
        own32 = kc_crc32(0x5EED, sample + 3, length)
        own32c = kc_crc32c(0x5EED, sample + 3, length)
        kc_lib_crc32 = isal_crc32
        kc_lib_crc32c = isal_crc32c
        if kc_crc32(0x5EED, sample + 3, length) != own32 or kc_crc32c(0x5EED, sample + 3,
                                                                      length) != own32c:
            kc_lib_crc32 = kc_lib_crc32c = NULL
            return False
    return True


cdef void find_isal():
    global isal_crc32, isal_crc32c, isal_name
    found = exported("isal.isal_zlib", ("crc32_gzip_refl", "crc32_iscsi"))
    if found is None:
        return
    isal_crc32 = <kc_lib_crc32_fn><uintptr_t>found["crc32_gzip_refl"]
    isal_crc32c = <kc_lib_crc32c_fn><uintptr_t>found["crc32_iscsi"]
    sample = bytes((i * 131 + (i >> 5)) & 0xFF for i in range(65540))
    if agrees_with_own_code(<const uint8_t*><const char*>sample):
        import isal
        isal_name = f"ISA-L {isal.ISAL_VERSION} (isal.isal_zlib)"


find_isal()

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


def library(enabled_now=None):
    """The library CRC-32 and CRC-32C run in, as "ISA-L 2.32.1 (isal.isal_zlib)",
    or None when they run in kcodec's own code (see hardware_crc32c). With
    `enabled_now`, turns it on or off first; tests compare the two."""
    global kc_lib_crc32, kc_lib_crc32c
    if enabled_now is not None:
        on = bool(enabled_now) and isal_name is not None
        kc_lib_crc32 = isal_crc32 if on else NULL
        kc_lib_crc32c = isal_crc32c if on else NULL
    return isal_name if kc_lib_crc32 != NULL else None
