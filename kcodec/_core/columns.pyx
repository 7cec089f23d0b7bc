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
#
# One extension, assembled from a file per concern (as pyarrow's lib.pyx is),
# so that the record loop and what it calls per record stay inlined:
#   fill.pxi          the column buffers (Out), a batch being added (Block),
#                     fill and its record loop fill_records, growth
#   memory_pool.pxi   the process-wide pool of kept column memory
#   arrow_export.pxi  the buffers handed to Arrow (C Data Interface), schemas
#   collector.pxi     Collector: one decode's columns, filled batch by batch
#   scan.pxi          the scan over runs of v2 batches, without the GIL
# and, below, the entry points.
cimport cython
from libc.stdint cimport uintptr_t, uint8_t, uint64_t, int16_t, int32_t, int64_t, INT64_MIN, INT64_MAX
from libc.stdlib cimport calloc, malloc, realloc, free
from cpython.ref cimport PyObject
from libc.string cimport memcpy, memset
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock, PyThread_release_lock,
    NOWAIT_LOCK, WAIT_LOCK,
)

from kcodec._core.status cimport *
from kcodec._core.wire cimport (
    ATTR_CONTROL, ATTR_TRANSACTIONAL, CODEC_LZ4, COPY_SLACK, ENTRY_SIZE_AT, HEADER_UP_TO_MAGIC,
    LOG_OVERHEAD, MAGIC_AT, MESSAGE_ATTRIBUTES_AT, V2_ATTRIBUTES_AT, V2_HEADER, FaultInfo,
    codec_of, copy_over, load_i32, load_i64, load_u16, read_blob, timestamp_type_of,
)
from kcodec._core.records cimport (
    Batch, BatchReader, HeaderAt, LegacyMessage, Slot, Slots, Source, V2Base, V2Header, Wrapper,
    ENTRY_OK, V2_MIN_RECORD, NOGIL_MIN_BYTES, count_fits, count_inner, entry_size,
    last_offset_below, legacy_entry_ok, parse_inner, parse_v2_record, raise_fault,
    raise_for_status, read_v2_header, record_sequence, scan_messages, v2_records_end, wrapper_of,
    batch_in_bounds, decompress_in_python,
)
from kcodec._core.system_codecs cimport (
    Inflater, decompress_batch, decompress_in_core, decompress_with_gil, inflates,
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

from kcodec.errors import KafkaFormatError, located

cdef int32_t MAX_ARROW_BYTES = 0x7FFFFFFF
cdef double MAX_EXPANSION = 16     # of compressed input, when extrapolating growth
cdef Py_ssize_t MAX_RESERVED_BLOCK = 64 << 20   # a larger block takes fill's checked loop
# v0/v1 messages are added MESSAGE_RUN at a time (each one record); a run
# spans at most MESSAGE_RUN_BYTES, far inside the 2 GiB a views window holds.
cdef enum:
    MESSAGE_RUN = 1024
cdef Py_ssize_t MESSAGE_RUN_BYTES = 64 << 20


include "fill.pxi"
include "memory_pool.pxi"
include "arrow_export.pxi"
include "collector.pxi"
include "scan.pxi"


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


def decode_record_set(BatchReader reader, bint include_control=False,
                      bint batch_columns=False, bint views=False, start_offset=None,
                      end_offset=None):
    """decode_columns of every batch `reader` (fresh) reads that may hold an
    offset in [start_offset, end_offset) (records.pxd's batch_in_bounds):
    runs of v2 batches and of uncompressed v0/v1 messages, and compressed
    v0/v1 wrappers, are parsed without Batch objects (and, but for some
    decompression, without the GIL); every other entry is read by `reader`.
    Rows of those batches outside the bounds are the caller's to drop."""
    # With offset bounds, the bytes read so far say little about how much of
    # the rest will be decoded: the buffers grow by doubling instead.
    cdef bint bounded = start_offset is not None or end_offset is not None
    cdef Collector c = Collector(include_control, views, batch_columns,
                                 0 if bounded else reader.src.length)
    try:
        c.add_reader(reader, INT64_MIN if start_offset is None else start_offset,
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
                    c.add_reader(part, INT64_MIN, INT64_MAX)
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
