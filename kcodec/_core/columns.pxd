# The pool of kept memory (columns.pyx): big blocks a decode or an encode
# used, kept for the next so that their pages need not be faulted in again.
from libc.stdint cimport uint8_t

cdef uint8_t* borrow_memory(size_t size, size_t* capacity) noexcept nogil
cdef void return_memory(void* memory, size_t capacity) noexcept nogil
