# The process-wide pool of kept column memory (borrow_memory, return_memory),
# included by columns.pyx; build.pyx and the decompressor borrow it
# through columns.pxd.

# Column memory of tables that are gone, kept for the next decode (under
# kept_lock: decodes take it without the GIL): memory handed back to the OS
# on free (glibc returns blocks above its mmap threshold, jemalloc purges
# them) must be faulted in again, which on a virtual machine costs more than
# decoding the records.
cdef enum:
    KEPT_BLOCKS = 32
cdef size_t MIN_KEPT_BYTES = 64 << 10
cdef size_t kept_limit = 64 << 20     # see kept_memory_limit
cdef void* kept_memory[KEPT_BLOCKS]
cdef size_t kept_capacity[KEPT_BLOCKS]
cdef size_t kept_total = 0
cdef int n_kept = 0
cdef PyThread_type_lock kept_lock = PyThread_allocate_lock()
if kept_lock == NULL:
    raise MemoryError()


def _kept_memory_after_fork():
    """A fork while another thread held kept_lock copies it held, by a thread
    the child does not have: the child then starts with a lock and a pool of
    its own (what the pool held is left to the parent's copy)."""
    global kept_lock, kept_total, n_kept
    cdef PyThread_type_lock lock
    if PyThread_acquire_lock(kept_lock, NOWAIT_LOCK):
        PyThread_release_lock(kept_lock)
        return
    lock = PyThread_allocate_lock()
    if lock == NULL:
        raise MemoryError()
    kept_lock = lock
    kept_total = n_kept = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_kept_memory_after_fork)


def kept_memory_limit(limit=None):
    """The most bytes of column memory this process keeps from tables that
    are gone, for its next decodes, as it was before the call. With `limit`,
    sets it (0 keeps none) and frees what is kept beyond it."""
    global kept_limit, kept_total, n_kept
    cdef size_t previous = kept_limit
    if limit is None:
        return previous
    limit = operator.index(limit)
    if limit < 0:
        raise ValueError(f"kept_memory_limit takes a number of bytes >= 0, not {limit}")
    cdef size_t new_limit = limit
    with nogil:
        PyThread_acquire_lock(kept_lock, WAIT_LOCK)
        kept_limit = new_limit
        while kept_total > kept_limit:
            n_kept -= 1
            kept_total -= kept_capacity[n_kept]
            free(kept_memory[n_kept])
        PyThread_release_lock(kept_lock)
    return previous


def kept_memory_bytes():
    """How many bytes kept_memory_limit's pool holds now."""
    return kept_total


cdef inline bint far_too_big(size_t capacity, size_t size) noexcept nogil:
    """Whether a block of `capacity` bytes is worth shrinking to `size`."""
    return capacity > 2 * size + MIN_KEPT_BYTES


cdef uint8_t* borrow_memory(size_t size, size_t* capacity) noexcept nogil:
    """A block of at least `size` bytes: the smallest kept one not far too
    big, else a new one (NULL: no memory)."""
    global kept_total, n_kept
    cdef int i, best = -1
    cdef void* memory = NULL
    if size >= MIN_KEPT_BYTES:
        PyThread_acquire_lock(kept_lock, WAIT_LOCK)
        for i in range(n_kept):
            if size <= kept_capacity[i] and not far_too_big(kept_capacity[i], size) and (
                    best < 0 or kept_capacity[i] < kept_capacity[best]):
                best = i
        if best >= 0:
            memory = kept_memory[best]
            capacity[0] = kept_capacity[best]
            kept_total -= kept_capacity[best]
            n_kept -= 1
            kept_memory[best] = kept_memory[n_kept]
            kept_capacity[best] = kept_capacity[n_kept]
        PyThread_release_lock(kept_lock)
    if memory == NULL:
        capacity[0] = max(size, <size_t>1)
        memory = malloc(capacity[0])
    return <uint8_t*>memory


cdef inline bint pool_has_room(size_t capacity) noexcept nogil:
    """Whether return_memory would keep a block of `capacity` bytes now: read
    without kept_lock, a hint (another thread may fill the pool first)."""
    return (capacity >= MIN_KEPT_BYTES and n_kept < KEPT_BLOCKS
            and kept_total + capacity <= kept_limit)


cdef void return_memory(void* memory, size_t capacity) noexcept nogil:
    global kept_total, n_kept
    if pool_has_room(capacity):
        PyThread_acquire_lock(kept_lock, WAIT_LOCK)
        if pool_has_room(capacity):
            kept_memory[n_kept] = memory
            kept_capacity[n_kept] = capacity
            kept_total += capacity
            n_kept += 1
            memory = NULL
        PyThread_release_lock(kept_lock)
    free(memory)


@cython.final
cdef class ColumnMemory:
    """One column buffer's memory, given back for reuse when Arrow drops it."""
    cdef uint8_t* memory
    cdef size_t capacity

    @staticmethod
    cdef ColumnMemory adopt(Out* o, int i):
        """Take buffer i over from o."""
        cdef ColumnMemory m = ColumnMemory.__new__(ColumnMemory)
        m.memory = o.mem[i]
        m.capacity = o.allocated[i]
        o.mem[i] = NULL
        return m

    cdef void fit(self, size_t size) noexcept:
        """Give back what is far past the `size` bytes used (an estimate far
        too high). If the pool has room for the big block, those bytes move
        to a block of their own (from the pool, if it has one) and the big
        block, faulted in already, goes to the pool for the next decode:
        shrunk in place, its pages went back to the OS, and a decode of 1 MB
        batches faulted 2 MB in afresh each time. Else it is shrunk in place,
        which copies nothing."""
        cdef uint8_t* fitted
        cdef size_t capacity
        if not far_too_big(self.capacity, size):
            return
        if pool_has_room(self.capacity):
            fitted = borrow_memory(size, &capacity)
            if fitted == NULL:
                return
            memcpy(fitted, self.memory, size)
            return_memory(self.memory, self.capacity)
        else:
            capacity = max(size, <size_t>1)
            fitted = <uint8_t*>realloc(self.memory, capacity)
            if fitted == NULL:
                return
        self.memory = fitted
        self.capacity = capacity

    def __dealloc__(self):
        if self.memory != NULL:
            return_memory(self.memory, self.capacity)
