import json

import kcodec
from kcodec.cli import main


def test_records_and_batches_print_json_lines(tmp_path, capsys):
    path = tmp_path / "00000000000000000000.log"
    data = kcodec.encode([(b"k", b"hello", 1_700_000_000_000, [("h", b"\x00")])] * 3,
                         compression="gzip", base_offset=7)
    path.write_bytes(data + kcodec.encode_control("COMMIT", producer_id=1, producer_epoch=0,
                                                  offset=10, timestamp=1))
    assert main(["records", "--include-control", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["offset"] for r in rows] == [7, 8, 9, 10]
    assert rows[0]["value"] == "hello" and rows[0]["headers"] == [["h", {"hex": "00"}]]
    assert rows[3]["control"] == {"type": "COMMIT", "coordinator_epoch": 0}
    assert main(["batches", str(path)]) == 0
    batches = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(b["compression"], b["count"], b["is_control"]) for b in batches] == [
        ("gzip", 3, False), ("none", 1, True)]


def test_corrupt_file_reports_where(tmp_path, capsys):
    path = tmp_path / "bad.log"
    data = bytearray(kcodec.encode([(b"k", b"v")] * 2))
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert main(["records", str(path)]) == 1
    err = capsys.readouterr().err
    assert "CRC" in err and "byte 0" in err


def test_only_the_bench_command_imports_the_benchmark_harness(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(kcodec.encode([(b"k", b"v")]))
    probe = ("import sys\nimport kcodec\nfrom kcodec.cli import main\n"
             "loaded = ['kcodec.bench' in sys.modules]\n"
             "main(['records', sys.argv[1]])\nloaded.append('kcodec.bench' in sys.modules)\n"
             "try:\n    main(['bench', '--help'])\nexcept SystemExit:\n    pass\n"
             "loaded.append('kcodec.bench' in sys.modules)\nprint(loaded, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[False, False, True]"
