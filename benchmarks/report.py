"""Side-by-side report: kcodec vs aiokafka's compiled codec (and kafka-python's
pure-Python reader) on the same bytes, in one process, as Markdown tables.

    python benchmarks/report.py [--json out.json] [--repeats 7] [--min-time 0.1]

Uses the workloads and operations of workloads.py (the same ones the pytest
benchmarks time). Each figure is the MEDIAN of --repeats timeit-style repeats
(each of >= --min-time seconds), the competitors' repeats interleaved so that
background load hits them alike. Progress goes to stderr, the tables to stdout.
"""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as w  # noqa: E402
from kcodec import bench  # noqa: E402

DECODE_TARGET = 2.0          # the goal: kcodec decode >= 2x aiokafka per record


def environment():
    return bench.environment()     # the same description of the machine as `kcodec bench`


def check(wl):
    """The same correctness checks as the pytest benchmarks, once, untimed."""
    req = w.require
    req(w.kcodec_digest(wl.data) == wl.digest, f"{wl.name}: kcodec reads other records")
    req(w.aiokafka_digest(wl.data) == wl.digest, f"{wl.name}: aiokafka reads other records")
    req(w.kcodec_decode(wl.data) == wl.count, f"{wl.name}: kcodec decode count")
    req(w.aiokafka_decode(wl.data) == wl.count, f"{wl.name}: aiokafka decode count")
    req(w.kcodec_encode(wl.records, wl.codec, wl.max_batch_bytes) == wl.data,
        f"{wl.name}: kcodec.encode is not deterministic")
    out = w.aiokafka_encode(wl.records, w.AIO_CODEC[wl.codec], wl.batch_counts)
    req(w.aiokafka_digest(out, relative_offsets=True) == wl.digest,
        f"{wl.name}: aiokafka encodes other records")
    req(w.batch_counts(out) == wl.batch_counts, f"{wl.name}: aiokafka writes other batches")
    if w.KafkaPythonMemoryRecords is not None:
        req(w.kafkapython_digest(wl.prefix) == wl.prefix_digest,
            f"{wl.name}: kafka-python reads other records")


def measure(wl, repeats, min_time):
    data, prefix, records = wl.data, wl.prefix, wl.records
    decoders = {
        "kcodec": lambda: w.kcodec_decode(data),
        "aiokafka": lambda: w.aiokafka_decode(data),
    }
    if w.KafkaPythonMemoryRecords is not None:
        decoders["kafka-python"] = lambda: w.kafkapython_decode(prefix)
    counts = {"kcodec": wl.count, "aiokafka": wl.count, "kafka-python": wl.prefix_count}
    decode = w.compare(decoders, repeats, min_time)
    values = w.compare({
        "kcodec": lambda: w.kcodec_decode_values(data),
        "aiokafka": lambda: w.aiokafka_decode_values(data),
    }, repeats, min_time)
    iterate = w.compare({
        "kcodec": lambda: w.kcodec_iterate(data),
        "aiokafka": lambda: w.aiokafka_iterate(data),
    }, repeats, min_time)
    codec, max_batch_bytes = wl.codec, wl.max_batch_bytes
    aio_codec, batch_counts = w.AIO_CODEC[wl.codec], wl.batch_counts
    encode = w.compare({
        "kcodec": lambda: w.kcodec_encode(records, codec, max_batch_bytes),
        "aiokafka": lambda: w.aiokafka_encode(records, aio_codec, batch_counts),
    }, repeats, min_time)

    def entry(timing, n):
        return {"records": n, "median_s": timing.median, "records_per_s": n / timing.median,
                "samples_s": timing.samples, "calls_per_sample": timing.number}

    row = {
        "workload": wl.name, "codec": wl.codec, "records_per_batch": wl.per_batch,
        "batches": len(wl.batch_counts), "bytes": len(wl.data),
        "decode": {k: entry(t, counts[k]) for k, t in decode.items()},
        "decode_values": {k: entry(t, wl.count) for k, t in values.items()},
        "iterate": {k: entry(t, wl.count) for k, t in iterate.items()},
        "encode": {k: entry(t, wl.count) for k, t in encode.items()},
    }
    for op in ("decode", "decode_values", "iterate", "encode"):
        r = row[op]
        row[op + "_ratio"] = r["kcodec"]["records_per_s"] / r["aiokafka"]["records_per_s"]
    if "kafka-python" in row["decode"]:
        row["decode_ratio_vs_kafka_python"] = (row["decode"]["kcodec"]["records_per_s"]
                                               / row["decode"]["kafka-python"]["records_per_s"])
    return row


def _rate(x):
    return f"{x:,.0f}"


def markdown(rows, env, repeats, min_time):
    prefix = min(r["decode"].get("kafka-python", {"records": 0})["records"] for r in rows)
    out = [
        f"kcodec {env['kcodec']} vs aiokafka {env['aiokafka']} (compiled `_crecords`) and "
        f"kafka-python {env['kafka-python']}; Python {env['python']}, {env['cpu']} "
        f"({env['cpus']} CPUs), hardware CRC32C: {env['kcodec_hardware_crc32c']}.",
        f"Records/s = records / median time per call; median of {repeats} interleaved "
        f"repeats of >= {min_time} s each; same bytes, same process. "
        f"{rows[0]['decode']['kcodec']['records']:,} records per workload "
        f"(100-byte values, {env['key_bytes']}-byte keys, no headers).",
        "",
        "Decode (`kcodec.read_records(verify_crc=True)` vs aiokafka `MemoryRecords` + "
        "`validate_crc()`; every record's offset, timestamp, key, value, headers read):",
        "",
        "| workload | kcodec records/s | aiokafka records/s | ratio (kcodec/aiokafka) "
        "| ratio, reading only offset + value | ratio, reading no field "
        f"| kafka-python records/s (first ~{prefix:,} records) | ratio (kcodec/kafka-python) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        d = r["decode"]
        kp = d.get("kafka-python")
        miss = " (< 2x)" if r["decode_ratio"] < DECODE_TARGET else ""
        ref = (f"{_rate(kp['records_per_s'])} | {r['decode_ratio_vs_kafka_python']:.1f}x"
               if kp else "- | -")
        out.append(f"| {r['workload']} | {_rate(d['kcodec']['records_per_s'])} "
                   f"| {_rate(d['aiokafka']['records_per_s'])} | {r['decode_ratio']:.2f}x{miss} "
                   f"| {r['decode_values_ratio']:.2f}x | {r['iterate_ratio']:.2f}x "
                   f"| {ref} |")
    out += [
        "",
        "Encode (`kcodec.encode(rows, compression=..., max_batch_bytes=...)`, which finds "
        "the batch boundaries itself, vs aiokafka `DefaultRecordBatchBuilder`, one per batch "
        "at the same boundaries, `append` per record, `build()`; each library's default "
        "level: gzip 6 in kcodec (as Kafka's Java client) but 9 in aiokafka):",
        "",
        "| workload | kcodec records/s | aiokafka records/s | ratio (kcodec/aiokafka) |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        e = r["encode"]
        out.append(f"| {r['workload']} | {_rate(e['kcodec']['records_per_s'])} "
                   f"| {_rate(e['aiokafka']['records_per_s'])} | {r['encode_ratio']:.2f}x |")
    misses = [r["workload"] for r in rows if r["decode_ratio"] < DECODE_TARGET]
    out += ["", f"Decode target (>= {DECODE_TARGET:g}x aiokafka per record): "
            + (f"missed for {', '.join(misses)}." if misses else "met for every workload.")]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write the figures (with all samples) here")
    ap.add_argument("--repeats", type=int, default=7, help="repeats per figure (>= 7; median quoted)")
    ap.add_argument("--min-time", type=float, default=0.1,
                    help="seconds each repeat runs at least (default 0.1)")
    ap.add_argument("--records", type=int, default=w.N_RECORDS, help="records per workload")
    ap.add_argument("--codec", action="append", choices=w.CODECS,
                    help="only this codec (repeatable; default all)")
    ap.add_argument("--per-batch", action="append", type=int, choices=w.SHAPES,
                    help="only this batch shape (repeatable; default both)")
    args = ap.parse_args(argv)
    if args.repeats < 7:
        ap.error("--repeats must be at least 7 (the report quotes a median)")
    codecs = args.codec or w.CODECS
    shapes = args.per_batch or w.SHAPES
    env = environment()
    keys = [len(k) for k, *_ in w.make_records(args.records)]
    env["key_bytes"] = f"{min(keys)}-{max(keys)}"
    rows = []
    started = time.perf_counter()
    for shape in shapes:
        for codec in codecs:
            wl = w.get_workload(codec, shape, n=args.records)
            check(wl)
            print(f"[{time.perf_counter() - started:6.1f}s] {wl.name} ...", file=sys.stderr, flush=True)
            rows.append(measure(wl, args.repeats, args.min_time))
    table = markdown(rows, env, args.repeats, args.min_time)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "environment": env, "repeats": args.repeats, "min_time_s": args.min_time,
            "decode_target": DECODE_TARGET, "workloads": rows, "markdown": table,
        }, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
