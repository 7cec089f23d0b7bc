# The Confluent wire format's headers, for a whole binary column in one pass
# (kcodec/values/framing.py says what they are and what the statuses mean).
cimport cython
from libc.stdint cimport uint8_t, int8_t, int32_t, int64_t, uint32_t
from libc.string cimport memchr, memcpy

import numpy as np

ctypedef fused offset_t:
    int32_t
    int64_t

cdef enum:
    HEADER_BYTES = 5
    MAGIC_BYTE = 0
    NO_SCHEMA_ID = -1
    STATUS_DATUM = 0
    STATUS_NULL = 1
    STATUS_SHORT = 2
    STATUS_BAD_MAGIC = 3


cpdef enum Framing:
    FRAMING_PLAIN = 0       # every row a datum
    FRAMING_FRAMED = 1      # every row framed
    FRAMING_AUTO = 2        # framed when the row begins with the magic byte


@cython.boundscheck(False)
@cython.wraparound(False)
def split_frames(const uint8_t[::1] data, const offset_t[::1] offsets, valid_bitmap,
                 Py_ssize_t bit_offset, int framing):
    """(starts, ends, value_starts, ids, status) of the rows whose bounds are
    offsets[i]:offsets[i + 1] in data, framed as `framing` (a Framing) says;
    valid_bitmap (Arrow's validity, from bit bit_offset; None: no nulls) says
    which are null."""
    cdef Py_ssize_t n = offsets.shape[0] - 1
    if n < 0:
        raise ValueError("offsets need at least one value")
    if framing not in (FRAMING_PLAIN, FRAMING_FRAMED, FRAMING_AUTO):
        raise ValueError(f"framing {framing} is not a Framing")
    starts_array = np.empty(n, np.int64)
    ends_array = np.empty(n, np.int64)
    value_starts_array = np.empty(n, np.int64)
    ids_array = np.full(n, NO_SCHEMA_ID, np.int32)
    status_array = np.empty(n, np.int8)
    cdef int64_t[::1] starts = starts_array
    cdef int64_t[::1] ends = ends_array
    cdef int64_t[::1] value_starts = value_starts_array
    cdef int32_t[::1] ids = ids_array
    cdef int8_t[::1] status = status_array
    cdef const uint8_t[::1] bits
    cdef const uint8_t* valid = NULL
    cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t i, size = data.shape[0]
    cdef int64_t begin, end
    cdef uint32_t header
    if valid_bitmap is not None:
        bits = valid_bitmap
        if (bit_offset + n + 7) >> 3 > bits.shape[0]:
            raise ValueError("the validity bitmap is shorter than the rows")
        valid = &bits[0]
    for i in range(n):
        begin = offsets[i]
        end = offsets[i + 1]
        if not 0 <= begin <= end <= size:
            raise ValueError(f"row {i}: offsets {begin}..{end} outside the data")
    with nogil:
        for i in range(n):
            begin = offsets[i]
            end = offsets[i + 1]
            starts[i] = begin
            ends[i] = end
            value_starts[i] = begin
            if valid != NULL and not (valid[(bit_offset + i) >> 3] >> ((bit_offset + i) & 7)) & 1:
                status[i] = STATUS_NULL
            elif framing == FRAMING_PLAIN or (
                    framing == FRAMING_AUTO and (end == begin or base[begin] != MAGIC_BYTE)):
                status[i] = STATUS_DATUM
            elif end - begin < HEADER_BYTES:
                status[i] = STATUS_SHORT
            elif base[begin] != MAGIC_BYTE:
                status[i] = STATUS_BAD_MAGIC
            else:
                header = ((<uint32_t>base[begin + 1] << 24) | (<uint32_t>base[begin + 2] << 16)
                          | (<uint32_t>base[begin + 3] << 8) | base[begin + 4])
                ids[i] = <int32_t>header
                starts[i] = begin + HEADER_BYTES
                status[i] = STATUS_DATUM
    return starts_array, ends_array, value_starts_array, ids_array, status_array


cdef enum:
    NEWLINE = 0x0A
    CARRIAGE_RETURN = 0x0D
    SPACE = 0x20


cdef inline void blank_out(uint8_t* text, int64_t length, uint8_t byte) noexcept nogil:
    """Each `byte` in text[:length] made a space (memchr: rare in a datum)."""
    cdef uint8_t* end = text + length
    cdef uint8_t* found = <uint8_t*>memchr(text, byte, length)
    while found != NULL:
        found[0] = SPACE
        found = <uint8_t*>memchr(found + 1, byte, end - found - 1)


@cython.boundscheck(False)
@cython.wraparound(False)
def join_lines(const uint8_t[::1] data, const int64_t[::1] starts, const int64_t[::1] ends,
               const int64_t[::1] rows):
    """(lines, line_starts, line_ends): the datums data[starts[r]:ends[r]] of
    the rows r in rows, each copied with its newlines and carriage returns
    made spaces and then ended by a newline, as one uint8 buffer (a reader
    of newline-delimited JSON takes it); line_ends are past the newlines."""
    cdef Py_ssize_t m = rows.shape[0], n = starts.shape[0], size = data.shape[0]
    cdef Py_ssize_t i, r, total = m
    if ends.shape[0] != n:
        raise ValueError("starts and ends need a value for every row")
    for i in range(m):
        r = rows[i]
        if not 0 <= r < n:
            raise ValueError(f"row {r} outside the {n} rows")
        if not 0 <= starts[r] <= ends[r] <= size:
            raise ValueError(f"row {r}: bounds {starts[r]}..{ends[r]} outside the data")
        total += ends[r] - starts[r]
    lines_array = np.empty(total, np.uint8)
    line_starts_array = np.empty(m, np.int64)
    line_ends_array = np.empty(m, np.int64)
    cdef uint8_t[::1] lines = lines_array
    cdef int64_t[::1] line_starts = line_starts_array
    cdef int64_t[::1] line_ends = line_ends_array
    cdef uint8_t* out = &lines[0] if total else NULL
    cdef const uint8_t* base = &data[0] if size else NULL
    cdef int64_t at = 0, length
    with nogil:
        for i in range(m):
            r = rows[i]
            length = ends[r] - starts[r]
            line_starts[i] = at
            if length:
                memcpy(out + at, base + starts[r], length)
                blank_out(out + at, length, NEWLINE)
                blank_out(out + at, length, CARRIAGE_RETURN)
            at += length
            out[at] = NEWLINE
            at += 1
            line_ends[i] = at
    return lines_array, line_starts_array, line_ends_array
