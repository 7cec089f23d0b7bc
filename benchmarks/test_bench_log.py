"""kcodec.log benchmarks: decoding a multi-segment partition log to Arrow
(PartitionLog.decode and the bounded iter_decode), a seek by offset and by
timestamp, and verify. Small logs, so that CI (--benchmark-disable) runs
each once quickly; `python benchmarks/log_convert.py` measures a multi-GiB
conversion and its peak memory."""
import pyarrow as pa
import pytest

import kcodec
from kcodec.log import PartitionLog, write_log

ROWS = 20_000


@pytest.fixture(scope="module", params=["none", "lz4", "zstd"])
def bench_log(request, tmp_path_factory):
    rows = [(b"key-%d" % i, b"v" * 100, 1_700_000_000_000 + i, []) for i in range(ROWS)]
    data = kcodec.encode(rows, compression=request.param, max_batch_bytes=16 << 10)
    directory = tmp_path_factory.mktemp("bench") / f"bench-{request.param}-0"
    write_log(directory, data, segment_bytes=256 << 10)
    return PartitionLog(directory)


def test_bench_log_decode(benchmark, bench_log):
    table = benchmark(bench_log.decode)
    assert table.num_rows == ROWS


def test_bench_log_iter_decode(benchmark, bench_log):
    def run():
        return sum(b.num_rows for b in bench_log.iter_decode(max_rows=4096, max_bytes=1 << 20))
    assert benchmark(run) == ROWS


def test_bench_log_seek(benchmark, bench_log):
    def run():
        return bench_log.decode(start_offset=ROWS // 2, end_offset=ROWS // 2 + 100)
    assert benchmark(run).column("offset")[0].as_py() == ROWS // 2


def test_bench_log_offset_for_timestamp(benchmark, bench_log):
    assert benchmark(bench_log.offset_for_timestamp, 1_700_000_000_000 + ROWS // 3) == ROWS // 3


def test_bench_log_verify(benchmark, bench_log):
    assert benchmark(bench_log.verify)


def test_bench_log_iter_decode_matches_decode(bench_log):
    batches = list(bench_log.iter_decode(max_rows=1000, max_bytes=1 << 18))
    assert pa.Table.from_batches(batches).equals(bench_log.decode())
