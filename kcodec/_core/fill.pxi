# The column buffers and the record loop that fills them (fill, fill_records),
# included by columns.pyx.

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
    uint8_t* mem[N_BUFFERS]        # from borrow_memory; handed to ColumnMemory by table()
    size_t allocated[N_BUFFERS]    # bytes of each, as borrow_memory gave them
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


cdef void retract_block(Block* b, Out* o) noexcept nogil:
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
    in bytes_left bytes (0: unknown), were they all like s); FILL_TOO_LARGE
    past Arrow's 2 GiB in a binary column."""
    cdef Py_ssize_t need[N_UNITS]
    cdef Py_ssize_t guess
    cdef int unit, st = FILL_DONE
    need[PER_ROW] = 1
    need[PER_HEADER] = s.headers_count
    need[KEY_BYTES] = key_bytes
    need[VALUE_BYTES] = value_bytes
    need[HEADER_KEY_BYTES] = s.header_key_bytes
    need[HEADER_VALUE_BYTES] = s.header_value_bytes
    for unit in range(N_UNITS):
        o.needed[unit] = o.used[unit] + need[unit]
        if unit != PER_ROW and o.needed[unit] > MAX_ARROW_BYTES:
            return FILL_TOO_LARGE
        if o.needed[unit] > o.capacity[unit]:
            st = FILL_GROW
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
    """Add block b's records, from b.done on, to the columns: a FillStatus
    (status.pxd). FILL_GROW: the buffers must grow first (to o.needed, see
    needs_room, or to o.most), then fill resumes at b.done."""
    cdef int st
    if b.items == NULL:
        if rest_of_block_fits(b, o):
            if not o.headers_seen:
                if o.views:
                    st = fill_records(b, o, <HeaderlessViewsV2Block*>NULL)
                else:
                    st = fill_records(b, o, <HeaderlessV2Block*>NULL)
                if st != FILL_HEADERS_AHEAD:
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
            return FILL_GROW
        memset(o.most, 0, sizeof(o.most))        # the checked loop grows by needs_room alone
    return fill_records(b, o, <AnyBlock*>NULL)


cdef int grow(Out* o) noexcept nogil:
    """Grow the buffers of every unit the last fill needed more of: 0, or
    FILL_NO_MEMORY (the buffers not grown yet are as they were)."""
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
            grown = borrow_memory(new, &allocated)
            if grown == NULL:
                return FILL_NO_MEMORY
            memcpy(grown, o.mem[i], written)
            if WIDTH[i] == 0:
                memset(grown + written, 0, new - written)
            return_memory(o.mem[i], o.allocated[i])
            o.mem[i] = grown
            o.allocated[i] = allocated
        o.capacity[unit] = units
    memset(o.most, 0, sizeof(o.most))
    return FILL_DONE


cdef int fill_grown(Block* b, Out* o) noexcept nogil:
    """fill, growing the buffers as often as it asks: its status but
    FILL_GROW, or FILL_NO_MEMORY."""
    cdef int st
    while True:
        st = fill(b, o)
        if st != FILL_GROW:
            return st
        if grow(o) != FILL_DONE:
            return FILL_NO_MEMORY


# fill_records is compiled once per BlockKind (the type of its last argument
# picks the version; the argument itself is unused): for any block; for a v2
# block without views whose rows, keys and values are known to fit, where the
# loop skips those checks for each record; for such a block while its
# records have no headers, which stops (FILL_HEADERS_AHEAD) at the first record
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
    cdef const uint8_t* hp = NULL                   # set before use; NULL for the compiler
    cdef const uint8_t* hend
    cdef const uint8_t* key = NULL
    cdef const uint8_t* value = NULL
    cdef int32_t j, hk = 0, hv = 0
    cdef Py_ssize_t k
    cdef int st = FILL_DONE
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
            st = FILL_FAULT
            break
        if headerless and r.headers_count > 0:
            p = record
            st = FILL_HEADERS_AHEAD
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
                    st = FILL_HEADER_CHANGED          # read again: the input may have changed
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
    if st == FILL_DONE and items == NULL and v2_records_end(base, p, records_end, <int32_t>count,
                                                    &b.fault):
        st = FILL_FAULT
    if st == FILL_FAULT:
        retract_block(b, o)
    return st
