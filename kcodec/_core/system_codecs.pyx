# gzip, lz4 and zstd, called without the GIL from the decode loop; snappy, with it.
#
# The Python bindings decompress holding the GIL (lz4.frame) or hand it over
# and take it back per call, so threads decoding compressed batches at once
# queued for it, and each batch paid a Python call and a new bytes object.
# The C functions come from the bindings' own extension modules, which export
# them: the very library builds the Python path runs, so that both paths
# accept the same input (libzstd 1.5.4 and 1.5.7 differ on corrupt frames).
# zstd alone may come from another binding's build of libzstd that behaves
# as the Python path's (see ZSTD_BUILDS).
# They are looked up at import, not linked: where a binding does not export
# them, decode() decompresses through the binding. This path takes only input
# it decodes whole; anything else (a bad frame, output over the limit, an
# input that ends inside a frame) goes to the Python path, which names the
# error.
import cramjam
import zstandard

from cpython.buffer cimport PyBUF_READ, PyBUF_WRITE
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport uint8_t, int32_t, uint32_t, uint64_t, uintptr_t, UINT32_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcmp, memcpy
from posix.mman cimport madvise, MADV_DONTNEED
from posix.unistd cimport sysconf, _SC_PAGESIZE

from kcodec._core.bindings cimport exported
from kcodec._core.crc cimport crc32_raw
from kcodec._core.wire cimport load_i32, read_uvarint
from kcodec.errors import DecompressionError

cdef extern from *:
    """
    typedef struct { const void* src; size_t size; size_t pos; } kc_zstd_in;
    typedef struct { void* dst; size_t size; size_t pos; } kc_zstd_out;
    """
    ctypedef struct kc_zstd_in:
        const void* src
        size_t size
        size_t pos
    ctypedef struct kc_zstd_out:
        void* dst
        size_t size
        size_t pos

ctypedef unsigned (*version_fn)() noexcept nogil
ctypedef unsigned (*is_error_fn)(size_t code) noexcept nogil
ctypedef size_t (*lz4f_create_fn)(void** dctx, unsigned version) noexcept nogil
ctypedef size_t (*free_fn)(void* context) noexcept nogil
ctypedef size_t (*lz4f_decompress_fn)(void* dctx, void* dst, size_t* dst_size, const void* src,
                                      size_t* src_size, const void* options) noexcept nogil
ctypedef void* (*zstd_create_fn)() noexcept nogil
ctypedef size_t (*zstd_set_fn)(void* dctx, int parameter, int value) noexcept nogil
ctypedef size_t (*zstd_reset_fn)(void* dctx, int directive) noexcept nogil
ctypedef size_t (*zstd_stream_fn)(void* dctx, kc_zstd_out* output, kc_zstd_in* input) noexcept nogil

# ISA-L's inflate. Only the fields an inflate_state begins with are named
# here, those its header documents for callers (the same from ISA-L 2.0 on);
# the state is allocated with room to spare past the 87,368 bytes of ISA-L
# 2.30's, gzip headers are read by ISA-L into a struct it fills itself, and
# the path is turned on only once it has inflated sample streams right
# (gzip_agrees_with_zlib).
cdef struct isal_state_head:
    uint8_t* next_out
    uint32_t avail_out
    uint32_t total_out
    const uint8_t* next_in
    uint64_t read_in
    uint32_t avail_in

ctypedef void (*isal_init_fn)(void* state) noexcept nogil
ctypedef int (*isal_stateless_fn)(void* state) noexcept nogil
ctypedef void (*isal_header_init_fn)(void* header) noexcept nogil
ctypedef int (*isal_read_header_fn)(void* state, void* header) noexcept nogil

cdef enum:
    LZ4F_VERSION = 100              # the frame API's version, as lz4frame.h defines it
    LZ4_MIN_VERSION = 10800         # 1.8.0 and 1.4.0: the calls used here are stable from then
    ZSTD_MIN_VERSION = 10400
    ZSTD_D_WINDOW_LOG_MAX = 100     # zstd.h's ZSTD_d_windowLogMax
    ZSTD_WINDOW_LOG_MAX = 27        # the largest window Java (and the Python path) accept
    ZSTD_RESET_SESSION = 1          # zstd.h's ZSTD_reset_session_only
    FIRST_CAPACITY = 64 << 10
    ISAL_STATE_BYTES = 256 << 10    # an inflate_state
    ISAL_HEADER_BYTES = 1 << 10     # then an isal_gzip_header (72 bytes in ISA-L 2.30)
    ISAL_OUT_OVERFLOW = 2
    GZIP_TRAILER = 8                # CRC-32 and size of the member's output, little-endian
    DEFLATE_MAX_EXPANSION = 1032    # the most a deflate stream's bytes expand

cdef lz4f_create_fn lz4f_create = NULL
cdef free_fn lz4f_free = NULL
cdef lz4f_decompress_fn lz4f_decompress = NULL
cdef is_error_fn lz4f_is_error = NULL
cdef zstd_create_fn zstd_create = NULL
cdef free_fn zstd_free = NULL
cdef zstd_set_fn zstd_set = NULL
cdef zstd_reset_fn zstd_reset = NULL
cdef zstd_stream_fn zstd_stream = NULL
cdef is_error_fn zstd_is_error = NULL
cdef isal_init_fn isal_init = NULL
cdef isal_stateless_fn isal_stateless = NULL
cdef isal_header_init_fn isal_header_init = NULL
cdef isal_read_header_fn isal_read_header = NULL
cdef bint enabled[CODEC_ZSTD + 1]
cdef dict libraries = {             # codec name -> "libzstd 1.5.7 (zstandard._cffi)", if found
    "snappy": f"cramjam {cramjam.__version__} (holding the GIL)"}
cdef dict modules = {}              # codec name -> the extension module its functions are in
# Where the core looks for libzstd, first to last: the first build that
# behaves as zstandard's own (zstd_build_traits). backports.zstd's (Python
# 3.14's compression.zstd, backported) decodes the harness's zstd workload
# about 7% faster than zstandard's (kcodec bench); zstandard's Python
# decompressor is the one the Python path keeps, since the standard module's
# takes a new context (~7 us) for every frame.
ZSTD_BUILDS = ("backports.zstd._zstd", "zstandard._cffi")
ZSTD_FUNCTIONS = ("ZSTD_versionNumber", "ZSTD_isFrame", "ZSTD_createDCtx", "ZSTD_freeDCtx",
                  "ZSTD_DCtx_setParameter", "ZSTD_DCtx_reset", "ZSTD_decompressStream",
                  "ZSTD_isError")
ctypedef unsigned (*is_frame_fn)(const void* buffer, size_t size) noexcept nogil


cdef tuple zstd_build_traits(dict zstd):
    """What two libzstd builds must share to accept the same input: the
    version, and whether they decode the formats before zstd 0.8 (builds of
    distributions do, the ones bundled with the bindings not): ZSTD_isFrame
    of each legacy magic number, 0xFD2FB51E to 0xFD2FB527."""
    cdef is_frame_fn is_frame = <is_frame_fn><uintptr_t>zstd["ZSTD_isFrame"]
    cdef uint8_t magic[4]
    legacy = []
    for low in range(0x1E, 0x28):
        magic[0], magic[1], magic[2], magic[3] = low, 0xB5, 0x2F, 0xFD
        legacy.append(is_frame(magic, 4))
    return (<version_fn><uintptr_t>zstd["ZSTD_versionNumber"])(), tuple(legacy)


cdef unsigned zstd_version_number(tuple version):
    return version[0] * 10000 + version[1] * 100 + version[2]


cdef str version_text(str stem, unsigned number, str module):
    return f"lib{stem} {number // 10000}.{number // 100 % 100}.{number % 100} ({module})"


cdef void load():
    global lz4f_create, lz4f_free, lz4f_decompress, lz4f_is_error
    global zstd_create, zstd_free, zstd_set, zstd_reset, zstd_stream, zstd_is_error
    cdef unsigned version, python_path_version
    lz4 = exported("lz4.frame._frame", (
        "LZ4_versionNumber", "LZ4F_createDecompressionContext", "LZ4F_freeDecompressionContext",
        "LZ4F_decompress", "LZ4F_isError"))
    if lz4 is not None:
        version = (<version_fn><uintptr_t>lz4["LZ4_versionNumber"])()
        if version >= LZ4_MIN_VERSION:
            lz4f_create = <lz4f_create_fn><uintptr_t>lz4["LZ4F_createDecompressionContext"]
            lz4f_free = <free_fn><uintptr_t>lz4["LZ4F_freeDecompressionContext"]
            lz4f_decompress = <lz4f_decompress_fn><uintptr_t>lz4["LZ4F_decompress"]
            lz4f_is_error = <is_error_fn><uintptr_t>lz4["LZ4F_isError"]
            libraries["lz4"] = version_text("lz4", version, "lz4.frame._frame")
            modules["lz4"] = "lz4.frame._frame"
    reference = exported("zstandard._cffi", ZSTD_FUNCTIONS)
    traits = None if reference is None else zstd_build_traits(reference)
    python_path_version = zstd_version_number(zstandard.ZSTD_VERSION)
    for module in ZSTD_BUILDS:
        zstd = exported(module, ZSTD_FUNCTIONS)
        if zstd is None or traits is None or zstd_build_traits(zstd) != traits:
            continue
        version = (<version_fn><uintptr_t>zstd["ZSTD_versionNumber"])()
        if version >= ZSTD_MIN_VERSION and version == python_path_version:
            zstd_create = <zstd_create_fn><uintptr_t>zstd["ZSTD_createDCtx"]
            zstd_free = <free_fn><uintptr_t>zstd["ZSTD_freeDCtx"]
            zstd_set = <zstd_set_fn><uintptr_t>zstd["ZSTD_DCtx_setParameter"]
            zstd_reset = <zstd_reset_fn><uintptr_t>zstd["ZSTD_DCtx_reset"]
            zstd_stream = <zstd_stream_fn><uintptr_t>zstd["ZSTD_decompressStream"]
            zstd_is_error = <is_error_fn><uintptr_t>zstd["ZSTD_isError"]
            libraries["zstd"] = version_text("zstd", version, module)
            modules["zstd"] = module
            break
    load_isal()
    enabled[CODEC_SNAPPY] = True
    enabled[CODEC_LZ4] = "lz4" in libraries
    enabled[CODEC_ZSTD] = "zstd" in libraries
    enabled[CODEC_GZIP] = "gzip" in libraries


cdef void load_isal():
    global isal_init, isal_stateless, isal_header_init, isal_read_header
    isal = exported("isal.isal_zlib", (
        "isal_inflate_init", "isal_inflate_stateless", "isal_gzip_header_init",
        "isal_read_gzip_header"))
    if isal is None:
        return
    try:
        from isal import ISAL_VERSION
    except ImportError:
        return
    if not ISAL_VERSION.startswith("2."):
        return
    isal_init = <isal_init_fn><uintptr_t>isal["isal_inflate_init"]
    isal_stateless = <isal_stateless_fn><uintptr_t>isal["isal_inflate_stateless"]
    isal_header_init = <isal_header_init_fn><uintptr_t>isal["isal_gzip_header_init"]
    isal_read_header = <isal_read_header_fn><uintptr_t>isal["isal_read_gzip_header"]
    if gzip_agrees_with_zlib():
        libraries["gzip"] = f"ISA-L {ISAL_VERSION} (isal.isal_zlib)"
        modules["gzip"] = "isal.isal_zlib"


cdef bint gzip_agrees_with_zlib():
    """Whether gzip_members inflates what zlib wrote, at every level and
    block kind, to what zlib inflates it to."""
    import zlib
    cdef Inflater f
    cdef Py_ssize_t produced
    cdef const uint8_t[::1] view
    sample = b"".join(b"record %d of a sample: %s\n" % (i, bytes(range(i % 256)))
                      for i in range(700))
    f.out = NULL
    f.capacity = f.kept = 0
    f.take = NULL
    f.give = NULL
    f.lz4 = f.zstd = f.gzip = NULL
    try:
        for level in (0, 1, 6, 9):
            for data in (sample, sample[:100], b""):
                deflater = zlib.compressobj(level, zlib.DEFLATED, 31)
                view = deflater.compress(data) + deflater.flush()
                produced = gzip_members(&f, &view[0], view.shape[0], 1 << 20)
                if produced != len(data) or f.out[:produced] != data:
                    return False
        return True
    finally:
        release_inflater(&f)


load()


def core_module(codec):
    """The extension module whose functions the decode loop calls for `codec`
    (as "zstandard._cffi"), or None where in_core(codec) is None or the
    library is not in one (snappy)."""
    return modules.get(codec) if in_core(codec) is not None else None


def in_core(codec, enabled_now=None):
    """The library the decode loop calls for `codec` ("gzip", "snappy", "lz4"
    or "zstd"), as "libzstd 1.5.7 (zstandard._cffi)", or None when decode()
    decompresses it through the Python path (its functions not found, or
    turned off). With `enabled_now`, turns it on or off first; tests compare
    the two paths."""
    cdef int codec_id = {"gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4,
                         "zstd": CODEC_ZSTD}[codec]
    if enabled_now is not None:
        enabled[codec_id] = bool(enabled_now) and codec in libraries
    return libraries[codec] if enabled[codec_id] else None


cdef inline size_t room(Inflater* f, size_t limit) noexcept nogil:
    """How many bytes a batch of at most `limit` may take in f.out as it is."""
    return min(f.capacity - f.kept, limit)


cdef bint has_room(Inflater* f, size_t produced, size_t limit) noexcept nogil:
    """Whether f.out holds a batch's `produced` bytes, grown if need be (never
    NULL, even for none: cramjam takes no NULL buffer)."""
    return (room(f, limit) >= produced and f.out != NULL) or room_for(f, produced, limit)


cdef bint room_for(Inflater* f, size_t produced, size_t limit) noexcept nogil:
    """Grow f.out past a batch's `produced` bytes (a batch of at most `limit`,
    after the f.kept bytes before it): False if it cannot."""
    cdef size_t capacity
    cdef uint8_t* grown
    if room(f, limit) >= limit:
        return False
    capacity = min(max(<size_t>FIRST_CAPACITY, 2 * f.capacity, f.kept + produced + 1),
                   f.kept + limit)
    if f.take == NULL:
        grown = <uint8_t*>realloc(f.out, capacity)
    else:
        # From the pool, faulted in already: a large batch grows f.out on
        # every decode, and memory realloc gets from the OS faults in afresh.
        grown = f.take(capacity, &capacity)
        if grown != NULL and f.out != NULL:
            memcpy(grown, f.out, min(f.capacity, f.kept + produced))
            f.give(f.out, f.capacity)
    if grown == NULL:
        return False
    f.out = grown
    f.capacity = capacity
    return True


cdef void drop_lz4(Inflater* f) noexcept nogil:
    """A context left inside a frame cannot start the next one."""
    if f.lz4 != NULL:
        lz4f_free(f.lz4)
        f.lz4 = NULL


cdef Py_ssize_t lz4_frame(Inflater* f, const uint8_t* src, size_t n, size_t limit) noexcept nogil:
    """The one lz4 frame that is all of src[:n], into f.out."""
    cdef size_t produced = 0, consumed = 0, out_size, in_size, hint
    if f.lz4 == NULL and lz4f_is_error(lz4f_create(&f.lz4, LZ4F_VERSION)):
        f.lz4 = NULL
        return -1
    while True:
        if produced == room(f, limit) and not room_for(f, produced, limit):
            drop_lz4(f)
            return -1
        out_size = room(f, limit) - produced
        in_size = n - consumed
        hint = lz4f_decompress(f.lz4, f.out + f.kept + produced, &out_size, src + consumed,
                               &in_size, NULL)
        if lz4f_is_error(hint) or (hint and out_size == 0 and in_size == 0):
            drop_lz4(f)
            return -1
        produced += out_size
        consumed += in_size
        if hint == 0:
            return <Py_ssize_t>produced if consumed == n else -1
        if consumed == n and produced < room(f, limit):   # the input ends inside the frame
            drop_lz4(f)
            return -1


cdef Py_ssize_t zstd_frames(Inflater* f, const uint8_t* src, size_t n, size_t limit) noexcept nogil:
    """The zstd frames, one after another, that are all of src[:n], into f.out."""
    cdef kc_zstd_in input
    cdef kc_zstd_out output
    cdef size_t hint, before_in, before_out
    if f.zstd == NULL:
        f.zstd = zstd_create()
        if f.zstd == NULL:
            return -1
        if zstd_is_error(zstd_set(f.zstd, ZSTD_D_WINDOW_LOG_MAX, ZSTD_WINDOW_LOG_MAX)):
            zstd_free(f.zstd)               # not without the window limit the Python path has
            f.zstd = NULL
            return -1
    input.src = src
    input.size = n
    input.pos = 0
    output.pos = 0
    while True:
        if output.pos == room(f, limit) and not room_for(f, output.pos, limit):
            break
        output.dst = f.out + f.kept
        output.size = room(f, limit)
        before_in = input.pos
        before_out = output.pos
        hint = zstd_stream(f.zstd, &output, &input)
        if zstd_is_error(hint) or (hint and input.pos == before_in and output.pos == before_out):
            break
        if hint == 0 and input.pos == n:
            return <Py_ssize_t>output.pos
        if hint and input.pos == n and output.pos < room(f, limit):
            break                           # the input ends inside a frame
    zstd_reset(f.zstd, ZSTD_RESET_SESSION)
    return -1


cdef inline uint32_t load_u32_le(const uint8_t* p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef bint gzip_header_at(const uint8_t* p, size_t n) noexcept nogil:
    return n >= 2 and p[0] == 0x1f and p[1] == 0x8b


cdef Py_ssize_t gzip_members(Inflater* f, const uint8_t* src, size_t n,
                             size_t limit) noexcept nogil:
    """The gzip members, one after another, that begin src[:n], into f.out.
    Bytes after the last member that do not begin another are ignored, as
    java.util.zip.GZIPInputStream (and the Python path) ignore them."""
    cdef isal_state_head* state
    cdef uint8_t* header
    cdef size_t at = 0, total = 0, want, member, end
    cdef int st
    if f.gzip == NULL:
        f.gzip = malloc(ISAL_STATE_BYTES + ISAL_HEADER_BYTES)
        if f.gzip == NULL:
            return -1
    state = <isal_state_head*>f.gzip
    header = <uint8_t*>f.gzip + ISAL_STATE_BYTES
    want = load_u32_le(src + n - 4) if n >= 4 else 0     # the last member's size: a hint
    if want > limit or want > DEFLATE_MAX_EXPANSION * n:
        want = 0
    while True:
        if not gzip_header_at(src + at, n - at) or n - at > UINT32_MAX:
            return -1
        while True:
            if not has_room(f, total + want, limit):
                return -1
            isal_init(f.gzip)
            state.next_in = src + at
            state.avail_in = <uint32_t>(n - at)
            isal_header_init(header)
            if isal_read_header(f.gzip, header):
                return -1
            state.next_out = f.out + f.kept + total
            state.avail_out = <uint32_t>min(room(f, limit) - total, <size_t>UINT32_MAX)
            st = isal_stateless(f.gzip)
            if st != ISAL_OUT_OVERFLOW:
                break
            want = room(f, limit) - total + 1       # grown past what did not fit
        member = state.total_out
        end = state.next_in - src
        if st != 0 or n - end < GZIP_TRAILER or load_u32_le(src + end + 4) != <uint32_t>member:
            return -1
        if crc32_raw(f.out + f.kept + total, member) != load_u32_le(src + end):
            return -1
        total += member
        at = end + GZIP_TRAILER
        if not gzip_header_at(src + at, n - at):
            return <Py_ssize_t>total
        want = 0


cdef Py_ssize_t decompress_in_core(Inflater* f, int codec, const uint8_t* src, size_t n,
                                   size_t limit) noexcept nogil:
    """Decompress a v2 batch's records into f.out + f.kept: their length, or -1 when
    they are not decompressed here (a codec without its library, input this
    path does not take whole, more than `limit` bytes, no memory)."""
    if codec == CODEC_GZIP and enabled[CODEC_GZIP]:
        return gzip_members(f, src, n, limit)
    if codec == CODEC_LZ4 and enabled[CODEC_LZ4]:
        return lz4_frame(f, src, n, limit)
    if codec == CODEC_ZSTD and enabled[CODEC_ZSTD]:
        return zstd_frames(f, src, n, limit)
    return -1


cdef bint inflates(int codec) noexcept nogil:
    """Whether decompress_in_core or decompress_with_gil takes batches of `codec`."""
    return codec in (CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD) and enabled[codec]


cdef void release_output(Inflater* f) noexcept nogil:
    """Give back f.out (the next batch takes memory again); the codecs'
    contexts stay."""
    if f.give == NULL:
        free(f.out)
    elif f.out != NULL:
        f.give(f.out, f.capacity)
    f.out = NULL
    f.capacity = f.kept = 0


cdef uintptr_t page_bytes = sysconf(_SC_PAGESIZE)


cdef void drop_output_tail(Inflater* f) noexcept nogil:
    """Hand the OS back the pages of f.out past its first f.kept bytes (what
    a batch left to the Python path decompressed there is not read again),
    keeping f.out where it is: views point into those bytes."""
    cdef uintptr_t page = page_bytes
    cdef uintptr_t first = (<uintptr_t>f.out + f.kept + page - 1) & ~(page - 1)
    cdef uintptr_t end = (<uintptr_t>f.out + f.capacity) & ~(page - 1)
    if f.out != NULL and end > first:
        madvise(<void*>first, end - first, MADV_DONTNEED)


cdef void release_inflater(Inflater* f) noexcept nogil:
    drop_lz4(f)
    if f.zstd != NULL:
        zstd_free(f.zstd)
        f.zstd = NULL
    free(f.gzip)
    f.gzip = NULL
    release_output(f)


# lz4's frame header ends in a checksum byte: the second byte of XXH32 of the
# descriptor (Kafka 0.8-0.9 hashed the magic number too, in magic 0). Computed
# here rather than through a hashing package for these few bytes; the tests
# check it against the xxhash package and against lz4's own frames.

cdef uint32_t XXH_PRIME1 = 0x9E3779B1
cdef uint32_t XXH_PRIME2 = 0x85EBCA77
cdef uint32_t XXH_PRIME3 = 0xC2B2AE3D
cdef uint32_t XXH_PRIME4 = 0x27D4EB2F
cdef uint32_t XXH_PRIME5 = 0x165667B1


cdef inline uint32_t rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef inline uint32_t xxh32_round(uint32_t acc, const uint8_t* p) noexcept nogil:
    acc += load_u32_le(p) * XXH_PRIME2
    return rotl32(acc, 13) * XXH_PRIME1


cdef uint32_t xxh32_of(const uint8_t* p, size_t n, uint32_t seed) noexcept nogil:
    """XXH32 of p[:n]: four lanes over 16-byte stripes, then the tail by
    4-byte words and by bytes, then the avalanche."""
    cdef const uint8_t* end = p + n
    cdef uint32_t v1, v2, v3, v4, h
    if n >= 16:
        v1 = seed + XXH_PRIME1 + XXH_PRIME2
        v2 = seed + XXH_PRIME2
        v3 = seed
        v4 = seed - XXH_PRIME1
        while end - p >= 16:
            v1 = xxh32_round(v1, p)
            v2 = xxh32_round(v2, p + 4)
            v3 = xxh32_round(v3, p + 8)
            v4 = xxh32_round(v4, p + 12)
            p += 16
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18)
    else:
        h = seed + XXH_PRIME5
    h += <uint32_t>n
    while end - p >= 4:
        h = rotl32(h + load_u32_le(p) * XXH_PRIME3, 17) * XXH_PRIME4
        p += 4
    while p < end:
        h = rotl32(h + p[0] * XXH_PRIME5, 11) * XXH_PRIME1
        p += 1
    h ^= h >> 15
    h *= XXH_PRIME2
    h ^= h >> 13
    h *= XXH_PRIME3
    h ^= h >> 16
    return h


def xxh32(data, uint32_t seed=0):
    """XXH32 of a buffer (lz4's frame header checksum is its second byte)."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef size_t n = view.shape[0]
    return xxh32_of(&view[0] if n else NULL, n, seed)


# snappy. cramjam has no C interface, so its blocks are decompressed with the
# GIL, but straight into f.out: no Python function or bytes object per batch,
# and the decode loop goes on from there without the GIL (Collector.add_v2).

cdef size_t max_expansion = 22     # a 3-byte copy op writes at most 64 bytes
cdef enum:
    XERIAL_HEADER = 16              # the magic, a version and a compatible version
    RAW = 0                         # snappy_framing
    XERIAL = 1
    XERIAL_SHORT_HEADER = 2
    CHUNK = 0                       # xerial_chunk
    LAST_CHUNK_DONE = 1
    CHUNK_LENGTH_CUT = 2
    CHUNK_PAST_END = 3

cdef const char* xerial_magic = b"\x82SNAPPY\x00"
XERIAL_MAGIC = xerial_magic[:8]
cdef object raw_into = cramjam.snappy.decompress_raw_into


cdef int snappy_framing(const uint8_t* src, size_t n) noexcept nogil:
    """Whether a batch's snappy records are one raw block (RAW) or chunks of
    snappy-java's framing (XERIAL), which Kafka's Java clients write."""
    if n < 8 or memcmp(src, xerial_magic, 8) != 0:
        return RAW
    return XERIAL if n >= XERIAL_HEADER else XERIAL_SHORT_HEADER


cdef int xerial_chunk(const uint8_t* src, size_t n, size_t* at, size_t* start,
                      size_t* size) noexcept nogil:
    """The raw snappy block of the [int32 length][block] chunk at *at
    (XERIAL_HEADER at first): CHUNK with its bounds and *at past it,
    LAST_CHUNK_DONE at the end, else a fault with *at where it is."""
    cdef int32_t length
    if at[0] == n:
        return LAST_CHUNK_DONE
    if n - at[0] < 4:
        return CHUNK_LENGTH_CUT
    length = load_i32(src + at[0])
    if length < 0 or <size_t>length > n - at[0] - 4:
        return CHUNK_PAST_END
    start[0] = at[0] + 4
    size[0] = <size_t>length
    at[0] = start[0] + size[0]
    return CHUNK


def snappy_blocks(data):
    """The raw snappy blocks (memoryviews) of a batch's snappy records."""
    whole = memoryview(data).cast("B")
    cdef const uint8_t[::1] view = whole
    cdef size_t n = view.shape[0], at = XERIAL_HEADER, start = 0, size = 0
    cdef const uint8_t* src = &view[0] if n else NULL
    cdef int framing = snappy_framing(src, n), st
    if framing == RAW:
        return [whole]
    if framing == XERIAL_SHORT_HEADER:
        raise DecompressionError(f"snappy (xerial): header needs {XERIAL_HEADER} bytes, got {n}")
    blocks = []
    while True:
        st = xerial_chunk(src, n, &at, &start, &size)
        if st == LAST_CHUNK_DONE:
            return blocks
        if st == CHUNK_LENGTH_CUT:
            raise DecompressionError(f"snappy (xerial): chunk length cut off at byte {at}")
        if st == CHUNK_PAST_END:
            raise DecompressionError(
                f"snappy (xerial): chunk at byte {at} declares {load_i32(src + at) & 0xFFFFFFFF} "
                f"bytes but {n - at - 4} remain")
        blocks.append(whole[start:start + size])


cdef enum:
    LENGTH_OK = 0                   # declared_length
    LENGTH_UNREADABLE = 1
    LENGTH_TOO_LARGE = 2


cdef int declared_length(const uint8_t* block, size_t size, uint64_t* length) noexcept nogil:
    """The length a raw snappy block declares it decompresses to, its
    preamble (a varint of at most 5 bytes, at most UINT32_MAX), and whether
    the block could hold it. Read here rather than by cramjam's
    decompress_raw_len: that is a Python call a block, which costs more than
    decompressing a small one."""
    cdef const uint8_t* p = block
    if read_uvarint(&p, block + size, 5, length) or length[0] > UINT32_MAX:
        return LENGTH_UNREADABLE
    if length[0] > max_expansion * size + 64:
        return LENGTH_TOO_LARGE
    return LENGTH_OK


cpdef Py_ssize_t snappy_block_length(block) except -1:
    """The length a raw snappy block declares it decompresses to, if it could."""
    cdef const uint8_t[::1] view = memoryview(block).cast("B")
    cdef size_t n = view.shape[0]
    cdef uint64_t length = 0
    cdef int st = declared_length(&view[0] if n else NULL, n, &length)
    if st == LENGTH_UNREADABLE:
        raise DecompressionError(f"snappy: a {n}-byte block's length is cut off or malformed")
    if st == LENGTH_TOO_LARGE:
        raise DecompressionError(
            f"snappy: a {n}-byte block cannot hold the {length} bytes it declares")
    return <Py_ssize_t>length


cdef Py_ssize_t snappy_into(Inflater* f, const uint8_t* src, size_t n, size_t limit) except -2:
    """Decompress a v2 batch's snappy records into f.out, with the GIL: their
    length, or -1 when they are left to the Python path (see above)."""
    cdef size_t at = XERIAL_HEADER, start = 0, size = n, total = 0
    cdef uint64_t want = 0
    cdef int framing = snappy_framing(src, n), st
    if framing == XERIAL_SHORT_HEADER:
        return -1
    while True:
        if framing == XERIAL:
            st = xerial_chunk(src, n, &at, &start, &size)
            if st == LAST_CHUNK_DONE:
                return total
            if st != CHUNK:
                return -1
        if (declared_length(src + start, size, &want) != LENGTH_OK or want > limit - total
                or not has_room(f, total + want, limit)):
            return -1
        block = PyMemoryView_FromMemory(<char*>src + start, size, PyBUF_READ)
        try:
            out = PyMemoryView_FromMemory(<char*>f.out + f.kept + total, want, PyBUF_WRITE)
            try:
                if raw_into(block, out) != want:
                    return -1
            finally:
                out.release()
        except Exception:
            return -1
        finally:
            block.release()
        total += want
        if framing == RAW:
            return total


cdef Py_ssize_t decompress_with_gil(Inflater* f, int codec, const uint8_t* src, size_t n,
                                    size_t limit) except -2:
    """decompress_in_core, for the codecs whose library needs the GIL."""
    if codec == CODEC_SNAPPY and enabled[CODEC_SNAPPY]:
        return snappy_into(f, src, n, limit)
    return -1


cdef Py_ssize_t decompress_batch(Inflater* f, int codec, const uint8_t* src, size_t n,
                                 size_t limit) except -2:
    """decompress_in_core, without the GIL, or decompress_with_gil: whichever
    takes `codec`."""
    cdef Py_ssize_t produced
    if codec == CODEC_SNAPPY:
        return decompress_with_gil(f, codec, src, n, limit)
    with nogil:
        produced = decompress_in_core(f, codec, src, n, limit)
    return produced
