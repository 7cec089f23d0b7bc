"""Guards: the compiled core is what runs, and (in CI) it is the installed wheel."""
import ctypes
import importlib.util
import mmap
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kcodec
from kcodec._core import build, columns, crc, records


def test_core_modules_are_compiled_extensions():
    for module in (crc, records, build, columns):
        assert Path(module.__file__).suffix in (".so", ".pyd"), module.__file__
    assert kcodec.Record.__module__ == "kcodec._core.records"
    assert kcodec.Batch.__module__ == "kcodec._core.records"


def test_installed_wheel_is_under_test():
    if not os.environ.get("KCODEC_REQUIRE_INSTALLED"):
        return
    source_package = Path(__file__).resolve().parents[1] / "kcodec"
    installed = Path(kcodec.__file__).resolve().parent
    assert installed != source_package, kcodec.__file__
    assert installed.parent.name == "site-packages", kcodec.__file__


def test_hardware_crcs_where_the_cpu_has_them():
    if sys.platform.startswith("linux") and os.uname().machine == "x86_64":
        flags = Path("/proc/cpuinfo").read_text()
        if " sse4_2" in flags:
            assert kcodec.hardware_crc32c()
        if " pclmulqdq" in flags:
            assert crc.hardware_crc32()


def test_records_are_extension_types():
    # Extension types have no instance __dict__ and cannot take new attributes.
    record = kcodec.Record(b"k", b"v", 1)
    try:
        record.anything = 1
    except AttributeError:
        pass
    else:
        raise AssertionError("kcodec.Record is a Python class, not the compiled one")


PER_RECORD_HELPERS = ("records_parse_v2_record", "wire_read_uvarint", "wire_read_varint",
                      "wire_read_varlong", "wire_read_blob", "wire_copy_over", "wire_copy_bytes",
                      "columns_mark")


def test_the_columns_loop_calls_no_helper_per_record():
    # setup.py's COLUMNS_INLINING: a helper GCC leaves out of line is a
    # function of its own in the module, called for every record (decode
    # then runs about 30% slower, and no other test notices).
    nm = shutil.which("nm")
    if not (sys.platform.startswith("linux") and nm):
        pytest.skip("needs nm on Linux to list the module's functions")
    listing = subprocess.run([nm, "--defined-only", columns.__file__], capture_output=True,
                             text=True, check=True).stdout
    functions = {line.split()[-1] for line in listing.splitlines()
                 if line.split()[1:2] in (["t"], ["T"])}
    assert any(name.endswith("columns_fill_grown") for name in functions)   # not stripped
    out_of_line = [name for name in functions
                   if any(helper in name for helper in PER_RECORD_HELPERS)]
    assert out_of_line == []


# XGETBV with ECX=1 reads XINUSE: which parts of the register state are in
# use. Bit 2: the upper halves of ymm0-15; bit 6: the upper halves of zmm0-15.
XINUSE_CODE = bytes.fromhex("b901000000"    # mov ecx, 1
                            "0f01d0"        # xgetbv
                            "48c1e220"      # shl rdx, 32
                            "4809d0"        # or rax, rdx
                            "c3")           # ret
VZEROUPPER = bytes.fromhex("c5f877")        # vzeroupper
UPPER_HALVES = (1 << 2) | (1 << 6)


def _xinuse_readers():
    """XINUSE as it is, and as it is after a vzeroupper of its own."""
    if not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"
            and " xgetbv1" in Path("/proc/cpuinfo").read_text()):
        pytest.skip("needs x86-64 Linux with XGETBV's in-use state (xgetbv1)")
    if crc.library() is None or not crc.library().startswith("ISA-L"):
        pytest.skip("the CRCs do not run in ISA-L here")
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except OSError as exc:
        pytest.skip(f"no executable memory: {exc}")
    page.write(XINUSE_CODE + VZEROUPPER + XINUSE_CODE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(page))
    read = ctypes.CFUNCTYPE(ctypes.c_uint64)(start)
    read_cleared = ctypes.CFUNCTYPE(ctypes.c_uint64)(start + len(XINUSE_CODE))
    read.page = read_cleared.page = page
    return read, read_cleared


def test_the_core_clears_the_vector_state_isal_leaves():
    # ISA-L's assembly returns without vzeroupper; until the upper halves are
    # cleared, the core's SSE code after each CRC runs slower (crc_impl.h,
    # kc_after_library). Called straight through ctypes, ISA-L leaves them set.
    xinuse, xinuse_cleared = _xinuse_readers()
    isal_zlib = ctypes.CDLL(importlib.util.find_spec("isal.isal_zlib").origin)
    isal_crc32c = isal_zlib.crc32_iscsi
    isal_crc32c.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint]
    data = bytes(range(256)) * 64
    batch = kcodec.encode([(b"k", b"v" * 5000, 1, [])])
    for name, call in [("crc32c", lambda: kcodec.crc32c(data)),
                       ("crc32", lambda: kcodec.crc32(data)),
                       ("decode", lambda: kcodec.decode(batch)),
                       ("read_records", lambda: list(kcodec.read_records(batch)))]:
        isal_crc32c(data, len(data), 0)
        if not xinuse() & UPPER_HALVES:
            pytest.skip(f"ISA-L left no upper halves in use here (XINUSE {xinuse():#x})")
        if xinuse_cleared() & UPPER_HALVES:   # XINUSE may report a state in use that is clean
            pytest.skip(f"XINUSE shows upper halves after a vzeroupper ({xinuse_cleared():#x})")
        isal_crc32c(data, len(data), 0)
        call()
        assert not xinuse() & UPPER_HALVES, (name, hex(xinuse()))
