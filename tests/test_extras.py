"""What only some commands need comes with an extra of kcodec's (capture,
progress, spark): without it, those commands say which extra to install and
everything else works; the installed metadata lists each in its extra and
all of them in the test extra."""
import importlib
import io
import sys
from importlib import metadata

import pyarrow.parquet as pq
import pytest
from packaging.requirements import Requirement

import kcodec
from kcodec._extras import EXTRAS, MissingExtraError
from kcodec.cli import main
from kcodec.log import write_log


def without(monkeypatch, *modules):
    """Make `modules` fail to import (None in sys.modules), and forget the
    kcodec modules that import them so that they run their imports again."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)
    for name in list(sys.modules):
        if name == "kcodec.protocol.capture" or name.split(".")[:2] == ["kcodec", "spark"]:
            monkeypatch.delitem(sys.modules, name)


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def partition(tmp_path):
    directory = tmp_path / "t-0"
    write_log(str(directory), kcodec.encode([(b"k%d" % i, b"v" * i) for i in range(50)]))
    return directory


def test_capture_without_dpkt_names_the_capture_extra(monkeypatch, capsys, tmp_path):
    without(monkeypatch, "dpkt")
    with pytest.raises(MissingExtraError, match=r"dpkt.*pip install 'kcodec\[capture\]'"):
        importlib.import_module("kcodec.protocol.capture")
    capture = tmp_path / "traffic.pcap"
    capture.write_bytes(b"")
    assert main(["capture", str(capture)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kcodec: capture: ")
    assert "pip install 'kcodec[capture]'" in err
    assert "Traceback" not in err


def test_capture_module_reads_with_dpkt():
    assert importlib.import_module("kcodec.protocol.capture").dpkt is importlib.import_module("dpkt")


def test_convert_without_tqdm_notes_the_progress_extra_and_converts(monkeypatch, partition,
                                                                      tmp_path):
    without(monkeypatch, "tqdm")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    out = tmp_path / "out.parquet"
    assert main(["convert", str(partition), "--to", str(out)]) == 0
    assert "pip install 'kcodec[progress]'" in terminal.getvalue()
    assert pq.read_table(out).num_rows == 50


def test_convert_with_tqdm_on_a_terminal_shows_a_bar(monkeypatch, partition, tmp_path):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["convert", str(partition), "--to", str(tmp_path / "out.parquet")]) == 0
    assert "100%|" in terminal.getvalue() and "offsets/s" in terminal.getvalue()
    assert "kcodec[progress]" not in terminal.getvalue()


def test_convert_with_no_progress_needs_no_tqdm(monkeypatch, partition, tmp_path):
    without(monkeypatch, "tqdm")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["convert", str(partition), "--to", str(tmp_path / "out.parquet"),
                 "--no-progress"]) == 0
    assert terminal.getvalue() == ""


@pytest.mark.parametrize("missing", ["pyspark", "pandas"])
@pytest.mark.parametrize("command", ["spark-convert", "demo"])
def test_spark_commands_without_the_spark_extra_name_it(monkeypatch, capsys, tmp_path, missing,
                                                        command, partition):
    without(monkeypatch, missing)
    argv = (["spark-convert", str(partition), "--out", str(tmp_path / "out")]
            if command == "spark-convert" else ["demo", "--dir", str(tmp_path / "demo")])
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kcodec: {command}: this command needs {missing}, ")
    assert err.rstrip().endswith("pip install 'kcodec[spark]'")
    assert not (tmp_path / "out").exists() and not (tmp_path / "demo").exists()


def test_kcodec_spark_without_pyspark_names_the_spark_extra(monkeypatch):
    without(monkeypatch, "pyspark")
    with pytest.raises(MissingExtraError, match=r"pip install 'kcodec\[spark\]'"):
        importlib.import_module("kcodec.spark")


def requirements(extra=None):
    """The installed kcodec's requirements (names) for `extra`, or the
    runtime ones."""
    names = set()
    for text in metadata.requires("kcodec") or ():
        requirement = Requirement(text)
        marker = requirement.marker
        if extra is None and marker is None:
            names.add(requirement.name.lower())
        elif extra is not None and marker is not None and marker.evaluate({"extra": extra}) \
                and not marker.evaluate({"extra": ""}):
            names.add(requirement.name.lower())
    return names


def test_each_module_is_in_its_extra_and_the_test_extra_not_a_dependency():
    for module, extra in EXTRAS.items():
        assert module in requirements(extra), (module, extra)
        assert module in requirements("test"), module
        assert module not in requirements(), module
