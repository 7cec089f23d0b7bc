"""kcodec's CRCs against independent implementations, in ISA-L (the isal
package's, used where it exports them) and in kcodec's own code, at every
length class the hardware paths treat differently: for CRC-32C alignment
head, three-stream blocks of 768 and 6144 bytes, 8-byte words, byte tail;
for CRC-32 the table below 32 bytes, 16-byte folds, four side by side from
128 bytes, the tail."""
import os
import zlib

import crc32c
import numpy as np
import pytest

import kcodec
from kcodec._core import crc


@pytest.fixture(autouse=True, params=["isa-l", "own code"])
def crc_code(request):
    found = crc.library()
    assert found, "ISA-L's CRCs not found in the isal package"
    crc.library(request.param == "isa-l")
    assert (crc.library() is not None) == (request.param == "isa-l")
    yield
    crc.library(True)


LENGTHS = sorted(set(list(range(0, 80)) + [
    127, 128, 129, 143, 144, 191, 192, 193, 207, 255, 256, 767, 768, 769, 1535, 1536,
    6143, 6144, 6145, 6151, 12288, 16384, 16389, 65535, 65536, 65537, 1 << 20, (1 << 20) + 13]))


@pytest.mark.parametrize("length", LENGTHS)
def test_crc32c_matches_the_crc32c_package(length):
    data = os.urandom(length + 7)
    for start in (0, 1, 5):                        # unaligned starts too
        view = memoryview(data)[start:start + length]
        assert kcodec.crc32c(view) == crc32c.crc32c(bytes(view))
        assert kcodec.crc32c(view, 0xDEADBEEF) == crc32c.crc32c(bytes(view), 0xDEADBEEF)


@pytest.mark.parametrize("length", LENGTHS)
def test_crc32_matches_zlib(length):
    data = os.urandom(length + 7)
    for start in (0, 1, 5):
        view = memoryview(data)[start:start + length]
        assert kcodec.crc32(view) == zlib.crc32(view)
        assert kcodec.crc32(view, 0xDEADBEEF) == zlib.crc32(view, 0xDEADBEEF)


def test_crc_continues_across_pieces_and_takes_any_buffer():
    data = os.urandom(20000)
    assert kcodec.crc32c(data[7000:], kcodec.crc32c(data[:7000])) == crc32c.crc32c(data)
    assert kcodec.crc32(data[7001:], kcodec.crc32(data[:7001])) == zlib.crc32(data)
    assert kcodec.crc32c(np.frombuffer(data, np.uint8)) == crc32c.crc32c(data)
    assert kcodec.crc32c(bytearray(data)) == crc32c.crc32c(data)
