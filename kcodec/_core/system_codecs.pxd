from libc.stdint cimport uint8_t


from kcodec._core.wire cimport CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD


ctypedef uint8_t* (*take_fn)(size_t size, size_t* capacity) noexcept nogil
ctypedef void (*give_fn)(void* memory, size_t capacity) noexcept nogil


cdef struct Inflater:          # one decode's decompression state, reused batch to batch
    uint8_t* out               # the last batch's decompressed bytes, from out + kept
    size_t capacity
    size_t kept                # bytes of earlier batches kept at the front of out (views)
    take_fn take               # where out's memory comes from and goes back to (the
    give_fn give               # decode's memory pool); NULL: malloc, realloc and free
    void* lz4                  # LZ4F_dctx*, made on first use
    void* zstd                 # ZSTD_DCtx*, made on first use
    void* gzip                 # ISA-L's inflate_state, made on first use


cdef Py_ssize_t decompress_in_core(Inflater* f, int codec, const uint8_t* src, size_t n,
                                   size_t limit) noexcept nogil
cdef Py_ssize_t decompress_with_gil(Inflater* f, int codec, const uint8_t* src, size_t n,
                                    size_t limit) except -2
cdef Py_ssize_t decompress_batch(Inflater* f, int codec, const uint8_t* src, size_t n,
                                 size_t limit) except -2
cdef bint inflates(int codec) noexcept nogil
cdef void release_output(Inflater* f) noexcept nogil
cdef void drop_output_tail(Inflater* f) noexcept nogil
cdef void release_inflater(Inflater* f) noexcept nogil
