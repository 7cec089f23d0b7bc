"""The object API: batches and records read from any buffer, and encoders.

All format rules live in the compiled core (kcodec._core); this module only
chooses options, filters transactions and normalises what callers pass in.
"""
import time
from collections import namedtuple

from .compression import DEFAULT_MAX_DECOMPRESSED_BYTES, codec_id
from ._core.build import (
    encode_control as _encode_control, encode_legacy, encode_v2, rows_from_arrow, rows_from_records,
)
from ._core.records import Batch, BatchReader, ControlRecord, Record, RecordIterator

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
INT64_MAX = (1 << 63) - 1
_TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}
_CONTROL_KINDS = {"ABORT": 0, "COMMIT": 1}


def read_batches(data, *, verify_crc=True, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                 partial="stop", max_entry_bytes=None):
    """Iterate the entries of a record set (a fetch payload, a produce payload,
    a slice of a .log file) as Batch objects, without copying the input."""
    return BatchReader(data, verify_crc=verify_crc, max_decompressed_bytes=max_decompressed_bytes,
                       partial=partial, max_entry_bytes=max_entry_bytes)


def read_records(data, *, verify_crc=True, include_control=False, isolation="read_uncommitted",
                 aborted=None, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                 partial="stop", start_offset=None, end_offset=None):
    """Iterate the records of a record set, as a consumer sees them.

    isolation="read_committed" drops batches of aborted transactions. `aborted`
    is the (producer_id, first_offset) list a Fetch response carries; without
    it, the aborted transactions are found by scanning the data itself.
    start_offset (inclusive) and end_offset (exclusive) bound the offsets
    returned; batches wholly outside them are not decompressed."""
    batches = consumer_batches(data, isolation, aborted, start_offset, end_offset,
                               verify_crc=verify_crc, partial=partial,
                               max_decompressed_bytes=max_decompressed_bytes)
    return RecordIterator(batches, include_control, start_offset, end_offset)


def consumer_batches(data, isolation, aborted, start_offset=None, end_offset=None, **options):
    """The batches a consumer with this isolation level reads, less those
    wholly outside [start_offset, end_offset): headers only, nothing decompressed."""
    batches = read_batches(data, **options)
    if _check_isolation(isolation) == "read_committed":
        if aborted is None:
            aborted = aborted_transactions(read_batches(data, **options))
        batches = committed(batches, aborted)
    if start_offset is not None or end_offset is not None:
        batches = _overlapping(batches, start_offset, end_offset)
    return batches


def _overlapping(batches, start, end):
    return (batch for batch in batches if overlaps(batch, start, end))


def overlaps(batch, start, end):
    """Whether a batch may hold offsets in [start, end) (None: unbounded)."""
    last = batch.last_offset
    # A compressed v0/v1 wrapper's first offset is known only inside it.
    first = None if batch.magic < 2 and batch.compression != "none" else batch.base_offset
    if first is None and last == 0:
        return True                        # produce-style wrapper: inner offsets only
    return (start is None or last >= start) and (end is None or first is None or first < end)


def _check_isolation(isolation):
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, not {isolation!r}")
    return isolation


def marker_record(batch):
    """The record of a control batch that holds its marker: the first (None
    when the batch has none)."""
    for record in batch:
        return record
    return None


def marker_type(batch):
    """"COMMIT", "ABORT" or another control type of a control batch."""
    record = marker_record(batch)
    return None if record is None else record.control.type


def committed(batches, aborted):
    """Drop the batches of aborted transactions, as a read_committed consumer
    does: an aborted (producer_id, first_offset) entry opens once a batch
    reaches first_offset; that producer's ABORT marker closes it. `aborted`
    lists what a Fetch from the first of `batches` carries: transactions whose
    ABORT marker is at or after it (an earlier one would stay open)."""
    pending = sorted(aborted, key=lambda entry: entry[1])
    next_pending = 0
    open_aborts = set()
    for batch in batches:
        while next_pending < len(pending) and pending[next_pending][1] <= batch.last_offset:
            open_aborts.add(pending[next_pending][0])
            next_pending += 1
        if batch.is_control:
            if batch.producer_id in open_aborts and marker_type(batch) == "ABORT":
                open_aborts.discard(batch.producer_id)
        elif batch.is_transactional and batch.producer_id in open_aborts:
            continue
        yield batch


# A .txnindex entry: the aborted transaction's first offset, its ABORT
# marker's offset, and the last stable offset when the marker was appended.
AbortedTxn = namedtuple("AbortedTxn", "producer_id first_offset last_offset last_stable_offset")


class TransactionTracker:
    """Which transactions `batches` abort, learnt the way a broker's producer
    state learns it while appending them: a transaction opens at its
    producer's first transactional batch and ends at its COMMIT or ABORT marker."""

    def __init__(self):
        self.open = {}          # producer id -> first offset of its ongoing transaction

    def append(self, batch):
        """Feed one batch; returns the AbortedTxn it completes, if any."""
        if not batch.is_transactional:
            return None
        pid = batch.producer_id
        if not batch.is_control:
            self.open.setdefault(pid, batch.base_offset)
            return None
        kind = marker_type(batch)
        if kind not in ("COMMIT", "ABORT"):
            return None
        marker = batch.last_offset
        first = self.open.pop(pid, None)
        # A marker that ends no transaction with data changes nothing a reader
        # sees, and the broker indexes none (ProducerAppendInfo).
        if kind != "ABORT" or first is None:
            return None
        undecided = min(self.open.values(), default=marker + 1)
        return AbortedTxn(pid, first, marker, undecided)


def aborted_in(batches):
    """Every AbortedTxn of `batches`, in log order."""
    tracker = TransactionTracker()
    return [txn for txn in map(tracker.append, batches) if txn is not None]


def aborted_transactions(batches):
    """(producer_id, first_offset) of every aborted transaction in `batches`,
    found from the ABORT markers (what a broker's .txnindex lists)."""
    return [(txn.producer_id, txn.first_offset) for txn in aborted_in(batches)]


# ------------------------------------------------------------------ encoding

def _table_rows(table, default_timestamp):
    """Rows straight from a pyarrow.Table's buffers, with decode()'s column
    names (key, value, timestamp, headers; only value is required)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(col.num_chunks > 1 for col in table.columns):
        table = table.combine_chunks()
    column = {name: col.chunk(0) if col.num_chunks else None
              for name, col in zip(table.column_names, table.columns)}
    n = table.num_rows
    ts = column.get("timestamp")
    if ts is None:
        timestamps = np.full(n, default_timestamp, np.int64)
    else:
        if pa.types.is_timestamp(ts.type):
            if ts.type.unit != "ms":
                ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz))
            ts = ts.view(pa.int64())
        elif ts.type != pa.int64():
            ts = ts.cast(pa.int64())
        if ts.null_count:
            ts = pc.fill_null(ts, default_timestamp)
        timestamps = np.ascontiguousarray(ts.to_numpy(zero_copy_only=False), np.int64)
    if "value" not in column:
        raise ValueError("a table to encode needs a 'value' column")
    return rows_from_arrow(column.get("key"), column["value"], timestamps,
                           column.get("headers"), n)


def encode(records, *, magic=2, compression="none", compression_level=None, base_offset=0,
           timestamp_type="CreateTime", producer_id=-1, producer_epoch=-1, base_sequence=-1,
           transactional=False, partition_leader_epoch=-1, max_batch_bytes=1 << 20):
    """Encode records into a record set of the given magic, as Kafka writes it."""
    if magic not in (0, 1, 2):
        raise ValueError(f"magic must be 0, 1 or 2, not {magic!r}")
    codec = codec_id(compression)
    if timestamp_type not in _TIMESTAMP_TYPES:
        raise ValueError(f"timestamp_type must be one of {tuple(_TIMESTAMP_TYPES)}")
    if max_batch_bytes < 1:
        raise ValueError("max_batch_bytes must be positive")
    now = int(time.time() * 1000)
    if hasattr(records, "column_names") and hasattr(records, "num_rows"):
        rows = _table_rows(records, now)
    else:
        rows = rows_from_records(records, now, Record)
    n = len(rows)
    if not n:
        return b""
    if base_offset < 0 or base_offset + n - 1 > INT64_MAX:
        raise ValueError(f"offsets {base_offset}..{base_offset + n - 1} do not fit "
                         "Kafka's int64 offsets")
    ts_type = _TIMESTAMP_TYPES[timestamp_type]
    if magic == 2:
        attributes = (0x08 if ts_type else 0) | (0x10 if transactional else 0)
        return encode_v2(rows, base_offset=base_offset, codec=codec, level=compression_level,
                         attributes=attributes, producer_id=producer_id,
                         producer_epoch=producer_epoch, base_sequence=base_sequence,
                         partition_leader_epoch=partition_leader_epoch,
                         max_batch_bytes=max_batch_bytes)
    if transactional or producer_id != -1:
        raise ValueError(f"magic {magic} messages have no producer id or transactions")
    return encode_legacy(rows, magic=magic, base_offset=base_offset, codec=codec,
                         level=compression_level, timestamp_type=ts_type,
                         max_batch_bytes=max_batch_bytes)


def encode_control(kind, *, producer_id, producer_epoch, offset, coordinator_epoch=0,
                   timestamp=None, partition_leader_epoch=-1):
    """An end-transaction marker batch: kind "COMMIT" or "ABORT"."""
    if kind not in _CONTROL_KINDS:
        raise ValueError(f"kind must be 'COMMIT' or 'ABORT', not {kind!r}")
    return _encode_control(_CONTROL_KINDS[kind], producer_id=producer_id,
                           producer_epoch=producer_epoch, offset=offset,
                           coordinator_epoch=coordinator_epoch,
                           timestamp=int(time.time() * 1000) if timestamp is None else timestamp,
                           partition_leader_epoch=partition_leader_epoch)


__all__ = ["Batch", "Record", "ControlRecord", "read_batches", "read_records", "encode",
           "encode_control", "committed", "aborted_transactions"]
