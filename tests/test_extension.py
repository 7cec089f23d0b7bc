"""Guards: the compiled core is what runs, and (in CI) it is the installed wheel."""
import os
import sys
from pathlib import Path

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
