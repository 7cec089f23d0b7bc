# Records -> Arrow columns, with no Python object per record.
#
# One pass, record by record: each v2 record is parsed (parse_v2_record, the
# one v2 record parser) and written straight into the column buffers while it
# is in cache; legacy entries come parsed as Slots. A decompressed batch is
# released (or its buffer reused: lz4 and zstd, which the scan decompresses
# itself) before the next one is decompressed. A record that does not fit
# stops the pass, the buffers grow, and it resumes at that record; a record
# that fails its checks takes its whole batch back out of the columns, and
# the batch is read again, through BatchReader and add_batch, which raises
# the error. A column that must grow makes room for the rest of the batch,
# as if its records were like the one that did not fit; from the second
# batch on, it is sized by extrapolating from the share of the input read,
# so a uniform input rarely copies a column; before that, and with offset
# bounds, it at least doubles. Growth needs no GIL: a run of uncompressed
# batches is one stretch without it, so threads decoding at once do not
# queue for it at every growth. The copy takes a record's first headers from
# where its parse found them; any after those it reads again, with bounds:
# the input may be a mutable buffer.
#
# With views, key and value become Arrow binary_view columns: 16-byte views
#   [int32 length][12 bytes inline]                                  length <= 12
#   [int32 length][4-byte prefix][int32 buffer index][int32 offset]  otherwise
# whose data buffers are the input and the decompressed buffers themselves.
cimport cython
from libc.stdint cimport uintptr_t, uint8_t, uint64_t, int16_t, int32_t, int64_t, INT64_MIN, INT64_MAX
from libc.stdlib cimport calloc, malloc, realloc, free
from cpython.ref cimport PyObject
from libc.string cimport memcpy, memset
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock, PyThread_release_lock,
    NOWAIT_LOCK, WAIT_LOCK,
)

from kcodec._core.wire cimport COPY_SLACK, FaultInfo, copy_over, load_i32, load_i64, load_u16, read_blob
from kcodec._core.records cimport (
    Batch, BatchReader, HeaderAt, LegacyMessage, Slot, Slots, Source, V2Base, V2Header, Wrapper, ENTRY_OK,
    LOG_OVERHEAD, V2_HEADER, V2_MIN_RECORD, NOGIL_MIN_BYTES, count_fits, count_inner, entry_size,
    last_offset_below, legacy_entry_ok, parse_inner, parse_v2_record, raise_fault, read_v2_header, record_sequence,
    scan_messages, v2_records_end, wrapper_of,
)
from kcodec._core.system_codecs cimport (
    LZ4, Inflater, decompress_batch, decompress_in_core, decompress_with_gil, inflates,
    release_inflater, release_output, drop_output_tail)

cdef extern from *:
    int popcount "__builtin_popcountll" (unsigned long long) noexcept nogil

cdef extern from *:
    """
    /* An exact bytes object exporting all of itself: it keeps nothing else alive. */
    static int kc_exported_by_bytes(const Py_buffer* view) {
        return view->obj != NULL && PyBytes_CheckExact(view->obj)
               && view->buf == PyBytes_AS_STRING(view->obj)
               && view->len == PyBytes_GET_SIZE(view->obj);
    }
    """
    bint exported_by_bytes "kc_exported_by_bytes" (const Py_buffer* view) noexcept nogil

cdef extern from "Python.h":
    void Py_IncRef(PyObject* o)
    void Py_DecRef(PyObject* o)
    int Py_IsInitialized() nogil

import operator
import os

import pyarrow as pa

from kcodec.compression import decompress
from kcodec.errors import CorruptRecordError, KafkaFormatError, located

cdef int32_t MAX_ARROW_BYTES = 0x7FFFFFFF
cdef double MAX_EXPANSION = 16     # of compressed input, when extrapolating growth
cdef Py_ssize_t MAX_RESERVED_BLOCK = 64 << 20   # a larger block takes fill's checked loop
# v0/v1 messages are added MESSAGE_RUN at a time (each one record); a run
# spans at most MESSAGE_RUN_BYTES, far inside the 2 GiB a views window holds.
cdef enum:
    MESSAGE_RUN = 1024
cdef Py_ssize_t MESSAGE_RUN_BYTES = 64 << 20


# The column buffers. Their order is relied on: a binary column's data
# follows its offsets, and the buffers of headers and of the batch columns
# are contiguous.
# Bitmaps are filled with their bits set only where that is rare: the
# validity of headers, and for the other columns the nulls, inverted into
# validity (see INVERTED) when handed to Arrow, so most records set no bit.
cdef enum:
    B_OFFSET, B_TIMESTAMP, B_TIMESTAMP_NULLS, B_TIMESTAMP_TYPE, B_KEY_NULLS, B_VALUE_NULLS,
    B_KEY_OFFSETS, B_KEY_DATA, B_VALUE_OFFSETS, B_VALUE_DATA, B_KEY_VIEWS, B_VALUE_VIEWS,
    B_HEADER_LIST_OFFSETS, B_HEADERS_VALID, B_HEADER_KEY_OFFSETS, B_HEADER_KEY_DATA,
    B_HEADER_VALUE_OFFSETS, B_HEADER_VALUE_DATA, B_HEADER_VALUE_NULLS,
    B_PRODUCER_ID, B_PRODUCER_EPOCH, B_SEQUENCE, B_TRANSACTIONAL, B_LEADER_EPOCH,
    N_BUFFERS

# What a buffer's size follows: rows, headers, or the bytes of one binary column.
cdef enum:          # Unit
    PER_ROW, PER_HEADER, KEY_BYTES, VALUE_BYTES, HEADER_KEY_BYTES, HEADER_VALUE_BYTES, N_UNITS

cdef enum:          # what nulls are counted in
    NULL_TIMESTAMPS, NULL_KEYS, NULL_VALUES, NULL_HEADERS, NULL_HEADER_VALUES, N_NULLS

cdef int UNIT[N_BUFFERS]
cdef int WIDTH[N_BUFFERS]          # bytes per unit; 0: a bitmap (one bit per unit)
cdef bint PLUS_ONE[N_BUFFERS]      # offsets: one more entry than units
cdef int NULLS_IN[N_BUFFERS]       # a validity bitmap: what its nulls are counted in; else -1
cdef bint INVERTED[N_BUFFERS]      # ... filled with the nulls' bits, not the valid ones'

cdef void describe(int i, int unit, int width, bint plus_one, int nulls_in=-1,
                   bint inverted=False):
    UNIT[i] = unit
    WIDTH[i] = width
    PLUS_ONE[i] = plus_one
    NULLS_IN[i] = nulls_in
    INVERTED[i] = inverted

describe(B_OFFSET, PER_ROW, 8, False)
describe(B_TIMESTAMP, PER_ROW, 8, False)
describe(B_TIMESTAMP_NULLS, PER_ROW, 0, False, NULL_TIMESTAMPS, True)
describe(B_TIMESTAMP_TYPE, PER_ROW, 4, False)
describe(B_KEY_NULLS, PER_ROW, 0, False, NULL_KEYS, True)
describe(B_VALUE_NULLS, PER_ROW, 0, False, NULL_VALUES, True)
describe(B_KEY_OFFSETS, PER_ROW, 4, True)
describe(B_KEY_DATA, KEY_BYTES, 1, False)
describe(B_VALUE_OFFSETS, PER_ROW, 4, True)
describe(B_VALUE_DATA, VALUE_BYTES, 1, False)
describe(B_KEY_VIEWS, PER_ROW, 16, False)
describe(B_VALUE_VIEWS, PER_ROW, 16, False)
describe(B_HEADER_LIST_OFFSETS, PER_ROW, 4, True)
describe(B_HEADERS_VALID, PER_ROW, 0, False, NULL_HEADERS)
describe(B_HEADER_KEY_OFFSETS, PER_HEADER, 4, True)
describe(B_HEADER_KEY_DATA, HEADER_KEY_BYTES, 1, False)
describe(B_HEADER_VALUE_OFFSETS, PER_HEADER, 4, True)
describe(B_HEADER_VALUE_DATA, HEADER_VALUE_BYTES, 1, False)
describe(B_HEADER_VALUE_NULLS, PER_HEADER, 0, False, NULL_HEADER_VALUES, True)
describe(B_PRODUCER_ID, PER_ROW, 8, False)
describe(B_PRODUCER_EPOCH, PER_ROW, 2, False)
describe(B_SEQUENCE, PER_ROW, 4, False)
describe(B_TRANSACTIONAL, PER_ROW, 0, False)
describe(B_LEADER_EPOCH, PER_ROW, 4, False)

cdef inline Py_ssize_t buffer_bytes(int i, Py_ssize_t units) noexcept nogil:
    if WIDTH[i] == 0:
        return (units + 7) // 8
    return WIDTH[i] * (units + PLUS_ONE[i])

cdef inline Py_ssize_t allocated_bytes(int i, Py_ssize_t units) noexcept nogil:
    """buffer_bytes, and the slack copy_over writes past a binary column's data."""
    return buffer_bytes(i, units) + (COPY_SLACK if WIDTH[i] == 1 else 0)


cdef struct Out:              # the column buffers being filled
    bint views                     # key and value as views, not offsets and data
    bint enabled[N_BUFFERS]
    uint8_t* mem[N_BUFFERS]        # from take_memory; handed to ColumnMemory by table()
    size_t allocated[N_BUFFERS]    # bytes of each, as take_memory gave them
    Py_ssize_t capacity[N_UNITS]   # units every buffer of a unit has room for
    Py_ssize_t used[N_UNITS]       # units written: rows, headers, bytes of each binary column
    Py_ssize_t needed[N_UNITS]     # units the block being added needs (see reserve)
    Py_ssize_t most[N_UNITS]       # ... at most, whatever its records are (see fill): not extrapolated
    Py_ssize_t input_bytes         # the whole input (0: unknown), and how much of it
    Py_ssize_t consumed            # the blocks so far came from, to extrapolate growth
    Py_ssize_t parts_before        # decode_parts: the input of the parts before this one
    Py_ssize_t expanded            # bytes decompression added to the blocks finished so far
    Py_ssize_t block_position      # the block filled at the last growth: where it starts
    Py_ssize_t block_end           # and ends in the input, and its records' bytes
    Py_ssize_t block_bytes
    bint headers_seen              # a block had records with headers: skip the headerless try


cdef Py_ssize_t grown_units(Out* o, int unit) noexcept nogil:
    """How many units to grow `unit`'s buffers to, for o.needed[unit]: from the
    second block on, what is written so far extrapolated from the share of
    the input consumed (every growth copies what is written so far, so
    waiting for a larger sample costs more than an estimate too high, which
    table() gives back), up to what an uncompressed input of its size could
    hold; for bytes, up to the blocks
    before the current one as decompressed, the current one whole, and the
    rest expanded as those before (at most MAX_EXPANSION times: a skewed
    input must not make it allocate without bound); and at least o.most[unit]."""
    cdef Py_ssize_t needed = o.needed[unit], guess, most, records_bytes
    cdef Py_ssize_t units = max(needed, 2 * o.capacity[unit])
    cdef double expansion = 1.0
    if o.input_bytes > o.consumed > 0:
        if o.block_position > 0:
            expansion = min(max(1.0, <double>(o.block_position + o.expanded) / o.block_position),
                            MAX_EXPANSION)
        records_bytes = o.block_position + o.expanded + o.block_bytes + <Py_ssize_t>(
            <double>max(o.input_bytes - o.block_end, 0) * expansion)
        most = (o.input_bytes // V2_MIN_RECORD if unit == PER_ROW else
                o.input_bytes // 2 if unit == PER_HEADER else records_bytes)
        # Plus the room this block reserves past what it wrote (the rest of it,
        # whatever its records are): the last block will reserve as much.
        guess = <Py_ssize_t>(<double>o.used[unit] * o.input_bytes / o.consumed * 1.0625) + max(
            o.most[unit] - o.needed[unit], 0)
        units = max(units, min(guess, most))
    if unit != PER_ROW:
        units = min(units, MAX_ARROW_BYTES)        # int32 offsets; reserve refuses more
    return max(units, needed, o.most[unit])


cdef struct ViewBuffer:        # a data buffer the views point into
    const uint8_t* start
    int64_t size


cdef struct Mark:             # the columns as they were before a block
    Py_ssize_t used[N_UNITS]


cdef enum:
    HEADERS_KEPT = 8         # headers of a record whose place the parse keeps for the copy


cdef struct Block:            # one batch being added to the columns
    const uint8_t* base        # the buffer its records are in
    Slot* items                # legacy entries: their records, parsed; NULL: v2, parsed by fill
    Py_ssize_t count
    Py_ssize_t done            # records added so far (fill resumes there after a growth)
    const uint8_t* next        # v2: where record `done` starts
    const uint8_t* end         # v2: where the records end
    V2Base v2
    int codec                  # v2: its compression codec id
    int64_t producer_id
    int16_t producer_epoch
    int32_t leader_epoch
    bint transactional
    const uint8_t* window      # views: where the block's data buffer starts
    int32_t buffer             # views: that buffer's index among the data buffers
    Py_ssize_t position        # input bytes read before this block
    Py_ssize_t consumed        # ... and once it is in
    const uint8_t* records     # v2: where its first record starts
    Mark mark
    FaultInfo fault            # why a record failed its checks
    HeaderAt kept[HEADERS_KEPT]   # where the first headers of the record being added are


cdef void start_block(Block* b, Out* o, Py_ssize_t count) noexcept nogil:
    b.count = count
    b.done = 0
    memcpy(b.mark.used, o.used, sizeof(o.used))


cdef void start_legacy_block(Block* b, Out* o, Slot* items, Py_ssize_t count) noexcept nogil:
    """start_block, for v0/v1 records parsed into items: no producer, no
    transaction."""
    start_block(b, o, count)
    b.items = items
    b.producer_id = -1
    b.producer_epoch = -1
    b.leader_epoch = -1
    b.transactional = False


cdef void take_back(Block* b, Out* o) noexcept nogil:
    """Remove what fill added of block b (its bits too: bitmaps are only ever OR'ed)."""
    cdef int i
    cdef Py_ssize_t k
    for i in range(N_BUFFERS):
        if o.enabled[i] and WIDTH[i] == 0:
            for k in range(b.mark.used[UNIT[i]], o.used[UNIT[i]]):
                o.mem[i][k >> 3] &= <uint8_t>~(1 << (k & 7))
    memcpy(o.used, b.mark.used, sizeof(o.used))


cdef void note_progress(Block* b, Out* o, const uint8_t* record, Py_ssize_t i) noexcept nogil:
    """Where growth extrapolates from: the input read up to record i (at
    `record`, in a v2 block) of block b."""
    o.block_position = o.parts_before + b.position
    o.block_end = o.parts_before + b.consumed
    o.block_bytes = b.end - b.records
    o.consumed = o.block_position + <Py_ssize_t>(
        <double>(b.consumed - b.position) *
        (<double>i / b.count if b.items != NULL
         else <double>(record - b.records) / (b.end - b.records)))


cdef int needs_room(Out* o, Slot* s, Py_ssize_t key_bytes, Py_ssize_t value_bytes,
                    Py_ssize_t records_left, Py_ssize_t bytes_left) noexcept nogil:
    """Whether one more record s fits: 0; 1 not yet (o.needed says how many
    units the buffers must grow to: room for the records_left of its block,
    in bytes_left bytes (0: unknown), were they all like s); -2 past Arrow's
    2 GiB in a binary column."""
    cdef Py_ssize_t need[N_UNITS]
    cdef Py_ssize_t guess
    cdef int unit, st = 0
    need[PER_ROW] = 1
    need[PER_HEADER] = s.headers_count
    need[KEY_BYTES] = key_bytes
    need[VALUE_BYTES] = value_bytes
    need[HEADER_KEY_BYTES] = s.header_key_bytes
    need[HEADER_VALUE_BYTES] = s.header_value_bytes
    for unit in range(N_UNITS):
        o.needed[unit] = o.used[unit] + need[unit]
        if unit != PER_ROW and o.needed[unit] > MAX_ARROW_BYTES:
            return -2
        if o.needed[unit] > o.capacity[unit]:
            st = 1
    if st:
        for unit in range(N_UNITS):
            guess = need[unit] * records_left
            if unit != PER_ROW:
                guess = min(guess, bytes_left // 2 if unit == PER_HEADER else bytes_left,
                            MAX_ARROW_BYTES - o.used[unit])
            o.needed[unit] = max(o.needed[unit], o.used[unit] + guess)
    return st


cdef inline void mark(uint8_t* bitmap, Py_ssize_t i, bint flag) noexcept nogil:
    """Set bit i when flag is true (bits are only ever set)."""
    if flag:
        bitmap[i >> 3] |= <uint8_t>(1 << (i & 7))


cdef Py_ssize_t bits_set(const uint8_t* bitmap, Py_ssize_t n) noexcept nogil:
    """How many of the first n bits are set."""
    cdef Py_ssize_t k, total = 0
    cdef uint64_t word
    for k in range(n >> 6):
        memcpy(&word, bitmap + 8 * k, 8)
        if word:                                   # null bitmaps: mostly zeros
            total += popcount(word)
    for k in range(n & ~63, n):
        total += (bitmap[k >> 3] >> (k & 7)) & 1
    return total


cdef bint is_ascii(const uint8_t* data, Py_ssize_t n) noexcept nogil:
    """Whether none of the n bytes has its top bit set."""
    cdef Py_ssize_t k
    cdef uint64_t bits = 0, word
    for k in range(n >> 3):
        memcpy(&word, data + 8 * k, 8)
        bits |= word
    for k in range(n & ~7, n):
        bits |= data[k]
    bits |= bits >> 32
    bits |= bits >> 16
    bits |= bits >> 8
    return not (bits & 0x80)


cdef inline void put_view(const uint8_t* src, int32_t n, const uint8_t* window, int32_t buffer,
                          uint8_t* view) noexcept nogil:
    """Write the 16-byte view of a value (n < 0, null, is all zeros)."""
    cdef int32_t offset
    memset(view, 0, 16)
    if n <= 0:
        return
    memcpy(view, &n, 4)
    if n <= 12:
        memcpy(view + 4, src, n)
    else:
        offset = <int32_t>(src - window)
        memcpy(view + 4, src, 4)
        memcpy(view + 8, &buffer, 4)
        memcpy(view + 12, &offset, 4)


cdef inline void store_used(Out* o, Py_ssize_t rows, Py_ssize_t headers, Py_ssize_t key_bytes,
                            Py_ssize_t value_bytes, Py_ssize_t header_key_bytes,
                            Py_ssize_t header_value_bytes) noexcept nogil:
    """What fill has written so far, from the locals it counts in."""
    o.used[PER_ROW] = rows
    o.used[PER_HEADER] = headers
    o.used[KEY_BYTES] = key_bytes
    o.used[VALUE_BYTES] = value_bytes
    o.used[HEADER_KEY_BYTES] = header_key_bytes
    o.used[HEADER_VALUE_BYTES] = header_value_bytes


cdef int fill(Block* b, Out* o) noexcept nogil:
    """Add block b's records, from b.done on, to the columns. 0: all added; 1:
    the buffers must grow first (to o.needed, see needs_room, or to o.most),
    then fill resumes at b.done;
    2: a record fails its checks (b.fault says why) and the block is taken
    back; -2: past Arrow's 2 GiB in a binary column; -3: a header changed in
    the input since its record was parsed."""
    cdef int st
    if b.items == NULL:
        if rest_of_block_fits(b, o):
            if not o.headers_seen:
                if o.views:
                    st = fill_records(b, o, <HeaderlessViewsV2Block*>NULL)
                else:
                    st = fill_records(b, o, <HeaderlessV2Block*>NULL)
                if st != HEADERS_AHEAD:
                    return st
                # Still fits: no record takes fewer than V2_MIN_RECORD bytes,
                # nor adds more key or value bytes than it has.
                o.headers_seen = True
            if o.views:
                return fill_records(b, o, <ViewsV2Block*>NULL)
            return fill_records(b, o, <PlainV2Block*>NULL)
        if (b.end - b.next <= MAX_RESERVED_BLOCK and o.most[KEY_BYTES] <= MAX_ARROW_BYTES
                and o.most[VALUE_BYTES] <= MAX_ARROW_BYTES):
            # Grow to what the rest of the block can need, so that it takes the
            # lean version: o.most, as rest_of_block_fits left it. Keys are
            # reserved as many bytes as the block has even when they are null.
            memcpy(o.needed, o.used, sizeof(o.used))
            note_progress(b, o, b.next, b.done)
            return 1
        memset(o.most, 0, sizeof(o.most))        # the checked loop grows by needs_room alone
    return fill_records(b, o, <AnyBlock*>NULL)


cdef enum:
    NO_MEMORY = -4           # fill_grown's status, beside fill's


cdef int grow(Out* o) noexcept nogil:
    """Grow the buffers of every unit the last fill needed more of: 0, or
    NO_MEMORY (the buffers not grown yet are as they were)."""
    cdef Py_ssize_t units, written, new
    cdef size_t allocated
    cdef uint8_t* grown
    cdef int unit, i
    for unit in range(N_UNITS):
        if max(o.needed[unit], o.most[unit]) <= o.capacity[unit]:
            continue
        units = grown_units(o, unit)
        for i in range(N_BUFFERS):
            if not o.enabled[i] or UNIT[i] != unit:
                continue
            written = buffer_bytes(i, o.used[unit])
            new = allocated_bytes(i, units)
            grown = take_memory(new, &allocated)
            if grown == NULL:
                return NO_MEMORY
            memcpy(grown, o.mem[i], written)
            if WIDTH[i] == 0:
                memset(grown + written, 0, new - written)
            give_back(o.mem[i], o.allocated[i])
            o.mem[i] = grown
            o.allocated[i] = allocated
        o.capacity[unit] = units
    memset(o.most, 0, sizeof(o.most))
    return 0


cdef int fill_grown(Block* b, Out* o) noexcept nogil:
    """fill, growing the buffers as often as it asks: its status but 1, or
    NO_MEMORY."""
    cdef int st
    while True:
        st = fill(b, o)
        if st != 1:
            return st
        if grow(o):
            return NO_MEMORY


# fill_records is compiled once per BlockKind (the type of its last argument
# picks the version; the argument itself is unused): for any block; for a v2
# block without views whose rows, keys and values are known to fit, where the
# loop skips those checks for each record; for such a block while its
# records have no headers, which stops (HEADERS_AHEAD) at the first record
# that has some (without the header columns' state kept across records, that
# loop keeps its locals in registers: about 25 fewer instructions a record,
# most of them loads and stores of spilled locals); and the same two for a v2
# block whose rows fit, under views (keys and values take no column bytes there).
cdef struct AnyBlock:
    char unused
cdef struct PlainV2Block:
    char unused
cdef struct HeaderlessV2Block:
    char unused
cdef struct ViewsV2Block:
    char unused
cdef struct HeaderlessViewsV2Block:
    char unused
ctypedef fused BlockKind:
    AnyBlock
    PlainV2Block
    HeaderlessV2Block
    ViewsV2Block
    HeaderlessViewsV2Block
cdef enum:
    HEADERS_AHEAD = 4        # fill_records' status, beside fill's


cdef inline Py_ssize_t v2_records_left(Py_ssize_t count, Py_ssize_t done,
                                      Py_ssize_t bytes_left) noexcept nogil:
    """How many more records a v2 block can add, `done` of `count` added with
    bytes_left bytes to go: its count is not trusted past what its bytes hold."""
    return min(count - done, bytes_left // V2_MIN_RECORD + 1)


cdef inline bint rest_of_block_fits(Block* b, Out* o) noexcept nogil:
    """Whether the rows, keys and values of a v2 block's remaining records fit
    whatever they are: none can hold more key or value bytes than the block
    has left (under views they take no column bytes), nor be more than its
    count or its bytes allow. If not, o.most gets the units they need at most."""
    cdef Py_ssize_t bytes_left = b.end - b.next
    cdef Py_ssize_t rows = o.used[PER_ROW] + v2_records_left(b.count, b.done, bytes_left)
    cdef Py_ssize_t keys = o.used[KEY_BYTES] + (0 if o.views else bytes_left)
    cdef Py_ssize_t values = o.used[VALUE_BYTES] + (0 if o.views else bytes_left)
    if (rows <= o.capacity[PER_ROW] and keys <= o.capacity[KEY_BYTES]
            and values <= o.capacity[VALUE_BYTES]):
        return True
    memcpy(o.most, o.used, sizeof(o.used))
    o.most[PER_ROW] = rows
    o.most[KEY_BYTES] = keys
    o.most[VALUE_BYTES] = values
    return False


cdef int fill_records(Block* b, Out* o, BlockKind* kind) noexcept nogil:
    """fill, for a block of that kind."""
    # Everything the loop reads is copied into locals first: a store through a
    # uint8_t* may alias any memory, so fields read through b and o would be
    # loaded again after every byte copied.
    cdef Slot r                                      # the record being added
    cdef HeaderAt* kept = b.kept
    cdef bint any_block = BlockKind is AnyBlock
    cdef bint headerless = BlockKind is HeaderlessV2Block or BlockKind is HeaderlessViewsV2Block
    cdef Slot* items = b.items if any_block else NULL
    cdef V2Base v2 = b.v2
    cdef const uint8_t* base = b.base
    cdef const uint8_t* records_end = b.end
    cdef Py_ssize_t count = b.count     # legacy wrappers: count may pass int32
    cdef const uint8_t* p = b.next
    cdef const uint8_t* record
    cdef const uint8_t* hp
    cdef const uint8_t* hend
    cdef const uint8_t* key = NULL
    cdef const uint8_t* value = NULL
    cdef int32_t j, hk = 0, hv = 0
    cdef Py_ssize_t k
    cdef int st = 0
    cdef int64_t* offset = <int64_t*>o.mem[B_OFFSET]
    cdef int64_t* timestamp = <int64_t*>o.mem[B_TIMESTAMP]
    cdef uint8_t* timestamp_nulls = o.mem[B_TIMESTAMP_NULLS]
    cdef int32_t* timestamp_type = <int32_t*>o.mem[B_TIMESTAMP_TYPE]
    cdef uint8_t* key_nulls = o.mem[B_KEY_NULLS]
    cdef uint8_t* value_nulls = o.mem[B_VALUE_NULLS]
    cdef int32_t* key_offsets = <int32_t*>o.mem[B_KEY_OFFSETS]
    cdef uint8_t* key_data = o.mem[B_KEY_DATA]
    cdef int32_t* value_offsets = <int32_t*>o.mem[B_VALUE_OFFSETS]
    cdef uint8_t* value_data = o.mem[B_VALUE_DATA]
    cdef uint8_t* key_views = o.mem[B_KEY_VIEWS]
    cdef uint8_t* value_views = o.mem[B_VALUE_VIEWS]
    cdef int32_t* header_list_offsets = <int32_t*>o.mem[B_HEADER_LIST_OFFSETS]
    cdef uint8_t* headers_valid = o.mem[B_HEADERS_VALID]
    cdef int32_t* header_key_offsets = <int32_t*>o.mem[B_HEADER_KEY_OFFSETS]
    cdef uint8_t* header_key_data = o.mem[B_HEADER_KEY_DATA]
    cdef int32_t* header_value_offsets = <int32_t*>o.mem[B_HEADER_VALUE_OFFSETS]
    cdef uint8_t* header_value_data = o.mem[B_HEADER_VALUE_DATA]
    cdef uint8_t* header_value_nulls = o.mem[B_HEADER_VALUE_NULLS]
    cdef bint batch_columns = o.enabled[B_PRODUCER_ID]
    cdef bint views = (BlockKind is ViewsV2Block or BlockKind is HeaderlessViewsV2Block
                       or (any_block and o.views))
    cdef Py_ssize_t row = o.used[PER_ROW], h = o.used[PER_HEADER]
    # The record index is row + row_to_index: one counter for both, and the
    # loop ends at stop_row.
    cdef Py_ssize_t first_row = row, row_to_index = b.done - row
    cdef Py_ssize_t stop_row = row + count - b.done
    cdef Py_ssize_t key_at = o.used[KEY_BYTES], value_at = o.used[VALUE_BYTES]
    cdef Py_ssize_t header_key_at = o.used[HEADER_KEY_BYTES]
    cdef Py_ssize_t header_value_at = o.used[HEADER_VALUE_BYTES]
    cdef Py_ssize_t header_keys_end, header_values_end
    cdef Py_ssize_t key_bytes, value_bytes
    cdef Py_ssize_t rows_room = o.capacity[PER_ROW], headers_room = o.capacity[PER_HEADER]
    cdef Py_ssize_t key_room = o.capacity[KEY_BYTES], value_room = o.capacity[VALUE_BYTES]
    cdef Py_ssize_t header_key_room = o.capacity[HEADER_KEY_BYTES]
    cdef Py_ssize_t header_value_room = o.capacity[HEADER_VALUE_BYTES]
    cdef int64_t producer_id = b.producer_id
    cdef int16_t producer_epoch = b.producer_epoch
    cdef int32_t leader_epoch = b.leader_epoch
    cdef bint transactional = b.transactional
    cdef const uint8_t* window = b.window
    cdef int32_t buffer = b.buffer
    while row < stop_row:
        record = p
        if items != NULL:
            r = items[row + row_to_index]
        elif parse_v2_record(base, &p, records_end, <int32_t>count,
                             <int32_t>(row + row_to_index), &v2, &r, &b.fault,
                             NULL if headerless else kept, 0 if headerless else HEADERS_KEPT):
            st = 2
            break
        if headerless and r.headers_count > 0:
            p = record
            st = HEADERS_AHEAD
            break
        key_bytes = r.key_len if r.key_len > 0 and not views else 0
        value_bytes = r.value_len if r.value_len > 0 and not views else 0
        if ((any_block and (row >= rows_room or key_at + key_bytes > key_room
                             or value_at + value_bytes > value_room))
                or (not headerless and r.headers_count > 0 and (h + r.headers_count > headers_room
                    or header_key_at + r.header_key_bytes > header_key_room
                    or header_value_at + r.header_value_bytes > header_value_room))):
            store_used(o, row, h, key_at, value_at, header_key_at, header_value_at)
            note_progress(b, o, record, row + row_to_index)
            # Room for the rest of the block.
            st = needs_room(o, &r, key_bytes, value_bytes,
                            stop_row - row if items != NULL else
                            v2_records_left(count, row + row_to_index, records_end - record),
                            0 if items != NULL else records_end - record)
            if st:
                p = record
                break
        offset[row] = r.offset
        timestamp[row] = r.timestamp
        if any_block:   # a v2 block's timestamps are never null; its type is set after the loop
            mark(timestamp_nulls, row, r.magic == 0)
            timestamp_type[row] = r.ts_type
        mark(key_nulls, row, r.key_len < 0)
        mark(value_nulls, row, r.value_len < 0)
        if views:
            put_view(base + r.key_pos, r.key_len, window, buffer, key_views + 16 * row)
            put_view(base + r.value_pos, r.value_len, window, buffer, value_views + 16 * row)
        else:
            if key_bytes:
                copy_over(key_data + key_at, base + r.key_pos, key_bytes, records_end)
                key_at += key_bytes
            key_offsets[row + 1] = <int32_t>key_at
            if value_bytes:
                copy_over(value_data + value_at, base + r.value_pos, value_bytes, records_end)
                value_at += value_bytes
            value_offsets[row + 1] = <int32_t>value_at
        if not headerless:
            mark(headers_valid, row, r.headers_count > 0)
            hend = base + r.headers_end
            if r.headers_count > HEADERS_KEPT:          # where the headers not kept start
                hp = kept[HEADERS_KEPT - 1].value + max(kept[HEADERS_KEPT - 1].value_len, 0)
            header_keys_end = header_key_at + r.header_key_bytes
            header_values_end = header_value_at + r.header_value_bytes
            for j in range(r.headers_count):
                if j < HEADERS_KEPT:
                    key = kept[j].key
                    hk = kept[j].key_len
                    value = kept[j].value
                    hv = kept[j].value_len
                elif (read_blob(&hp, hend, &key, &hk) or read_blob(&hp, hend, &value, &hv)
                        or hk < 0 or hk > header_keys_end - header_key_at
                        or hv > header_values_end - header_value_at):
                    st = -3                         # read again: the input may have changed
                    break
                copy_over(header_key_data + header_key_at, key, hk, hend)
                header_key_at += hk
                header_key_offsets[h + 1] = <int32_t>header_key_at
                mark(header_value_nulls, h, hv < 0)
                if hv > 0:
                    copy_over(header_value_data + header_value_at, value, hv, hend)
                    header_value_at += hv
                header_value_offsets[h + 1] = <int32_t>header_value_at
                h += 1
            if st:
                break
            header_list_offsets[row + 1] = <int32_t>h
        if batch_columns:
            (<int64_t*>o.mem[B_PRODUCER_ID])[row] = producer_id
            (<int16_t*>o.mem[B_PRODUCER_EPOCH])[row] = producer_epoch
            (<int32_t*>o.mem[B_SEQUENCE])[row] = (r.sequence if items != NULL
                                                  else record_sequence(&v2, r.offset))
            mark(o.mem[B_TRANSACTIONAL], row, transactional)
            (<int32_t*>o.mem[B_LEADER_EPOCH])[row] = leader_epoch
        row += 1
    if not any_block:
        for k in range(first_row, row):
            timestamp_type[k] = v2.ts_type
            if headerless:
                header_list_offsets[k + 1] = <int32_t>h
    store_used(o, row, h, key_at, value_at, header_key_at, header_value_at)
    b.done = row + row_to_index
    b.next = p
    if st == 0 and items == NULL and v2_records_end(base, p, records_end, <int32_t>count,
                                                    &b.fault):
        st = 2
    if st == 2:
        take_back(b, o)
    return st


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


cdef uint8_t* take_memory(size_t size, size_t* capacity) noexcept nogil:
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
        capacity[0] = max(size, 1)
        memory = malloc(capacity[0])
    return <uint8_t*>memory


cdef inline bint pool_has_room(size_t capacity) noexcept nogil:
    """Whether give_back would keep a block of `capacity` bytes now: read
    without kept_lock, a hint (another thread may fill the pool first)."""
    return (capacity >= MIN_KEPT_BYTES and n_kept < KEPT_BLOCKS
            and kept_total + capacity <= kept_limit)


cdef void give_back(void* memory, size_t capacity) noexcept nogil:
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
            fitted = take_memory(size, &capacity)
            if fitted == NULL:
                return
            memcpy(fitted, self.memory, size)
            give_back(self.memory, self.capacity)
        else:
            capacity = max(size, <size_t>1)
            fitted = <uint8_t*>realloc(self.memory, capacity)
            if fitted == NULL:
                return
        self.memory = fitted
        self.capacity = capacity

    def __dealloc__(self):
        if self.memory != NULL:
            give_back(self.memory, self.capacity)


# Arrow's C data interface (arrow.apache.org/docs/format/CDataInterface.html):
# each column goes to Arrow as one import whose buffers are the column
# memory; its release lets go of that column's memory only, so a column
# kept alone does not keep the others. A small table's columns go as one
# import (see small_table).
cdef struct ArrowArray:
    int64_t length
    int64_t null_count
    int64_t offset
    int64_t n_buffers
    int64_t n_children
    const void** buffers
    ArrowArray** children
    ArrowArray* dictionary
    void (*release)(ArrowArray*) noexcept nogil
    void* private_data

cdef enum:
    MAX_ARRAYS = 4           # a column; headers: its list, structs, keys and values
    MAX_BUFFERS = 3 * MAX_ARRAYS

cdef struct Export:          # one column's arrays, freed by its release
    ArrowArray arrays[MAX_ARRAYS]
    ArrowArray* children[MAX_ARRAYS]
    int n_arrays, n_children, n_buffers
    const void** buffers     # every array's buffer pointers, in turn
    int64_t* view_sizes      # views: the sizes of their data buffers
    PyObject* owner          # what keeps the memory: ColumnMemory, views' data buffers


cdef void release_nothing(ArrowArray* a) noexcept nogil:
    a.release = NULL             # a child: its memory goes with its column's


cdef void release_export(ArrowArray* a) noexcept nogil:
    cdef Export* e = <Export*>a.private_data
    a.release = NULL             # before the free: `a` is in e
    if Py_IsInitialized():
        with gil:
            Py_DecRef(e.owner)
    free(e.buffers)
    free(e.view_sizes)
    free(e)


cdef Export* new_export(int n_views, owner) except NULL:
    """Room for a column's arrays (a views column: on n_views data buffers);
    `owner` is kept until Arrow releases the column."""
    cdef Export* e = <Export*>calloc(1, sizeof(Export))
    if e == NULL:
        raise MemoryError()
    e.buffers = <const void**>calloc(MAX_BUFFERS + n_views + 1, sizeof(void*))
    e.view_sizes = <int64_t*>calloc(n_views + 1, sizeof(int64_t))
    if e.buffers == NULL or e.view_sizes == NULL:
        free(e.buffers)
        free(e.view_sizes)
        free(e)
        raise MemoryError()
    e.owner = <PyObject*>owner
    Py_IncRef(e.owner)
    return e


cdef ArrowArray* new_array(Export* e, int64_t length, int64_t null_count, const void* validity,
                           const void* b1, const void* b2, int n_buffers,
                           int max_children=0) noexcept:
    """An array of `length` in e: its validity (NULL without nulls) and up to
    two more buffers (a views column's data buffers are set by its caller)."""
    cdef ArrowArray* a = &e.arrays[e.n_arrays]
    e.n_arrays += 1
    a.length = length
    a.null_count = null_count
    a.offset = 0
    a.n_buffers = n_buffers
    a.buffers = e.buffers + e.n_buffers
    e.n_buffers += n_buffers
    a.buffers[0] = validity if null_count else NULL
    if n_buffers > 1:
        a.buffers[1] = b1
    if n_buffers > 2:
        a.buffers[2] = b2
    a.n_children = 0
    a.children = e.children + e.n_children
    e.n_children += max_children
    a.dictionary = NULL
    a.release = release_export if a == e.arrays else release_nothing
    a.private_data = e if a == e.arrays else NULL
    return a


cdef inline ArrowArray* add_child(ArrowArray* parent, ArrowArray* child) noexcept:
    parent.children[parent.n_children] = child
    parent.n_children += 1
    return child


IMPORT_ARRAY = pa.Array._import_from_c


cdef object import_column(Export* e, arrow_type):
    """Arrow's array of e's first array (which Arrow then owns, and releases)."""
    cdef ArrowArray* column = &e.arrays[0]
    try:
        return IMPORT_ARRAY(<uintptr_t>column, arrow_type)
    finally:
        if column.release != NULL:       # not taken by Arrow
            column.release(column)


cdef enum:
    MAX_COLUMNS = 11         # key, value, offset, timestamp, its type, headers, 5 batch columns
cdef size_t SMALL_TABLE_BYTES = 1 << 20


cdef bint small_table(list memory, size_t arena_bytes, dict sources) except -1:
    """Whether a table's column memory, the decompressed batches its views
    point into (arena_bytes) and the sources its other views point into are
    so small that its columns go to Arrow in one import: a column kept alone
    then keeps all of that, but one import instead of one a column saves
    about 5 µs, 40% of decoding a small record set. A source that is not a
    whole, exact bytes object may be a slice of a larger buffer, which it
    keeps alive whole: how much that is is not known here, so such a table
    is not small."""
    cdef size_t total = arena_bytes
    cdef ColumnMemory m
    cdef Source src
    for src in sources:
        if not exported_by_bytes(&src.view):
            return False
        total += <size_t>src.length
    for m in memory:
        if m is not None:
            total += m.capacity
    return total <= SMALL_TABLE_BYTES


cdef struct Root:            # the columns of a small table, as one struct array
    ArrowArray array
    ArrowArray* children[MAX_COLUMNS]
    const void* validity      # NULL: no nulls


cdef void release_root(ArrowArray* a) noexcept nogil:
    cdef Root* root = <Root*>a.private_data
    cdef int i
    a.release = NULL             # before the free: `a` may be root.array
    for i in range(a.n_children):
        if root.children[i].release != NULL:
            root.children[i].release(root.children[i])
    free(root)


IMPORT_BATCH = pa.RecordBatch._import_from_c
TABLE_FROM_BATCHES = pa.Table.from_batches


@cython.final
cdef class Columns:
    """A table's columns on their way to Arrow: one import each, or for a
    small table (small_table) one import of them all."""
    cdef Export* exports[MAX_COLUMNS]
    cdef list types, fixes
    cdef int n
    cdef int64_t rows
    cdef bint together

    def __cinit__(self, int64_t rows, bint together):
        self.rows = rows
        self.together = together
        self.types = []
        self.fixes = []

    def __dealloc__(self):
        cdef int i
        for i in range(self.n):
            if self.exports[i] != NULL and self.exports[i].arrays[0].release != NULL:
                self.exports[i].arrays[0].release(&self.exports[i].arrays[0])

    cdef int add(self, Export* e, arrow_type, fix=None) except -1:
        """Column e, of arrow_type, which fix (if any) turns into its column
        of the table (then imported on its own)."""
        self.exports[self.n] = e
        self.n += 1
        self.types.append(arrow_type)
        self.fixes.append(fix)
        if fix is not None:
            self.together = False

    cdef object table(self, schema):
        cdef int i
        cdef Export* e
        cdef Root* root
        if not self.together:
            columns = []
            for i in range(self.n):
                e = self.exports[i]
                self.exports[i] = NULL               # import_column releases it, if Arrow does not
                column = import_column(e, self.types[i])
                columns.append(column if self.fixes[i] is None else self.fixes[i](column))
            return pa.Table.from_arrays(columns, schema=schema)
        root = <Root*>calloc(1, sizeof(Root))
        if root == NULL:
            raise MemoryError()
        root.array.length = self.rows
        root.array.n_buffers = 1
        root.array.buffers = &root.validity
        root.array.n_children = self.n
        root.array.children = root.children
        root.array.release = release_root
        root.array.private_data = root
        for i in range(self.n):
            root.children[i] = &self.exports[i].arrays[0]
            self.exports[i] = NULL
        try:
            return TABLE_FROM_BATCHES([IMPORT_BATCH(<uintptr_t>&root.array, schema)])
        finally:
            if root.array.release != NULL:       # not taken by Arrow
                root.array.release(&root.array)


HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADER_LIST_TYPE = pa.list_(HEADER_TYPE)
BINARY_KEY_HEADER_LIST_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.binary()), pa.field("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
BATCH_FIELDS = (
    pa.field("producerId", pa.int64()), pa.field("producerEpoch", pa.int16()),
    pa.field("sequence", pa.int32()), pa.field("isTransactional", pa.bool_()),
    pa.field("leaderEpoch", pa.int32()),
)
cdef dict SCHEMAS = {}          # (views, batch_columns) -> (schema, its types)


cdef tuple schema_and_types(bint views, bint batch_columns):
    # Schema.types makes a Python object per field on every call: a few
    # microseconds, a fifth of decoding a one-record set.
    cache_key = (views, batch_columns)
    cached = SCHEMAS.get(cache_key)
    if cached is None:
        binary = pa.binary_view() if views else pa.binary()
        fields = [pa.field("key", binary), pa.field("value", binary),
                  pa.field("offset", pa.int64()), pa.field("timestamp", TIMESTAMP_TYPE),
                  pa.field("timestampType", pa.int32()),
                  pa.field("headers", HEADER_LIST_TYPE)]
        if batch_columns:
            fields += BATCH_FIELDS
        schema = pa.schema(fields)
        cached = SCHEMAS[cache_key] = (schema, tuple(schema.types))
    return cached


def record_schema(bint views=False, bint batch_columns=False):
    """The columns the core builds: key, value, offset, timestamp,
    timestampType, headers, and with batch_columns the batch's producer
    fields (decode adds topic and partition after value)."""
    return schema_and_types(views, batch_columns)[0]


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
    if src.length - pos <= 17 or src.base[pos + 16] > 1:
        return -1
    return src.base[pos + 17] & 0x07


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
        self.inflater.take = take_memory
        self.inflater.give = give_back
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
                self.o.mem[i] = take_memory(allocated_bytes(i, 0), &self.o.allocated[i])
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
                give_back(self.o.mem[i], self.o.allocated[i])

    cdef int added(self, int st, Py_ssize_t position) except -1:
        """Raise what fill_grown's status st says, for the batch at `position`."""
        if st == NO_MEMORY:
            raise MemoryError()
        if st == -2:
            raise ValueError("a binary column would exceed Arrow's 2 GiB limit; decode fewer "
                             "batches or record sets a call (a log: iter_decode)")
        if st == -3:
            raise CorruptRecordError("record headers no longer fit their record: the input "
                                     "buffer changed after it was read", position=position)
        return 0

    cdef int add_block(self, Block* b, Py_ssize_t position, bint release) except -1:
        """Fill block b (of the batch at `position`), growing the buffers as it
        asks: 0, or 1 when a record fails its checks (b.fault; taken back)."""
        cdef int st
        if release:
            with nogil:
                st = fill_grown(b, &self.o)
        else:
            st = fill_grown(b, &self.o)
        if st == 2:
            return 1
        return self.added(st, position)

    cdef int add_batch(self, Batch batch, Py_ssize_t consumed) except -1:
        cdef Block b
        cdef Slots slots = None
        cdef Source src
        cdef Py_ssize_t pos, n
        if batch.magic == 2 and batch.attributes & 0x20:
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
        b.transactional = batch.magic == 2 and batch.attributes & 0x10
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
            data = Source(decompress(b.codec, src.slice(position + V2_HEADER, size - V2_HEADER),
                                     reader.max_decompressed, 2))
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
        `keep` (records.overlaps) passes it over: without decompressing it."""
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
                or (codec == LZ4 and src.base[at + 16] == 0)):
            return False                 # magic 0 lz4: its header checksum needs mending
        with nogil:
            ok = legacy_entry_ok(src.base, src.length, at, reader.max_entry, verify_crc, True,
                                 &m, &size)
        if not ok:
            return False
        wrapper_of(&m, load_i64(src.base + at), &w)
        entry_end = at + LOG_OVERHEAD + <Py_ssize_t>size
        if w.last_offset != 0 and w.last_offset < start:
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
                entry_end = pos[0] + LOG_OVERHEAD + max(0, load_i32(src.base + pos[0] + 8))
                view_buffer(&b, src, pos[0] + LOG_OVERHEAD, min(entry_end, src.length), self)
                window = b.window
                buffer = b.buffer
                limit = min(src.length, window - src.base + MAX_ARROW_BYTES)
            b.window = window
            b.buffer = buffer
            if ready < 0 and (src.length - pos[0] < NOGIL_MIN_BYTES
                              or src.base[pos[0] + 16] != 2):
                st = scan(self, src.base, src.length, pos, reader.max_entry, reader.verify_crc,
                          start, last, &b, limit, -1)
            else:
                with nogil:
                    st = scan(self, src.base, src.length, pos, reader.max_entry,
                              reader.verify_crc, start, last, &b, limit, ready)
            ready = -1
            if st == 3:
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
            elif st != 2:
                return self.added(st, pos[0])
            if st != 2:
                pos[0] = b.consumed

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
        self.inflater.out = take_memory(
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

    cdef int add_reader(self, BatchReader reader, keep, int64_t start, int64_t last) except -1:
        """Add every batch of `reader` (fresh) that keep(batch) accepts, skipping
        those with no offset in [start, last] (see decode_record_set)."""
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
            if keep is None or keep(batch):
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
    return remaining >= V2_HEADER and p[16] == 2 and not (p[22] & 0x07)


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
    is left at *pos for BatchReader (add_batch raises its error, if any); 0. Control
    batches and batches with no offset in [start, last] are skipped, CRCs checked, as
    `keep` in decode_record_set skips them. With *pos at a batch begun in
    block b: 3 when it is compressed and not decompressed here (b holds its
    header; the caller decompresses it, with the GIL: see system_codecs for
    the codecs that are decompressed here; with views, also when a new data
    buffer is due, see needs_new_arena), and with views 2 when it needs a
    window into the input first (none yet, or it ends past `limit`); -2, -3,
    NO_MEMORY as fill_grown. `ready` >= 0: the batch at *pos is in b, its
    records decompressed into c.inflater, that many bytes, and is added first."""
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
            if entry_size(p, length - pos[0], max_entry, &size) != ENTRY_OK or p[16] != 2:
                return 0
            attributes = load_u16(p + 21)
            if attributes & 0x20 and c.include_control:
                return 0
            if read_v2_header(p, size, verify_crc, &h) != ENTRY_OK:
                return 0
            if not (h.count and not attributes & 0x20 and h.last_offset >= start
                    and h.base_offset <= last):
                pos[0] += LOG_OVERHEAD + <Py_ssize_t>size
                continue
            start_block(b, &c.o, h.count)
            b.v2.offset = h.base_offset
            b.v2.timestamp = h.first_timestamp
            b.v2.max_timestamp = h.max_timestamp
            b.v2.ts_type = (attributes >> 3) & 1
            b.v2.sequence = h.base_sequence
            b.producer_id = h.producer_id
            b.producer_epoch = h.producer_epoch
            b.leader_epoch = h.leader_epoch
            b.transactional = (attributes & 0x10) != 0
            b.position = pos[0]
            b.consumed = pos[0] + LOG_OVERHEAD + size
            b.codec = attributes & 0x07
            if b.codec:
                decompressed = -1 if c.views and needs_new_arena(c) else decompress_in_core(
                    &c.inflater, b.codec, p + V2_HEADER, LOG_OVERHEAD + size - V2_HEADER,
                    batch_limit(c))
                if decompressed < 0:
                    return 3
        if b.codec:
            if not count_fits(<int32_t>b.count, decompressed):
                c.handed_back += 1
                return 0
            b.base = c.inflater.out + c.inflater.kept
            b.next = b.records = b.base
            b.end = b.base + decompressed
            b.window = c.inflater.out
            b.buffer = <int32_t>c.arena
        else:
            if not count_fits(<int32_t>b.count, b.consumed - b.position - V2_HEADER):
                return 0
            if c.views and (input_window == NULL or b.consumed > limit):
                return 2
            b.window = input_window
            b.buffer = input_buffer
            b.base = base
            b.next = b.records = base + b.position + V2_HEADER
            b.end = base + b.consumed
        b.items = NULL
        st = fill_grown(b, &c.o)
        if st == 2:
            c.handed_back += 1
            return 0
        if st:
            return st
        if b.codec:
            c.o.expanded += decompressed - (b.consumed - b.position)
            if c.views:
                c.inflater.kept += decompressed
                c.largest_batch = max(c.largest_batch, <size_t>decompressed)
        decompressed = -1
        pos[0] = b.consumed


def decode_columns(batches, bint include_control=False, bint batch_columns=False,
                   bint views=False):
    """Decode every record of `batches` (kcodec Batch objects) into a
    pyarrow.Table of record_schema. With `views`, key and value are
    binary_view arrays pointing into the input and decompressed buffers, which
    they keep alive."""
    cdef Collector c = Collector(include_control, views, batch_columns, 0)
    cdef Batch batch
    for batch in batches:
        c.add_batch(batch, 0)
    return c.table()


def decode_record_set(BatchReader reader, keep=None, bint include_control=False,
                      bint batch_columns=False, bint views=False, start_offset=None,
                      end_offset=None):
    """decode_columns of every batch `reader` (fresh) reads that keep(batch)
    accepts: runs of v2 batches and of uncompressed v0/v1 messages, and
    compressed v0/v1 wrappers, are parsed without Batch objects (and, but for
    some decompression, without the GIL), skipping those outside
    [start_offset, end_offset) (`keep` must skip the same); every other entry
    is read by `reader`."""
    # With offset bounds, the bytes read so far say little about how much of
    # the rest will be decoded: the buffers grow by doubling instead.
    cdef bint bounded = start_offset is not None or end_offset is not None
    cdef Collector c = Collector(include_control, views, batch_columns,
                                 0 if bounded else reader.src.length)
    try:
        c.add_reader(reader, keep, INT64_MIN if start_offset is None else start_offset,
                     last_offset_below(end_offset))
    finally:
        c.count_handed_back()
    return c.table()


def decode_parts(parts, bint include_control=False, bint batch_columns=False,
                 bint views=False, Py_ssize_t first_index=0):
    """The records of each part, one part after another, in one table of
    record_schema, and how many rows each part gave (a list). A part is a
    fresh BatchReader (read as decode_record_set reads it), an iterable of
    Batch objects (as decode_columns reads them), or None (no rows). An error
    names the part it is in ("record set 3", counting from first_index), at
    its byte in that part."""
    parts = list(parts)
    cdef Py_ssize_t input_bytes = 0, before
    for part in parts:
        if isinstance(part, BatchReader):
            input_bytes += (<BatchReader>part).src.length
        elif part is not None:              # Batch objects: growth has nothing to go by
            input_bytes = 0
            break
    cdef Collector c = Collector(include_control, views, batch_columns, input_bytes)
    cdef Batch batch
    rows = []
    try:
        for i, part in enumerate(parts):
            before = c.o.used[PER_ROW]
            try:
                if isinstance(part, BatchReader):
                    c.add_reader(part, None, INT64_MIN, INT64_MAX)
                    c.o.parts_before += (<BatchReader>part).src.length
                elif part is not None:
                    for batch in part:
                        c.add_batch(batch, 0)
            except KafkaFormatError as exc:
                raise located(exc, f"record set {first_index + i}", 0) from None
            rows.append(c.o.used[PER_ROW] - before)
    finally:
        c.count_handed_back()
    return c.table(), rows


cdef _header_keys_as_text(headers):
    """Java decodes header keys as UTF-8, replacing what is not; the rare
    column whose keys are not all ASCII comes with binary keys, decoded here."""
    structs = headers.values
    keys = pa.array([k.decode("utf-8", "replace") for k in structs.field("key").to_pylist()],
                    pa.string())
    structs = pa.Array.from_buffers(HEADER_TYPE, len(structs), [None], 0,
                                    children=[keys, structs.field("value")])
    return pa.Array.from_buffers(HEADER_LIST_TYPE, len(headers), headers.buffers()[:2],
                                 headers.null_count, children=[structs])
