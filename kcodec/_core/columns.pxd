# The pool of kept memory (columns.pyx): big blocks a decode or an encode
# used, kept for the next so that their pages need not be faulted in again.
from libc.stdint cimport uint8_t

cdef uint8_t* take_memory(size_t size, size_t* capacity) noexcept nogil
cdef void give_back(void* memory, size_t capacity) noexcept nogil
