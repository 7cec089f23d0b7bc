"""`kcodec bench`: the harness runs end to end on tiny workloads (--quick) and
writes what it promises. Nothing here looks at the figures themselves: a
quick run's rates are noise, and speed is shown by the harness, never asserted."""
import contextlib
import io
import json

import pytest

from kcodec import bench
from kcodec.cli import main
from needs import require_module, unavailable

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DECODE_HEADER = ["workload", "records", "records/batch", "kcodec.decode rec/s",
                 "decode(views=True) rec/s", "object API rec/s", "aiokafka rec/s",
                 "kafka-python rec/s", "floor rec/s", "decode / aiokafka",
                 "decode / kafka-python", "decode time / floor time", "2 threads / 1 thread"]
ENCODE_HEADER = ["workload", "kcodec.encode(table) rec/s", "aiokafka builder rec/s",
                 "encode / aiokafka"]
LABELS = ["none 100 B", "gzip 100 B", "snappy 100 B", "lz4 100 B", "zstd 100 B",
          "none 1/batch", "none 3 headers", "none 10 KB", "v1 snappy wrappers"]


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def table(text, first_cell):
    """The rows (lists of cells) of the Markdown table whose header starts with first_cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("| ") and line.split("|")[1].strip() == first_cell)
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[0], rows[2:]                # header, body (without the |---| rule)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One `kcodec bench --quick` run shared by the tests below (a few seconds)."""
    require_module("aiokafka")
    require_module("kafka")
    tmp = tmp_path_factory.mktemp("bench")
    argv = ["bench", "--quick", "--json", str(tmp / "bench.json")]
    if bench.matplotlib_available():
        argv += ["--png", str(tmp / "bench.png")]
    status, out, err = run_cli(argv)
    return {"status": status, "out": out, "err": err, "dir": tmp}


def test_quick_run_succeeds(quick):
    assert quick["status"] == 0, quick["err"]
    assert "Missing peer columns" not in quick["out"]


def test_prints_decode_and_encode_tables(quick):
    header, body = table(quick["out"], "workload")
    assert header == DECODE_HEADER
    assert [row[0] for row in body] == LABELS
    for row in body:
        assert len(row) == len(header)
        assert all(cell.replace(",", "").isdigit() for cell in row[3:8]), row
    encode_header, encode_body = table(quick["out"].split("Encode.", 1)[1], "workload")
    assert encode_header == ENCODE_HEADER
    assert [row[0] for row in encode_body] == LABELS
    targets_header, targets = table(quick["out"], "target")
    assert targets_header == ["target", "workload", "measured", "goal", "met"]
    assert {row[4] for row in targets} <= {"yes", "**no**"}


def test_writes_json(quick):
    result = json.loads((quick["dir"] / "bench.json").read_text())
    assert result["parameters"]["quick"] is True
    assert [w["id"] for w in result["workloads"]] == list(bench.DEFAULT_MATRIX)
    for w in result["workloads"]:
        assert w["records"] > 0 and w["bytes"] > 0
        for impl in ("kcodec.decode", "kcodec object API", "aiokafka", "kafka-python"):
            entry = w["decode"][impl]
            assert entry["records_per_s"] > 0 and len(entry["samples_s"]) == 3
        assert w["floor"]["records_per_s"] > 0
        assert w["floor"]["kind"] == ("codec decompress" if w["codec"] != "none"
                                      else ("CRC-32C + memcpy" if w["magic"] == 2
                                            else "CRC-32 + memcpy"))
        assert w["encode"]["kcodec.encode(table)"]["records_per_s"] > 0
        assert w["ratios"]["decode_vs_aiokafka"] > 0
        assert w["ratios"]["threads_2_vs_1"] is not None
    assert {t["workload"] for t in result["targets"]} >= {"none", "gzip", "none-1pb"}
    assert result["markdown"].strip() in quick["out"]


def test_writes_png(quick):
    if not bench.matplotlib_available():
        unavailable("matplotlib is not installed")
    png = (quick["dir"] / "bench.png").read_bytes()
    assert png[:8] == PNG_SIGNATURE and len(png) > 1000


def test_missing_peer_is_named(monkeypatch):
    real = bench._import_peer

    def without_kafka_python(name):
        if name == "kafka-python":
            raise ImportError("No module named 'kafka'")
        return real(name)

    monkeypatch.setattr(bench, "_import_peer", without_kafka_python)
    status, out, err = run_cli(["bench", "--quick", "--workloads", "none", "--no-threads"])
    assert status == 0, err
    assert "Missing peer columns: kafka-python" in out and "kcodec[bench]" in out
    header, body = table(out, "workload")
    row = dict(zip(header, body[0]))
    assert row["kafka-python rec/s"] == "n/a" and row["decode / kafka-python"] == "n/a"
    assert row["2 threads / 1 thread"] == "n/a"


def test_png_without_matplotlib_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "matplotlib_available", lambda: False)
    status, out, err = run_cli(["bench", "--quick", "--png", str(tmp_path / "x.png")])
    assert status == 2 and "matplotlib" in err and "kcodec[bench]" in err
    assert not (tmp_path / "x.png").exists()


def test_unknown_workload_is_refused():
    status, out, err = run_cli(["bench", "--quick", "--workloads", "none", "nope"])
    assert status == 2 and "unknown workload 'nope'" in err and "none-1pb" in err


def test_steal_is_read_from_the_aggregate_cpu_line():
    stat = ("cpu  100 5 20 900 30 2 3 40 7 0\n"
            "cpu0 50 2 10 450 15 1 1 20 3 0\n"
            "intr 12345\n")
    # guest time (7) is already in user; idle (900) and I/O wait (30) are not wanted
    assert bench.cpu_times(stat) == (100 + 5 + 20 + 2 + 3 + 40, 40)
    assert bench.cpu_times("cpu  10 0 5 100\n") == (15, 0)      # an old kernel: no steal field
    assert bench.cpu_times("intr 1\n") is None
    assert bench.cpu_times("cpu  10 x 5 100\n") is None


def test_steal_share_between_two_readings():
    assert bench.steal_share((1000, 10), (1400, 110)) == 0.25
    assert bench.steal_share((1000, 10), (1000, 10)) is None      # no time passed
    assert bench.steal_share(None, (1400, 110)) is None


def test_run_reports_the_steal_between_its_start_and_end(monkeypatch):
    readings = iter([(1000, 10), (1400, 110)])
    monkeypatch.setattr(bench, "cpu_times", lambda: next(readings))
    monkeypatch.setattr(bench, "measure", lambda *args: {})
    monkeypatch.setattr(bench, "evaluate_targets", lambda rows: [])
    monkeypatch.setattr(bench, "markdown", lambda result: "")
    result = bench.run(quick=True, workloads=["none"], threads=False)
    assert result["cpu_steal"] == 0.25


def test_steal_line_in_the_report(quick):
    result = json.loads((quick["dir"] / "bench.json").read_text())
    if result["cpu_steal"] is None:
        assert "Steal during the run" not in quick["out"]
    else:
        assert f"Steal during the run (/proc/stat, the whole machine): " \
               f"{result['cpu_steal']:.0%} of" in quick["out"]


def test_summarize_puts_each_run_in_a_column_and_counts_the_runs_that_met_a_target(
        quick, tmp_path):
    saved = json.loads((quick["dir"] / "bench.json").read_text())
    first = next(t for t in saved["targets"] if t["value"] is not None)
    # a second run that met the first target and one that missed it
    met, missed = json.loads(json.dumps(saved)), json.loads(json.dumps(saved))
    for run, value in ((met, first["goal"]), (missed, first["goal"] * (
            2 if first["op"] == "<=" else 0.5))):
        target = next(t for t in run["targets"] if t["target"] == first["target"]
                      and t["workload"] == first["workload"])
        target["value"], target["met"] = value, value == first["goal"]
    paths = []
    for name, run in (("run-a", met), ("run-b", missed)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(run))
    status, out, err = run_cli(["bench", "--summarize", *map(str, paths)])
    assert status == 0, err
    header, body = table(out, "target")
    assert header == ["target", "workload", "goal", "run-a", "run-b", "met in"]
    rows = {(row[0], row[1]): row for row in body}
    none = next(r for r in saved["workloads"] if r["id"] == "none")
    ns = none["decode"]["kcodec.decode"]["median_s"] / none["records"] * 1e9
    assert rows[("uncompressed decode, ns/record", "none")][3:5] == [f"{ns:.1f}"] * 2
    floor_ns = none["floor"]["median_s"] / none["records"] * 1e9
    assert rows[("CRC-32C+memcpy floor, ns/record", "none")][3:5] == [f"{floor_ns:.1f}"] * 2
    assert rows[("CPU", "")][3:5] == [saved["environment"]["cpu"] or "n/a"] * 2
    row = rows[(first["target"], first["workload"])]
    assert row[2] == f"{first['op']} {first['goal']:g}x"
    assert row[3] == f"{first['goal']:.2f}x" and row[5] == "1 of 2"
    assert len(body) == 4 + len(saved["targets"])


def test_summarize_refuses_a_file_that_is_not_a_saved_run(tmp_path):
    wrong = tmp_path / "wrong.json"
    wrong.write_text("[1, 2]")
    status, out, err = run_cli(["bench", "--summarize", str(wrong)])
    assert status == 2 and "wrong.json is not a run saved with --json" in err and out == ""
    status, out, err = run_cli(["bench", "--summarize", str(tmp_path / "absent.json")])
    assert status == 2 and "absent.json" in err
