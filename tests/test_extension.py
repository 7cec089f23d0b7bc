"""Guards: the compiled core is what runs, and (in CI) it is the installed wheel."""
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
