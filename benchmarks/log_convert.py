"""Write a multi-GiB partition log with write_log, convert it to Parquet with
`kcodec convert` (iter_decode + pyarrow's ParquetWriter) in a child process,
and report rows/s, MB/s of log read, and the child's peak RSS.

    python benchmarks/log_convert.py --gib 2 --dir /tmp/kcodec-log-bench [--keep]

The writer runs in this process; the conversion runs in a fresh child so its
peak RSS (VmHWM) is the conversion's own.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

ROWS_PER_TABLE = 200_000
VALUE_BYTES = 100


def tables(total_bytes, codec_cycle=("none", "lz4", "zstd", "snappy", "none")):
    """Tables of ~100-byte values with keys and a header, about total_bytes of log."""
    rng = np.random.default_rng(0)
    written, i = 0, 0
    while written < total_bytes:
        n = ROWS_PER_TABLE
        values = rng.integers(0, 26, size=(n, VALUE_BYTES), dtype=np.uint8) + 97
        value_col = pa.array([bytes(v) for v in values], pa.binary())
        keys = pa.array([b"key-%d" % (i * n + j) for j in range(n)], pa.binary())
        ts = pa.array(1_700_000_000_000 + i * n + np.arange(n), pa.int64())
        table = pa.table({"key": keys, "value": value_col,
                          "timestamp": ts.cast(pa.timestamp("ms", tz="UTC"))})
        yield codec_cycle[i % len(codec_cycle)], table
        written += n * (VALUE_BYTES + 30)
        i += 1


def write(directory, gib, segment_bytes):
    import kcodec
    from kcodec.log import write_log
    total = int(gib * (1 << 30))

    def record_sets():
        size = 0
        for codec, table in tables(total * 3):      # compressed tables take less room
            data = kcodec.encode(table, compression=codec, max_batch_bytes=1 << 16)
            yield data
            size += len(data)
            if size >= total:
                return

    started = time.perf_counter()
    write_log(directory, record_sets(), segment_bytes=segment_bytes)
    size = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
               if n.endswith(".log"))
    print(f"wrote {size / (1 << 30):.2f} GiB in {time.perf_counter() - started:.1f} s "
          f"({len([n for n in os.listdir(directory) if n.endswith('.log')])} segments)")
    return size


CHILD = r"""
import sys, time
from kcodec.cli import main
started = time.perf_counter()
status = main(["convert", sys.argv[1], "--to", sys.argv[2], "--no-progress"])
elapsed = time.perf_counter() - started
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(f"CHILD elapsed={elapsed:.3f} vmhwm_kib={hwm}")
sys.exit(status)
"""


def convert(directory, target):
    out = subprocess.run([sys.executable, "-c", CHILD, directory, target], check=True,
                         capture_output=True, text=True).stdout
    print(out.strip())
    fields = dict(kv.split("=") for kv in out.split("CHILD", 1)[1].split())
    return float(fields["elapsed"]), int(fields["vmhwm_kib"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0, help="log size to write (GiB)")
    parser.add_argument("--dir", default="/tmp/kcodec-log-bench", help="work directory")
    parser.add_argument("--segment-bytes", type=int, default=1 << 30)
    parser.add_argument("--keep", action="store_true", help="keep the log and the Parquet file")
    args = parser.parse_args(argv)
    directory = os.path.join(args.dir, "bench-0")
    target = os.path.join(args.dir, "bench.parquet")
    shutil.rmtree(args.dir, ignore_errors=True)
    try:
        size = write(directory, args.gib, args.segment_bytes)
        elapsed, hwm_kib = convert(directory, target)
        import pyarrow.parquet as pq
        rows = pq.ParquetFile(target).metadata.num_rows
        print(f"converted {rows:,} rows, {size / 1e6:,.0f} MB of log in {elapsed:.1f} s: "
              f"{rows / elapsed:,.0f} rows/s, {size / 1e6 / elapsed:,.0f} MB/s; "
              f"peak RSS of the conversion {hwm_kib / 1024:,.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
