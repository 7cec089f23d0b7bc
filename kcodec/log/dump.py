"""`kcodec dump`: the lines of Kafka's kafka-dump-log (DumpLogSegments) for
.log, .index, .timeindex, .txnindex and .snapshot files, or one JSON object
per batch, record or entry."""
import json
import os
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptIndexError, KafkaFormatError
from ..records import read_batches
from .coordinator import offsets_key_value, transaction_key_value
from .java_text import JAVA_REPLACE, java_absolute_path, java_path
from .indexes import (
    OFFSET_ENTRY, TIME_ENTRY, _entries, _used_entries, base_offset_of,
    map_file, read_producer_snapshot, read_txn_index,
)

RECORD_INDENT = "|"
INT32_MAX = (1 << 31) - 1


@dataclass
class DumpOptions:
    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = INT32_MAX
    max_message_size: int = 5 * 1024 * 1024
    skip_record_metadata: bool = False
    decoder: str = "string"          # "string" | "offsets" | "transactions"
    json: bool = False

    @property
    def deep(self):
        return self.deep_iteration or self.print_data_log or self.decoder != "string"

    @property
    def print_data(self):
        return self.print_data_log or self.decoder != "string"


def _string(blob):
    return None if blob is None else blob.decode("utf-8", JAVA_REPLACE)


def _key_value(record, decoder):
    if decoder == "offsets":
        return offsets_key_value(record)
    if decoder == "transactions":
        return transaction_key_value(record)
    return _string(record.key), _string(record.value)


def _optional_long(value):
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _size(view):
    return -1 if view is None else len(view)


def _sanity_check(path, dtype, base):
    """The broker's index sanity check, which the tool runs on every entry
    the file's length holds: a live segment's preallocated index too, whose
    zero tail fails it for a time index (the broker rebuilds such an index
    when it opens it after a crash). Messages in the broker's words."""
    where = java_absolute_path(path)
    size = os.path.getsize(path)
    time_index = dtype is TIME_ENTRY
    if size % dtype.itemsize:
        kind = "Time index" if time_index else "Index"
        raise CorruptIndexError(f"{kind} file {where} is corrupt, found {size} bytes which is "
                                f"neither positive nor a multiple of {dtype.itemsize}.")
    entries = _entries(path, dtype)
    if not len(entries):
        return
    last_offset = base + int(entries["relative_offset"][-1])
    if time_index:
        first, last = int(entries["timestamp"][0]), int(entries["timestamp"][-1])
        if last < first:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({where}) has non-zero size but "
                f"the last timestamp is {last} which is less than the first timestamp {first}")
        if last_offset < base:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({where}) has non-zero size but "
                f"the last offset is {last_offset} which is less than the first offset {base}")
    elif last_offset < base:
        raise CorruptIndexError(
            f"Corrupt index found, index file ({where}) has non-zero size but the last offset "
            f"is {last_offset} which is less than the base offset {base}")


class Dumper:
    """Dumps files to `out`; problems collected for `err` as the tool prints
    them after all files."""

    def __init__(self, options, out, err):
        self.options, self.out, self.err = options, out, err
        self.index_mismatches = {}
        self.time_errors = {"mismatch": {}, "order": {}, "missing": {}}
        self.non_consecutive = {}
        self.status = 0

    def emit(self, text=None, **obj):
        self.out.write((json.dumps(obj) if self.options.json else text) + "\n")

    def dump(self, paths):
        for path in paths:
            if not self.options.json:
                self.emit(f"Dumping {java_path(path)}")
            name = os.path.basename(path)
            suffix = name[name.rfind("."):] if "." in name else ""
            handler = {".log": self.dump_log, ".index": self.dump_index,
                       ".timeindex": self.dump_time_index, ".txnindex": self.dump_txn_index,
                       ".snapshot": self.dump_snapshot}.get(suffix)
            if handler is None:
                self.err.write(f"Ignoring unknown file {java_path(path)}\n")
                continue
            try:
                handler(path)
            except BrokenPipeError:
                raise
            except (KafkaFormatError, ValueError, OSError) as exc:
                self.err.write(f"kcodec: {path}: {exc}\n")
                self.status = 1
        self.report()
        return self.status

    # ---------------------------------------------------------------- .log
    def dump_log(self, path):
        opts = self.options
        base = base_offset_of(path)
        if not opts.json:
            self.emit(f"Log starting offset: {base}")
        data = map_file(path)
        view = memoryview(data)[:opts.max_bytes]
        valid_bytes = 0
        last_offset = -1        # the tool checks a segment's first record against -1 too
        for batch in read_batches(view, verify_crc=False, source=path):
            self.batch_line(path, batch, valid_bytes)
            if opts.deep:
                for record in batch:
                    if record.offset != last_offset + 1:
                        self.non_consecutive.setdefault(java_absolute_path(path), {})[
                            last_offset] = record.offset
                    last_offset = record.offset
                    self.record_line(path, batch, record)
            valid_bytes += batch.size
        trailing = len(data) - valid_bytes
        if trailing > 0 and opts.max_bytes == INT32_MAX and not opts.json:
            self.emit(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")

    def batch_line(self, path, batch, position):
        if self.options.json:
            self.emit(type="batch", file=path, position=position, magic=batch.magic,
                      base_offset=batch.base_offset, last_offset=batch.last_offset,
                      count=batch.count, base_sequence=batch.base_sequence,
                      last_sequence=batch.last_sequence, producer_id=batch.producer_id,
                      producer_epoch=batch.producer_epoch,
                      partition_leader_epoch=batch.partition_leader_epoch,
                      is_transactional=batch.is_transactional, is_control=batch.is_control,
                      delete_horizon_ms=batch.delete_horizon_ms,
                      timestamp_type=batch.timestamp_type, max_timestamp=batch.max_timestamp,
                      size=batch.size, compression=batch.compression, crc=batch.crc,
                      crc_valid=batch.crc_valid)
            return
        if batch.magic >= 2:
            head = (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
                    f"count: {batch.count} baseSequence: {batch.base_sequence} "
                    f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
                    f"producerEpoch: {batch.producer_epoch} "
                    f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                    f"isTransactional: {str(batch.is_transactional).lower()} "
                    f"isControl: {str(batch.is_control).lower()} "
                    f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}")
        else:
            head = f"offset: {batch.last_offset}"
        self.emit(f"{head} position: {position} {batch.timestamp_type}: {batch.max_timestamp} "
                  f"size: {batch.size} magic: {batch.magic} compresscodec: {batch.compression} "
                  f"crc: {batch.crc} isvalid: {str(batch.crc_valid).lower()}")

    def record_line(self, path, batch, record):
        opts = self.options
        control = record.control
        key = value = None
        if opts.print_data and not batch.is_control:
            key, value = _key_value(record, opts.decoder)
        if opts.json:
            obj = dict(type="record", file=path, offset=record.offset,
                       timestamp=record.timestamp, timestamp_type=batch.timestamp_type,
                       key_size=_size(record.key_view), value_size=_size(record.value_view),
                       sequence=record.sequence, header_keys=[k for k, _ in record.headers])
            if control is not None:
                obj["control"] = {"type": control.type,
                                  "coordinator_epoch": control.coordinator_epoch}
            if opts.print_data and not batch.is_control:
                obj.update(key=key, payload=value)
            self.emit(**obj)
            return
        line, prefix = "", f"{RECORD_INDENT} "
        if not opts.skip_record_metadata:
            line = (f"{prefix}offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
                    f"keySize: {_size(record.key_view)} valueSize: {_size(record.value_view)}")
            prefix = " "
            if batch.magic >= 2:
                keys = ",".join(k for k, _ in record.headers)
                line += f" sequence: {record.sequence} headerKeys: [{keys}]"
            else:
                # For a compressed wrapper the tool prints the inner message's
                # CRC, which Record does not expose: the wrapper's is printed here.
                line += f" isValid: {str(batch.crc_valid).lower()} crc: {batch.crc}"
            if control is not None:
                if control.type in ("COMMIT", "ABORT"):
                    line += (f" endTxnMarker: {control.type} "
                             f"coordinatorEpoch: {control.coordinator_epoch}")
                else:
                    line += f" controlType: {control.type}({control.type_id})"
        if opts.print_data and not batch.is_control:
            if key is not None:
                line += f"{prefix}key: {key}"
                prefix = " "
            if value is not None:
                line += f"{prefix}payload: {value}"
        self.emit(line)

    # ------------------------------------------------------------- indexes
    def _log_beside(self, path):
        log_path = path[:path.rfind(".")] + ".log"
        return map_file(log_path) if os.path.exists(log_path) else None

    def _first_batch_at(self, log, position, limit):
        try:
            return next(iter(read_batches(memoryview(log)[position:position + limit],
                                          verify_crc=False)), None)
        except KafkaFormatError:
            return None

    def dump_index(self, path):
        opts = self.options
        base = base_offset_of(path)
        entries = _used_entries(path, OFFSET_ENTRY, zero_first_entry_is_padding=False)
        if len(entries) == 0:          # the tool says so before any sanity check
            self.emit(f"{java_path(path)} is empty.", type="empty", file=path)
            return
        if opts.index_sanity_check:
            _sanity_check(path, OFFSET_ENTRY, base)
            self.emit(f"{java_path(path)} passed sanity check.", type="sanity", file=path,
                      passed=True)
            return
        log = self._log_beside(path)
        for relative, position in entries.tolist():
            offset = base + relative
            if log is not None:
                batch = self._first_batch_at(log, position, opts.max_message_size)
                found = -1 if batch is None else batch.last_offset
                if found != offset:
                    self.index_mismatches.setdefault(java_absolute_path(path), {})[offset] = found
            if not opts.verify_index_only:
                self.emit(f"offset: {offset} position: {position}", type="index", file=path,
                          offset=offset, position=position)

    def dump_time_index(self, path):
        opts = self.options
        base = base_offset_of(path)
        if opts.index_sanity_check:
            _sanity_check(path, TIME_ENTRY, base)
            self.emit(f"{java_path(path)} passed sanity check.", type="sanity", file=path,
                      passed=True)
            return
        entries = _used_entries(path, TIME_ENTRY, zero_first_entry_is_padding=False)
        log = self._log_beside(path)
        index_path = path[:path.rfind(".")] + ".index"
        offsets = positions = np.zeros(0, np.int64)
        if os.path.exists(index_path):
            index_entries = _used_entries(index_path, OFFSET_ENTRY)
            offsets = index_entries["relative_offset"].astype(np.int64) + base
            positions = index_entries["position"].astype(np.int64)
        previous = -1
        where = java_absolute_path(path)
        for timestamp, relative in entries.tolist():
            offset = base + relative
            if log is not None:
                i = int(np.searchsorted(offsets, offset, side="right")) - 1
                start = int(positions[i]) if i >= 0 else 0
                found = None
                for batch in read_batches(memoryview(log)[start:], verify_crc=False):
                    if batch.last_offset >= offset:
                        found = batch
                        break
                if found is None or found.last_offset != offset:
                    last = -1 if found is None else found.last_offset
                    self.time_errors["missing"].setdefault(where, []).append((offset, last))
                else:
                    max_ts = max((r.timestamp for r in found), default=-1)
                    if max_ts != timestamp:
                        self.time_errors["mismatch"].setdefault(where, []).append(
                            (timestamp, max_ts))
                    if previous >= timestamp:
                        self.time_errors["order"].setdefault(where, []).append(
                            (timestamp, previous))
            if not opts.verify_index_only:
                self.emit(f"timestamp: {timestamp} offset: {offset}", type="timeindex",
                          file=path, timestamp=timestamp, offset=offset)
            previous = timestamp

    def dump_txn_index(self, path):
        for txn in read_txn_index(path):
            self.emit(f"version: 0 producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                      f"lastOffset: {txn.last_offset} lastStableOffset: "
                      f"{txn.last_stable_offset}", type="txnindex", file=path, version=0,
                      **txn._asdict())

    def dump_snapshot(self, path):
        for entry in read_producer_snapshot(path):
            current = entry.current_txn_first_offset
            line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                    f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: "
                    f"{_optional_long(current if current >= 0 else None)} "
                    f"lastTimestamp: {entry.timestamp} ")
            if entry.last_offset >= 0:
                first_sequence = (entry.last_sequence - entry.offset_delta) % (INT32_MAX + 1) \
                    if entry.last_sequence >= 0 else -1
                line += (f"firstSequence: {first_sequence} lastSequence: {entry.last_sequence} "
                         f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} "
                         f"timestamp: {entry.timestamp}")
            self.emit(line, type="snapshot", file=path, **entry._asdict())

    # ------------------------------------------------------------ summary
    def report(self):
        """The tool's summary on stderr: index mismatches by index offset,
        highest first, and non-consecutive pairs by the earlier offset, each
        offset once (the tool keeps them in sorted maps); the time index
        lists in the order found."""
        write = self.err.write
        for name, found in self.index_mismatches.items():
            write(f"Mismatches in :{name}\n")
            for index_offset in sorted(found, reverse=True):
                write(f"  Index offset: {index_offset}, log offset: {found[index_offset]}\n")
        for name, pairs in self.time_errors["mismatch"].items():
            write(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in pairs:
                write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, pairs in self.time_errors["order"].items():
            write(f"Found out of order timestamp in :{name}\n")
            for index_ts, previous in pairs:
                write(f"  Index timestamp: {index_ts}, Previously indexed timestamp: "
                      f"{previous}\n")
        for name, pairs in self.time_errors["missing"].items():
            write(f"The following indexed offsets are not found in :{name}\n")
            for indexed, found in pairs:
                write(f"Indexed offset: {indexed}, found log offset: {found}\n")
        for name, following in self.non_consecutive.items():
            write(f"Non-consecutive offsets in {name}\n")
            for offset in sorted(following):
                write(f"  {offset} is followed by {following[offset]}\n")


def dump(paths, options=None, out=None, err=None):
    """Dump files as kafka-dump-log does; returns 0, or 1 if a file could not be read."""
    import sys
    return Dumper(options or DumpOptions(), out or sys.stdout, err or sys.stderr).dump(paths)
