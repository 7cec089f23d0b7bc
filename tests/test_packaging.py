"""The built package: extensions without debug info (release builds), and in
CI a wheel with a manylinux tag (ci/test.sh repairs it with auditwheel)."""
import os
import struct
from importlib import metadata
from pathlib import Path

import pytest

import kcodec

CORE = Path(kcodec.__file__).resolve().parent / "_core"


def elf_section_names(path):
    """The section names of a little-endian ELF64 file (its section headers
    and their string table), or None for any other file."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * entry_size)
        return name, offset, size

    _, table_at, table_size = section(names_index)
    table = data[table_at:table_at + table_size]
    names = []
    for i in range(count):
        name = section(i)[0]
        names.append(table[name:table.index(b"\0", name)].decode())
    return names


def test_elf_section_names_reads_a_section_table():
    [crc] = CORE.glob("crc.*.so") or [None]
    names = None if crc is None else elf_section_names(crc)
    if names is None:
        pytest.skip("the core is not built as ELF64 here")
    assert ".text" in names and ".symtab" in names and ".dynsym" in names


def test_release_extensions_carry_no_debug_info():
    if os.environ.get("KCODEC_DEBUG") == "1":
        pytest.skip("a build that keeps debug info (KCODEC_DEBUG=1)")
    extensions = sorted(CORE.glob("*.so"))
    assert len(extensions) >= 5, extensions
    for path in extensions:
        names = elf_section_names(path)
        if names is None:
            pytest.skip("the core is not built as ELF64 here")
        assert [n for n in names if n.startswith(".debug")] == [], path.name
        assert ".symtab" in names, path.name    # the symbols stay: test_extension reads them


def test_the_installed_wheel_has_a_manylinux_tag():
    if not os.environ.get("KCODEC_REQUIRE_MANYLINUX"):
        pytest.skip("only where ci/test.sh installed its repaired wheel")
    wheel = metadata.distribution("kcodec").read_text("WHEEL")
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines()
            if line.startswith("Tag:")]
    assert tags and all("manylinux" in tag for tag in tags), tags
