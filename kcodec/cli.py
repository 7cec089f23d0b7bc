"""kcodec's command line: inspect record sets without a broker or a JVM."""
import argparse
import json
import mmap
import sys

from . import bench, read_batches, read_records
from .errors import KafkaFormatError


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


def cmd_bench(args, out):
    return bench.run_from_args(args, out=out, err=sys.stderr)


def build_parser():
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
    text = ("time decode/encode against aiokafka, kafka-python and the floors "
            "(CRC-32C + memcpy, codec decompress) on a workload matrix; "
            "print a Markdown table, optionally write JSON and a PNG chart")
    p = sub.add_parser("bench", help=text, description=text)
    bench.add_arguments(p)
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args, sys.stdout)
    except KafkaFormatError as exc:
        print(f"kcodec: {getattr(args, 'file', args.command)}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
