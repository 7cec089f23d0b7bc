# Avro datums -> Arrow column buffers, with no Python object per datum.
#
# kcodec/values/avro.py compiles a (writer schema, reader schema) pair into a
# program: a flat int32 array of nodes, NODE_WIDTH ints each,
#   [op, column, a, b, children, size]
# where a node's children follow it and `size` counts the nodes of its subtree,
# so a child's next sibling is `size` nodes on. The writer schema says what the
# bytes are (the op); the reader schema says where they go (the column, -1 to
# skip them). The columns are the reader schema's, preorder, so the datums of
# every writer schema in a column land in one set of buffers.
#
# Every read is checked against the datum's end; a count is checked against
# the bytes that remain (or, for items that take no bytes, a fixed cap) before
# anything grows; recursion is as deep as the schema, which the compiler caps.
# A datum that fails takes back what it wrote (truncate), so with
# on_error="null" its row is null and the rest are untouched.
cimport cython
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t, INT64_MIN
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyBuffer_FillInfo

from kcodec._core.wire cimport OK, F_TRUNCATED, read_varint, read_varlong

cdef extern from *:
    """
    #include <string.h>
    typedef __int128 kc_int128;
    static inline int kc_utf8_valid(const unsigned char *s, long long n) {
        long long i = 0;
        while (i < n) {
            unsigned long long word;
            if (i + 8 <= n) {
                memcpy(&word, s + i, 8);
                if (!(word & 0x8080808080808080ULL)) { i += 8; continue; }
            }
            unsigned char c = s[i];
            if (c < 0x80) { i++; continue; }
            if (c >= 0xC2 && c <= 0xDF) {
                if (i + 1 >= n || (s[i+1] & 0xC0) != 0x80) return 0;
                i += 2;
            } else if (c >= 0xE0 && c <= 0xEF) {
                if (i + 2 >= n || (s[i+1] & 0xC0) != 0x80 || (s[i+2] & 0xC0) != 0x80) return 0;
                if (c == 0xE0 && s[i+1] < 0xA0) return 0;
                if (c == 0xED && s[i+1] > 0x9F) return 0;
                i += 3;
            } else if (c >= 0xF0 && c <= 0xF4) {
                if (i + 3 >= n || (s[i+1] & 0xC0) != 0x80 || (s[i+2] & 0xC0) != 0x80
                    || (s[i+3] & 0xC0) != 0x80) return 0;
                if (c == 0xF0 && s[i+1] < 0x90) return 0;
                if (c == 0xF4 && s[i+1] > 0x8F) return 0;
                i += 4;
            } else {
                return 0;
            }
        }
        return 1;
    }
    """
    ctypedef long long kc_int128
    int kc_utf8_valid(const unsigned char *s, long long n) nogil


cdef enum:
    NODE_WIDTH = 6
    AT_OP = 0
    AT_COLUMN = 1
    AT_A = 2
    AT_B = 3
    AT_CHILDREN = 4
    AT_SIZE = 5

# Ops: what the writer's bytes are.
cpdef enum Op:
    OP_NULL = 0          # nothing to read; appends a null
    OP_BOOLEAN = 1
    OP_INT = 2           # zigzag varint, 32-bit; column kind says int32/int64/float/double
    OP_LONG = 3
    OP_FLOAT = 4
    OP_DOUBLE = 5
    OP_BYTES = 6         # length + bytes; column binary or string
    OP_STRING = 7
    OP_FIXED = 8         # a: size
    OP_ENUM = 9          # a: table start in ints (2 per writer symbol: const start, length; -1: none), b: symbols
    OP_DECIMAL_BYTES = 10    # a: const start of 10**precision (16 bytes)
    OP_DECIMAL_FIXED = 11    # a: size, b: const start of 10**precision
    OP_RECORD = 12       # children: the writer's fields, then the reader's defaults
    OP_SEQUENCE = 13     # children, in turn
    OP_ARRAY = 14        # a: least bytes an item takes; child: the items
    OP_MAP = 15          # a: least bytes an entry's value takes, b: the keys' column; child: values
    OP_UNION = 16        # children: one per writer branch
    OP_APPEND_NULL = 17  # a null into the column, nothing read
    OP_STRUCT_VALID = 18 # a valid slot in a struct column (a union's struct), nothing read
    OP_DEFAULT = 19      # a: const start, b: length; child: reads the default's bytes
    OP_FAIL = 20         # a: message number

# Column kinds: the Arrow layouts the reader schema's types take.
cpdef enum Kind:
    KIND_NULL = 0
    KIND_BOOLEAN = 1
    KIND_INT32 = 2
    KIND_INT64 = 3
    KIND_FLOAT = 4
    KIND_DOUBLE = 5
    KIND_BINARY = 6
    KIND_STRING = 7
    KIND_DECIMAL = 8
    KIND_STRUCT = 9
    KIND_LIST = 10
    KIND_MAP = 11

# Results: 0 is success; the rest are what went wrong.
cpdef enum Fault:
    FAULT_NONE = 0
    FAULT_TRUNCATED = 1
    FAULT_VARINT = 2
    FAULT_NEGATIVE_LENGTH = 3
    FAULT_LENGTH = 4
    FAULT_COUNT = 5
    FAULT_UNION_BRANCH = 6
    FAULT_ENUM_SYMBOL = 7
    FAULT_UTF8 = 8
    FAULT_DECIMAL = 9
    FAULT_RESOLUTION = 10
    FAULT_TOO_BIG = 11
    FAULT_NO_MEMORY = 12
    FAULT_FRAME = 13         # the row's frame failed (program below -1)

# Items that take no bytes (nulls, empty records) are not bounded by the
# input: a datum may hold this many in all.
cdef int64_t MAX_EMPTY_ITEMS = 1 << 24
# Binary, string and list offsets are int32.
cdef int64_t MAX_OFFSET = 0x7FFFFFFF


cdef struct Buffer:
    uint8_t* data
    int64_t size          # bytes in use
    int64_t capacity


cdef struct Column:
    int kind
    bint nullable         # may hold nulls (else: empty values under null structs)
    int width             # bytes a value takes, fixed-width kinds
    int64_t length
    bint has_nulls
    Buffer valid          # bitmap
    Buffer values         # fixed-width values (bitmap for booleans), or offsets
    Buffer data           # binary and string bytes
    int first_child       # into Decoder.children
    int n_children


cdef struct Reader:
    const uint8_t* at
    const uint8_t* end


@cython.final
cdef class OwnedBuffer:
    """malloc'd memory handed to Arrow: pa.py_buffer(owned) points at it,
    and keeps this object (so the memory) alive."""
    cdef uint8_t* data
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __dealloc__(self):
        free(self.data)


cdef OwnedBuffer take(Buffer* buffer):
    cdef OwnedBuffer owned = OwnedBuffer.__new__(OwnedBuffer)
    owned.data = buffer.data
    owned.size = buffer.size
    buffer.data = NULL
    buffer.size = buffer.capacity = 0
    return owned


cdef inline int reserve(Buffer* buffer, int64_t more) noexcept nogil:
    cdef int64_t need = buffer.size + more
    cdef int64_t capacity
    cdef uint8_t* grown
    if need <= buffer.capacity:
        return 0
    capacity = buffer.capacity * 2 if buffer.capacity else 64
    while capacity < need:
        capacity *= 2
    grown = <uint8_t*>realloc(buffer.data, capacity)
    if grown == NULL:
        return FAULT_NO_MEMORY
    buffer.data = grown
    buffer.capacity = capacity
    return 0


cdef inline int set_bit(Buffer* bitmap, int64_t i, bint value) noexcept nogil:
    cdef int64_t byte = i >> 3
    if byte >= bitmap.size:
        if reserve(bitmap, byte + 1 - bitmap.size):
            return FAULT_NO_MEMORY
        memset(bitmap.data + bitmap.size, 0, byte + 1 - bitmap.size)
        bitmap.size = byte + 1
    if value:
        bitmap.data[byte] |= <uint8_t>(1 << (i & 7))
    else:
        bitmap.data[byte] &= <uint8_t>~(1 << (i & 7))
    return 0


cdef inline int varint_fault(int status) noexcept nogil:
    if status == OK:
        return 0
    return FAULT_TRUNCATED if status == F_TRUNCATED else FAULT_VARINT


cdef inline int read_long(Reader* r, int64_t* out) noexcept nogil:
    # Avro's longs and ints are Kafka's zigzag varints: wire.pxd reads both.
    return varint_fault(read_varlong(&r.at, r.end, out))


cdef inline int read_int(Reader* r, int64_t* out) noexcept nogil:
    # Java's readInt: at most 5 bytes, bits past 32 dropped.
    cdef int32_t value = 0
    cdef int status = varint_fault(read_varint(&r.at, r.end, &value))
    out[0] = value
    return status


cdef inline int read_length(Reader* r, int64_t* out) noexcept nogil:
    cdef int status = read_long(r, out)
    if status:
        return status
    if out[0] < 0:
        return FAULT_NEGATIVE_LENGTH
    if out[0] > r.end - r.at:
        return FAULT_LENGTH
    return 0


@cython.final
cdef class Decoder:
    """The columns of one reader schema, and the programs that fill them.

    Args:
        kinds, widths: Each column's Kind and value width, preorder.
        children: Each column's child columns (lists of column numbers).
        nullable: Whether each column may hold nulls.
        programs: One (nodes, ints, consts) per writer schema: int32 nodes,
            int32 tables, bytes of constants.
    """
    cdef Column* columns
    cdef int n_columns
    cdef int32_t* children
    cdef list programs           # keeps the arrays alive
    cdef const int32_t** nodes
    cdef const int32_t** ints
    cdef const uint8_t** consts
    cdef int64_t* const_sizes
    cdef int n_programs
    # Where the last fault happened: byte in the datum, message number.
    cdef const uint8_t* fault_at
    cdef int fault_detail
    # Items that took no bytes in the datum being decoded (MAX_EMPTY_ITEMS).
    cdef int64_t empty_items

    def __cinit__(self, kinds, widths, children, nullable, programs):
        cdef int i, j, total = 0
        self.n_columns = len(kinds)
        self.columns = <Column*>malloc(max(1, self.n_columns) * sizeof(Column))
        total = sum(len(c) for c in children)
        self.children = <int32_t*>malloc(max(1, total) * sizeof(int32_t))
        self.n_programs = len(programs)
        self.nodes = <const int32_t**>malloc(max(1, self.n_programs) * sizeof(void*))
        self.ints = <const int32_t**>malloc(max(1, self.n_programs) * sizeof(void*))
        self.consts = <const uint8_t**>malloc(max(1, self.n_programs) * sizeof(void*))
        self.const_sizes = <int64_t*>malloc(max(1, self.n_programs) * sizeof(int64_t))
        if (self.columns == NULL or self.children == NULL or self.nodes == NULL
                or self.ints == NULL or self.consts == NULL or self.const_sizes == NULL):
            raise MemoryError()
        memset(self.columns, 0, max(1, self.n_columns) * sizeof(Column))
        total = 0
        for i in range(self.n_columns):
            self.columns[i].kind = kinds[i]
            self.columns[i].width = widths[i]
            self.columns[i].nullable = nullable[i]
            self.columns[i].first_child = total
            self.columns[i].n_children = len(children[i])
            for j in children[i]:
                self.children[total] = j
                total += 1
            if kinds[i] in (KIND_BINARY, KIND_STRING, KIND_LIST, KIND_MAP):
                if reserve(&self.columns[i].values, 4):
                    raise MemoryError()
                (<int32_t*>self.columns[i].values.data)[0] = 0
                self.columns[i].values.size = 4
        self.programs = []
        for i, (nodes, ints, consts) in enumerate(programs):
            self.add_program(i, nodes, ints, consts)

    cdef add_program(self, int i, const int32_t[::1] nodes, const int32_t[::1] ints,
                     const uint8_t[::1] consts):
        self.programs.append((nodes, ints, consts))
        self.nodes[i] = &nodes[0]
        self.ints[i] = &ints[0] if ints.shape[0] else NULL
        self.consts[i] = &consts[0] if consts.shape[0] else NULL
        self.const_sizes[i] = consts.shape[0]

    def __dealloc__(self):
        cdef int i
        if self.columns != NULL:
            for i in range(self.n_columns):
                free(self.columns[i].valid.data)
                free(self.columns[i].values.data)
                free(self.columns[i].data.data)
            free(self.columns)
        free(self.children)
        free(<void*>self.nodes)
        free(<void*>self.ints)
        free(<void*>self.consts)
        free(self.const_sizes)

    # -- appending -----------------------------------------------------------

    cdef inline int append_valid(self, Column* c) noexcept nogil:
        if c.has_nulls:
            if set_bit(&c.valid, c.length, 1):
                return FAULT_NO_MEMORY
        c.length += 1
        return 0

    cdef inline int append_null(self, int col) noexcept nogil:
        return self.append_empty(col, True)

    cdef int append_empty(self, int col, bint null) noexcept nogil:
        """A slot with no value: null, or valid and empty (zero, "", [], a
        struct of empties) in a column that may hold no nulls, under a null
        struct: Arrow's casts and Spark refuse nulls there, parent or not."""
        cdef Column* c = &self.columns[col]
        cdef Column* child
        cdef int64_t i, end
        cdef int status
        if null:
            if not c.has_nulls:
                # The bitmap begins when the first null does: all before were valid.
                if reserve(&c.valid, (c.length >> 3) + 1):
                    return FAULT_NO_MEMORY
                memset(c.valid.data, 0xFF, (c.length >> 3) + 1)
                c.valid.size = (c.length >> 3) + 1
                c.has_nulls = True
            if set_bit(&c.valid, c.length, 0):
                return FAULT_NO_MEMORY
        if c.kind == KIND_BOOLEAN:
            if set_bit(&c.values, c.length, 0):
                return FAULT_NO_MEMORY
        elif c.kind in (KIND_INT32, KIND_INT64, KIND_FLOAT, KIND_DOUBLE, KIND_DECIMAL):
            if reserve(&c.values, c.width):
                return FAULT_NO_MEMORY
            memset(c.values.data + c.values.size, 0, c.width)
            c.values.size += c.width
        elif c.kind in (KIND_BINARY, KIND_STRING, KIND_LIST, KIND_MAP):
            if reserve(&c.values, 4):
                return FAULT_NO_MEMORY
            end = (<int32_t*>c.values.data)[c.length]
            (<int32_t*>(c.values.data + c.values.size))[0] = <int32_t>end
            c.values.size += 4
        elif c.kind == KIND_STRUCT:
            for i in range(c.n_children):
                child = &self.columns[self.children[c.first_child + i]]
                status = self.append_empty(self.children[c.first_child + i], child.nullable)
                if status:
                    return status
        if null:
            c.length += 1
            return 0
        return self.append_valid(c)

    cdef void truncate(self, int col, int64_t length) noexcept nogil:
        cdef Column* c = &self.columns[col]
        cdef int64_t i, inner
        # Equal lengths walk down too: a list or map closes its slot after its
        # items, so a datum that failed inside one left items in its children.
        if length > c.length:
            return
        c.length = length
        if c.kind == KIND_BOOLEAN:
            c.values.size = min(c.values.size, (length + 7) >> 3)
        elif c.kind in (KIND_INT32, KIND_INT64, KIND_FLOAT, KIND_DOUBLE, KIND_DECIMAL):
            c.values.size = length * c.width
        elif c.kind in (KIND_BINARY, KIND_STRING, KIND_LIST, KIND_MAP):
            c.values.size = (length + 1) * 4
            inner = (<int32_t*>c.values.data)[length]
            if c.kind == KIND_LIST or c.kind == KIND_MAP:
                for i in range(c.n_children):
                    self.truncate(self.children[c.first_child + i], inner)
            else:
                c.data.size = inner
        elif c.kind == KIND_STRUCT:
            for i in range(c.n_children):
                self.truncate(self.children[c.first_child + i], length)

    cdef inline int end_offsets(self, Column* c, int64_t inner) noexcept nogil:
        """Close a binary, list or map slot whose contents end at `inner`."""
        if inner > MAX_OFFSET:
            return FAULT_TOO_BIG
        if reserve(&c.values, 4):
            return FAULT_NO_MEMORY
        (<int32_t*>(c.values.data + c.values.size))[0] = <int32_t>inner
        c.values.size += 4
        return self.append_valid(c)

    cdef inline int append_bytes(self, Column* c, const uint8_t* data, int64_t n) noexcept nogil:
        if c.kind == KIND_STRING and not kc_utf8_valid(data, n):
            return FAULT_UTF8
        if c.data.size + n > MAX_OFFSET:
            return FAULT_TOO_BIG
        if reserve(&c.data, n):
            return FAULT_NO_MEMORY
        memcpy(c.data.data + c.data.size, data, n)
        c.data.size += n
        return self.end_offsets(c, c.data.size)

    cdef inline int append_number(self, Column* c, int64_t integer, double real,
                                  bint is_real) noexcept nogil:
        if reserve(&c.values, 8):
            return FAULT_NO_MEMORY
        if c.kind == KIND_INT32:
            (<int32_t*>(c.values.data + c.values.size))[0] = <int32_t>integer
        elif c.kind == KIND_INT64:
            (<int64_t*>(c.values.data + c.values.size))[0] = integer
        elif c.kind == KIND_FLOAT:
            (<float*>(c.values.data + c.values.size))[0] = <float>(real if is_real else integer)
        else:
            (<double*>(c.values.data + c.values.size))[0] = real if is_real else <double>integer
        c.values.size += c.width
        return self.append_valid(c)

    cdef int append_decimal(self, Column* c, const uint8_t* data, int64_t n,
                            const uint8_t* limit) noexcept nogil:
        # Big-endian two's complement, sign-extended; no wider than its
        # precision (limit: 10**precision, 16 bytes little-endian).
        cdef kc_int128 value = 0
        cdef kc_int128 bound
        cdef int64_t i
        if n == 0:
            value = 0
        else:
            value = -1 if data[0] & 0x80 else 0
            for i in range(n):
                if i < n - 16:
                    if data[i] != (0xFF if data[0] & 0x80 else 0):
                        return FAULT_DECIMAL
                    continue
                value = (value << 8) | data[i]
            if n > 16 and ((value < 0) != ((data[0] & 0x80) != 0)):
                return FAULT_DECIMAL
        memcpy(&bound, limit, 16)
        if value >= bound or value <= -bound:
            return FAULT_DECIMAL
        if reserve(&c.values, 16):
            return FAULT_NO_MEMORY
        memcpy(c.values.data + c.values.size, &value, 16)
        c.values.size += 16
        return self.append_valid(c)

    # -- the program ---------------------------------------------------------

    cdef inline int take_blob(self, Reader* r, const uint8_t** data,
                              int64_t* count) noexcept nogil:
        """A length and that many bytes (strings, bytes, decimals, map keys):
        where they begin in *data, and the reader past them."""
        cdef const uint8_t* at = r.at
        cdef int status = read_length(r, count)
        if status:
            self.fault_at = at
            return status
        data[0] = r.at
        r.at += count[0]
        return 0

    cdef int run(self, int program, int node, Reader* r) noexcept nogil:
        cdef const int32_t* n = self.nodes[program] + node * NODE_WIDTH
        cdef int op = n[AT_OP]
        cdef int col = n[AT_COLUMN]
        cdef Column* c = &self.columns[col] if col >= 0 else NULL
        cdef int status = 0
        cdef int64_t value = 0, count, i, least, entry_least
        cdef int child
        cdef const int32_t* table
        cdef const uint8_t* at
        cdef Column* keys
        cdef float f
        cdef double d
        cdef Reader inner
        if op == OP_RECORD or op == OP_SEQUENCE:
            if c != NULL:
                status = self.append_valid(c)
                if status:
                    return status
            child = node + 1
            for i in range(n[AT_CHILDREN]):
                status = self.run(program, child, r)
                if status:
                    return status
                child += self.nodes[program][child * NODE_WIDTH + AT_SIZE]
            return 0
        if op == OP_INT or op == OP_LONG:
            at = r.at
            status = read_int(r, &value) if op == OP_INT else read_long(r, &value)
            if status:
                self.fault_at = at
                return status
            return self.append_number(c, value, 0, False) if c != NULL else 0
        if op == OP_STRING or op == OP_BYTES:
            status = self.take_blob(r, &at, &count)
            if status:
                return status
            if c == NULL:
                return 0
            status = self.append_bytes(c, at, count)
            if status == FAULT_UTF8:
                self.fault_at = at
            return status
        if op == OP_UNION:
            at = r.at
            status = read_long(r, &value)
            if status:
                self.fault_at = at
                return status
            if value < 0 or value >= n[AT_CHILDREN]:
                self.fault_at = at
                return FAULT_UNION_BRANCH
            child = node + 1
            for i in range(value):
                child += self.nodes[program][child * NODE_WIDTH + AT_SIZE]
            return self.run(program, child, r)
        if op == OP_APPEND_NULL or op == OP_NULL:
            return self.append_null(col) if c != NULL else 0
        if op == OP_DOUBLE or op == OP_FLOAT:
            count = 8 if op == OP_DOUBLE else 4
            if r.end - r.at < count:
                self.fault_at = r.at
                return FAULT_TRUNCATED
            if op == OP_DOUBLE:
                memcpy(&d, r.at, 8)
            else:
                memcpy(&f, r.at, 4)
                d = f
            r.at += count
            return self.append_number(c, 0, d, True) if c != NULL else 0
        if op == OP_BOOLEAN:
            if r.at >= r.end:
                self.fault_at = r.at
                return FAULT_TRUNCATED
            value = r.at[0] == 1
            r.at += 1
            if c == NULL:
                return 0
            if set_bit(&c.values, c.length, value):
                return FAULT_NO_MEMORY
            return self.append_valid(c)
        if op == OP_FIXED or op == OP_DECIMAL_FIXED:
            count = n[AT_A]
            if r.end - r.at < count:
                self.fault_at = r.at
                return FAULT_TRUNCATED
            at = r.at
            r.at += count
            if c == NULL:
                return 0
            if op == OP_DECIMAL_FIXED:
                status = self.append_decimal(c, at, count, self.consts[program] + n[AT_B])
            else:
                status = self.append_bytes(c, at, count)
            if status == FAULT_DECIMAL or status == FAULT_UTF8:
                self.fault_at = at
            return status
        if op == OP_DECIMAL_BYTES:
            status = self.take_blob(r, &at, &count)
            if status:
                return status
            if c == NULL:
                return 0
            status = self.append_decimal(c, at, count, self.consts[program] + n[AT_A])
            if status == FAULT_DECIMAL:
                self.fault_at = at
            return status
        if op == OP_ENUM:
            at = r.at
            status = read_int(r, &value)
            if status:
                self.fault_at = at
                return status
            if c == NULL:
                return 0
            if value < 0 or value >= n[AT_B]:
                self.fault_at = at
                return FAULT_ENUM_SYMBOL
            table = self.ints[program] + n[AT_A] + 2 * value
            if table[0] < 0:
                self.fault_at = at
                self.fault_detail = table[1]
                return FAULT_RESOLUTION
            return self.append_bytes(c, self.consts[program] + table[0], table[1])
        if op == OP_ARRAY or op == OP_MAP:
            least = n[AT_A]
            keys = &self.columns[n[AT_B]] if (op == OP_MAP and c != NULL) else NULL
            while True:
                at = r.at
                status = read_long(r, &count)
                if status:
                    self.fault_at = at
                    return status
                if count == 0:
                    break
                if count < 0:
                    if count == INT64_MIN:
                        self.fault_at = at
                        return FAULT_COUNT
                    count = -count
                    status = read_length(r, &value)   # the block's size in bytes
                    if status:
                        self.fault_at = at
                        return status
                    if c == NULL:
                        r.at += value
                        continue
                # An item takes `least` bytes at least (a map entry one more,
                # its key's length): the count must fit what remains.
                entry_least = least + 1 if op == OP_MAP else least
                if ((count > (r.end - r.at) // entry_least) if entry_least > 0
                        else self.empty_items + count > MAX_EMPTY_ITEMS):
                    self.fault_at = at
                    return FAULT_COUNT
                if entry_least == 0:
                    self.empty_items += count
                for i in range(count):
                    if op == OP_MAP:
                        status = self.take_blob(r, &at, &value)
                        if status:
                            return status
                        if keys != NULL:
                            status = self.append_bytes(keys, at, value)
                            if status:
                                self.fault_at = at
                                return status
                    status = self.run(program, node + 1, r)
                    if status:
                        return status
            if c == NULL:
                return 0
            if op == OP_MAP:
                return self.end_offsets(c, keys.length)
            return self.end_offsets(c, self.columns[self.children[c.first_child]].length)
        if op == OP_STRUCT_VALID:
            return self.append_valid(c)
        if op == OP_DEFAULT:
            inner.at = self.consts[program] + n[AT_A]
            inner.end = inner.at + n[AT_B]
            return self.run(program, node + 1, &inner)
        if op == OP_FAIL:
            self.fault_at = r.at
            self.fault_detail = n[AT_A]
            return FAULT_RESOLUTION
        self.fault_at = r.at
        return FAULT_RESOLUTION

    # -- rows ------------------------------------------------------------------

    cdef int binary_columns(self, int col) noexcept nogil:
        """How many binary and string columns have a value in every row."""
        cdef Column* c = &self.columns[col]
        cdef int i, found = 0
        if c.kind == KIND_BINARY or c.kind == KIND_STRING:
            return 1
        if c.kind == KIND_STRUCT:
            for i in range(c.n_children):
                found += self.binary_columns(self.children[c.first_child + i])
        return found

    cdef void presize(self, int col, int64_t rows, int64_t data_bytes) noexcept nogil:
        """Room for `rows` more values in the columns that have one in every
        row (a list's items may be any number): growing them value by value
        copies them several times over. Strings and bytes share the input's
        size as a first guess. Best effort: appending grows what is short."""
        cdef Column* c = &self.columns[col]
        cdef int i
        if c.kind == KIND_BOOLEAN:
            reserve(&c.values, (rows + 7) >> 3)
        elif c.kind in (KIND_INT32, KIND_INT64, KIND_FLOAT, KIND_DOUBLE, KIND_DECIMAL):
            reserve(&c.values, rows * c.width)
        elif c.kind in (KIND_BINARY, KIND_STRING, KIND_LIST, KIND_MAP):
            reserve(&c.values, rows * 4)
            if c.kind != KIND_LIST and c.kind != KIND_MAP:
                reserve(&c.data, data_bytes)
        elif c.kind == KIND_STRUCT:
            for i in range(c.n_children):
                self.presize(self.children[c.first_child + i], rows, data_bytes)

    def decode(self, const uint8_t[::1] data, const int64_t[::1] starts,
               const int64_t[::1] ends, const int64_t[::1] value_starts,
               const int32_t[::1] program_of_row, bint stop_at_fault):
        """Decode each row's datum (data[starts[i]:ends[i]]) with its program
        (program_of_row[i]; -1: a null row; below -1: a frame that failed,
        a fault with that code's negation - 2 as detail) into the columns.

        Returns:
            list[tuple[int, int, int, int]]: (row, fault, byte in the value,
            detail) of each row that failed, which is null in the columns;
            with stop_at_fault, the first only, and the rows after it are
            not decoded.
        """
        cdef Py_ssize_t n = program_of_row.shape[0]
        cdef Py_ssize_t row
        cdef int program, status
        cdef int64_t before
        cdef Reader r
        cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
        cdef list faults = []
        cdef int64_t fault_row = -1, fault_byte = 0
        cdef int fault = 0, detail = 0
        if starts.shape[0] < n or ends.shape[0] < n or value_starts.shape[0] < n:
            raise ValueError("starts, ends and value_starts need a value for every row")
        for row in range(n):
            if program_of_row[row] >= self.n_programs:
                raise ValueError(f"row {row}: no program {program_of_row[row]}")
            if program_of_row[row] >= 0 and not (
                    0 <= starts[row] <= ends[row] <= data.shape[0]
                    and value_starts[row] <= starts[row]):
                raise ValueError(f"row {row}: datum bounds outside the data")
        if self.n_columns == 0:
            raise ValueError("a decoder needs a column")
        cdef const int64_t* start_of = &starts[0] if n else NULL
        cdef const int64_t* end_of = &ends[0] if n else NULL
        cdef const int64_t* value_start_of = &value_starts[0] if n else NULL
        cdef const int32_t* program_of = &program_of_row[0] if n else NULL
        with nogil:
            self.presize(0, n, data.shape[0] // max(1, self.binary_columns(0)))
        row = 0
        while row < n:
            with nogil:
                while row < n:
                    program = program_of[row]
                    before = self.columns[0].length
                    if program == -1:
                        status = self.append_null(0)
                        if status:
                            break
                        row += 1
                        continue
                    if program < -1:
                        status = FAULT_FRAME
                        self.fault_detail = -program - 2
                        self.fault_at = base + value_start_of[row] if base != NULL else NULL
                        break
                    r.at = base + start_of[row]
                    r.end = base + end_of[row]
                    self.fault_detail = 0
                    self.empty_items = 0
                    status = self.run(program, 0, &r)
                    if status:
                        self.truncate(0, before)
                        break
                    row += 1
            if row >= n:
                break
            if status == FAULT_NO_MEMORY:
                raise MemoryError()
            fault_byte = (self.fault_at - base) - value_start_of[row] if self.fault_at != NULL else 0
            faults.append((row, status, fault_byte, self.fault_detail))
            if stop_at_fault:
                break
            if self.append_null(0):
                raise MemoryError()
            row += 1
        return faults

    # -- results ---------------------------------------------------------------

    def column(self, int col):
        """(length, validity or None, values, data) of column `col`: owned
        buffers for pa.py_buffer, which the decoder gives up."""
        if not 0 <= col < self.n_columns:
            raise IndexError(col)
        cdef Column* c = &self.columns[col]
        valid = take(&c.valid) if c.has_nulls else None
        values = take(&c.values) if c.values.data != NULL else None
        data = take(&c.data) if c.data.data != NULL else None
        return c.length, valid, values, data

    @property
    def rows(self):
        return self.columns[0].length if self.n_columns else 0
