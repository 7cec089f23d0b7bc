"""Typed values (issue 48): a binary column of Confluent-framed Avro values
decoded into one Arrow struct column by kcodec's compiled decoder, side by
side, in one process, with what Python users write today; and the same
records as JSON values. The workload (value_workloads.py): 100,000 "order"
records of a 12-field Avro schema (strings, longs, an int, a double, a
boolean, an enum, a timestamp-millis, a nested record, an array, a nullable
union), written with fastavro's schemaless_writer and framed as confluent-
kafka's AvroSerializer frames them (checked byte for byte on one record).

    python -m pytest benchmarks/test_bench_values.py --benchmark-only -q
    python -m pytest benchmarks/test_bench_values.py --benchmark-disable   # as CI: once each
    python benchmarks/value_workloads.py --json FILE   # interleaved repeats, for results/

Groups (the first member is kcodec; the ratios printed at the end are each
peer's median time over kcodec's):

* avro values to Arrow: ``decode_column(column, format="avro", schemas={id:
  schema})`` against confluent-kafka's ``AvroDeserializer`` per value (its
  registry client is confluent-kafka's in-memory mock, ``mock://``, with the
  schema registered first: the deserializer finds it in memory, so only its
  CPU cost is timed, as with a warmed real client's cache) + ``pa.array(dicts,
  type)`` or ``Table.from_pylist`` (goal >= 20x); against fastavro's
  ``schemaless_reader`` per datum, the 5-byte header skipped, + ``pa.array``,
  and the loop alone (goal >= 10x). kcodec's input is the binary Arrow column
  (what ``kcodec.decode`` gives); the peers', the list of ``bytes`` a Python
  consumer gives.
* json values to Arrow: kcodec's JSON path against ``json.loads`` per value
  + ``pa.array`` / ``from_pylist`` (the timestamp, RFC 3339 text, cast to the
  timestamp type afterwards, vectorized), and against ``pyarrow.json.read_json``
  alone on the values already joined by newlines.
* record set to Arrow: ``kcodec.decode(data, value_format="avro",
  schemas=...)`` against ``kcodec.decode(data)``: what the typed values cost
  over the raw decode.

Every benchmark checks, once and untimed, that its output is kcodec's column
(value for value; fields' not-null flags aside) or, for the loops without
Arrow, the dicts written. Nothing here asserts a speed.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from needs import require_module, unavailable  # noqa: E402

import value_workloads as vw  # noqa: E402

GROUP_CASES = [(group, impl) for group, impls in vw.GROUPS.items() for impl in impls]
_MEDIANS = {}          # group -> impl -> median seconds (timed runs only)
_MEDIANS_RECORDS = {}  # group -> records per call
_EXPECTED = {}         # (workload, group) -> kcodec's output


def _records(config):
    env = os.environ.get("KCODEC_BENCH_VALUE_RECORDS")
    if env:
        return int(env)
    return vw.SMOKE_RECORDS if config.getoption("benchmark_disable", False) else vw.N_RECORDS


@pytest.fixture(scope="module")
def values_workload(request):
    require_module("fastavro")
    require_module("confluent_kafka.schema_registry.avro")
    return vw.get_workload(_records(request.config))


class _RatioReport:
    """Prints, at the end of a timed run, each peer's median over kcodec's."""
    def pytest_terminal_summary(self, terminalreporter):
        lines = ratio_lines()
        if lines:
            terminalreporter.section("typed values: peer median / kcodec median (same process)")
            for line in lines:
                terminalreporter.write_line(line)


@pytest.fixture(scope="module", autouse=True)
def _ratio_report(request):
    manager = request.config.pluginmanager
    if not manager.has_plugin("kcodec-values-ratios"):
        manager.register(_RatioReport(), "kcodec-values-ratios")


def ratio_lines():
    lines = []
    for group, medians in _MEDIANS.items():
        subject = next(iter(vw.GROUPS[group]))
        kc = medians.get(subject)
        if kc is None:
            continue
        n = _MEDIANS_RECORDS[group]
        lines += ["", f"| {group} ({n:,} records) | median ms | ns/record | peer/kcodec | goal |",
                  "|---|---:|---:|---:|---|"]
        for impl in vw.GROUPS[group]:
            if impl not in medians:
                continue
            median = medians[impl]
            ratio = median / kc
            goal = vw.GOALS.get((group, impl))
            verdict = "" if goal is None else f">= {goal:g}x: {'met' if ratio >= goal else 'MISSED'}"
            lines.append(f"| {impl} | {median * 1e3:,.1f} | {median / n * 1e9:,.0f} "
                         f"| {ratio:.2f}x | {verdict} |")
    return lines


def _expected(wl, group):
    """kcodec's output for the group, computed once per workload (untimed)."""
    key = (id(wl), group)
    if key not in _EXPECTED:
        build = next(iter(vw.GROUPS[group].values()))
        _EXPECTED[key] = build(wl)()
    return _EXPECTED[key]


def _check(wl, group, impl, fn):
    """The implementation's output against kcodec's, once, untimed."""
    got = fn()
    if group == "record set to Arrow":
        assert got.num_rows == wl.count
        if impl.startswith("kcodec.decode(value_format"):
            vw.check_same(vw.kcodec_avro(wl)(), got.column("value"), impl)
            assert got.column("valueSchemaId").to_pylist() == [wl.schema_id] * wl.count
        else:
            assert got.column("value").to_pylist() == wl.values
        return
    expected = _expected(wl, group)
    if isinstance(got, list):
        vw.check_dicts(wl.orders, got, impl)
    else:
        if impl == next(iter(vw.GROUPS[group])):
            assert vw.normalized(got).type == vw._nullable(wl.arrow_type)
            assert len(got) == wl.count and got.null_count == 0
            assert got.to_pylist()[:50] == wl.orders[:50]      # as fastavro reads them
        vw.check_same(expected, got, impl)


@pytest.mark.parametrize("group,impl", GROUP_CASES, ids=[f"{g}/{i}" for g, i in GROUP_CASES])
def test_values(benchmark, record_rate, values_workload, group, impl):
    wl = values_workload
    if group == "json values to Arrow" and impl.startswith("kcodec"):
        require_module("kcodec.values.json")
    if group == "record set to Arrow" and not vw.has_registry():
        unavailable("kcodec.values.registry (schemas={id: schema}) is not there yet")
    fn = vw.GROUPS[group][impl](wl)
    _check(wl, group, impl, fn)
    benchmark.group = f"{group} ({wl.count:,} records)"
    benchmark.extra_info["impl"] = impl
    benchmark(fn)
    record_rate(benchmark, group, f"{wl.count:,} records", impl, wl.count)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        _MEDIANS.setdefault(group, {})[impl] = stats.stats.median
        _MEDIANS_RECORDS[group] = wl.count
