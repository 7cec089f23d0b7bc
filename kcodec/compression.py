"""Codec registry: the compressed streams Kafka writes inside batches and wrappers.

Compression itself is done by the codec libraries; only Kafka's own framing is
here: snappy-java's "xerial" chunks (read in kcodec/_core/system_codecs.pyx,
which the decode loop shares) and the header checksum that Kafka 0.8-0.9
computed wrongly for lz4 in magic 0. Every decompression is bounded by a
per-batch limit so that a hostile batch cannot exhaust memory.
"""
import struct
import sys
import threading
import zlib

import cramjam
import lz4.frame
try:                                   # ISA-L inflates gzip about twice as fast as zlib
    from isal import isal_zlib as _inflate
except ImportError:                    # pragma: no cover - a platform without its wheels
    _inflate = zlib
import zstandard

from ._core import records as _core_records
from ._core.records import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED_BYTES  # noqa: F401 (re-exported)
from ._core.system_codecs import XERIAL_MAGIC, snappy_block_length, snappy_blocks, xxh32
from .errors import DecompressionError, DecompressionLimitError, UnsupportedFormatError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_IDS = {name: i for i, name in enumerate(CODEC_NAMES)}

ZSTD_MAX_WINDOW = 1 << 27          # libzstd's default window limit, as Java applies it
ZSTD_MAX_EXPANSION = 1 << 15
ZSTD_KEPT_CONTEXT = 4 << 20        # a thread's compressor is kept while its context is no larger
LZ4_MAX_EXPANSION = 256            # a match length grows by at most 255 per input byte

XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024           # snappy-java compresses input in blocks of this size
_be_i32 = struct.Struct(">i")

_per_thread = threading.local()     # zstd contexts must not be shared between threads


def _zstd_decompressor():
    try:
        return _per_thread.zstd
    except AttributeError:
        _per_thread.zstd = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
        return _per_thread.zstd


def _zstd_compress(data, level):
    """A zstd frame of data, by this thread's compressor for `level`, kept
    for its next batch (one, for the last level asked) while its context
    holds at most ZSTD_KEPT_CONTEXT: a new compressor makes a new context, a
    fifth of the time of compressing a 16 KiB batch, but a context keeps the
    largest workspace it needed (18 MiB at level 19 after a 1 MiB batch)."""
    kept_level, compressor = getattr(_per_thread, "zstd_compressor", (None, None))
    if compressor is None or kept_level != level:
        compressor = zstandard.ZstdCompressor(level=level)
    frame = compressor.compress(data)
    kept = compressor if compressor.memory_size() <= ZSTD_KEPT_CONTEXT else None
    _per_thread.zstd_compressor = (level, kept)
    return frame


def codec_id(name):
    try:
        return CODEC_IDS[name]
    except KeyError:
        raise ValueError(f"unknown compression {name!r}; choose one of {', '.join(CODEC_NAMES)}") from None


def _over_limit(codec, size, limit):
    return DecompressionLimitError(
        f"{CODEC_NAMES[codec]} batch decompresses to more than {limit} bytes "
        f"(at least {size}); raise max_decompressed_bytes to read it")


# ---------------------------------------------------------------- decompress

def decompress(codec, data, limit, magic=2):
    """Decompress one batch's (or wrapper's) records stream; returns a buffer."""
    if codec == GZIP:
        return _gunzip(data, limit)
    if codec == SNAPPY:
        return _unsnappy(data, limit)
    if codec == LZ4:
        return _unlz4(data, limit, magic)
    if codec == ZSTD:
        if magic < 2:
            raise UnsupportedFormatError(f"zstd is not allowed in magic {magic} messages")
        return _unzstd(data, limit)
    raise UnsupportedFormatError(f"unknown compression codec id {codec}")


GZIP_MEMBER_FEED = 64


def _gunzip(data, limit):
    """The members of a gzip stream, one after another. The first is fed all
    of the input; each member after it pieces that start at twice the size of
    the member before (at least GZIP_MEMBER_FEED) and double: an inflater
    copies what it was fed and did not use into `unused_data`, and the rest
    of the input fed to each of many small members would be copied once a
    member."""
    view = memoryview(data).cast("B")
    pieces = []
    total = start = 0
    feed = len(view)
    while True:
        inflater = _inflate.decompressobj(31)
        at = start
        while True:
            fed = view[at:at + feed]
            at += len(fed)
            try:
                piece = inflater.decompress(fed, limit - total + 1)
            except _inflate.error as exc:
                raise DecompressionError(f"gzip: {exc}") from None
            total += len(piece)
            if total > limit:
                raise _over_limit(GZIP, total, limit)
            pieces.append(piece)
            if inflater.eof:
                break
            if at >= len(view):
                raise DecompressionError("gzip: stream ends before its last block")
            feed *= 2
        member = at - len(inflater.unused_data) - start
        start += member
        # Concatenated members are read on; other trailing bytes are ignored,
        # as java.util.zip.GZIPInputStream does.
        if view[start:start + 2] != b"\x1f\x8b":
            break
        feed = max(GZIP_MEMBER_FEED, 2 * member)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _snappy_block_len(block, limit, total):
    size = snappy_block_length(block)
    if total + size > limit:
        raise _over_limit(SNAPPY, total + size, limit)
    return size


def _unsnappy(data, limit):
    blocks = snappy_blocks(data)
    if len(blocks) == 1:
        return _unsnappy_block(blocks[0], limit, 0)
    sizes = []
    total = 0
    for block in blocks:
        sizes.append(_snappy_block_len(block, limit, total))
        total += sizes[-1]
    out = bytearray(total)
    out_view = memoryview(out)
    start = 0
    for block, size in zip(blocks, sizes):
        try:
            written = cramjam.snappy.decompress_raw_into(block, out_view[start:start + size])
        except Exception as exc:
            raise DecompressionError(f"snappy (xerial): {exc}") from None
        if written != size:
            raise DecompressionError(f"snappy (xerial): block gave {written} bytes, declared {size}")
        start += size
    return out


def _unsnappy_block(block, limit, total):
    _snappy_block_len(block, limit, total)
    try:
        return cramjam.snappy.decompress_raw(block)
    except Exception as exc:
        raise DecompressionError(f"snappy: {exc}") from None


def _lz4_header_length(view):
    """Length of an lz4 frame header (magic through HC), or 0 when malformed."""
    if len(view) < 7:
        return 0
    flg = view[4]
    length = 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    return length if len(view) >= length else 0


def _lz4_content_size(view):
    """The content size an lz4 frame header declares, or -1 when it has none."""
    if not _lz4_header_length(view) or not view[4] & 0x08:
        return -1
    return int.from_bytes(view[6:14], "little")


def _lz4_header_checksum(view, length, magic0_quirk):
    start = 0 if magic0_quirk else 4
    return (xxh32(view[start:length - 1]) >> 8) & 0xFF


def _unlz4(data, limit, magic):
    view = memoryview(data)
    pieces = [view]
    if magic == 0:
        # Kafka 0.8-0.9 hashed the magic bytes into the header checksum; Java
        # does not check it for magic 0, so put the standard one in its place.
        hlen = _lz4_header_length(view)
        if hlen:
            header = bytearray(view[:hlen])
            header[hlen - 1] = _lz4_header_checksum(view, hlen, False)
            pieces = [header, view[hlen:]]
    declared = _lz4_content_size(view)
    if declared > limit:
        # python-lz4 sets aside what the header declares before decoding.
        raise DecompressionLimitError(
            f"lz4 frame declares {declared} decompressed bytes, more than {limit}; "
            f"raise max_decompressed_bytes to read it")
    if declared > LZ4_MAX_EXPANSION * len(view):
        raise DecompressionError(
            f"lz4: a {len(view)}-byte frame cannot hold the {declared} bytes it declares")
    if LZ4_MAX_EXPANSION * len(view) <= limit:
        # Too small to exceed the limit whatever it holds: decode in one call.
        try:
            return lz4.frame.decompress(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        except RuntimeError as exc:
            raise DecompressionError(f"lz4: {exc}") from None
    decomp = lz4.frame.LZ4FrameDecompressor()
    out = []
    total = 0
    step = min(limit + 1, max(1 << 16, 8 * len(view)))
    try:
        for piece in pieces:
            while True:
                chunk = decomp.decompress(piece, max_length=min(step, limit - total + 1))
                piece = b""
                total += len(chunk)
                if total > limit:
                    raise _over_limit(LZ4, total, limit)
                out.append(chunk)
                if decomp.eof or decomp.needs_input:
                    break
            if decomp.eof:
                break
    except RuntimeError as exc:
        raise DecompressionError(f"lz4: {exc}") from None
    if not decomp.eof:
        raise DecompressionError("lz4: frame ends before its end mark")
    return out[0] if len(out) == 1 else b"".join(out)


def _unzstd(data, limit):
    view = memoryview(data)
    try:
        declared = zstandard.frame_content_size(view)
        if 0 < declared <= limit:
            # One frame that states its size: a single exact-size decompression.
            try:
                return _zstd_decompressor().decompress(view, allow_extra_data=False)
            except zstandard.ZstdError:
                pass                    # several frames, or corrupt: found out below
        return _unzstd_frames(view, limit)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"zstd: {exc}") from None


def _unzstd_frames(view, limit):
    # Frame by frame, feeding input in slices small enough that one slice cannot
    # overshoot the limit by much: a zstd block expands at most ZSTD_MAX_EXPANSION
    # times (an RLE block: 4 bytes of input, 128 KiB of output).
    out = []
    total = 0
    pos = 0
    while pos < len(view):
        frame = _zstd_decompressor().decompressobj()
        while True:
            step = max(64, (limit - total) // ZSTD_MAX_EXPANSION)
            piece = view[pos:pos + step]
            pos += len(piece)
            chunk = frame.decompress(piece)
            total += len(chunk)
            if total > limit:
                raise _over_limit(ZSTD, total, limit)
            out.append(chunk)
            if frame.eof:
                pos -= len(frame.unused_data)
                break
            if pos >= len(view):
                raise DecompressionError("zstd: the data ends inside a frame")
    return out[0] if len(out) == 1 else b"".join(out)


# ------------------------------------------------------------------ compress

def compress(codec, data, level=None, magic=2):
    """Compress a records stream the way Java's producer frames it."""
    if codec == GZIP:
        deflater = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return deflater.compress(data) + deflater.flush()
    if codec == SNAPPY:
        return _snappy_xerial(data)
    if codec == LZ4:
        return _lz4_frame(data, level, magic)
    if codec == ZSTD:
        if magic < 2:
            raise UnsupportedFormatError(f"zstd is not allowed in magic {magic} messages")
        return _zstd_compress(data, 3 if level is None else level)
    raise UnsupportedFormatError(f"unknown compression codec id {codec}")


def _snappy_xerial(data):
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK]))
        parts.append(_be_i32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_frame(data, level, magic):
    frame = lz4.frame.compress(
        data, compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
        content_checksum=False, store_size=False)
    if magic == 0:
        frame = bytearray(frame)
        hlen = _lz4_header_length(frame)
        frame[hlen - 1] = _lz4_header_checksum(memoryview(frame), hlen, True)
        frame = bytes(frame)
    return frame


_core_records.use_python_codecs(sys.modules[__name__])
