"""Fixtures for the benchmarks: the workloads (built once per session, see
workloads.py for the object-API ones and kcodec.bench for the matrix of
`kcodec bench` that test_bench_arrow.py uses) and a side-by-side summary
(records/s and the kcodec/peer ratios, from pytest-benchmark's medians)
printed at the end of a `--benchmark-only` run. With `--benchmark-disable`
every benchmark runs once, as a plain test, and no summary is printed.
"""
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:       # so that `import workloads` works in any import mode
    sys.path.insert(0, _HERE)

import workloads  # noqa: E402
from kcodec import bench  # noqa: E402

# (operation, workload name) -> implementation -> records per second (median)
_RATES = defaultdict(dict)


@pytest.fixture(params=workloads.WORKLOAD_KEYS,
                ids=[workloads.workload_id(*key) for key in workloads.WORKLOAD_KEYS])
def workload(request):
    """One workload; each is built (and checked against aiokafka) once per session.

    Timed runs use N_RECORDS (20k) records per workload; with benchmarks
    disabled (CI runs them once, as tests) SMOKE_RECORDS (4k) are enough to
    check every code path and keep the run short. KCODEC_BENCH_RECORDS
    overrides both."""
    return workloads.get_workload(*request.param, n=records_per_workload(request.config))


@pytest.fixture
def bench_workload(request, workload_id):
    """The workload `workload_id` (a test parameter) of kcodec.bench's matrix,
    built once per session, sized like the object-API ones (10 KB-value
    workloads get 1/20 of the records)."""
    return bench.build_workload(workload_id, records_per_workload(request.config))


def records_per_workload(config):
    env = os.environ.get("KCODEC_BENCH_RECORDS")
    if env:
        return int(env)
    if config.getoption("benchmark_disable", False):
        return workloads.SMOKE_RECORDS
    return workloads.N_RECORDS


@pytest.fixture
def record_rate():
    """record_rate(benchmark, operation, workload_name, impl, records): after the
    benchmark ran, note its median records/s for the end-of-run summary."""
    def record(benchmark, operation, workload_name, impl, records):
        benchmark.extra_info["records"] = records
        stats = getattr(benchmark, "stats", None)
        if stats is None:                       # --benchmark-disable: ran once, untimed
            return
        median = stats.stats.median
        if median > 0:
            rate = records / median
            benchmark.extra_info["records_per_s_median"] = rate
            _RATES[(operation, workload_name)][impl] = rate
    return record


def _fmt(rate):
    return "-" if rate is None else f"{rate:,.0f}"


def summary_lines(rates=None):
    """Markdown table(s) of the recorded medians: records/s and kcodec/peer ratios."""
    rates = _RATES if rates is None else rates
    lines = []
    for operation in dict.fromkeys(op for op, _ in rates):
        if operation not in ("decode", "encode"):
            lines += _generic_summary(operation, rates)
    for operation in ("decode", "encode"):
        rows = [(name, impls) for (op, name), impls in rates.items() if op == operation]
        if not rows:
            continue
        extra = operation == "decode" and any("kafka-python" in i for _, i in rows)
        lines.append("")
        head = (f"| {operation} workload | kcodec records/s | aiokafka records/s "
                f"| ratio (kcodec/aiokafka) |")
        rule = "|---|---:|---:|---:|"
        if extra:
            head += " kafka-python records/s (first 2k records) |"
            rule += "---:|"
        lines += [head, rule]
        for name, impls in rows:
            kc, aio = impls.get("kcodec"), impls.get("aiokafka")
            ratio = f"{kc / aio:.2f}x" if kc and aio else "-"
            line = f"| {name} | {_fmt(kc)} | {_fmt(aio)} | {ratio} |"
            if extra:
                line += f" {_fmt(impls.get('kafka-python'))} |"
            lines.append(line)
    return lines


def _generic_summary(operation, rates):
    """One operation's table: every implementation's records/s, the first
    kcodec one over aiokafka, and its time over the fastest floor."""
    rows = [(name, impls) for (op, name), impls in rates.items() if op == operation]
    impls = list(dict.fromkeys(impl for _, recorded in rows for impl in recorded))
    subject = next((i for i in impls if i.startswith("kcodec")), None)
    floors = [i for i in impls if i.startswith("floor")]
    head = [f"{operation} workload"] + [f"{i} records/s" for i in impls]
    if subject and "aiokafka" in impls:
        head.append(f"{subject} / aiokafka")
    if subject and floors:
        head.append(f"{subject} time / fastest floor time")
    lines = ["", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, recorded in rows:
        cells = [name] + [_fmt(recorded.get(i)) for i in impls]
        kc = recorded.get(subject)
        if subject and "aiokafka" in impls:
            aio = recorded.get("aiokafka")
            cells.append(f"{kc / aio:.2f}x" if kc and aio else "-")
        if subject and floors:
            best = max((recorded[f] for f in floors if f in recorded), default=None)
            cells.append(f"{best / kc:.2f}x" if kc and best else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def pytest_terminal_summary(terminalreporter):
    lines = summary_lines()
    if lines:
        terminalreporter.section("kcodec vs peers (median records/s, same bytes, same process)")
        terminalreporter.write_line(
            "pytest-benchmark times the members of a group one after the other; on a busy "
            "machine prefer benchmarks/report.py, which interleaves their repeats.")
        for line in lines:
            terminalreporter.write_line(line)
