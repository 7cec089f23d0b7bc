# The compiled scan over runs of v2 batches, with no Python object per batch;
# included by columns.pyx.

cdef view_buffer(Block* b, Source src, Py_ssize_t start, Py_ssize_t end, Collector c):
    """Point the block's views at a data buffer of `src` holding [start, end), the
    block's records. Views address their bytes with int32 offsets: past 2 GiB,
    a source is cut into windows, each starting at the first block it holds."""
    cdef Py_ssize_t index, at
    index, at = c.current.get(src, (-1, 0))
    if index < 0 or start < at or end - at > MAX_ARROW_BYTES:
        at = 0 if end <= MAX_ARROW_BYTES else start
        if end - at > MAX_ARROW_BYTES:
            raise ValueError(f"{end - at} bytes of decompressed records exceed the 2 GiB that "
                             "binary views can address; decode with views=False")
        # `src` holds the buffer export of the input or the decompressed
        # bytes: the columns keep it as long as Arrow holds the buffer.
        index = c.keep_buffer(len(c.buffers), src, src.base + at, src.length - at)
        c.current[src] = (index, at)
    b.window = src.base + at
    b.buffer = index


cdef inline bint plain_batch_at(const uint8_t* p, Py_ssize_t remaining) noexcept nogil:
    """Whether the entry at p looks like an uncompressed v2 batch (so that views
    need a window into the input for it)."""
    return (remaining >= V2_HEADER and p[MAGIC_AT] == 2
            and not codec_of(load_u16(p + V2_ATTRIBUTES_AT)))


# With views, batches the core decompresses stay in c.inflater.out, one after
# another: one data buffer of the views for many batches. A new one is begun
# when the rest of it would likely not hold the next batch, since growing it
# would copy the batches it holds.
cdef size_t ARENA_BYTES = 1 << 20


cdef inline bint needs_new_arena(Collector c) noexcept nogil:
    return c.arena < 0 or c.inflater.capacity - c.inflater.kept < c.largest_batch


cdef inline size_t batch_limit(Collector c) noexcept nogil:
    """The most bytes the core may decompress a batch to: max_decompressed_bytes
    and, with views, what their int32 offsets still reach in c.inflater.out."""
    if c.views:
        return min(c.max_decompressed, <size_t>MAX_ARROW_BYTES - min(c.inflater.kept,
                                                                    <size_t>MAX_ARROW_BYTES))
    return c.max_decompressed


cdef int scan(Collector c, const uint8_t* base, Py_ssize_t length, Py_ssize_t* pos,
              int64_t max_entry, bint verify_crc, int64_t start, int64_t last,
              Block* b, Py_ssize_t limit, Py_ssize_t ready) noexcept nogil:
    """Add the v2 batches from *pos on, with no Python object per batch, until
    an entry it does not take whole: the end or a partial entry, a legacy
    entry, a control batch to include, anything that fails a check. That entry
    is left at *pos for BatchReader (add_batch raises its error, if any):
    SCAN_STOPPED. Control batches and batches with no offset in [start, last]
    are skipped, CRCs checked. With *pos at a batch begun in block b:
    SCAN_NEEDS_DECOMPRESS when it is compressed and not decompressed here (b
    holds its header; the caller decompresses it, with the GIL: see
    system_codecs for the codecs that are decompressed here; with views, also
    when a new data buffer is due, see needs_new_arena), and with views
    SCAN_NEEDS_WINDOW when it needs a window into the input first (none yet,
    or it ends past `limit`); or a FillStatus error of fill_grown. `ready` >=
    0: the batch at *pos is in b, its records decompressed into c.inflater,
    that many bytes, and is added first."""
    cdef const uint8_t* p
    cdef int32_t size
    cdef int attributes, st
    cdef Py_ssize_t decompressed = ready
    cdef V2Header h
    cdef const uint8_t* input_window = b.window
    cdef int32_t input_buffer = b.buffer
    while True:
        if decompressed < 0:
            p = base + pos[0]
            if entry_size(p, length - pos[0], max_entry, &size) != ENTRY_OK or p[MAGIC_AT] != 2:
                return SCAN_STOPPED
            attributes = load_u16(p + V2_ATTRIBUTES_AT)
            if attributes & ATTR_CONTROL and c.include_control:
                return SCAN_STOPPED
            if read_v2_header(p, size, verify_crc, &h) != ENTRY_OK:
                return SCAN_STOPPED
            if not (h.count and not attributes & ATTR_CONTROL
                    and batch_in_bounds(h.base_offset, h.last_offset, True, start, last)):
                pos[0] += LOG_OVERHEAD + <Py_ssize_t>size
                continue
            start_block(b, &c.o, h.count)
            b.v2.offset = h.base_offset
            b.v2.timestamp = h.first_timestamp
            b.v2.max_timestamp = h.max_timestamp
            b.v2.ts_type = timestamp_type_of(attributes)
            b.v2.sequence = h.base_sequence
            b.producer_id = h.producer_id
            b.producer_epoch = h.producer_epoch
            b.leader_epoch = h.leader_epoch
            b.transactional = (attributes & ATTR_TRANSACTIONAL) != 0
            b.position = pos[0]
            b.consumed = pos[0] + LOG_OVERHEAD + size
            b.codec = codec_of(attributes)
            if b.codec:
                decompressed = -1 if c.views and needs_new_arena(c) else decompress_in_core(
                    &c.inflater, b.codec, p + V2_HEADER, LOG_OVERHEAD + size - V2_HEADER,
                    batch_limit(c))
                if decompressed < 0:
                    return SCAN_NEEDS_DECOMPRESS
        if b.codec:
            if not count_fits(<int32_t>b.count, decompressed):
                c.handed_back += 1
                return SCAN_STOPPED
            b.base = c.inflater.out + c.inflater.kept
            b.next = b.records = b.base
            b.end = b.base + decompressed
            b.window = c.inflater.out
            b.buffer = <int32_t>c.arena
        else:
            if not count_fits(<int32_t>b.count, b.consumed - b.position - V2_HEADER):
                return SCAN_STOPPED
            if c.views and (input_window == NULL or b.consumed > limit):
                return SCAN_NEEDS_WINDOW
            b.window = input_window
            b.buffer = input_buffer
            b.base = base
            b.next = b.records = base + b.position + V2_HEADER
            b.end = base + b.consumed
        b.items = NULL
        st = fill_grown(b, &c.o)
        if st == FILL_FAULT:
            c.handed_back += 1
            return SCAN_STOPPED
        if st != FILL_DONE:
            return st
        if b.codec:
            c.o.expanded += decompressed - (b.consumed - b.position)
            if c.views:
                c.inflater.kept += decompressed
                c.largest_batch = max(c.largest_batch, <size_t>decompressed)
        decompressed = -1
        pos[0] = b.consumed
