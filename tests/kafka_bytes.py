"""Byte-level helpers shared by the test suites: reading and writing the fields
of Kafka record data, walking entries and records, patching a batch or message
and recomputing its checksum, and compressing/decompressing payloads the way
Kafka's codecs do.

They are written independently of kcodec's decoder and encoder (their own
varint writer and reader, their own entry and record walkers), so that tests
can use them as an oracle. Only fix_crc calls kcodec, for its CRC functions.

Not a test module: test files import it (`from kafka_bytes import ...`);
pytest puts tests/ on sys.path since tests/ has no __init__.py.
"""
import gzip
import struct
import zlib

import cramjam
import lz4.frame
import xxhash
import zstandard

import kcodec

INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
XERIAL_MAGIC = b"\x82SNAPPY\x00"


# --------------------------------------------------------- fields, sequences

def i32(buf, pos):
    return struct.unpack_from(">i", buf, pos)[0]


def put_i32(buf, pos, v):
    struct.pack_into(">i", buf, pos, v)


def zigzag_varint(v):
    """The zigzag varint (or varlong) encoding of v, as v2 records write it."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def read_varint(buf, pos):
    """(value, position after it) of the zigzag varint at pos."""
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def wrap_sequence(base, delta):
    """Kafka's producer sequence arithmetic: -1 (none) stays -1, otherwise
    base + delta, wrapping past INT32_MAX back to 0."""
    if base < 0:
        return -1
    return (base + delta) % (INT32_MAX + 1)


# ----------------------------------------------------- entries and records

def entries(buf):
    """(start, end) of each entry of a well-formed record set."""
    out, pos = [], 0
    while pos < len(buf):
        end = pos + 12 + i32(buf, pos + 8)
        out.append((pos, end))
        pos = end
    return out


def parse_v2_records(buf, start, count=None):
    """Positions (absolute in buf) of every field of `count` v2 records from
    `start` (count None: every record up to the end of buf)."""
    recs = []
    p = start
    while len(recs) < count if count is not None else p < len(buf):
        r = {"start": p}
        length, q = read_varint(buf, p)
        r["body"] = q
        end = q + length
        r["attr"] = q
        q += 1
        r["ts"] = q
        _, q = read_varint(buf, q)
        r["offset_delta"] = q
        _, q = read_varint(buf, q)
        r["key_len"] = q
        kl, q = read_varint(buf, q)
        r["key"] = q
        q += max(kl, 0)
        r["value_len"] = q
        vl, q = read_varint(buf, q)
        r["value"] = q
        q += max(vl, 0)
        r["headers_count"] = q
        hc, q = read_varint(buf, q)
        r["headers"] = []
        for _ in range(hc):
            h = {"key_len": q}
            hk, q = read_varint(buf, q)
            h["key"] = q
            q += hk
            h["value_len"] = q
            hv, q = read_varint(buf, q)
            h["value"] = q
            q += max(hv, 0)
            r["headers"].append(h)
        assert q == end
        r["end"] = end
        recs.append(r)
        p = end
    return recs


def legacy_fields(buf, start=0):
    """Magic and field positions of the v0/v1 message at start."""
    magic = buf[start + 16]
    kl_pos = start + (18 if magic == 0 else 26)
    kl = i32(buf, kl_pos)
    vl_pos = kl_pos + 4 + max(kl, 0)
    return {"magic": magic, "attr": start + 17, "key_len": kl_pos, "value_len": vl_pos,
            "value": vl_pos + 4, "end": start + 12 + i32(buf, start + 8)}


# ------------------------------------------------------ patching, checksums

def fix_crc(buf, start=0):
    """Recompute the checksum of the entry at `start` (CRC-32C for v2, CRC-32 below)."""
    size = i32(buf, start + 8)
    end = start + 12 + size
    if buf[start + 16] == 2:
        struct.pack_into(">I", buf, start + 17, kcodec.crc32c(bytes(buf[start + 21:end])))
    else:
        struct.pack_into(">I", buf, start + 12, kcodec.crc32(bytes(buf[start + 16:end])))
    return buf


def with_v2_section(batch, section, count=None):
    """The v2 batch `batch` (one entry) with its records section (or compressed
    payload) replaced, and optionally its records count; CRC recomputed."""
    out = bytearray(batch[:61]) + section
    put_i32(out, 8, len(out) - 12)
    if count is not None:
        put_i32(out, 57, count)
    return bytes(fix_crc(out))


def with_legacy_value(entry, value):
    """The v0/v1 message `entry` with its value replaced (None: null); CRC recomputed."""
    f = legacy_fields(entry)
    out = bytearray(entry[:f["value_len"]])
    out += struct.pack(">i", -1 if value is None else len(value)) + (value or b"")
    put_i32(out, 8, len(out) - 12)
    return bytes(fix_crc(out))


# ------------------------------------------------------------------ codecs

def xerial(raw, chunk=32 * 1024, version=struct.pack(">ii", 1, 1)):
    """Xerial-framed snappy, as Kafka's Java client writes it."""
    out = bytearray(XERIAL_MAGIC + version)
    for i in range(0, max(len(raw), 1), chunk):
        block = bytes(cramjam.snappy.compress_raw(raw[i:i + chunk]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def lz4_frame(raw, magic=2):
    """An LZ4 frame as Kafka writes it; for magic 0 with the broken (Kafka 0.8)
    header checksum, over the magic number too."""
    frame = bytearray(lz4.frame.compress(raw, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                         block_linked=False, content_checksum=False,
                                         store_size=False))
    if magic == 0:
        frame[6] = (xxhash.xxh32_intdigest(bytes(frame[0:6])) >> 8) & 0xFF
    return bytes(frame)


def zstd_frame(raw, content_size=True):
    if content_size:
        return zstandard.ZstdCompressor(write_content_size=True).compress(raw)
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    return cobj.compress(raw) + cobj.flush()


def compress(codec, raw, magic=2):
    return {"gzip": lambda: gzip.compress(raw), "snappy": lambda: xerial(raw),
            "lz4": lambda: lz4_frame(raw, magic), "zstd": lambda: zstd_frame(raw)}[codec]()


def decompress(codec, payload, magic=2):
    if codec == "gzip":
        return zlib.decompress(payload, 31)
    if codec == "snappy":
        if payload[:8] != XERIAL_MAGIC:
            return bytes(cramjam.snappy.decompress_raw(payload))
        out, pos = bytearray(), 16
        while pos < len(payload):
            n = i32(payload, pos)
            out += bytes(cramjam.snappy.decompress_raw(payload[pos + 4:pos + 4 + n]))
            pos += 4 + n
        return bytes(out)
    if codec == "lz4":
        frame = bytearray(payload)
        if magic == 0:
            frame[6] = (xxhash.xxh32_intdigest(bytes(frame[4:6])) >> 8) & 0xFF
        return lz4.frame.decompress(bytes(frame))
    if codec == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(payload)
    raise AssertionError(codec)
