"""decode() decompresses gzip, lz4 and zstd batches itself, without the GIL,
through the C functions of the Python bindings, and snappy batches through cramjam
straight into its own buffer: the same rows, and the same errors at the same
places, as decompressing through the Python path; with views=True too, where
the batches stay in that buffer for the views to point into."""
from concurrent.futures import ThreadPoolExecutor

import ctypes
import gzip
import io
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

import kcodec
from kcodec import compression
from kcodec._core import system_codecs
from kcodec.errors import DecompressionError, DecompressionLimitError, KafkaFormatError

from arrow_rows import rows_of_records, rows_of_table
from kafka_bytes import entries, with_v2_section, xerial
from needs import unavailable

RECORDS = [(f"key-{i}".encode(), (b"value %d " % i) * (i % 40), 1_700_000_000_000 + i,
            [("h", b"x")] if i % 3 == 0 else None) for i in range(3000)]


def in_core(codec):
    if system_codecs.in_core(codec) is None:
        unavailable(f"the {codec} binding exports no C functions to decode with")
    return codec


@pytest.fixture(params=["gzip", "snappy", "lz4", "zstd"])
def codec(request):
    return in_core(request.param)


@pytest.fixture(params=[False, True], ids=["copies", "views"])
def views(request):
    return request.param


def one_batch(codec, compress, records=RECORDS):
    """One v2 batch of `records`, its records section compressed by compress()."""
    plain = kcodec.encode(records, compression="none", base_offset=10)
    template = kcodec.encode(records, compression=codec, base_offset=10)
    assert len(entries(plain)) == len(entries(template)) == 1
    return with_v2_section(template, compress(plain[61:]))


def outcome(codec, in_core, data, **options):
    """decode()'s rows with the codec decompressed in the core or through the
    binding, or its error as (type, position, offset)."""
    previous = system_codecs.in_core(codec) is not None
    system_codecs.in_core(codec, in_core)
    try:
        return rows_of_table(kcodec.decode(data, **options))
    except KafkaFormatError as exc:
        return type(exc), exc.position, exc.offset
    finally:
        system_codecs.in_core(codec, previous)


def assert_paths_agree(codec, data, **options):
    in_core = outcome(codec, True, data, **options)
    assert in_core == outcome(codec, False, data, **options)
    return in_core


def without_the_binding(monkeypatch):
    """decode() may no longer decompress through the Python binding."""
    def binding(*args):
        raise AssertionError("decompressed through the Python binding")

    monkeypatch.setattr(compression, "decompress", binding)


def test_the_core_decompresses_without_the_binding(codec, views, monkeypatch):
    data = kcodec.encode(RECORDS, compression=codec, max_batch_bytes=16384)
    assert len(entries(data)) > 5
    expected = rows_of_records(data)            # the object API decompresses in Python
    without_the_binding(monkeypatch)
    table = kcodec.decode(data, views=views)
    assert rows_of_table(table) == expected
    system_codecs.in_core(codec, False)
    try:
        with pytest.raises(AssertionError, match="Python binding"):
            kcodec.decode(data, views=views)
    finally:
        system_codecs.in_core(codec, True)


def test_turning_the_core_path_off_and_on(codec):
    library = system_codecs.in_core(codec)
    assert library.startswith({"gzip": "ISA-L ", "snappy": "cramjam ", "lz4": "liblz4 ",
                               "zstd": "libzstd "}[codec])
    assert system_codecs.in_core(codec, False) is None
    assert system_codecs.in_core(codec) is None
    assert system_codecs.in_core(codec, True) == library
    with pytest.raises(KeyError):
        system_codecs.in_core("none")


def test_the_core_takes_backports_zstds_build_at_zstandards_version():
    try:
        from backports import zstd
    except ImportError:
        pytest.skip("backports.zstd is not installed")
    major, minor, patch = zstandard.ZSTD_VERSION
    module = ("backports.zstd._zstd" if zstd.zstd_version_info[:3] == (major, minor, patch)
              else "zstandard._cffi")
    assert system_codecs.core_module("zstd") == module
    assert system_codecs.in_core("zstd") == f"libzstd {major}.{minor}.{patch} ({module})"


_CORE_ZSTD = """
import sys
import zstandard
if sys.argv[1:]:
    zstandard.ZSTD_VERSION = tuple(map(int, sys.argv[1].split(".")))
from kcodec._core import system_codecs
print(system_codecs.core_module("zstd"))
"""


def test_a_libzstd_build_unlike_zstandards_is_not_taken(tmp_path):
    """The system's libzstd posing as backports.zstd's build: another version,
    and (Debian's) decoding the formats before zstd 0.8, which zstandard's
    does not. Not taken, even where the Python path claims its version."""
    import subprocess
    import sys
    import sysconfig
    try:
        system = ctypes.CDLL("libzstd.so.1")
    except OSError:
        pytest.skip("no system libzstd.so.1")
    with open("/proc/self/maps") as maps:
        path = next(line.split()[-1] for line in maps if "libzstd.so" in line)
    fake = tmp_path / "backports" / "zstd"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / ("_zstd" + sysconfig.get_config_var("EXT_SUFFIX"))).write_bytes(
        open(path, "rb").read())
    version = system.ZSTD_versionNumber()
    as_text = f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    if version == libzstd_number(zstandard.ZSTD_VERSION):
        pytest.skip("the system's libzstd is zstandard's version")

    def core_module(*argv):
        child = subprocess.run([sys.executable, "-c", _CORE_ZSTD, *argv], capture_output=True,
                               text=True, timeout=60, cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(tmp_path)})
        assert child.returncode == 0, child.stderr
        return child.stdout.strip()

    assert core_module() == "zstandard._cffi"
    # With the Python path claiming the system's version, the version check
    # alone would take it; it is still unlike zstandard's build, and nothing
    # is taken (zstandard's own build is not of the version claimed).
    assert core_module(as_text) == "None"


def test_a_backports_zstd_that_fails_to_import_leaves_zstandards_build(tmp_path):
    import subprocess
    import sys
    fake = tmp_path / "backports" / "zstd"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('Unsupported Python version')\n")
    child = subprocess.run([sys.executable, "-c", _CORE_ZSTD], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert (child.returncode, child.stdout.strip()) == (0, "zstandard._cffi"), child.stderr


def libzstd_number(version):
    major, minor, patch = version
    return major * 10000 + minor * 100 + patch


def gzip_named(raw):
    """A member whose header carries a file name: left to the Python path."""
    out = io.BytesIO()
    with gzip.GzipFile("records", "wb", fileobj=out, mtime=0) as member:
        member.write(raw)
    return out.getvalue()


PAYLOADS = {
    "gzip": {
        "zlib, level 6": lambda raw: gzip.compress(raw, 6, mtime=0),
        "stored blocks": lambda raw: gzip.compress(raw, 0),
        "fixed Huffman codes": lambda raw: (lambda c: c.compress(raw) + c.flush())(
            zlib.compressobj(6, zlib.DEFLATED, 31, strategy=zlib.Z_FIXED)),
        "two members": lambda raw: gzip.compress(raw[:1000]) + gzip.compress(raw[1000:]),
        "a name in the header": gzip_named,
    },
    "snappy": {
        "xerial, 32 KiB chunks": xerial,
        "xerial, one chunk": lambda raw: xerial(raw, chunk=len(raw)),
        "xerial, chunks of 1000 bytes and an empty one": lambda raw: (
            xerial(raw, chunk=1000) + b"\x00\x00\x00\x01\x00"),
        "raw block, no framing": lambda raw: bytes(cramjam.snappy.compress_raw(raw)),
    },
    "lz4": {
        "linked blocks, checksums, stored size": lambda raw: lz4.frame.compress(
            raw, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=True,
            content_checksum=True, block_checksum=True, store_size=True),
        "4 MiB blocks": lambda raw: lz4.frame.compress(
            raw, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False, store_size=False),
        "stored, not compressed": lambda raw: lz4.frame.compress(raw, compression_level=-1000),
    },
    "zstd": {
        "content size": lambda raw: zstandard.ZstdCompressor(level=3).compress(raw),
        "no content size": lambda raw: (lambda c: c.compress(raw) + c.flush())(
            zstandard.ZstdCompressor(write_content_size=False).compressobj()),
        "two frames": lambda raw: (zstandard.ZstdCompressor().compress(raw[:1000])
                                   + zstandard.ZstdCompressor().compress(raw[1000:])),
        "checksum": lambda raw: zstandard.ZstdCompressor(write_checksum=True).compress(raw),
    },
}


@pytest.mark.parametrize("codec_name,shape", [(c, s) for c in PAYLOADS for s in PAYLOADS[c]])
def test_frames_of_every_shape_give_the_same_rows(codec_name, shape, monkeypatch):
    codec = in_core(codec_name)
    data = one_batch(codec, PAYLOADS[codec][shape])
    rows = assert_paths_agree(codec, data)
    assert rows == rows_of_records(data)
    assert len(rows) == len(RECORDS)
    assert assert_paths_agree(codec, data, views=True) == rows
    without_the_binding(monkeypatch)
    assert outcome(codec, True, data) == rows
    assert outcome(codec, True, data, views=True) == rows


@pytest.mark.invalid_input
def test_decompressed_size_limit_is_the_bindings(codec, views, monkeypatch):
    data = one_batch(codec, PAYLOADS[codec][sorted(PAYLOADS[codec])[0]])
    size = len(kcodec.encode(RECORDS, compression="none")) - 61
    assert size > 64 << 10            # past the core's first buffer: it grows
    rows = assert_paths_agree(codec, data, max_decompressed_bytes=size, views=views)
    assert len(rows) == len(RECORDS)
    with monkeypatch.context() as patched:
        without_the_binding(patched)
        assert outcome(codec, True, data, max_decompressed_bytes=size, views=views) == rows
    for limit in (size - 1, 1000, 0):
        got = assert_paths_agree(codec, data, max_decompressed_bytes=limit, views=views)
        assert got[0] is DecompressionLimitError, limit


@pytest.mark.invalid_input
def test_cut_and_padded_frames_fail_alike(codec, views):
    small = RECORDS[:200]
    data = one_batch(codec, PAYLOADS[codec][sorted(PAYLOADS[codec])[0]], small)
    section = data[61:]
    for cut in list(range(0, len(section), max(1, len(section) // 40))) + [len(section) - 1]:
        got = assert_paths_agree(codec, with_v2_section(data, section[:cut]), views=views)
        assert isinstance(got, tuple) and issubclass(got[0], KafkaFormatError), cut
    for tail in (b"\x00", b"\x00" * 9, section[:20]):
        assert_paths_agree(codec, with_v2_section(data, section + tail), views=views)
    assert_paths_agree(codec, with_v2_section(data, b""), views=views)


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 1 << 21, (1 << 21) + 5])
def test_a_snappy_blocks_declared_length_is_cramjams(size):
    raw = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    block = bytes(cramjam.snappy.compress_raw(raw))
    assert system_codecs.snappy_block_length(block) == cramjam.snappy.decompress_raw_len(block)
    assert system_codecs.snappy_block_length(memoryview(block)) == size


@pytest.mark.invalid_input
@pytest.mark.parametrize("preamble,rest,message", [
    (b"", False, "length is cut off"),                          # an empty block
    (b"\x80\x80", False, "length is cut off"),                   # the varint runs past it
    (b"\xff\xff\xff\xff\xff\x01", True, "length is cut off"),     # six bytes long
    (b"\xff\xff\xff\xff\x7f", True, "length is cut off"),          # past UINT32_MAX
    (b"\xff\xff\x03", True, "cannot hold the 65535 bytes"),
], ids=["empty", "cut", "six bytes", "past 32 bits", "too large"])
def test_a_malformed_snappy_length_fails_alike_in_both_paths(preamble, rest, message, views):
    codec = in_core("snappy")
    body = bytes(cramjam.snappy.compress_raw(b"ab" * 20))[1:]     # without its own preamble
    block = preamble + (body if rest else b"")
    data = one_batch(codec, lambda raw: xerial(raw)[:16] + struct.pack(">i", len(block)) + block)
    got = assert_paths_agree(codec, data, views=views)
    assert got[0] is DecompressionError and got[1] == 0
    with pytest.raises(DecompressionError, match=message):
        system_codecs.snappy_block_length(block)


def test_threads_decoding_at_once_each_get_their_rows(codec, views):
    inputs = [kcodec.encode(RECORDS[i::4], compression=codec, base_offset=1000 * i,
                            max_batch_bytes=8192) for i in range(4)]
    expected = [rows_of_table(kcodec.decode(d)) for d in inputs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: [rows_of_table(kcodec.decode(inputs[i], views=views))
                                       for _ in range(5)], range(4)))
    assert got == [[rows] * 5 for rows in expected]


@pytest.mark.invalid_input
@pytest.mark.parametrize("at,bit", [(-8, 0x20), (-4, 0x01), (3, 0x02)],
                         ids=["CRC-32", "size", "a header CRC that is not there"])
def test_a_gzip_member_failing_its_checks_fails_alike(at, bit, views):
    codec = in_core("gzip")
    data = one_batch(codec, PAYLOADS[codec]["zlib, level 6"], RECORDS[:300])
    section = bytearray(data[61:])
    section[at] ^= bit
    got = assert_paths_agree(codec, with_v2_section(data, bytes(section)), views=views)
    assert isinstance(got, tuple) and issubclass(got[0], KafkaFormatError), got


@pytest.mark.parametrize("seed", [0, 1, 0x9E3779B1, 0xFFFFFFFF])
def test_xxh32_is_the_xxhash_packages(seed):
    # Every tail length after 0-4 stripes of 16 bytes, and a long input.
    import xxhash
    data = bytes((i * 167 + 13) & 0xFF for i in range(5000))
    for n in list(range(80)) + [1000, 4999]:
        assert system_codecs.xxh32(data[:n], seed) == xxhash.xxh32_intdigest(data[:n], seed), n
    assert system_codecs.xxh32(memoryview(bytearray(data))[7:30], seed) == \
        xxhash.xxh32_intdigest(data[7:30], seed)


@pytest.mark.parametrize("store_size", [False, True])
def test_the_lz4_header_checksum_is_the_one_lz4_writes(store_size):
    # A frame's header: magic, FLG, BD, the content size if stored, HC.
    frame = lz4.frame.compress(b"abc" * 100, store_size=store_size, content_checksum=True)
    length = 7 + (8 if store_size else 0)
    assert frame[length - 1] == (system_codecs.xxh32(frame[4:length - 1]) >> 8) & 0xFF
