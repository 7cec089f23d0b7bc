"""The object API: batches and records read from any buffer, and encoders.

All format rules live in the compiled core (kcodec._core); this module only
chooses options, filters transactions and normalises what callers pass in.
"""
import functools
import time
from collections import namedtuple

from .compression import DEFAULT_MAX_DECOMPRESSED_BYTES, codec_id
from .errors import integer_option
from ._core.build import (
    encode_control as _encode_control, encode_legacy, encode_v2, rows_from_records,
)
from ._core.records import Batch, BatchReader, ControlRecord, Record, RecordIterator, overlaps

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
_TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}
_CONTROL_KINDS = {"ABORT": 0, "COMMIT": 1}


def read_batches(data, *, verify_crc=True, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                 partial="stop", max_entry_bytes=None, source=None, first_byte=0):
    """Iterate the entries of a record set as :class:`Batch` objects.

    A record set is what a Fetch response or Produce request carries, or what
    a ``.log`` segment holds: entries (v2 record batches, v0/v1 messages) back
    to back. Nothing is copied to read it; a batch's records are decompressed
    and checked when the batch is iterated.

    Args:
        data: The record set: any object with the buffer protocol (bytes,
            bytearray, memoryview, mmap, a numpy uint8 array).
        verify_crc: Check each entry's CRC (CRC-32C for v2, CRC-32 for v0/v1)
            and raise :class:`~kcodec.errors.CrcMismatchError` on a mismatch.
        max_decompressed_bytes: The most bytes one batch may decompress to;
            more raises :class:`~kcodec.errors.DecompressionLimitError`.
        partial: What a partial entry at the end of ``data`` does: ``"stop"``
            ends the iteration silently, as Kafka's readers do (a fetch may
            end mid-batch); ``"error"`` raises
            :class:`~kcodec.errors.CorruptRecordError`.
        max_entry_bytes: The largest entry accepted (None: no limit below
            Kafka's 2 GiB); a larger size field raises
            :class:`~kcodec.errors.CorruptRecordError`.
        source: The file ``data`` was read from, named in every error (the
            batches' records' errors too).
        first_byte: Where ``data`` starts in ``source``: error positions are
            then bytes of that file.

    Returns:
        An iterator of :class:`Batch`; iterating a batch yields its
        :class:`Record` objects.

    Raises:
        KafkaFormatError: A subclass of it for input that breaks Kafka's
            format, naming the byte (and file) where it failed.
    """
    return BatchReader(data, verify_crc=verify_crc, max_decompressed_bytes=max_decompressed_bytes,
                       partial=partial, max_entry_bytes=max_entry_bytes, source=source,
                       first_byte=first_byte)


def read_records(data, *, verify_crc=True, include_control=False, isolation="read_uncommitted",
                 aborted=None, max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                 partial="stop", start_offset=None, end_offset=None):
    """Iterate the records of a record set, as a consumer sees them.

    Args:
        data: The record set (any buffer, see :func:`read_batches`).
        verify_crc: Check CRCs, as in :func:`read_batches`.
        include_control: Also yield control records (transaction markers),
            whose ``control`` attribute is a :class:`ControlRecord`.
        isolation: ``"read_uncommitted"`` (everything) or
            ``"read_committed"``, which drops the batches of aborted
            transactions.
        aborted: For ``read_committed``: the ``(producer_id, first_offset)``
            pairs a Fetch response carries for this record set. None: the
            aborted transactions are found from the ABORT markers in ``data``.
        max_decompressed_bytes: The most bytes one batch may decompress to.
        partial: ``"stop"`` or ``"error"``, as in :func:`read_batches`.
        start_offset: The first offset returned (inclusive); None: no bound.
        end_offset: The offset to stop before (exclusive); None: no bound.
            Batches wholly outside the bounds are not decompressed.

    Returns:
        An iterator of :class:`Record`.

    Raises:
        KafkaFormatError: For input that breaks Kafka's format.
        ValueError: For an unknown ``isolation``.
        TypeError: For an ``aborted`` that is not a list of integer pairs.
    """
    start_offset, end_offset = offset_bounds(start_offset, end_offset)
    batches = consumer_batches(data, isolation, aborted, start_offset, end_offset,
                               verify_crc=verify_crc, partial=partial,
                               max_decompressed_bytes=max_decompressed_bytes)
    return RecordIterator(batches, include_control, start_offset, end_offset)


def offset_bounds(start, end):
    """[start, end) as int64 offsets meet it, the one place bounds are fitted
    to int64: None for a bound that every offset passes, and (INT64_MAX,
    INT64_MIN + 1) for a range that no offset is in."""
    start = None if start is None else integer_option("start_offset", start)
    end = None if end is None else integer_option("end_offset", end)
    if start is not None and start <= INT64_MIN:
        start = None
    if end is not None and end > INT64_MAX:
        end = None
    if (start is not None and start > INT64_MAX) or (end is not None and end <= INT64_MIN):
        return INT64_MAX, INT64_MIN + 1
    return start, end


def consumer_batches(data, isolation, aborted, start_offset=None, end_offset=None, **options):
    """The batches a consumer with this isolation level reads, less those
    wholly outside [start_offset, end_offset): headers only, nothing decompressed."""
    batches = read_batches(data, **options)
    if check_isolation(isolation) == "read_committed":
        if aborted is None:
            aborted = aborted_transactions(read_batches(data, **options))
        else:
            aborted = fetched_aborted(aborted)
        batches = committed(batches, aborted)
    if start_offset is not None or end_offset is not None:
        batches = _overlapping(batches, start_offset, end_offset)
    return batches


def _overlapping(batches, start, end):
    return (batch for batch in batches if overlaps(batch, start, end))


def check_isolation(isolation):
    """`isolation` if it is one of ISOLATION_LEVELS ("read_uncommitted",
    "read_committed"), else ValueError naming them."""
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


def fetched_aborted(aborted):
    """A Fetch response's aborted transactions, as given: a list of
    (producer_id, first_offset) integer pairs, or TypeError."""
    expected = "aborted must be a list of (producer_id, first_offset) pairs of integers"
    try:
        entries = list(aborted)
    except TypeError:
        raise TypeError(f"{expected}, not {type(aborted).__name__}") from None
    pairs = []
    for entry in entries:
        try:
            producer_id, first_offset = entry
            pairs.append((integer_option("producer_id", producer_id),
                          integer_option("first_offset", first_offset)))
        except (TypeError, ValueError):
            raise TypeError(f"{expected}; one is {entry!r}") from None
    return pairs


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

NO_TIMESTAMP = -1
# decode(batch_columns=True)'s columns, and the encode() keyword each stands for.
_BATCH_COLUMNS = {"producerId": "producer_id", "producerEpoch": "producer_epoch",
                  "isTransactional": "transactional", "leaderEpoch": "partition_leader_epoch"}
_DEFAULTS = {"base_offset": 0, "timestamp_type": "CreateTime", "producer_id": -1,
             "producer_epoch": -1, "base_sequence": -1, "transactional": False,
             "partition_leader_epoch": -1}
# Each batch attribute of a run of rows: the type the core takes it in, and
# the least and greatest value its keyword or column may have (sequences: -1
# is "none"; the timestamp type is checked by name, or by batch_starts).
_RUN_TYPES = {"timestamp_type": ("int32", None, None), "transactional": ("bool", None, None),
              "producer_id": ("int64", -(1 << 63), (1 << 63) - 1),
              "producer_epoch": ("int16", -(1 << 15), (1 << 15) - 1),
              "base_sequence": ("int32", -1, (1 << 31) - 1),
              "partition_leader_epoch": ("int32", -(1 << 31), (1 << 31) - 1)}


def _check_numbering(base_offset, n):
    if base_offset < 0 or base_offset + n - 1 > INT64_MAX:
        raise ValueError(f"offsets {base_offset}..{base_offset + n - 1} do not fit "
                         "Kafka's int64 offsets")


def _fixed_attributes(given):
    """The batch attributes the keywords give, with defaults for the rest; a
    value Kafka cannot hold raises ValueError."""
    fixed = dict(_DEFAULTS, **given)
    del fixed["base_offset"]
    fixed["timestamp_type"] = _TIMESTAMP_TYPES[fixed["timestamp_type"]]
    for name, value in fixed.items():
        _, least, greatest = _RUN_TYPES[name]
        if least is not None:
            fixed[name] = value = integer_option(name, value)
            if not least <= value <= greatest:
                raise ValueError(f"{name} {value} is outside {least}..{greatest}")
    return fixed


def _runs(starts, fixed, columns):
    """The batch attributes of each run (rows from each of `starts`), arrays of
    one element a run: a run's first row's, from the columns that hold that
    attribute, else the keyword's or default."""
    import numpy as np
    picked = np.asarray(starts, np.int64)
    if len(picked) == 1:
        runs = dict(_one_run(tuple(fixed.items())))
    else:
        runs = {name: np.full(len(picked), value, _RUN_TYPES[name][0])
                for name, value in fixed.items()}
    for name in fixed.keys() & columns.keys():
        runs[name] = columns[name][picked].astype(_RUN_TYPES[name][0], copy=False)
    return picked, runs


@functools.lru_cache(maxsize=64)
def _one_run(fixed_items):
    """The attribute arrays of one run, made once for each set of values
    (read-only: they are shared): six small numpy arrays cost more than
    encoding a record."""
    import numpy as np
    runs = {}
    for name, value in fixed_items:
        runs[name] = np.array([value], _RUN_TYPES[name][0])
        runs[name].flags.writeable = False
    return runs


def encode(records, *, magic=2, compression="none", compression_level=None, base_offset=None,
           timestamp_type=None, producer_id=None, producer_epoch=None, base_sequence=None,
           transactional=None, partition_leader_epoch=None, max_batch_bytes=1 << 20):
    """Encode records into a record set of the given magic, as Kafka writes it.

    v2 batches are split at ``max_batch_bytes``; v1 compressed wrappers carry
    relative inner offsets; magic-0 lz4 carries Kafka's legacy header
    checksum; snappy is written in snappy-java's xerial framing.

    A table keeps what its columns say: offsets (a batch starts where offsets
    do not increase), timestamp types, and with
    ``decode(batch_columns=True)``'s columns the producer, sequences,
    transactions and leader epochs, breaking batches where these change, so
    ``encode(decode(x))`` decodes as ``x`` does. A keyword given here
    overrides its column (``base_offset=0`` numbers the rows afresh). Unset,
    and with no column: offsets from 0, CreateTime, no producer, no
    transaction, leader epoch -1. Control records are not told apart from
    data in a table: a table decoded with ``include_control=True`` re-encodes
    them as data.

    Args:
        records: :class:`Record` objects, ``(key, value)`` or
            ``(key, value, timestamp, headers)`` tuples, dicts with those
            names, or a ``pyarrow.Table`` / ``RecordBatch`` with
            :func:`decode`'s columns (only ``value`` is required). Keys and
            values are bytes-like or None; headers a sequence of
            ``(str, bytes | None)``; timestamps int milliseconds (None: now).
        magic: 2 (record batches), or 1 or 0 (legacy messages).
        compression: ``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or
            ``"zstd"`` (zstd needs magic 2).
        compression_level: The codec's level; None: the codec's default
            (gzip 6, as Kafka's Java client).
        base_offset: The first record's offset.
        timestamp_type: ``"CreateTime"`` or ``"LogAppendTime"``.
        producer_id: v2 producer id (-1: none).
        producer_epoch: v2 producer epoch (-1: none).
        base_sequence: v2 first sequence number (-1: none).
        transactional: Mark v2 batches transactional.
        partition_leader_epoch: v2 partition leader epoch (-1: none).
        max_batch_bytes: Start a new batch before one would pass this size.

    Returns:
        bytes: The record set (``b""`` for no records).

    Raises:
        ValueError: For an option or a value Kafka's field cannot hold (a
            producer epoch past int16, a sequence below -1, ...); it is not
            wrapped or replaced.
        TypeError: For a non-integer where an integer is required.
    """
    if magic not in (0, 1, 2):
        raise ValueError(f"magic must be 0, 1 or 2, not {magic!r}")
    codec = codec_id(compression)
    if timestamp_type is not None and timestamp_type not in _TIMESTAMP_TYPES:
        raise ValueError(f"timestamp_type must be one of {tuple(_TIMESTAMP_TYPES)}")
    max_batch_bytes = integer_option("max_batch_bytes", max_batch_bytes)
    if max_batch_bytes < 1:
        raise ValueError("max_batch_bytes must be positive")
    if compression_level is not None:
        compression_level = integer_option("compression_level", compression_level)
    if base_offset is not None:
        base_offset = integer_option("base_offset", base_offset)
    if magic < 2 and (transactional or producer_id not in (None, -1)):
        raise ValueError(f"magic {magic} messages have no producer id or transactions")
    given = {keyword: value for keyword, value in (
        ("base_offset", base_offset), ("timestamp_type", timestamp_type),
        ("producer_id", producer_id), ("producer_epoch", producer_epoch),
        ("base_sequence", base_sequence), ("transactional", transactional),
        ("partition_leader_epoch", partition_leader_epoch)) if value is not None}
    now = int(time.time() * 1000)
    if hasattr(type(records), "column_names") and hasattr(type(records), "num_rows"):
        from .arrow import table_encoding     # arrow.py imports this module
        rows, (starts, runs) = table_encoding(records, magic, given, now)
    else:
        fixed = _fixed_attributes(given)
        _check_numbering(given.get("base_offset", 0), 1)     # before the core adds to it
        rows = rows_from_records(records, now, Record, given.get("base_offset", 0))
        _check_numbering(given.get("base_offset", 0), len(rows))
        starts, runs = _runs([0] if len(rows) else [], fixed, {})
    if not len(rows):
        return b""
    if magic == 2:
        return encode_v2(rows, starts, codec=codec, level=compression_level,
                         timestamp_type=runs["timestamp_type"],
                         transactional=runs["transactional"].view("uint8"),
                         producer_id=runs["producer_id"],
                         producer_epoch=runs["producer_epoch"],
                         base_sequence=runs["base_sequence"],
                         partition_leader_epoch=runs["partition_leader_epoch"],
                         max_batch_bytes=max_batch_bytes)
    stops = [*starts[1:].tolist(), len(rows)]
    parts = [encode_legacy(rows, start, stop, magic=magic, codec=codec, level=compression_level,
                           timestamp_type=timestamp_type, max_batch_bytes=max_batch_bytes)
             for start, stop, timestamp_type in zip(starts.tolist(), stops,
                                                    runs["timestamp_type"].tolist())]
    return parts[0] if len(parts) == 1 else b"".join(parts)


def encode_control(kind, *, producer_id, producer_epoch, offset, coordinator_epoch=0,
                   timestamp=None, partition_leader_epoch=-1):
    """An end-transaction marker: a v2 control batch of one record.

    Args:
        kind: ``"COMMIT"`` or ``"ABORT"``.
        producer_id: The transactional producer's id.
        producer_epoch: Its epoch.
        offset: The marker's offset.
        coordinator_epoch: The transaction coordinator's epoch.
        timestamp: The marker's timestamp in ms (None: now).
        partition_leader_epoch: The batch's partition leader epoch.

    Returns:
        bytes: The control batch, a record set of one entry.
    """
    if kind not in _CONTROL_KINDS:
        raise ValueError(f"kind must be 'COMMIT' or 'ABORT', not {kind!r}")
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    numbers = {name: integer_option(name, value) for name, value in (
        ("producer_id", producer_id), ("producer_epoch", producer_epoch), ("offset", offset),
        ("coordinator_epoch", coordinator_epoch), ("timestamp", timestamp),
        ("partition_leader_epoch", partition_leader_epoch))}
    return _encode_control(_CONTROL_KINDS[kind], **numbers)


__all__ = ["Batch", "Record", "ControlRecord", "read_batches", "read_records", "encode",
           "encode_control", "committed", "aborted_transactions"]
