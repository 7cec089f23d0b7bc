# Handing the filled buffers to Arrow through its C Data Interface, and the
# schema of the tables; included by columns.pyx.

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
