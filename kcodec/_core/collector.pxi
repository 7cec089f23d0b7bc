# Collector: the columns of one decode, filled batch by batch; included by
# columns.pyx.

# Batches the compiled scan began and handed back to BatchReader because a
# record failed its checks; that path then raises the error. On valid input a
# hand-back means the scan wrongly rejected a batch, which only the time it
# costs would show (the rows are right): tests check that it stays 0.
cdef Py_ssize_t batches_handed_back = 0


def handed_back_batches():
    """How many batches this process's decodes have handed back from the
    compiled scan to be read again through BatchReader (see above)."""
    return batches_handed_back


cdef inline int legacy_codec_at(Source src, Py_ssize_t pos) noexcept:
    """The codec a v0/v1 entry at pos says it has (0: an uncompressed message,
    else a wrapper's), or -1 when no v0/v1 entry begins there: a v2 batch or
    the end. Only a peek: the entry is checked by whoever takes it."""
    if src.length - pos <= HEADER_UP_TO_MAGIC or src.base[pos + MAGIC_AT] > 1:
        return -1
    return codec_of(src.base[pos + LOG_OVERHEAD + MESSAGE_ATTRIBUTES_AT])


@cython.final
cdef class Collector:
    """The columns of one decode, filled batch by batch."""
    cdef Out o
    cdef Py_ssize_t handed_back
    cdef list memory                # table(): each o.mem as a ColumnMemory (None: not used)
    cdef bint include_control, views
    cdef list buffers               # views: what keeps each of their data buffers alive
    cdef ViewBuffer* view_buffers   # ... and where each is
    cdef Py_ssize_t view_buffers_room
    cdef dict current
    cdef Inflater inflater          # for batches scan decompresses itself, without the GIL
    cdef size_t max_decompressed
    cdef Py_ssize_t arena           # views: the index in buffers of inflater.out (-1: none)
    cdef size_t largest_batch       # views: the most bytes a batch has decompressed to
    cdef size_t arena_bytes         # views: the memory of the arenas ended so far
    cdef Slot* messages             # v0/v1 records: add_messages' run, add_wrapper's inner ones
    cdef Py_ssize_t messages_room   # ... slots allocated

    def __cinit__(self, bint include_control, bint views, bint batch_columns,
                  Py_ssize_t input_bytes):
        cdef int i
        self.include_control = include_control
        self.views = views
        self.buffers = []
        self.current = {}
        memset(&self.o, 0, sizeof(Out))
        memset(&self.inflater, 0, sizeof(Inflater))
        self.inflater.take = borrow_memory
        self.inflater.give = return_memory
        self.arena = -1
        self.o.views = views
        self.o.input_bytes = input_bytes
        for i in range(N_BUFFERS):
            if i in (B_KEY_OFFSETS, B_KEY_DATA, B_VALUE_OFFSETS, B_VALUE_DATA):
                self.o.enabled[i] = not views
            elif i in (B_KEY_VIEWS, B_VALUE_VIEWS):
                self.o.enabled[i] = views
            elif i >= B_PRODUCER_ID:
                self.o.enabled[i] = batch_columns
            else:
                self.o.enabled[i] = True
        for i in range(N_BUFFERS):
            if self.o.enabled[i]:
                self.o.mem[i] = borrow_memory(allocated_bytes(i, 0), &self.o.allocated[i])
                if self.o.mem[i] == NULL:
                    raise MemoryError()
        for i in (B_KEY_OFFSETS, B_VALUE_OFFSETS, B_HEADER_LIST_OFFSETS, B_HEADER_KEY_OFFSETS,
                  B_HEADER_VALUE_OFFSETS):
            if self.o.enabled[i]:
                (<int32_t*>self.o.mem[i])[0] = 0

    def __dealloc__(self):
        cdef int i
        release_inflater(&self.inflater)
        free(self.messages)
        free(self.view_buffers)
        for i in range(N_BUFFERS):
            if self.o.mem[i] != NULL:          # not handed to table()'s ColumnMemory
                return_memory(self.o.mem[i], self.o.allocated[i])

    cdef int add_block(self, Block* b, Py_ssize_t position, bint release) except -1:
        """Fill block b (of the batch at `position`), growing the buffers as it
        asks: 0, or 1 when a record fails its checks (b.fault; the block retracted)."""
        cdef int st
        if release:
            with nogil:
                st = fill_grown(b, &self.o)
        else:
            st = fill_grown(b, &self.o)
        if st == FILL_FAULT:
            return 1
        return raise_for_status(st, position)

    cdef int add_batch(self, Batch batch, Py_ssize_t consumed) except -1:
        cdef Block b
        cdef Slots slots = None
        cdef Source src
        cdef Py_ssize_t pos, n
        if batch.magic == 2 and batch.attributes & ATTR_CONTROL:
            if not self.include_control:
                return 0
            batch._loaded()                          # validates the control keys and values
        if batch.magic == 2 and batch._count == 0:
            return 0
        if batch.magic == 2:
            src = batch.records_source(&pos, &n)
            start_block(&b, &self.o, batch._count)
            b.items = NULL
            batch.v2_base(&b.v2)
        else:
            slots = batch.parsed()
            src = slots.src
            start_block(&b, &self.o, slots.count)
            b.items = slots.items
            pos = 0
            n = src.length
            if src is batch.src:
                pos = batch.position + LOG_OVERHEAD
                n = batch.size - LOG_OVERHEAD
        b.base = src.base
        b.next = b.records = src.base + pos
        b.end = src.base + pos + n
        b.producer_id = batch.producer_id
        b.producer_epoch = batch.producer_epoch
        b.leader_epoch = batch.partition_leader_epoch
        b.transactional = batch.magic == 2 and batch.attributes & ATTR_TRANSACTIONAL
        b.position = batch.position
        b.consumed = consumed
        if self.views and b.count:
            view_buffer(&b, src, pos, pos + n, self)
        if self.add_block(&b, batch.position, n >= NOGIL_MIN_BYTES):
            raise_fault(&b.fault, batch, src is not batch.src)
        if src is not batch.src:
            self.o.expanded += n - batch.size
        return 0

    cdef int add_compressed(self, BatchReader reader, Block* b, Py_ssize_t position) except -1:
        """Decompress the v2 batch at `position` (scan put its header in b) and
        add it: 0, or 1 when it is to be read again through BatchReader and
        add_batch (which raise what is wrong with it)."""
        cdef Source src = reader.src
        cdef Source data
        cdef Py_ssize_t size = b.consumed - position
        try:
            data = Source(decompress_in_python(
                b.codec, src.slice(position + V2_HEADER, size - V2_HEADER), reader.max_decompressed,
                2))
        except KafkaFormatError:
            return 1
        if not count_fits(<int32_t>b.count, data.length):
            return 1
        b.base = data.base
        b.items = NULL
        b.next = b.records = data.base
        b.end = data.base + data.length
        if self.views:
            view_buffer(b, data, 0, data.length, self)
        if self.add_block(b, position, data.length >= NOGIL_MIN_BYTES):
            return 1
        self.o.expanded += data.length - size
        return 0

    cdef bint add_messages(self, BatchReader reader, Py_ssize_t* pos, int64_t start,
                           int64_t last) except -1:
        """Add the uncompressed v0/v1 messages from *pos on, a run at a time
        without a Batch object each (see scan_messages); *pos is left at the
        first entry for `reader` to read. Whether it went past any."""
        cdef Source src = reader.src
        cdef Block b
        cdef Py_ssize_t first, n, taken = pos[0]
        if legacy_codec_at(src, taken) != 0:
            return False                    # a wrapper, a v2 batch or the end
        self.message_slots(MESSAGE_RUN)
        while True:
            first = pos[0]
            if src.length - first < NOGIL_MIN_BYTES:
                n = scan_messages(src.base, src.length, pos, reader.max_entry, reader.verify_crc,
                                  start, last, self.messages, MESSAGE_RUN, MESSAGE_RUN_BYTES)
            else:
                with nogil:
                    n = scan_messages(src.base, src.length, pos, reader.max_entry,
                                      reader.verify_crc, start, last, self.messages, MESSAGE_RUN,
                                      MESSAGE_RUN_BYTES)
            if n == 0:
                return pos[0] != taken
            start_legacy_block(&b, &self.o, self.messages, n)
            b.base = src.base
            b.next = b.records = src.base + first
            b.end = src.base + pos[0]
            b.position = first
            b.consumed = pos[0]
            if self.views:
                view_buffer(&b, src, first, pos[0], self)
            # Parsed records: fill finds no fault in them (it returns 1 only for
            # v2 records it parses itself).
            self.add_block(&b, first, pos[0] - first >= NOGIL_MIN_BYTES)

    cdef int message_slots(self, Py_ssize_t n) except -1:
        """Room for n records in self.messages."""
        cdef Slot* grown
        if n > self.messages_room:
            grown = <Slot*>realloc(self.messages, n * sizeof(Slot))
            if grown == NULL:
                raise MemoryError()
            self.messages = grown
            self.messages_room = n
        return 0

    cdef bint add_wrapper(self, BatchReader reader, Py_ssize_t* pos, int64_t start) except -1:
        """Add the compressed v0/v1 message (a wrapper of inner messages) at
        *pos with no Batch object, decompressed into self.inflater as add_v2
        decompresses v2 batches (gzip and lz4 without the GIL, snappy with it) and its
        inner messages parsed without the GIL: whether it went past it. A
        wrapper it does not take (another codec, magic 0 lz4, with views) or
        that fails a check is left at *pos for `reader` to read, and to raise
        what is wrong with it. One wholly before `start` is passed over, as
        batch_in_bounds passes it over: without decompressing it."""
        cdef Source src = reader.src
        cdef LegacyMessage m
        cdef Wrapper w
        cdef FaultInfo fi
        cdef Block b
        cdef int32_t size
        cdef Py_ssize_t at = pos[0], entry_end, produced, n = 0
        cdef bint ok, verify_crc = reader.verify_crc
        cdef int codec = legacy_codec_at(src, at), st
        # Declined before its CRC is computed: `reader` computes it again.
        if (self.views or codec <= 0 or not inflates(codec)
                or (codec == CODEC_LZ4 and src.base[at + MAGIC_AT] == 0)):
            return False                 # magic 0 lz4: its header checksum needs mending
        with nogil:
            ok = legacy_entry_ok(src.base, src.length, at, reader.max_entry, verify_crc, True,
                                 &m, &size)
        if not ok:
            return False
        wrapper_of(&m, load_i64(src.base + at), &w)
        entry_end = at + LOG_OVERHEAD + <Py_ssize_t>size
        if not batch_in_bounds(0, w.last_offset, False, start, INT64_MAX):
            pos[0] = entry_end
            return True
        produced = decompress_batch(&self.inflater, codec, src.base + m.value_pos, m.value_len,
                                    reader.max_decompressed)
        if produced < 0 or count_inner(self.inflater.out, produced, &n, &fi):
            return False
        self.message_slots(n)
        with nogil:
            st = parse_inner(self.inflater.out, n, &w, verify_crc, self.messages, &fi)
        if st:
            return False
        start_legacy_block(&b, &self.o, self.messages, n)
        b.base = b.next = b.records = self.inflater.out
        b.end = self.inflater.out + produced
        b.position = at
        b.consumed = entry_end
        self.add_block(&b, at, produced >= NOGIL_MIN_BYTES)
        self.o.expanded += produced - (entry_end - at)
        pos[0] = entry_end
        return True

    cdef int add_v2(self, BatchReader reader, Py_ssize_t* pos, int64_t start,
                    int64_t last) except -1:
        """Add the v2 batches from *pos on (see scan); *pos is left at the first
        entry for `reader` to read."""
        cdef Source src = reader.src
        cdef Block b
        cdef const uint8_t* window = NULL
        cdef int32_t buffer = 0
        cdef Py_ssize_t limit = src.length, entry_end = 0, ready = -1
        cdef const uint8_t* section
        cdef size_t section_size
        cdef int st
        self.max_decompressed = reader.max_decompressed
        while True:
            if self.views and plain_batch_at(src.base + pos[0], src.length - pos[0]):
                # Views address at most 2 GiB of one buffer: a run that goes on
                # past that continues in a new window (see view_buffer).
                entry_end = pos[0] + LOG_OVERHEAD + max(
                    0, load_i32(src.base + pos[0] + ENTRY_SIZE_AT))
                view_buffer(&b, src, pos[0] + LOG_OVERHEAD, min(entry_end, src.length), self)
                window = b.window
                buffer = b.buffer
                limit = min(src.length, window - src.base + MAX_ARROW_BYTES)
            b.window = window
            b.buffer = buffer
            if ready < 0 and (src.length - pos[0] < NOGIL_MIN_BYTES
                              or src.base[pos[0] + MAGIC_AT] != 2):
                st = scan(self, src.base, src.length, pos, reader.max_entry, reader.verify_crc,
                          start, last, &b, limit, -1)
            else:
                with nogil:
                    st = scan(self, src.base, src.length, pos, reader.max_entry,
                              reader.verify_crc, start, last, &b, limit, ready)
            ready = -1
            if st == SCAN_NEEDS_DECOMPRESS:
                section = src.base + pos[0] + V2_HEADER
                section_size = b.consumed - pos[0] - V2_HEADER
                if self.views and inflates(b.codec) and needs_new_arena(self):
                    # The scan left the batch for a new buffer; it decompresses
                    # here, into that one, rather than through the scan again.
                    self.begin_arena()
                    ready = decompress_batch(&self.inflater, b.codec, section, section_size,
                                             batch_limit(self))
                else:
                    ready = decompress_with_gil(&self.inflater, b.codec, section, section_size,
                                                batch_limit(self))
                if ready >= 0:
                    continue             # added by scan, without the GIL, with those after it
                # The Python path decompresses the batch again: what the core
                # decompressed of it (up to the limit) is not held.
                if self.views:
                    drop_output_tail(&self.inflater)
                else:
                    release_output(&self.inflater)
                if self.add_compressed(reader, &b, pos[0]):
                    self.handed_back += 1
                    return 0
                pos[0] = b.consumed
            elif st != SCAN_NEEDS_WINDOW:
                return raise_for_status(st, pos[0])

    cdef Py_ssize_t keep_buffer(self, Py_ssize_t index, owner, const uint8_t* start,
                                Py_ssize_t size) except -1:
        """Make data buffer `index` of the views (len(buffers): a new one) the
        `size` bytes at `start`, which `owner` keeps alive; returns index."""
        cdef ViewBuffer* grown
        cdef Py_ssize_t room
        if index == len(self.buffers):
            if index == self.view_buffers_room:
                room = max(8, 2 * self.view_buffers_room)
                grown = <ViewBuffer*>realloc(self.view_buffers, room * sizeof(ViewBuffer))
                if grown == NULL:
                    raise MemoryError()
                self.view_buffers = grown
                self.view_buffers_room = room
            self.buffers.append(owner)
        else:
            self.buffers[index] = owner
        self.view_buffers[index].start = start
        self.view_buffers[index].size = size
        return index

    cdef int begin_arena(self) except -1:
        """Make inflater.out a new data buffer of the views (see needs_new_arena)."""
        cdef size_t allocated
        self.end_arena()
        self.inflater.out = borrow_memory(
            min(max(ARENA_BYTES, 2 * self.largest_batch), <size_t>MAX_ARROW_BYTES), &allocated)
        if self.inflater.out == NULL:
            raise MemoryError()
        self.inflater.capacity = allocated
        self.arena = self.keep_buffer(len(self.buffers), None, NULL, 0)   # set by end_arena
        return 0

    cdef int end_arena(self) except -1:
        """Hand the batches decompressed into inflater.out to its data buffer."""
        cdef ColumnMemory m
        cdef size_t size = self.inflater.kept
        if self.arena < 0:
            return 0
        m = ColumnMemory.__new__(ColumnMemory)
        m.memory = self.inflater.out
        m.capacity = self.inflater.capacity
        self.inflater.out = NULL
        self.inflater.capacity = self.inflater.kept = 0
        m.fit(size)
        self.arena_bytes += m.capacity
        self.keep_buffer(self.arena, m, m.memory, size)
        self.arena = -1
        return 0

    cdef int add_reader(self, BatchReader reader, int64_t start, int64_t last) except -1:
        """Add every batch of `reader` (fresh) that may hold an offset in
        [start, last] (batch_in_bounds; see decode_record_set)."""
        cdef Py_ssize_t pos
        cdef Batch batch
        while True:
            pos = reader.pos
            self.add_v2(reader, &pos, start, last)
            if self.add_messages(reader, &pos, start, last) or self.add_wrapper(reader, &pos, start):
                reader.pos = pos
                continue
            reader.pos = pos
            if pos == reader.src.length:
                return 0                        # without a StopIteration: many small inputs
            batch = next(reader, None)
            if batch is None:
                return 0
            if batch_in_bounds(batch._base_offset, batch.last_offset,
                               not (batch.magic < 2 and batch.codec != 0), start, last):
                self.add_batch(batch, batch.position + batch.size)

    cdef void count_handed_back(self):
        global batches_handed_back
        batches_handed_back += self.handed_back
        self.handed_back = 0

    cdef object table(self):
        """The columns as a pyarrow.Table of record_schema, each column's
        memory handed to Arrow without a copy (see Columns)."""
        cdef Py_ssize_t rows = self.o.used[PER_ROW], nh = self.o.used[PER_HEADER]
        cdef Py_ssize_t size, k, units, set_bits
        cdef int i, j, n_views
        cdef int nulls, valid, view_buffer, offsets
        cdef ColumnMemory m
        cdef const void* mem[N_BUFFERS]
        cdef Py_ssize_t nulls_of[N_NULLS]
        cdef Export* e
        cdef ArrowArray* a
        memset(nulls_of, 0, sizeof(nulls_of))
        self.end_arena()
        n_views = len(self.buffers) if self.views else 0
        self.memory = [ColumnMemory.adopt(&self.o, i) if self.o.enabled[i] else None
                       for i in range(N_BUFFERS)]
        for i in range(N_BUFFERS):
            mem[i] = NULL
            if not self.o.enabled[i]:
                continue
            m = self.memory[i]
            units = self.o.used[UNIT[i]]
            if NULLS_IN[i] >= 0:
                # Nulls are counted here, once, rather than per record by fill.
                set_bits = bits_set(m.memory, units)
                nulls_of[NULLS_IN[i]] = set_bits if INVERTED[i] else units - set_bits
                if not nulls_of[NULLS_IN[i]]:
                    continue                           # Arrow takes no validity without nulls
            size = buffer_bytes(i, units)
            if INVERTED[i]:
                for k in range(size):                  # nulls into validity
                    m.memory[k] = ~m.memory[k]
            m.fit(size)
            mem[i] = m.memory
        schema, types = schema_and_types(self.views, self.o.enabled[B_PRODUCER_ID])
        columns = Columns(rows, small_table(self.memory, self.arena_bytes, self.current))
        for i, nulls, valid, view_buffer, offsets in (
                (0, NULL_KEYS, B_KEY_NULLS, B_KEY_VIEWS, B_KEY_OFFSETS),
                (1, NULL_VALUES, B_VALUE_NULLS, B_VALUE_VIEWS, B_VALUE_OFFSETS)):
            if self.views:
                e = self.new_column((valid, view_buffer), n_views)
                a = new_array(e, rows, nulls_of[nulls], mem[valid], mem[view_buffer], NULL,
                              2 + n_views + 1)
                for j in range(n_views):
                    a.buffers[2 + j] = self.view_buffers[j].start
                    e.view_sizes[j] = self.view_buffers[j].size
                a.buffers[2 + n_views] = e.view_sizes
            else:
                e = self.new_column((valid, offsets, offsets + 1))
                new_array(e, rows, nulls_of[nulls], mem[valid], mem[offsets],
                          mem[offsets + 1], 3)
            columns.add(e, types[i])
        for i, valid in ((B_OFFSET, B_OFFSET), (B_TIMESTAMP, B_TIMESTAMP_NULLS),
                         (B_TIMESTAMP_TYPE, B_TIMESTAMP_TYPE)):
            e = self.new_column((i, valid))
            new_array(e, rows, nulls_of[NULL_TIMESTAMPS] if i == B_TIMESTAMP else 0,
                      mem[valid], mem[i], NULL, 2)
            columns.add(e, types[columns.n])
        e = self.new_column(tuple(range(B_HEADER_LIST_OFFSETS, B_HEADER_VALUE_NULLS + 1)))
        a = new_array(e, rows, nulls_of[NULL_HEADERS], mem[B_HEADERS_VALID],
                      mem[B_HEADER_LIST_OFFSETS], NULL, 2, 1)
        a = add_child(a, new_array(e, nh, 0, NULL, NULL, NULL, 1, 2))     # the structs
        add_child(a, new_array(e, nh, 0, NULL, mem[B_HEADER_KEY_OFFSETS], mem[B_HEADER_KEY_DATA],
                               3))
        add_child(a, new_array(e, nh, nulls_of[NULL_HEADER_VALUES], mem[B_HEADER_VALUE_NULLS],
                               mem[B_HEADER_VALUE_OFFSETS], mem[B_HEADER_VALUE_DATA], 3))
        # Checked in the column's memory, not the input, which may change.
        if is_ascii(<const uint8_t*>mem[B_HEADER_KEY_DATA], self.o.used[HEADER_KEY_BYTES]):
            columns.add(e, HEADER_LIST_TYPE)
        else:
            columns.add(e, BINARY_KEY_HEADER_LIST_TYPE, _header_keys_as_text)
        if self.o.enabled[B_PRODUCER_ID]:
            for i in range(B_PRODUCER_ID, N_BUFFERS):
                e = self.new_column((i,))
                new_array(e, rows, 0, NULL, mem[i], NULL, 2)
                columns.add(e, types[columns.n])
        return columns.table(schema)

    cdef Export* new_column(self, tuple buffers, int n_views=0) except NULL:
        """An export kept by the memory of `buffers` (and the views' data buffers)."""
        memory = self.memory
        owner = tuple([memory[i] for i in buffers])
        return new_export(n_views, (owner, tuple(self.buffers)) if n_views else owner)
