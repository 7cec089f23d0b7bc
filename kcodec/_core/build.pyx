# Encoders: v2 record batches (data and control) and v0/v1 messages, plain or
# in compressed wrappers. Layouts as in records.pyx.
#
# Records reach the writers as Rows: pointers and lengths of each key, value and
# header, plus an offset and a timestamp. Rows are filled from Python records
# (rows_from_records, pointing into the bytes objects, which the caller keeps
# alive) or straight from Arrow buffers (rows_from_arrow), so each wire layout
# is written by one function.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport (
    uint8_t, uint32_t, uintptr_t, uint64_t, int16_t, int32_t, int64_t, INT32_MAX)
from libc.string cimport memcpy

from kcodec._core.wire cimport *
from kcodec._core.crc cimport crc32c_raw, crc32_of

cdef tuple NO_HEADERS = ()

from kcodec._core.records cimport NOGIL_MIN_BYTES, V2_MIN_RECORD, compress_in_python, seq_advance
from kcodec._core.columns cimport borrow_memory, return_memory

cdef enum:
    LEGACY_V0_OVERHEAD = 14      # crc, magic, attributes, key length, value length
    LEGACY_V1_OVERHEAD = 22      # ... plus the timestamp


# ---------------------------------------------------------------------- rows

cdef struct Blob:
    const uint8_t* p
    int32_t n                    # -1: null


cdef struct Row:
    Blob key
    Blob value
    int64_t offset
    int64_t timestamp
    Py_ssize_t first_header      # index into Rows.headers (two Blobs a header)
    int32_t n_headers
    Py_ssize_t fields            # v2 record body size less its timestamp and offset deltas
    Py_ssize_t body              # v2 record body size in its batch, from split_batch


@cython.final
cdef class Rows:
    cdef Row* rows
    cdef Blob* headers
    cdef size_t rows_capacity, headers_capacity     # bytes, from the kept-memory pool
    cdef Py_ssize_t n
    cdef list keep               # the objects the pointers point into
    # How far past a key, value, header key or header value its copy may read:
    # the end of the Arrow data buffer it is in; NULL, not past the blob.
    cdef const uint8_t* readable[4]

    def __dealloc__(self):
        if self.rows != NULL:
            return_memory(self.rows, self.rows_capacity)
        if self.headers != NULL:
            return_memory(self.headers, self.headers_capacity)

    def __len__(self):
        return self.n

    cdef allocate(self, Py_ssize_t n, Py_ssize_t n_headers):
        self.n = n
        self.rows = <Row*>borrow_memory(max(n, 1) * sizeof(Row), &self.rows_capacity)
        self.headers = <Blob*>borrow_memory(max(2 * n_headers, 1) * sizeof(Blob),
                                          &self.headers_capacity)
        if self.rows == NULL or self.headers == NULL:
            raise MemoryError()


cdef inline Py_ssize_t blob_size(Blob* b) noexcept nogil:
    return 1 if b.n < 0 else varlong_size(b.n) + b.n


cdef inline Py_ssize_t fields_size(Rows rows, Row* row) noexcept nogil:
    """A v2 record body's bytes but its timestamp and offset deltas, which
    depend on the batch it lands in: attributes, key, value and headers."""
    cdef Py_ssize_t h, n = 1 + blob_size(&row.key) + blob_size(&row.value)
    n += varlong_size(row.n_headers)
    for h in range(row.first_header, row.first_header + row.n_headers):
        n += blob_size(&rows.headers[2 * h]) + blob_size(&rows.headers[2 * h + 1])
    return n


cdef inline void set_blob(Blob* b, object value):
    if value is None:
        b.p = NULL
        b.n = -1
    else:
        b.p = <const uint8_t*>PyBytes_AS_STRING(value)
        b.n = <int32_t>PyBytes_GET_SIZE(value)


cdef object as_blob(object value, str what):
    if value is None or type(value) is bytes:
        if value is not None and PyBytes_GET_SIZE(value) > 0x7FFFFFFF:
            raise ValueError(f"record {what} is over 2 GiB")
        return value
    if isinstance(value, str):
        return (<str>value).encode()
    try:
        return bytes(memoryview(value))
    except TypeError:
        raise TypeError(f"record {what} must be bytes-like, str or None, not "
                        f"{type(value).__name__}") from None


cdef tuple as_headers(object headers):
    if not headers:
        return NO_HEADERS
    out = []
    for hk, hv in headers:
        if hk is None:
            raise ValueError("a header key may not be None")
        out.append((as_blob(hk, "header key"), as_blob(hv, "header value")))
    return tuple(out)


def rows_from_records(records, int64_t default_timestamp, record_type, int64_t base_offset):
    """Rows from Python records: a `record_type` (kcodec.Record), a (key,
    value[, timestamp[, headers]]) tuple, or a dict with those names; offsets
    base_offset, base_offset + 1, ..."""
    cdef list keys = [], values = [], timestamps = [], headers = []
    cdef Py_ssize_t width, i, h = 0, n_headers = 0
    cdef Rows rows = Rows.__new__(Rows)
    cdef Row* row
    for r in records:
        if isinstance(r, tuple):
            width = len(<tuple>r)
            if width == 4:
                key, value, ts, hdrs = <tuple>r
            elif width == 3:
                key, value, ts = <tuple>r
                hdrs = None
            elif width == 2:
                key, value = <tuple>r
                ts = hdrs = None
            else:
                raise TypeError(f"a record tuple has 2, 3 or 4 items, not {width}")
        elif isinstance(r, record_type):
            key, value, ts, hdrs = r.key, r.value, r.timestamp, r.headers
        elif isinstance(r, dict):
            key, value = r.get("key"), r.get("value")
            ts, hdrs = r.get("timestamp"), r.get("headers")
        else:
            raise TypeError("a record is a kcodec.Record, a (key, value[, timestamp[, headers]]) "
                            "tuple, or a dict of those names")
        keys.append(as_blob(key, "key"))
        values.append(as_blob(value, "value"))
        timestamps.append(default_timestamp if ts is None else ts)
        hdrs = as_headers(hdrs)
        headers.append(hdrs)
        n_headers += len(<tuple>hdrs)
    rows.allocate(len(keys), n_headers)
    rows.keep = [keys, values, headers]
    for i in range(rows.n):
        row = &rows.rows[i]
        set_blob(&row.key, keys[i])
        set_blob(&row.value, values[i])
        row.offset = base_offset + i
        row.timestamp = timestamps[i]
        row.first_header = h
        row.n_headers = len(<tuple>headers[i])
        for hk, hv in <tuple>headers[i]:
            set_blob(&rows.headers[2 * h], hk)
            set_blob(&rows.headers[2 * h + 1], hv)
            h += 1
        row.fields = fields_size(rows, row)
    return rows


# Arrow: a binary or string column, read through its buffers.
cdef struct BinaryColumn:
    const uint8_t* validity      # NULL: no nulls
    const int32_t* offsets
    const int64_t* large_offsets
    const uint8_t* data
    const uint8_t* data_end
    Py_ssize_t start             # the array's slice offset


cdef inline bint is_valid(const uint8_t* validity, Py_ssize_t i) noexcept nogil:
    return validity == NULL or (validity[i >> 3] >> (i & 7)) & 1


cdef inline void get_blob(BinaryColumn* c, Py_ssize_t i, Blob* out) noexcept nogil:
    cdef int64_t a, b
    i += c.start
    if not is_valid(c.validity, i):
        out.p = NULL
        out.n = -1
        return
    if c.offsets != NULL:
        a = c.offsets[i]
        b = c.offsets[i + 1]
    else:
        a = c.large_offsets[i]
        b = c.large_offsets[i + 1]
    out.p = c.data + a
    out.n = <int32_t>(b - a)


cdef class _Buffers:
    """Pointers into an Arrow array's buffers, kept alive while they are read."""
    cdef list views

    def __cinit__(self):
        self.views = []

    cdef const uint8_t* address(self, buf) except? NULL:
        # Buffer.address, not a typed memoryview: a memoryview of each of a
        # small table's buffers cost more than encoding its rows.
        if buf is None:
            return NULL
        if not getattr(buf, "is_cpu", True):
            raise ValueError("a table to encode must be in main memory, not on a device")
        self.views.append(buf)
        if buf.size == 0:
            return <const uint8_t*>""
        return <const uint8_t*><uintptr_t>buf.address


cdef dict binary_kinds = None     # Arrow type id -> one of these, once pyarrow is imported
cdef enum:
    SMALL_OFFSETS, LARGE_OFFSETS, VIEWS


cdef int binary_kind(t) except -1:
    """How a binary or string type's array is read (by type id: pa.types'
    predicates, called for each column, cost more than a small table's rows)."""
    global binary_kinds
    if binary_kinds is None:
        import pyarrow as pa
        kinds = {pa.binary().id: SMALL_OFFSETS, pa.string().id: SMALL_OFFSETS,
                 pa.large_binary().id: LARGE_OFFSETS, pa.large_string().id: LARGE_OFFSETS}
        if hasattr(pa, "binary_view"):          # pyarrow 16 and later
            kinds.update({pa.binary_view().id: VIEWS, pa.string_view().id: VIEWS})
        binary_kinds = kinds
    return binary_kinds.get(t.id, -2)


cdef binary_column(_Buffers keep, array, BinaryColumn* c, str name):
    cdef int kind = binary_kind(array.type)
    if kind == VIEWS:
        import pyarrow as pa
        array = array.cast(pa.large_binary())
        kind = LARGE_OFFSETS
    if kind < 0:
        raise TypeError(f"column {name!r} must be binary or string, not {array.type}")
    validity, offsets, data = array.buffers()[:3]
    c.validity = keep.address(validity) if array.null_count else NULL
    c.offsets = NULL
    c.large_offsets = NULL
    if kind == LARGE_OFFSETS:
        c.large_offsets = <const int64_t*>keep.address(offsets)
    else:
        c.offsets = <const int32_t*>keep.address(offsets)
    cdef Py_ssize_t data_size = data.size if data is not None else 0
    c.data = keep.address(data)
    c.data_end = c.data + data_size
    c.start = array.offset


@cython.boundscheck(False)        # the arrays' lengths are checked first
@cython.wraparound(False)
def rows_from_arrow(key, value, timestamps, headers, Py_ssize_t n, offsets,
                    int64_t base_offset):
    """Rows from Arrow arrays (key/value binary or string, headers
    list<struct<key, value>>, any of them None) and int64 numpy arrays of
    timestamps and offsets (None: base_offset, base_offset + 1, ...); no
    Python object per record."""
    import pyarrow as pa
    cdef _Buffers keep = _Buffers()
    cdef Rows rows = Rows.__new__(Rows)
    cdef BinaryColumn k, v, hk, hv
    cdef const int64_t[::1] ts = timestamps
    cdef const int64_t[::1] offset = offsets
    cdef bint numbered = offsets is None
    cdef const int32_t* list_offsets = NULL
    cdef const uint8_t* list_validity = NULL
    cdef Py_ssize_t list_start = 0, n_headers = 0, i, j, first, last, h = 0
    cdef Row* row
    cdef bint has_key = key is not None
    if has_key:
        binary_column(keep, key, &k, "key")
    if value is None:
        raise ValueError("a table to encode needs a 'value' column")
    if ts.shape[0] != n or (not numbered and offset.shape[0] != n):
        raise ValueError(f"timestamps or offsets for other than {n} rows")
    if any(column is not None and len(column) != n for column in (key, value, headers)):
        raise ValueError(f"key, value or headers for other than {n} rows")
    binary_column(keep, value, &v, "value")
    if headers is not None:
        if not (pa.types.is_list(headers.type) and pa.types.is_struct(headers.type.value_type)
                and {"key", "value"} <= {f.name for f in headers.type.value_type}):
            raise TypeError(f"column 'headers' must be list<struct<key, value>>, not {headers.type}")
        validity_buffer, offsets_buffer = headers.buffers()[:2]
        list_validity = keep.address(validity_buffer) if headers.null_count else NULL
        list_offsets = <const int32_t*>keep.address(offsets_buffer)
        list_start = headers.offset
        structs = headers.values
        if structs.null_count:
            raise ValueError("a header may not be null")
        header_keys = structs.field("key")
        binary_column(keep, header_keys, &hk, "headers.key")
        binary_column(keep, structs.field("value"), &hv, "headers.value")
        if header_keys.null_count:
            raise ValueError("a header key may not be null")
        n_headers = len(structs)
    rows.allocate(n, n_headers)
    rows.keep = [keep, timestamps]
    rows.readable[0] = k.data_end if has_key else NULL
    rows.readable[1] = v.data_end
    if headers is not None:
        rows.readable[2] = hk.data_end
        rows.readable[3] = hv.data_end
    with nogil:
        for i in range(n):
            row = &rows.rows[i]
            if has_key:
                get_blob(&k, i, &row.key)
            else:
                row.key.p = NULL
                row.key.n = -1
            get_blob(&v, i, &row.value)
            row.timestamp = ts[i]
            row.offset = base_offset + i if numbered else offset[i]
            row.first_header = h
            row.n_headers = 0
            if list_offsets != NULL and is_valid(list_validity, i + list_start):
                first = list_offsets[i + list_start]
                last = list_offsets[i + list_start + 1]
                row.n_headers = <int32_t>(last - first)
                for j in range(first, last):
                    get_blob(&hk, j, &rows.headers[2 * h])
                    get_blob(&hv, j, &rows.headers[2 * h + 1])
                    h += 1
            row.fields = fields_size(rows, row)
    return rows


# batch_starts' rules, one function each: the first row from i (> 0) that
# breaks the rule with the row before it, or n. Each is a loop without a call,
# one rule a loop: batches break rarely, and a loop over all the rules at once
# takes a branch per rule and row.

cdef Py_ssize_t offset_falls(const int64_t* off, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and off[i] > off[i - 1]:
        i += 1
    return i


cdef Py_ssize_t log_append_time_changes(const int32_t* types, const int64_t* ts, Py_ssize_t i,
                                        Py_ssize_t n) noexcept nogil:
    """LogAppendTime (type 1) starts or ends, or its timestamp changes: a
    batch has one timestamp type, and under LogAppendTime one timestamp."""
    while (i < n and (types[i] == 1) == (types[i - 1] == 1)
           and (types[i] != 1 or ts[i] == ts[i - 1])):
        i += 1
    return i


cdef Py_ssize_t sequence_skips(const int32_t* seq, const int64_t* off, Py_ssize_t i,
                               Py_ssize_t n) noexcept nogil:
    """A sequence (-1: none) that does not follow the one before by the offset
    step (off: NULL for consecutive offsets), wrapping at INT32_MAX."""
    cdef int64_t step = 1
    while i < n:
        if off != NULL:
            step = off[i] - off[i - 1]
        if seq[i] != seq_advance(seq[i - 1], step):
            return i
        i += 1
    return n


cdef Py_ssize_t value_changes(const int64_t* values, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and values[i] == values[i - 1]:
        i += 1
    return i


cdef enum:
    UNKNOWN_TYPE = 1             # timestamp_kinds
    LOG_APPEND_TIME = 2


cdef int timestamp_kinds(const int32_t* types, Py_ssize_t n) noexcept nogil:
    """UNKNOWN_TYPE if a type is none of -1, 0 and 1, LOG_APPEND_TIME if one
    is 1: in one pass without an exit, which the compiler vectorizes."""
    cdef Py_ssize_t i
    cdef int unknown = 0, log_append = 0
    for i in range(n):
        unknown |= <uint32_t>(types[i] + 1) > 2
        log_append |= types[i] == 1
    return (UNKNOWN_TYPE if unknown else 0) | (LOG_APPEND_TIME if log_append else 0)


cdef enum RuleKind:
    BY_OFFSET, BY_TYPE, BY_SEQUENCE, BY_ATTRIBUTE


cdef struct Rule:
    RuleKind kind
    const int64_t* values        # BY_ATTRIBUTE's column
    Py_ssize_t next              # the rule's first break past the last batch start


@cython.boundscheck(False)        # the arrays' lengths are checked first
@cython.wraparound(False)
def batch_starts(Py_ssize_t n, offsets, timestamps, timestamp_types, sequences, list attributes):
    """The rows of n that must start a batch (the first always): one whose
    offset does not increase (offsets: int64, or None for consecutive ones);
    one whose timestamp type (int32: -1, 0 or 1; or None) turns to or from
    LogAppendTime (1), or a LogAppendTime one whose timestamp (int64) differs;
    one whose sequence (int32, or None) does not follow the one before by
    their offsets' step; one where any of `attributes` (int64, at most 4)
    changes."""
    for array in [offsets, timestamps, timestamp_types, sequences] + attributes:
        if array is not None and len(array) != n:
            raise ValueError(f"an array of {len(array)} for {n} rows")
    if len(attributes) > 4:
        raise ValueError("at most 4 attribute columns")
    if n == 0:
        return []
    cdef const int64_t[::1] off = offsets
    cdef const int64_t[::1] ts = timestamps
    cdef const int32_t[::1] types = timestamp_types
    cdef const int32_t[::1] seq = sequences
    cdef const int64_t[::1] values
    cdef const int64_t* off_p = &off[0] if offsets is not None else NULL
    cdef Py_ssize_t i, k, n_rules = 0, start = 0
    cdef Rule rules[7]
    cdef Rule* rule
    cdef int kinds = 0
    if timestamp_types is not None:
        kinds = timestamp_kinds(&types[0], n)
        if kinds & UNKNOWN_TYPE:
            i = 0
            while <uint32_t>(types[i] + 1) <= 2:
                i += 1
            raise ValueError(f"timestampType {types[i]} is none of -1, 0 (CreateTime) "
                             f"or 1 (LogAppendTime) (row {i})")
    # Without LogAppendTime, timestamp types never break a batch.
    for kind, given in ((BY_OFFSET, offsets),
                        (BY_TYPE, timestamp_types if kinds & LOG_APPEND_TIME else None),
                        (BY_SEQUENCE, sequences)):
        if given is not None:
            rules[n_rules].kind = kind
            n_rules += 1
    for column in attributes:
        values = column
        rules[n_rules].kind = BY_ATTRIBUTE
        rules[n_rules].values = &values[0]        # `attributes` keeps the column
        n_rules += 1
    for k in range(n_rules):
        rules[k].next = 0
    # Each batch starts at the nearest break of any rule; a rule looks for its
    # next break only once the batches have reached its last.
    cdef list starts = [0]
    while True:
        i = n
        for k in range(n_rules):
            rule = &rules[k]
            if rule.next <= start:
                if rule.kind == BY_OFFSET:
                    rule.next = offset_falls(off_p, start + 1, n)
                elif rule.kind == BY_TYPE:
                    rule.next = log_append_time_changes(&types[0], &ts[0], start + 1, n)
                elif rule.kind == BY_SEQUENCE:
                    rule.next = sequence_skips(&seq[0], off_p, start + 1, n)
                else:
                    rule.next = value_changes(rule.values, start + 1, n)
            i = min(i, rule.next)
        if i >= n:
            break
        starts.append(i)
        start = i
    if offsets is not None:        # offsets increase within a batch: its first is its least
        for i in starts:
            if off[i] < 0:
                raise ValueError(f"offset {off[i]} is negative (row {i})")
    return starts


# ------------------------------------------------------------------- v2 batches

cdef inline uint8_t* write_blob(uint8_t* p, const uint8_t* end, Blob* b,
                                const uint8_t* readable) noexcept nogil:
    """b's varint length and bytes, in a buffer that ends at `end`."""
    p = write_varlong(p, b.n)
    if b.n > 0:
        if end - p >= b.n + COPY_SLACK:
            copy_over(p, b.p, b.n, readable if readable != NULL else b.p + b.n)
        else:
            copy_bytes(p, b.p, b.n)
        p += b.n
    return p


cdef inline Py_ssize_t body_size(Row* row, int64_t ts_delta, int64_t offset_delta) noexcept nogil:
    return row.fields + varlong_size(ts_delta) + varlong_size(offset_delta)


cdef uint8_t* write_records(Rows rows, Py_ssize_t start, Py_ssize_t stop, uint8_t* p,
                            const uint8_t* end) noexcept nogil:
    """Records [start, stop) of one batch, as split_batch sized them, in a
    buffer that ends at `end` (bytes past them may be overwritten)."""
    cdef Py_ssize_t i, h
    cdef int64_t base_offset = rows.rows[start].offset, base_ts = rows.rows[start].timestamp
    cdef Row* row
    for i in range(start, stop):
        row = &rows.rows[i]
        p = write_varlong(p, row.body)
        p[0] = 0
        p += 1
        p = write_varlong(p, row.timestamp - base_ts)
        p = write_varlong(p, row.offset - base_offset)
        p = write_blob(p, end, &row.key, rows.readable[0])
        p = write_blob(p, end, &row.value, rows.readable[1])
        p = write_varlong(p, row.n_headers)
        for h in range(row.first_header, row.first_header + row.n_headers):
            p = write_blob(p, end, &rows.headers[2 * h], rows.readable[2])
            p = write_blob(p, end, &rows.headers[2 * h + 1], rows.readable[3])
    return p


cdef Py_ssize_t split_batch(Rows rows, Py_ssize_t start, Py_ssize_t end,
                            Py_ssize_t max_batch_bytes, Py_ssize_t* size,
                            int64_t* max_ts) noexcept nogil:
    """Where the batch starting at `start` ends (at most at `end`): records
    while the batch stays within max_batch_bytes (at least one) and their offset
    deltas fit an int32; `size`: the bytes of its records, `max_ts`: their
    largest timestamp. Each row's body size is kept for write_records."""
    # Totals in locals, written out once: a store through `size` or a Row
    # could alias them, and would make the loop reload them on every row.
    cdef Row* row = &rows.rows[start]
    cdef Row* stop_row = &rows.rows[end]
    cdef int64_t base_ts = row.timestamp, base_offset = row.offset, largest = base_ts
    cdef int64_t offset_delta
    cdef Py_ssize_t total = 0, rec, body
    while row < stop_row:
        offset_delta = row.offset - base_offset
        if offset_delta > INT32_MAX:
            break
        body = body_size(row, row.timestamp - base_ts, offset_delta)
        rec = varlong_size(body) + body
        if total and V2_HEADER + total + rec > max_batch_bytes:
            break
        row.body = body
        total += rec
        if row.timestamp > largest:
            largest = row.timestamp
        row += 1
    size[0] = total
    max_ts[0] = largest
    return row - rows.rows


cdef void write_v2_header(uint8_t* p, Py_ssize_t records_len, int32_t count, int64_t base_offset,
                          int32_t last_offset_delta, int attributes, int64_t base_ts,
                          int64_t max_ts, int64_t producer_id, int16_t producer_epoch,
                          int32_t base_sequence, int32_t partition_leader_epoch) noexcept nogil:
    """The 61-byte header in front of records_len bytes of records, CRC included."""
    store_u64(p, <uint64_t>base_offset)
    store_u32(p + ENTRY_SIZE_AT, <uint32_t>(V2_HEADER - LOG_OVERHEAD + records_len))
    store_u32(p + V2_LEADER_EPOCH_AT, <uint32_t>partition_leader_epoch)
    p[MAGIC_AT] = 2
    store_u16(p + V2_ATTRIBUTES_AT, <uint16_t>attributes)
    store_u32(p + V2_LAST_OFFSET_DELTA_AT, <uint32_t>last_offset_delta)
    store_u64(p + V2_BASE_TIMESTAMP_AT, <uint64_t>base_ts)
    store_u64(p + V2_MAX_TIMESTAMP_AT, <uint64_t>max_ts)
    store_u64(p + V2_PRODUCER_ID_AT, <uint64_t>producer_id)
    store_u16(p + V2_PRODUCER_EPOCH_AT, <uint16_t>producer_epoch)
    store_u32(p + V2_BASE_SEQUENCE_AT, <uint32_t>base_sequence)
    store_u32(p + V2_RECORDS_COUNT_AT, <uint32_t>count)
    store_u32(p + V2_CRC_AT,
              crc32c_raw(p + V2_ATTRIBUTES_AT, V2_HEADER - V2_ATTRIBUTES_AT + records_len))


cdef struct Run:                 # rows [start, stop), written with one set of batch attributes
    Py_ssize_t start
    Py_ssize_t stop
    int attributes               # without the codec's bits
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence        # row start's; a batch's advances with its offset
    int32_t partition_leader_epoch


cdef struct BatchExtent:
    Run* run
    Py_ssize_t stop              # the row after its last
    Py_ssize_t size              # bytes of its records
    int64_t max_ts


cdef void write_batch_header(Rows rows, Run* run, Py_ssize_t start, Py_ssize_t stop, uint8_t* p,
                             Py_ssize_t records_len, int codec, int64_t max_ts) noexcept nogil:
    """The header of the batch of rows [start, stop) of `run`."""
    cdef int64_t base_offset = rows.rows[start].offset
    write_v2_header(p, records_len, <int32_t>(stop - start), base_offset,
                    <int32_t>(rows.rows[stop - 1].offset - base_offset), run.attributes | codec,
                    rows.rows[start].timestamp, max_ts, run.producer_id, run.producer_epoch,
                    seq_advance(run.base_sequence, base_offset - rows.rows[run.start].offset),
                    run.partition_leader_epoch)


@cython.boundscheck(False)        # the arrays' lengths are checked first
@cython.wraparound(False)
def encode_v2(Rows rows, starts, *, int codec, level, timestamp_type, transactional, producer_id,
              producer_epoch, base_sequence, partition_leader_epoch, Py_ssize_t max_batch_bytes):
    """Encode all rows as v2 batches of at most max_batch_bytes each (before
    compression; a batch always takes at least one record), in runs: run k is
    rows [starts[k], starts[k + 1]) (the last, to the end; starts[0] is 0), and
    its batches take element k of timestamp_type (int32, 1: LogAppendTime),
    transactional (uint8), producer_id (int64), producer_epoch (int16),
    base_sequence (int32: row starts[k]'s) and partition_leader_epoch (int32),
    arrays of one element a run. Returns bytes."""
    cdef const int64_t[::1] start_rows = starts
    cdef const int32_t[::1] ts_types = timestamp_type
    cdef const uint8_t[::1] in_transaction = transactional
    cdef const int64_t[::1] pids = producer_id
    cdef const int16_t[::1] epochs = producer_epoch
    cdef const int32_t[::1] sequences = base_sequence
    cdef const int32_t[::1] leader_epochs = partition_leader_epoch
    cdef Py_ssize_t n_runs = start_rows.shape[0], k
    cdef size_t capacity
    cdef Run* runs
    for length in (ts_types.shape[0], in_transaction.shape[0], pids.shape[0], epochs.shape[0],
                   sequences.shape[0], leader_epochs.shape[0]):
        if length != n_runs:
            raise ValueError(f"{length} run attributes for {n_runs} runs")
    if rows.n == 0:
        raise ValueError("no rows to encode")
    if n_runs == 0 or start_rows[0] != 0:
        raise ValueError(f"{n_runs} runs for {rows.n} rows: the first must start at row 0")
    for k in range(1, n_runs):
        if not start_rows[k - 1] < start_rows[k] < rows.n:
            raise ValueError(f"run {k} starts at row {start_rows[k]}: runs must start "
                             f"after row {start_rows[k - 1]} and before row {rows.n}")
    runs = <Run*>borrow_memory(n_runs * sizeof(Run), &capacity)
    if runs == NULL:
        raise MemoryError()
    try:
        for k in range(n_runs):
            runs[k].start = start_rows[k]
            runs[k].stop = start_rows[k + 1] if k + 1 < n_runs else rows.n
            runs[k].attributes = ((ATTR_LOG_APPEND_TIME if ts_types[k] == 1 else 0)
                                  | (ATTR_TRANSACTIONAL if in_transaction[k] else 0))
            runs[k].producer_id = pids[k]
            runs[k].producer_epoch = epochs[k]
            runs[k].base_sequence = sequences[k]
            runs[k].partition_leader_epoch = leader_epochs[k]
        if codec:
            return compressed_batches(rows, runs, n_runs, codec, level, max_batch_bytes)
        return uncompressed_batches(rows, runs, n_runs, max_batch_bytes)
    finally:
        return_memory(runs, capacity)


cdef bytes compressed_batches(Rows rows, Run* runs, Py_ssize_t n_runs, int codec, level,
                              Py_ssize_t max_batch_bytes):
    """The runs' batches, each batch's records compressed by the codec library."""
    cdef Py_ssize_t k, start, stop, size
    cdef int64_t max_ts
    cdef list parts = []
    cdef bytes out, records
    cdef uint8_t* p
    cdef const uint8_t[::1] compressed
    for k in range(n_runs):
        start = runs[k].start
        while start < runs[k].stop:
            stop = split_batch(rows, start, runs[k].stop, max_batch_bytes, &size, &max_ts)
            records = PyBytes_FromStringAndSize(NULL, size)
            p = <uint8_t*>PyBytes_AS_STRING(records)
            write_records(rows, start, stop, p, p + size)
            compressed = compress_in_python(codec, records, level, 2)
            size = compressed.shape[0]
            out = PyBytes_FromStringAndSize(NULL, V2_HEADER + size)
            p = <uint8_t*>PyBytes_AS_STRING(out)
            if size:
                memcpy(p + V2_HEADER, &compressed[0], size)
            if size >= NOGIL_MIN_BYTES:         # its CRC: else releasing costs more
                with nogil:
                    write_batch_header(rows, &runs[k], start, stop, p, size, codec, max_ts)
            else:
                write_batch_header(rows, &runs[k], start, stop, p, size, codec, max_ts)
            parts.append(out)
            start = stop
    return parts[0] if len(parts) == 1 else b"".join(parts)


cdef Py_ssize_t plan_batches(Rows rows, Run* runs, Py_ssize_t n_runs, Py_ssize_t max_batch_bytes,
                             BatchExtent* batches, Py_ssize_t* total) noexcept nogil:
    """Every batch's extent, in `batches`; returns how many, and their bytes in `total`."""
    cdef Py_ssize_t k, start, n_batches = 0
    cdef BatchExtent* batch
    total[0] = 0
    for k in range(n_runs):
        start = runs[k].start
        while start < runs[k].stop:
            batch = &batches[n_batches]
            batch.run = &runs[k]
            batch.stop = split_batch(rows, start, runs[k].stop, max_batch_bytes, &batch.size,
                                     &batch.max_ts)
            total[0] += V2_HEADER + batch.size
            start = batch.stop
            n_batches += 1
    return n_batches


cdef void write_batches(Rows rows, BatchExtent* batches, Py_ssize_t n_batches, uint8_t* p,
                        const uint8_t* end) noexcept nogil:
    """The planned batches, one after another from p, in a buffer that ends at `end`."""
    cdef Py_ssize_t b, start = 0
    cdef BatchExtent* batch
    # Each batch's records are written before its header, which covers the
    # bytes they may overwrite past their end.
    for b in range(n_batches):
        batch = &batches[b]
        write_records(rows, start, batch.stop, p + V2_HEADER, end)
        write_batch_header(rows, batch.run, start, batch.stop, p, batch.size, 0, batch.max_ts)
        p += V2_HEADER + batch.size
        start = batch.stop


cdef bytes uncompressed_batches(Rows rows, Run* runs, Py_ssize_t n_runs,
                                Py_ssize_t max_batch_bytes):
    """The runs' batches, every batch's extent found first, then all of them
    written into one buffer of the final size; both without the GIL but for
    a few bytes, where releasing it costs more than it frees."""
    cdef Py_ssize_t n_batches, total
    cdef size_t capacity
    cdef BatchExtent* batches = <BatchExtent*>borrow_memory(rows.n * sizeof(BatchExtent), &capacity)
    cdef bytes out
    cdef uint8_t* p
    if batches == NULL:
        raise MemoryError()
    try:
        if rows.n * V2_MIN_RECORD >= NOGIL_MIN_BYTES:
            with nogil:
                n_batches = plan_batches(rows, runs, n_runs, max_batch_bytes, batches, &total)
        else:
            n_batches = plan_batches(rows, runs, n_runs, max_batch_bytes, batches, &total)
        out = PyBytes_FromStringAndSize(NULL, total)
        p = <uint8_t*>PyBytes_AS_STRING(out)
        if total >= NOGIL_MIN_BYTES:
            with nogil:
                write_batches(rows, batches, n_batches, p, p + total)
        else:
            write_batches(rows, batches, n_batches, p, p + total)
        return out
    finally:
        return_memory(batches, capacity)


def encode_control(int type_id, *, int64_t producer_id, int16_t producer_epoch, int64_t offset,
                   int32_t coordinator_epoch, int64_t timestamp, int32_t partition_leader_epoch=-1):
    """An end-transaction marker batch (ABORT = 0, COMMIT = 1)."""
    cdef uint8_t key[4]
    cdef uint8_t value[6]
    cdef Rows rows = Rows.__new__(Rows)
    store_u16(key, 0)
    store_u16(key + 2, <uint16_t>type_id)
    store_u16(value, 0)
    store_u32(value + 2, <uint32_t>coordinator_epoch)
    rows.allocate(1, 0)
    rows.rows[0].key.p = key
    rows.rows[0].key.n = 4
    rows.rows[0].value.p = value
    rows.rows[0].value.n = 6
    rows.rows[0].offset = offset
    rows.rows[0].timestamp = timestamp
    rows.rows[0].first_header = 0
    rows.rows[0].n_headers = 0
    rows.rows[0].fields = fields_size(rows, &rows.rows[0])
    cdef Run run
    run.start = 0
    run.stop = 1
    run.attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL
    run.producer_id = producer_id
    run.producer_epoch = producer_epoch
    run.base_sequence = -1
    run.partition_leader_epoch = partition_leader_epoch
    return uncompressed_batches(rows, &run, 1, 1 << 30)


# ------------------------------------------------------------ v0/v1 messages

cdef inline Py_ssize_t message_size(int magic, Blob* key, Blob* value) noexcept nogil:
    cdef Py_ssize_t n = LEGACY_V1_OVERHEAD if magic == 1 else LEGACY_V0_OVERHEAD
    return n + max(key.n, 0) + max(value.n, 0)


cdef inline uint8_t* write_sized(uint8_t* q, Blob* blob) noexcept nogil:
    """int32 length (-1: null) and the bytes, as v0/v1 messages hold keys and values."""
    store_u32(q, <uint32_t>blob.n)
    q += 4
    if blob.n > 0:
        memcpy(q, blob.p, blob.n)
        q += blob.n
    return q


cdef uint8_t* write_message_entry(uint8_t* p, int64_t offset, int magic, int attributes,
                                  int64_t timestamp, Blob* key, Blob* value) noexcept:
    cdef Py_ssize_t size = message_size(magic, key, value)
    cdef uint8_t* msg = p + LOG_OVERHEAD
    cdef uint8_t* q = msg + MESSAGE_FIELDS_AT
    store_u64(p, <uint64_t>offset)
    store_u32(p + ENTRY_SIZE_AT, <uint32_t>size)
    msg[MESSAGE_MAGIC_AT] = magic
    msg[MESSAGE_ATTRIBUTES_AT] = attributes
    if magic == 1:
        store_u64(q, <uint64_t>timestamp)
        q += 8
    q = write_sized(q, key)
    q = write_sized(q, value)
    store_u32(msg, crc32_of(msg + MESSAGE_MAGIC_AT, size - MESSAGE_MAGIC_AT))
    return q


cdef bytes message_entries(Rows rows, Py_ssize_t start, Py_ssize_t stop, int magic,
                           int attributes, int64_t offsets_from):
    """Messages of rows [start, stop), each at its offset less offsets_from."""
    cdef Py_ssize_t i, size = 0
    cdef Row* row
    for i in range(start, stop):
        size += LOG_OVERHEAD + message_size(magic, &rows.rows[i].key, &rows.rows[i].value)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    for i in range(start, stop):
        row = &rows.rows[i]
        p = write_message_entry(p, row.offset - offsets_from, magic, attributes,
                                row.timestamp, &row.key, &row.value)
    return out


def encode_legacy(Rows rows, Py_ssize_t first, Py_ssize_t end, *, int magic, int codec, level,
                  int timestamp_type, Py_ssize_t max_batch_bytes):
    """Encode rows [first, end) as v0/v1 messages: one entry per record when
    uncompressed, else wrappers of at most max_batch_bytes of inner entries each."""
    cdef Py_ssize_t start = first, stop, size, entry
    cdef int ts_bit = ATTR_LOG_APPEND_TIME if (magic == 1 and timestamp_type == 1) else 0
    cdef int64_t max_ts
    cdef bytes inner, wrapper, compressed
    cdef Blob null_key, value
    cdef list out = []
    cdef Py_ssize_t i
    if not 0 <= first < end <= rows.n:
        raise ValueError(f"rows {first}..{end} of {rows.n}")
    for i in range(first, end):
        if rows.rows[i].n_headers:
            raise ValueError(f"magic {magic} messages cannot carry headers")
    if codec == 0:
        return message_entries(rows, first, end, magic, ts_bit, 0)
    null_key.p = NULL
    null_key.n = -1
    while start < end:
        stop = start
        size = 0
        max_ts = rows.rows[start].timestamp
        while stop < end:
            entry = LOG_OVERHEAD + message_size(magic, &rows.rows[stop].key, &rows.rows[stop].value)
            if stop > start and size + entry > max_batch_bytes:
                break
            size += entry
            max_ts = max(max_ts, rows.rows[stop].timestamp)
            stop += 1
        # Inner offsets: relative to the first in magic 1, absolute in magic 0.
        inner = message_entries(rows, start, stop, magic, 0,
                                rows.rows[start].offset if magic == 1 else 0)
        compressed = bytes(compress_in_python(codec, inner, level, magic))
        value.p = <const uint8_t*>PyBytes_AS_STRING(compressed)
        value.n = <int32_t>PyBytes_GET_SIZE(compressed)
        wrapper = PyBytes_FromStringAndSize(
            NULL, LOG_OVERHEAD + message_size(magic, &null_key, &value))
        write_message_entry(<uint8_t*>PyBytes_AS_STRING(wrapper), rows.rows[stop - 1].offset, magic,
                            codec | ts_bit, max_ts, &null_key, &value)
        out.append(wrapper)
        start = stop
    return out[0] if len(out) == 1 else b"".join(out)
