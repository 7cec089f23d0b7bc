# Records -> Arrow columns, with no Python object per record.
#
# Two passes over the parsed batches (records.pxd Slots): the first sums what
# the columns will hold (rows, key/value/header bytes), so every buffer is
# allocated once at its final size; the second copies fields into them without
# the GIL. Header fields are re-read with bounded reads in both passes: the
# input may be a mutable buffer.
#
# With views, key and value become Arrow binary_view columns: 16-byte views
#   [int32 length][12 bytes inline]                                  length <= 12
#   [int32 length][4-byte prefix][int32 buffer index][int32 offset]  otherwise
# whose data buffers are the input and the decompressed buffers themselves.
cimport cython
from libc.stdint cimport uintptr_t, uint8_t, uint64_t, int8_t, int16_t, int32_t, int64_t, INT64_MIN, INT64_MAX
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy, memset

from kcodec._core.wire cimport FaultInfo, copy_bytes, load_u16, read_blob
from kcodec._core.records cimport (
    Batch, BatchReader, Slot, Slots, Source, V2Header, ENTRY_OK, LOG_OVERHEAD, V2_HEADER,
    NOGIL_MIN_BYTES, count_fits, entry_size, parse_v2_records, read_v2_header,
)

import pyarrow as pa

from kcodec.errors import CorruptRecordError

cdef int32_t MAX_ARROW_BYTES = 0x7FFFFFFF


cdef struct Block:            # one parsed batch, as the nogil pass needs it
    const uint8_t* base
    Slot* items
    Py_ssize_t count
    Py_ssize_t first_slot      # where its slots are in the collector's arena; -1: in a Slots
    Py_ssize_t start, end      # the records' bytes in their source (views)
    int64_t producer_id
    int16_t producer_epoch
    int32_t leader_epoch
    bint transactional
    const uint8_t* window      # views: where the block's data buffer starts
    int32_t buffer             # views: that buffer's index among the data buffers


cdef struct Totals:
    Py_ssize_t rows
    Py_ssize_t key_bytes
    Py_ssize_t value_bytes
    Py_ssize_t headers
    Py_ssize_t header_key_bytes
    Py_ssize_t header_value_bytes
    bint header_keys_ascii


cdef int measure(Block* b, Totals* t) noexcept nogil:
    """Add a block to the totals; -1 when a header no longer fits its record."""
    cdef Py_ssize_t i
    cdef int32_t j, hk, hv
    cdef Slot* s
    cdef const uint8_t* p
    cdef const uint8_t* end
    cdef const uint8_t* key
    cdef const uint8_t* value
    t.rows += b.count
    for i in range(b.count):
        s = &b.items[i]
        if s.key_len > 0:
            t.key_bytes += s.key_len
        if s.value_len > 0:
            t.value_bytes += s.value_len
        t.headers += s.headers_count
        p = b.base + s.headers_pos
        end = b.base + s.headers_end
        for j in range(s.headers_count):
            if read_blob(&p, end, &key, &hk) or hk < 0 or read_blob(&p, end, &value, &hv):
                return -1
            t.header_key_bytes += hk
            if hv > 0:
                t.header_value_bytes += hv
            while hk > 0:
                hk -= 1
                if key[hk] & 0x80:
                    t.header_keys_ascii = False
    return 0


cdef struct Out:              # the column buffers being filled
    bint views                     # key and value as views, not offsets and data
    int64_t* offset
    int64_t* timestamp
    uint8_t* timestamp_valid       # validity bitmaps (zeroed before the fill)
    int32_t* timestamp_type
    int32_t* key_offsets
    uint8_t* key_data
    uint8_t* key_views
    uint8_t* key_valid
    int32_t* value_offsets
    uint8_t* value_data
    uint8_t* value_views
    uint8_t* value_valid
    int32_t* header_list_offsets
    uint8_t* headers_valid
    int32_t* header_key_offsets
    uint8_t* header_key_data
    int32_t* header_value_offsets
    uint8_t* header_value_data
    uint8_t* header_value_valid
    int64_t* producer_id           # batch columns (NULL unless asked for)
    int16_t* producer_epoch
    int32_t* sequence
    uint8_t* transactional         # a bitmap, as Arrow stores booleans
    int32_t* leader_epoch
    Py_ssize_t null_timestamps     # nulls counted while filling
    Py_ssize_t null_keys
    Py_ssize_t null_values
    Py_ssize_t null_headers
    Py_ssize_t null_header_values


cdef inline Py_ssize_t set_bit(uint8_t* bitmap, Py_ssize_t i, bint value) noexcept nogil:
    """Set bit i when value is true; returns 1 for a null (false)."""
    if value:
        bitmap[i >> 3] |= <uint8_t>(1 << (i & 7))
        return 0
    return 1


cdef inline void put_bytes(const uint8_t* src, int32_t n, uint8_t* data, int32_t* offsets,
                           Py_ssize_t i) noexcept nogil:
    """Append value i of a binary column (n < 0, null, adds no bytes)."""
    cdef int32_t at = offsets[i]
    if n > 0:
        copy_bytes(data + at, src, n)
        at += n
    offsets[i + 1] = at


cdef inline void put_view(const uint8_t* src, int32_t n, Block* b, uint8_t* view) noexcept nogil:
    """Write the 16-byte view of a value (n < 0, null, is all zeros)."""
    cdef int32_t offset
    memset(view, 0, 16)
    if n <= 0:
        return
    memcpy(view, &n, 4)
    if n <= 12:
        memcpy(view + 4, src, n)
    else:
        offset = <int32_t>(src - b.window)
        memcpy(view + 4, src, 4)
        memcpy(view + 8, &b.buffer, 4)
        memcpy(view + 12, &offset, 4)


cdef void fill(Block* blocks, Py_ssize_t n_blocks, Out* o) noexcept nogil:
    cdef Py_ssize_t bi, i, row = 0, h = 0
    cdef int32_t j, hk = 0, hv = 0
    cdef Block* b
    cdef Slot* s
    cdef const uint8_t* p
    cdef const uint8_t* end
    cdef const uint8_t* key = NULL
    cdef const uint8_t* value = NULL
    if not o.views:
        o.key_offsets[0] = o.value_offsets[0] = 0
    o.header_list_offsets[0] = o.header_key_offsets[0] = o.header_value_offsets[0] = 0
    for bi in range(n_blocks):
        b = &blocks[bi]
        for i in range(b.count):
            s = &b.items[i]
            o.offset[row] = s.offset
            o.timestamp[row] = s.timestamp
            o.null_timestamps += set_bit(o.timestamp_valid, row, s.magic > 0)
            o.timestamp_type[row] = s.ts_type
            o.null_keys += set_bit(o.key_valid, row, s.key_len >= 0)
            o.null_values += set_bit(o.value_valid, row, s.value_len >= 0)
            if o.views:
                put_view(b.base + s.key_pos, s.key_len, b, o.key_views + 16 * row)
                put_view(b.base + s.value_pos, s.value_len, b, o.value_views + 16 * row)
            else:
                put_bytes(b.base + s.key_pos, s.key_len, o.key_data, o.key_offsets, row)
                put_bytes(b.base + s.value_pos, s.value_len, o.value_data, o.value_offsets, row)
            o.null_headers += set_bit(o.headers_valid, row, s.headers_count > 0)
            p = b.base + s.headers_pos
            end = b.base + s.headers_end
            for j in range(s.headers_count):
                read_blob(&p, end, &key, &hk)          # measured already: in bounds
                read_blob(&p, end, &value, &hv)
                put_bytes(key, hk, o.header_key_data, o.header_key_offsets, h)
                o.null_header_values += set_bit(o.header_value_valid, h, hv >= 0)
                put_bytes(value, hv, o.header_value_data, o.header_value_offsets, h)
                h += 1
            o.header_list_offsets[row + 1] = <int32_t>h
            if o.producer_id != NULL:
                o.producer_id[row] = b.producer_id
                o.producer_epoch[row] = b.producer_epoch
                o.sequence[row] = s.sequence
                set_bit(o.transactional, row, b.transactional)
                o.leader_epoch[row] = b.leader_epoch
            row += 1


_POOL = pa.system_memory_pool()
cdef Py_ssize_t ALIGNMENT = 64


cdef class Columns:
    """Every fixed-width and offsets buffer of one decode, and its data buffers,
    carved out of one allocation from Arrow's system (malloc) pool. Output
    columns are megabytes written once: allocators that hand such blocks back
    to the OS on free (numpy's large arrays, mimalloc's huge objects) make
    every decode fault its pages in again, which on a virtual machine costs
    more than decoding the records; malloc keeps them for the next call."""
    cdef object memory
    cdef uint8_t* base
    cdef dict regions               # name -> (start, size)

    def __cinit__(self, list sizes):
        cdef Py_ssize_t at = 0
        self.regions = {}
        for name, size in sizes:
            self.regions[name] = (at, size)
            at += (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        self.memory = pa.allocate_buffer(max(at, 1), memory_pool=_POOL)
        self.base = <uint8_t*><uintptr_t>self.memory.address

    cdef uint8_t* ptr(self, name, bint zeroed=False):
        cdef Py_ssize_t at, size
        if name not in self.regions:
            return NULL
        at, size = self.regions[name]
        if zeroed:
            memset(self.base + at, 0, size)
        return self.base + at

    cdef buffer(self, name):
        at, size = self.regions[name]
        return self.memory.slice(at, size)


HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADER_LIST_TYPE = pa.list_(HEADER_TYPE)
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")


cdef view_buffer(Block* b, Source src, Py_ssize_t start, Py_ssize_t end, dict current,
                 list buffers):
    """Point the block's views at a data buffer of `src` holding [start, end), the
    block's records. Views address their bytes with int32 offsets: past 2 GiB,
    a source is cut into windows, each starting at the first block it holds."""
    cdef Py_ssize_t index, at
    index, at = current.get(src, (-1, 0))
    if index < 0 or start < at or end - at > MAX_ARROW_BYTES:
        at = 0 if end <= MAX_ARROW_BYTES else start
        if end - at > MAX_ARROW_BYTES:
            raise ValueError(f"{end - at} bytes of decompressed records exceed the 2 GiB that "
                             "binary views can address; decode with views=False")
        index = len(buffers)
        # The slice keeps `src`, and with it the buffer export of the input or
        # the decompressed bytes, alive as long as Arrow holds the buffer.
        buffers.append(pa.py_buffer(src.slice(at, src.length - at)))
        current[src] = (index, at)
    b.window = src.base + at
    b.buffer = index


cdef struct Spare:
    void* memory
    Py_ssize_t capacity


# The block and slot arrays of the last decode, kept for the next one (under
# the GIL): growing them anew each time would fault in fresh pages, which on
# a virtual machine costs more than parsing the records. Large ones are freed.
cdef Spare spare_blocks, spare_arena
cdef size_t MAX_SPARE_BYTES = 8 << 20


cdef void keep_spare(Spare* spare, void* memory, size_t nbytes, Py_ssize_t capacity) noexcept:
    if memory == NULL:
        return
    if nbytes > MAX_SPARE_BYTES or capacity <= spare.capacity:
        free(memory)
        return
    free(spare.memory)
    spare.memory = memory
    spare.capacity = capacity


@cython.final
cdef class Collector:
    """The parsed batches of one decode, as Blocks: batches read as Batch objects
    keep their slots in a Slots object; uncompressed v2 batches parsed by
    scan_plain keep theirs in one arena."""
    cdef Block* blocks
    cdef Py_ssize_t n_blocks, blocks_capacity
    cdef Slot* arena
    cdef Py_ssize_t arena_used, arena_capacity
    cdef list keep_alive
    cdef bint include_control, views
    cdef list buffers
    cdef dict current

    def __cinit__(self, bint include_control, bint views):
        global spare_blocks, spare_arena
        self.include_control = include_control
        self.views = views
        self.keep_alive = []
        self.buffers = []
        self.current = {}
        self.blocks = <Block*>spare_blocks.memory
        self.blocks_capacity = spare_blocks.capacity
        self.arena = <Slot*>spare_arena.memory
        self.arena_capacity = spare_arena.capacity
        spare_blocks.memory = spare_arena.memory = NULL
        spare_blocks.capacity = spare_arena.capacity = 0

    def __dealloc__(self):
        keep_spare(&spare_blocks, self.blocks, self.blocks_capacity * sizeof(Block),
                   self.blocks_capacity)
        keep_spare(&spare_arena, self.arena, self.arena_capacity * sizeof(Slot),
                   self.arena_capacity)

    cdef Block* new_block(self) noexcept nogil:
        cdef Py_ssize_t capacity
        cdef Block* grown
        if self.n_blocks == self.blocks_capacity:
            capacity = max(16, 2 * self.blocks_capacity)
            grown = <Block*>realloc(self.blocks, capacity * sizeof(Block))
            if grown == NULL:
                return NULL
            self.blocks = grown
            self.blocks_capacity = capacity
        self.n_blocks += 1
        return &self.blocks[self.n_blocks - 1]

    cdef Slot* reserve(self, Py_ssize_t n) noexcept nogil:
        """Room for n slots at the end of the arena (NULL when out of memory)."""
        cdef Py_ssize_t capacity
        cdef Slot* grown
        if self.arena_used + n > self.arena_capacity:
            capacity = max(1024, 2 * self.arena_capacity, self.arena_used + n)
            grown = <Slot*>realloc(self.arena, capacity * sizeof(Slot))
            if grown == NULL:
                return NULL
            self.arena = grown
            self.arena_capacity = capacity
        return self.arena + self.arena_used

    cdef int add_batch(self, Batch batch) except -1:
        cdef Slots slots
        cdef Block* b
        if batch.magic == 2 and batch.attributes & 0x20:
            if not self.include_control:
                return 0
            batch._loaded()                          # validates the control keys and values
        slots = batch.parsed()
        self.keep_alive.append(slots)
        b = self.new_block()
        if b == NULL:
            raise MemoryError()
        b.base = slots.src.base
        b.items = slots.items
        b.first_slot = -1
        b.count = slots.count
        b.producer_id = batch.producer_id
        b.producer_epoch = batch.producer_epoch
        b.leader_epoch = batch.partition_leader_epoch
        b.transactional = batch.magic == 2 and batch.attributes & 0x10
        b.start = batch.position + LOG_OVERHEAD
        b.end = batch.position + batch.size
        if self.views and slots.count:
            if slots.src is batch.src:
                view_buffer(b, slots.src, b.start, b.end, self.current, self.buffers)
            else:
                view_buffer(b, slots.src, 0, slots.src.length, self.current, self.buffers)
        return 0

    cdef int add_plain(self, Source src, Py_ssize_t* pos, int64_t max_entry, bint verify_crc,
                       int64_t start, int64_t end) except -1:
        """Take the uncompressed v2 batches from *pos on (see scan_plain)."""
        cdef Py_ssize_t first = self.n_blocks, k
        cdef int st
        if src.length - pos[0] < NOGIL_MIN_BYTES or not plain_batch_at(src.base + pos[0],
                                                                        src.length - pos[0]):
            st = scan_plain(self, src.base, src.length, pos, max_entry, verify_crc, start, end)
        else:
            with nogil:
                st = scan_plain(self, src.base, src.length, pos, max_entry, verify_crc, start,
                                end)
        if st:
            raise MemoryError()
        if self.views:
            for k in range(first, self.n_blocks):
                view_buffer(&self.blocks[k], src, self.blocks[k].start, self.blocks[k].end,
                            self.current, self.buffers)
        return 0

    cdef dict columns(self, bint batch_columns):
        cdef Py_ssize_t k
        cdef Totals t
        cdef Out o
        cdef Block* b
        t.rows = t.key_bytes = t.value_bytes = t.headers = 0
        t.header_key_bytes = t.header_value_bytes = 0
        t.header_keys_ascii = True
        for k in range(self.n_blocks):
            b = &self.blocks[k]
            if b.first_slot >= 0:
                b.items = self.arena + b.first_slot
            if measure(b, &t):
                raise CorruptRecordError("record headers no longer fit their record: the input "
                                         "buffer changed after it was read",
                                         position=b.start - LOG_OVERHEAD)
        copied = (t.header_key_bytes, t.header_value_bytes)
        if not self.views:
            copied += (t.key_bytes, t.value_bytes)
        for size in copied:
            if size > MAX_ARROW_BYTES:
                raise ValueError(f"{size} bytes in one column exceed Arrow's 2 GiB binary "
                                 "limit; decode fewer batches at a time (e.g. iter_decode)")
        rows, nh = t.rows, t.headers
        bitmap = (rows + 7) // 8
        sizes = [("offset", 8 * rows), ("timestamp", 8 * rows), ("timestamp_valid", bitmap),
                 ("timestampType", 4 * rows), ("key_valid", bitmap), ("value_valid", bitmap),
                 ("header_list_offsets", 4 * (rows + 1)), ("headers_valid", bitmap),
                 ("header_key_offsets", 4 * (nh + 1)), ("header_key_data", t.header_key_bytes),
                 ("header_value_offsets", 4 * (nh + 1)),
                 ("header_value_data", t.header_value_bytes),
                 ("header_value_valid", (nh + 7) // 8)]
        if self.views:
            sizes += [("key_views", 16 * rows), ("value_views", 16 * rows)]
        else:
            sizes += [("key_offsets", 4 * (rows + 1)), ("key_data", t.key_bytes),
                      ("value_offsets", 4 * (rows + 1)), ("value_data", t.value_bytes)]
        if batch_columns:
            sizes += [("producerId", 8 * rows), ("producerEpoch", 2 * rows),
                      ("sequence", 4 * rows), ("isTransactional", bitmap),
                      ("leaderEpoch", 4 * rows)]
        cdef Columns cols = Columns(sizes)
        o.views = self.views
        o.offset = <int64_t*>cols.ptr("offset")
        o.timestamp = <int64_t*>cols.ptr("timestamp")
        o.timestamp_valid = cols.ptr("timestamp_valid", True)
        o.timestamp_type = <int32_t*>cols.ptr("timestampType")
        o.key_offsets = <int32_t*>cols.ptr("key_offsets")
        o.key_data = cols.ptr("key_data")
        o.key_views = cols.ptr("key_views")
        o.key_valid = cols.ptr("key_valid", True)
        o.value_offsets = <int32_t*>cols.ptr("value_offsets")
        o.value_data = cols.ptr("value_data")
        o.value_views = cols.ptr("value_views")
        o.value_valid = cols.ptr("value_valid", True)
        o.header_list_offsets = <int32_t*>cols.ptr("header_list_offsets")
        o.headers_valid = cols.ptr("headers_valid", True)
        o.header_key_offsets = <int32_t*>cols.ptr("header_key_offsets")
        o.header_key_data = cols.ptr("header_key_data")
        o.header_value_offsets = <int32_t*>cols.ptr("header_value_offsets")
        o.header_value_data = cols.ptr("header_value_data")
        o.header_value_valid = cols.ptr("header_value_valid", True)
        o.producer_id = <int64_t*>cols.ptr("producerId")
        o.producer_epoch = <int16_t*>cols.ptr("producerEpoch")
        o.sequence = <int32_t*>cols.ptr("sequence")
        o.transactional = cols.ptr("isTransactional", True)
        o.leader_epoch = <int32_t*>cols.ptr("leaderEpoch")
        o.null_timestamps = o.null_keys = o.null_values = 0
        o.null_headers = o.null_header_values = 0
        if rows < NOGIL_MIN_BYTES // 64:
            fill(self.blocks, self.n_blocks, &o)
        else:
            with nogil:
                fill(self.blocks, self.n_blocks, &o)
        nulls = {"timestamp": o.null_timestamps, "key": o.null_keys, "value": o.null_values,
                 "headers": o.null_headers, "header_value": o.null_header_values}
        return _assemble(cols, rows, nh, nulls, t.header_keys_ascii, batch_columns,
                         self.buffers if self.views else None)


cdef inline bint plain_batch_at(const uint8_t* p, Py_ssize_t remaining) noexcept nogil:
    """Whether the entry at p looks like an uncompressed v2 batch (so that a scan
    is worth releasing the GIL for)."""
    return remaining >= V2_HEADER and p[16] == 2 and not (p[22] & 0x07)


cdef int scan_plain(Collector c, const uint8_t* base, Py_ssize_t length, Py_ssize_t* pos,
                    int64_t max_entry, bint verify_crc, int64_t start, int64_t end) noexcept nogil:
    """Parse the uncompressed v2 batches from *pos on, with no Python object per
    batch, until an entry it does not take whole: the end or a partial entry,
    a legacy or compressed entry, a control batch to include, anything that
    fails a check. That entry is left at *pos for BatchReader (which raises
    the error, if any). Control batches and batches outside [start, end) are
    skipped, CRCs checked, as decode_columns skips them. -1: out of memory."""
    cdef const uint8_t* p
    cdef int32_t size
    cdef int attributes
    cdef V2Header h
    cdef Block* b
    cdef Slot* slots
    cdef FaultInfo fi
    while True:
        p = base + pos[0]
        if entry_size(p, length - pos[0], max_entry, &size) != ENTRY_OK or p[16] != 2:
            return 0
        attributes = load_u16(p + 21)
        if attributes & 0x07 or (attributes & 0x20 and c.include_control):
            return 0
        if read_v2_header(p, size, verify_crc, &h) != ENTRY_OK:
            return 0
        if h.count and not attributes & 0x20 and h.last_offset >= start and h.base_offset < end:
            if not count_fits(h.count, size + LOG_OVERHEAD - V2_HEADER):
                return 0
            slots = c.reserve(h.count)
            if slots == NULL:
                return -1
            if parse_v2_records(base, p + V2_HEADER, p + LOG_OVERHEAD + size, h.count,
                                h.base_offset, h.first_timestamp, h.max_timestamp,
                                (attributes >> 3) & 1, h.base_sequence, slots, &fi):
                return 0
            b = c.new_block()
            if b == NULL:
                return -1
            b.base = base
            b.items = NULL
            b.first_slot = c.arena_used
            b.count = h.count
            b.start = pos[0] + LOG_OVERHEAD
            b.end = pos[0] + LOG_OVERHEAD + size
            b.producer_id = h.producer_id
            b.producer_epoch = h.producer_epoch
            b.leader_epoch = h.leader_epoch
            b.transactional = (attributes & 0x10) != 0
            c.arena_used += h.count
        pos[0] += LOG_OVERHEAD + <Py_ssize_t>size


def decode_columns(batches, bint include_control=False, bint batch_columns=False,
                   bint views=False):
    """Decode every record of `batches` (kcodec Batch objects) into a dict of
    Arrow arrays named as decode()'s schema. With `views`, key and value are
    binary_view arrays pointing into the input and decompressed buffers, which
    they keep alive."""
    cdef Collector c = Collector(include_control, views)
    cdef Batch batch
    for batch in batches:
        c.add_batch(batch)
    return c.columns(batch_columns)


def decode_record_set(BatchReader reader, keep=None, bint include_control=False,
                      bint batch_columns=False, bint views=False, start_offset=None,
                      end_offset=None):
    """decode_columns of every batch `reader` (fresh) reads that keep(batch)
    accepts: runs of uncompressed v2 batches are parsed without the GIL and
    without Batch objects, skipping those outside [start_offset, end_offset)
    (`keep` must skip the same); every other entry is read by `reader`."""
    cdef Collector c = Collector(include_control, views)
    cdef int64_t start = INT64_MIN if start_offset is None else start_offset
    cdef int64_t end = INT64_MAX if end_offset is None else end_offset
    cdef Py_ssize_t pos
    while True:
        pos = reader.pos
        c.add_plain(reader.src, &pos, reader.max_entry, reader.verify_crc, start, end)
        reader.pos = pos
        batch = next(reader, None)
        if batch is None:
            break
        if keep is None or keep(batch):
            c.add_batch(batch)
    return c.columns(batch_columns)


cdef _validity(Columns cols, name, Py_ssize_t nulls):
    return cols.buffer(name) if nulls else None


cdef _assemble(Columns cols, Py_ssize_t rows, Py_ssize_t nh, dict nulls, bint header_keys_ascii,
               bint batch_columns, list buffers):
    B = cols.buffer
    header_keys = pa.Array.from_buffers(
        pa.string() if header_keys_ascii else pa.binary(), nh,
        [None, B("header_key_offsets"), B("header_key_data")], 0)
    if not header_keys_ascii:   # Java decodes header keys as UTF-8, replacing what is not
        header_keys = pa.array([k.decode("utf-8", "replace") for k in header_keys.to_pylist()],
                               pa.string())
    header_values = pa.Array.from_buffers(
        pa.binary(), nh, [_validity(cols, "header_value_valid", nulls["header_value"]),
                          B("header_value_offsets"), B("header_value_data")],
        nulls["header_value"])
    structs = pa.Array.from_buffers(HEADER_TYPE, nh, [None], 0,
                                    children=[header_keys, header_values])
    headers = pa.Array.from_buffers(
        HEADER_LIST_TYPE, rows,
        [_validity(cols, "headers_valid", nulls["headers"]), B("header_list_offsets")],
        nulls["headers"], children=[structs])
    out = {}
    for name in ("key", "value"):
        validity = _validity(cols, name + "_valid", nulls[name])
        if buffers is None:
            out[name] = pa.Array.from_buffers(
                pa.binary(), rows, [validity, B(name + "_offsets"), B(name + "_data")],
                nulls[name])
        else:
            out[name] = pa.Array.from_buffers(
                pa.binary_view(), rows, [validity, B(name + "_views"), *buffers], nulls[name])
    out["offset"] = pa.Array.from_buffers(pa.int64(), rows, [None, B("offset")], 0)
    out["timestamp"] = pa.Array.from_buffers(
        TIMESTAMP_TYPE, rows,
        [_validity(cols, "timestamp_valid", nulls["timestamp"]), B("timestamp")],
        nulls["timestamp"])
    out["timestampType"] = pa.Array.from_buffers(pa.int32(), rows, [None, B("timestampType")], 0)
    out["headers"] = headers
    if batch_columns:
        for name, arrow_type in (("producerId", pa.int64()), ("producerEpoch", pa.int16()),
                                 ("sequence", pa.int32()), ("isTransactional", pa.bool_()),
                                 ("leaderEpoch", pa.int32())):
            out[name] = pa.Array.from_buffers(arrow_type, rows, [None, B(name)], 0)
    return out
