"""kcodec's command line: inspect record sets without a broker or a JVM."""
import argparse
import json
import mmap
import sys

import os
import time

from . import read_batches, read_records
from ._extras import MissingExtraError, install_hint, require
from .errors import KafkaFormatError
from .protocol.frames import DEFAULT_MAX_FRAME_BYTES


def _text_or_hex(blob):
    if blob is None:
        return None
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": blob.hex()}
    return text if text.isprintable() else {"hex": blob.hex()}


def _open(path):
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def cmd_batches(args, out):
    data = _open(args.file)
    for batch in read_batches(data, verify_crc=not args.no_verify_crc, partial=args.partial):
        out.write(json.dumps({
            "position": batch.position, "size": batch.size, "magic": batch.magic,
            "base_offset": batch.base_offset, "last_offset": batch.last_offset,
            "count": batch.count, "compression": batch.compression,
            "timestamp_type": batch.timestamp_type, "first_timestamp": batch.first_timestamp,
            "max_timestamp": batch.max_timestamp, "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch, "base_sequence": batch.base_sequence,
            "partition_leader_epoch": batch.partition_leader_epoch,
            "is_transactional": batch.is_transactional, "is_control": batch.is_control,
            "crc": batch.crc, "crc_valid": batch.crc_valid,
        }) + "\n")


def cmd_records(args, out):
    data = _open(args.file)
    for record in read_records(data, verify_crc=not args.no_verify_crc, partial=args.partial,
                               include_control=args.include_control, isolation=args.isolation):
        row = {
            "offset": record.offset, "timestamp": record.timestamp,
            "timestamp_type": record.timestamp_type,
            "key": _text_or_hex(record.key), "value": _text_or_hex(record.value),
            "headers": [[k, _text_or_hex(v)] for k, v in record.headers],
        }
        if record.control is not None:
            row["control"] = {"type": record.control.type,
                              "coordinator_epoch": record.control.coordinator_epoch}
        out.write(json.dumps(row) + "\n")


def cmd_dump(args, out):
    from .log.dump import DumpOptions, dump
    decoder = "offsets" if args.offsets_decoder else \
        "transactions" if args.transaction_log_decoder else "string"
    options = DumpOptions(
        deep_iteration=args.deep_iteration, print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        max_bytes=args.max_bytes, max_message_size=args.max_message_size,
        skip_record_metadata=args.skip_record_metadata, decoder=decoder, json=args.json)
    files = [f for f in args.files.split(",") if f]
    return dump(files, options, out, sys.stderr)


def cmd_verify(args, out):
    from .log import open_logs
    status = 0
    for log in open_logs(args.dirs):
        report = log.verify()
        out.write(f"{log.directory}: {report}\n")
        status = status or (0 if report else 1)
    return status


def cmd_convert(args, out):
    import pyarrow.parquet as pq

    from .log import open_logs
    logs = open_logs(args.dirs)
    interactive = sys.stderr.isatty() and not args.no_progress
    options = dict(start_offset=args.start_offset, end_offset=args.end_offset,
                   start_timestamp=args.start_timestamp, end_timestamp=args.end_timestamp,
                   isolation=args.isolation, max_rows=args.max_rows, max_bytes=args.max_bytes)
    started = time.perf_counter()
    rows = 0
    progress = None
    if interactive:
        total = sum(log.end_offset - max(log.start_offset, args.start_offset or 0)
                    for log in logs)
        progress = _progress_bar(max(total, 0), "convert")
    writer = None
    tmp = args.to + ".tmp"
    try:
        for log in logs:
            position = max(log.start_offset, args.start_offset or 0)
            for batch in log.iter_decode(**options):
                if writer is None:
                    writer = pq.ParquetWriter(tmp, batch.schema, compression=args.compression)
                writer.write_batch(batch)
                rows += batch.num_rows
                if progress is not None and batch.num_rows:
                    last = batch.column("offset")[batch.num_rows - 1].as_py() + 1
                    progress.update(max(0, last - position))
                    position = max(position, last)
        if writer is None:
            from .arrow import schema
            writer = pq.ParquetWriter(tmp, schema(topic=True, partition=True),
                                      compression=args.compression)
        writer.close()
        writer = None
        os.replace(tmp, args.to)
    finally:
        if progress is not None:
            progress.close()
        if writer is not None:
            writer.close()
        if os.path.exists(tmp):
            os.remove(tmp)
    elapsed = time.perf_counter() - started
    size = sum(seg.size for log in logs for seg in log.segments)
    out.write(f"{rows} rows from {len(logs)} partition(s), {size} log bytes, "
              f"{elapsed:.2f} s, {rows / max(elapsed, 1e-9):,.0f} rows/s -> {args.to}\n")
    return 0


def _progress_bar(total, command):
    """A tqdm progress bar on stderr, or None without tqdm (the progress
    extra), after a note saying how to get one."""
    try:
        tqdm = require("tqdm", "a progress bar").tqdm
    except MissingExtraError:
        print(f"kcodec: {command}: no progress bar without tqdm: {install_hint('tqdm')} "
              "(--no-progress: no bar and no note)", file=sys.stderr)
        return None
    return tqdm(total=total, unit="offsets", unit_scale=True, file=sys.stderr)


def _spark_read_options(args):
    """kafka-log's options from spark-convert's flags (--option NAME=VALUE for any other)."""
    options = {"includeHeaders": str(not args.no_headers).lower(),
               "kafka.isolation.level": args.isolation,
               "failOnDataLoss": str(not args.no_fail_on_data_loss).lower(),
               "verifyCrc": str(not args.no_verify_crc).lower(),
               "onCorruptData": args.on_corrupt_data}
    for flag, name in (("starting_offsets", "startingOffsets"), ("ending_offsets", "endingOffsets"),
                       ("starting_timestamp", "startingTimestamp"),
                       ("ending_timestamp", "endingTimestamp"),
                       ("min_partitions", "minPartitions"),
                       ("max_records_per_partition", "maxRecordsPerPartition"),
                       ("max_bytes_per_partition", "maxBytesPerPartition")):
        if getattr(args, flag) is not None:
            options[name] = str(getattr(args, flag))
    for flag, name in (("s3_endpoint", "s3.endpoint"), ("s3_region", "s3.region"),
                       ("s3_profile", "s3.profile")):
        if getattr(args, flag) is not None:
            options[name] = getattr(args, flag)
    for item in args.option:
        name, _, value = item.partition("=")
        options[name] = value
    return options


def _require_spark():
    """pyspark, and pandas (PySpark's mapInArrow imports it): the spark extra."""
    for module in ("pyspark", "pandas"):
        require(module, "this command")


def cmd_spark_convert(args, out):
    _require_spark()
    from .errors import ObjectStoreError
    from .spark.convert import CheckpointError, convert, kcodec_error_in
    from .spark.options import parse_options
    from .spark.plan import DataLossError
    from .spark.session import local_session
    options = parse_options(_spark_read_options(args))
    if options.typed:
        print("kcodec: spark-convert: valueFormat and keyFormat are for kafka-log reads: the "
              "Parquet keeps keys and values as they are (binary)", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession
    conf = dict(item.partition("=")[::2] for item in args.conf)
    ours = SparkSession.getActiveSession() is None
    spark = local_session(args.master, verbose=args.verbose, **conf)
    try:
        result = convert(spark, args.dirs, args.out, options, compression=args.compression,
                         mode=args.mode, checkpoint=args.checkpoint)
    except (ObjectStoreError, FileNotFoundError, FileExistsError, CheckpointError,
            DataLossError) as exc:
        # the driver's own (planning, the output): what is wrong, and where
        print(f"kcodec: spark-convert: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        reported = kcodec_error_in(exc)
        if reported is None:
            raise
        print(f"kcodec: spark-convert: {reported}", file=sys.stderr)
        return 1
    finally:
        if ours:
            spark.stop()
    out.write(result.summary() + "\n")
    return 0


def cmd_demo(args, out):
    _require_spark()
    from .spark.demo import run_demo
    return run_demo(args.dir, master=args.master, out=out, verbose=args.verbose)


def cmd_capture(args, out):
    from .protocol.capture import CaptureReader

    def warn(message):
        print(f"kcodec: capture: {message}", file=sys.stderr)

    reader = CaptureReader(args.file, args.port, max_frame_bytes=args.max_frame_bytes, warn=warn)
    verify = not args.no_verify_crc
    tables, records = [], 0
    for found in reader:
        where = (f"{found.api} v{found.api_version} correlation id {found.correlation_id} "
                 f"{found.topic} {found.partition}")
        try:
            if args.out:
                tables.append(_capture_table(found, verify))
                records += tables[-1].num_rows
                continue
            for record in read_records(found.records, verify_crc=verify):
                records += 1
                out.write(json.dumps({
                    "api": found.api, "api_version": found.api_version,
                    "correlation_id": found.correlation_id, "topic": found.topic,
                    "partition": found.partition, "offset": record.offset,
                    "timestamp": record.timestamp, "key": _summary(record.key),
                    "value": _summary(record.value),
                    "value_size": None if record.value is None else len(record.value),
                    "headers": len(record.headers)}) + "\n")
        except KafkaFormatError as exc:
            warn(f"{where}: {exc}")
    if args.out:
        _write_capture_parquet(tables, args.out)
    print(f"kcodec: capture: {records} records in {reader.frames} frames"
          + (f" -> {args.out}" if args.out else ""), file=sys.stderr)
    return 0


def _summary(blob, limit=64):
    return _text_or_hex(blob if blob is None or len(blob) <= limit else blob[:limit])


CAPTURE_COLUMNS = (("api", "string"), ("api_version", "int16"), ("correlation_id", "int32"))


def _capture_table(found, verify):
    import pyarrow as pa

    from .arrow import decode
    table = decode(found.records, verify_crc=verify, topic=found.topic,
                   partition=found.partition)
    for name, kind in CAPTURE_COLUMNS:
        value = getattr(found, name)
        table = table.append_column(name, pa.array([value] * table.num_rows, kind))
    return table


def _write_capture_parquet(tables, path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .arrow import schema
    if tables:
        table = pa.concat_tables(tables)
    else:
        empty = schema(topic=True, partition=True)
        for name, kind in CAPTURE_COLUMNS:
            empty = empty.append(pa.field(name, kind))
        table = empty.empty_table()
    pq.write_table(table, path)


def cmd_bench(args, out):
    from . import bench
    return bench.run_from_args(args, out=out, err=sys.stderr)


def build_parser(bench_options=True):
    """The argument parser of every command. Without bench_options, `kcodec
    bench` is listed but its options are not added: they come with the
    benchmark harness (kcodec.bench), which only that command imports."""
    parser = argparse.ArgumentParser(prog="kcodec", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, text in (
        ("batches", cmd_batches, "one JSON line per batch (entry) of a record-set file"),
        ("records", cmd_records, "one JSON line per record of a record-set file"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("file", help="a record set: a .log segment, a fetch payload, ...")
        p.add_argument("--no-verify-crc", action="store_true", help="skip CRC checks")
        p.add_argument("--partial", choices=("stop", "error"), default="stop",
                       help="what to do with a partial trailing entry (default: stop)")
        if name == "records":
            p.add_argument("--include-control", action="store_true",
                           help="also print control records (transaction markers)")
            p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                           default="read_uncommitted")
        p.set_defaults(func=func)
    _add_log_commands(sub)
    _add_spark_commands(sub)
    text = ("decode the Kafka traffic of a pcap/pcapng capture: the records carried by "
            "Produce requests and Fetch responses on a port, one JSON line per record "
            "(or one Parquet row with --out)")
    p = sub.add_parser("capture", help=text, description=text)
    p.add_argument("file", help="a pcap or pcapng file (tcpdump -w, tshark -w)")
    p.add_argument("--port", type=int, default=9092, help="the broker's port (default 9092)")
    p.add_argument("--out", help="write a Parquet file (one row per record, with api, "
                                 "api_version, correlation_id, topic, partition)")
    p.add_argument("--no-verify-crc", action="store_true", help="skip CRC checks")
    p.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES,
                   help="largest Kafka frame accepted (default 100 MiB)")
    p.set_defaults(func=cmd_capture)
    text = ("time decode/encode against aiokafka, kafka-python and the floors "
            "(CRC-32C + memcpy, codec decompress) on a workload matrix; "
            "print a Markdown table, optionally write JSON and a PNG chart")
    p = sub.add_parser("bench", help=text, description=text)
    if bench_options:
        from . import bench
        bench.add_arguments(p)
    p.set_defaults(func=cmd_bench)
    return parser


def _add_log_commands(sub):
    text = ("print segment, index, time index, transaction index and producer snapshot files "
            "as kafka-dump-log does (or as JSON lines)")
    p = sub.add_parser("dump", help=text, description=text)
    p.add_argument("--files", required=True, help="comma-separated files to dump")
    p.add_argument("--deep-iteration", action="store_true", help="print every record")
    p.add_argument("--print-data-log", action="store_true",
                   help="print keys and values (implies --deep-iteration)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the broker's index sanity check")
    p.add_argument("--max-bytes", type=int, default=(1 << 31) - 1,
                   help="read only the batches within the first N bytes of each .log")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                   help="largest batch read when checking an index entry")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print only keys and values of records")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets keys and values")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="decode __transaction_state keys and values")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_dump)

    text = "verify partition directories: CRCs, offsets, indexes; exit 1 on any problem"
    p = sub.add_parser("verify", help=text, description=text)
    p.add_argument("dirs", nargs="+", help="partition directories or log.dirs roots")
    p.set_defaults(func=cmd_verify)

    text = "convert partition directories to one Parquet file, in bounded memory"
    p = sub.add_parser("convert", help=text, description=text)
    p.add_argument("dirs", nargs="+", help="partition directories or log.dirs roots")
    p.add_argument("--to", required=True, help="the Parquet file to write")
    p.add_argument("--start-offset", type=int, help="first offset (inclusive)")
    p.add_argument("--end-offset", type=int, help="end offset (exclusive)")
    p.add_argument("--start-timestamp", type=int,
                   help="start at the first offset whose timestamp (ms) reaches this")
    p.add_argument("--end-timestamp", type=int,
                   help="end before the first offset whose timestamp (ms) reaches this")
    p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted")
    p.add_argument("--max-rows", type=int, default=1 << 16, help="rows per Parquet row group")
    p.add_argument("--max-bytes", type=int, default=64 << 20,
                   help="decoded bytes held at once (the memory bound)")
    p.add_argument("--compression", default="zstd", help="Parquet codec (default zstd)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")
    p.set_defaults(func=cmd_convert)


def _add_spark_commands(sub):
    text = ("convert partition directories to Parquet on Spark: one task per segment (or "
            "split), each decoding with the compiled core and writing Parquet with pyarrow "
            "into OUT/topic=T/partition=P/ (needs the spark extra: pip install 'kcodec[spark]')")
    p = sub.add_parser("spark-convert", help=text, description=text)
    p.add_argument("dirs", nargs="+", metavar="DIR_OR_GLOB",
                   help="partition directories, globs of them or log.dirs roots (paths or URIs)")
    p.add_argument("--out", required=True, help="output directory (path or URI)")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark configuration setting (repeatable)")
    p.add_argument("--starting-offsets", help="earliest, an offset, or Spark's JSON per partition")
    p.add_argument("--ending-offsets", help="latest, an offset, or Spark's JSON per partition")
    p.add_argument("--starting-timestamp", type=int,
                   help="start at the first offset whose timestamp (ms) reaches this")
    p.add_argument("--ending-timestamp", type=int,
                   help="end before the first offset whose timestamp (ms) reaches this")
    p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted")
    p.add_argument("--no-headers", action="store_true", help="leave the headers column out")
    p.add_argument("--no-fail-on-data-loss", action="store_true",
                   help="read what is there when requested offsets are gone")
    p.add_argument("--no-verify-crc", action="store_true", help="skip CRC checks")
    p.add_argument("--on-corrupt-data", choices=("fail", "skip"), default="fail",
                   help="fail naming file and byte (default), or skip and count corrupt ranges")
    p.add_argument("--min-partitions", type=int, help="at least this many tasks")
    p.add_argument("--max-records-per-partition", type=int,
                   help="cut splits at about this many records")
    p.add_argument("--max-bytes-per-partition", type=int,
                   help="cut segments larger than this (default 128 MiB)")
    p.add_argument("--s3-endpoint", metavar="URL",
                   help="the S3-compatible server of s3:// paths, e.g. http://127.0.0.1:9000 "
                        "(default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the AWS profile, AWS)")
    p.add_argument("--s3-region", help="the region of s3:// paths (default: AWS_REGION, "
                                       "the AWS profile, the bucket's)")
    p.add_argument("--s3-profile", help="the AWS profile (~/.aws/config, ~/.aws/credentials) "
                                        "for s3:// paths (default: AWS_PROFILE, default)")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="any other kafka-log option (repeatable; s3.accessKey=... and "
                        "s3.secretKey=... give credentials)")
    p.add_argument("--compression", default="snappy", help="Parquet codec (default snappy)")
    p.add_argument("--mode", choices=("error", "overwrite"), default="error",
                   help="when OUT is not empty: fail (default) or replace it (with "
                        "--checkpoint: at its first run)")
    p.add_argument("--checkpoint", metavar="DIR",
                   help="incremental: convert only what is new since the last run with this "
                        "checkpoint (path or URI), adding to OUT; each run commits atomically "
                        "and a crashed one is finished by the next")
    _add_verbose(p)
    p.set_defaults(func=cmd_spark_convert)

    text = ("the main job on an embedded default: write a multi-segment demo log (several "
            "codecs, headers, committed and aborted transactions), convert it with "
            "spark-convert on local[*], print a summary and a few decoded rows")
    p = sub.add_parser("demo", help=text, description=text)
    p.add_argument("--dir", default="kcodec-demo", help="where to write the log and the output")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    _add_verbose(p)
    p.set_defaults(func=cmd_demo)


def _add_verbose(parser):
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's log and the JVM's warnings (default: errors only)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(bench_options=argv[:1] == ["bench"]).parse_args(argv)
    try:
        status = args.func(args, sys.stdout)
    except KafkaFormatError as exc:
        print(f"kcodec: {getattr(args, 'file', args.command)}: {exc}", file=sys.stderr)
        return 1
    except MissingExtraError as exc:
        print(f"kcodec: {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
