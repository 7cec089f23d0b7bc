"""Logs for the kcodec.log tests: a scripted history of appends (plain
batches in every codec, two transactional producers whose transactions
interleave, commits and aborts), written with write_log, together with what
each append held, so that tests derive expectations from the input and not
from the code under test."""
import random
import struct
from dataclasses import dataclass, field

import kcodec
from kcodec.log import write_log

BASE_TS = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass
class Append:
    base_offset: int
    kind: str                      # "plain" | "txn" | "COMMIT" | "ABORT"
    producer_id: int = -1
    records: list = field(default_factory=list)   # (offset, timestamp, key, value, headers)
    txn: int = -1                  # which transaction a txn batch or marker belongs to
    data: bytes = b""
    marker_timestamp: int = -1

    @property
    def last_offset(self):
        return self.base_offset + max(len(self.records), 1) - 1


@dataclass
class History:
    appends: list
    aborted_txns: set              # txn ids that were aborted

    def data_records(self, committed_only=False):
        out = []
        for a in self.appends:
            if a.kind == "plain" or (a.kind == "txn" and not (
                    committed_only and a.txn in self.aborted_txns)):
                out += a.records
        return sorted(out)

    def aborted_entries(self):
        """(producer_id, first offset, ABORT marker offset) of each aborted transaction."""
        out = []
        for a in self.appends:
            if a.kind == "ABORT":
                first = min(b.base_offset for b in self.appends
                            if b.kind == "txn" and b.txn == a.txn)
                out.append((a.producer_id, first, a.base_offset))
        return out

    @property
    def end_offset(self):
        return self.appends[-1].last_offset + 1

    def record_set(self):
        return b"".join(a.data for a in self.appends)


def scripted_history(seed=0, rounds=6, batch_records=(20, 60)):
    """Plain batches across codecs and, each round, two producers' interleaved
    transactions: producer 7 aborts its even rounds, producer 8 commits."""
    rng = random.Random(seed)
    appends, aborted, offset = [], set(), 0
    clock = [BASE_TS]

    def records(n, offset):
        out = []
        for i in range(n):
            clock[0] += rng.randrange(0, 40)
            ts = clock[0] - rng.randrange(0, 200)            # not monotonic
            key = rng.choice([None, b"", b"k%d" % (offset + i)])
            value = rng.choice([None, b"v" * rng.randrange(0, 300), rng.randbytes(50)])
            headers = tuple((f"h{j}", rng.choice([None, b"x%d" % j])) for j in
                            range(rng.randrange(3)))
            out.append((offset + i, ts, key, value, headers))
        return out

    def data_batch(kind, pid=-1, txn=-1):
        nonlocal offset
        n = rng.randrange(*batch_records)
        rows = records(n, offset)
        codec = rng.choice(CODECS)
        data = kcodec.encode([(k, v, ts, list(h)) for _, ts, k, v, h in rows],
                             compression=codec, base_offset=offset, producer_id=pid,
                             producer_epoch=0 if pid >= 0 else -1,
                             base_sequence=0 if pid >= 0 else -1, transactional=kind == "txn")
        appends.append(Append(offset, kind, pid, rows, txn, data))
        offset += n

    def marker(kind, pid, txn):
        nonlocal offset
        clock[0] += 5
        data = kcodec.encode_control(kind, producer_id=pid, producer_epoch=0, offset=offset,
                                     timestamp=clock[0])
        appends.append(Append(offset, kind, pid, [], txn, data, marker_timestamp=clock[0]))
        offset += 1

    for r in range(rounds):
        a, b = 2 * r, 2 * r + 1
        data_batch("plain")
        data_batch("txn", 7, a)
        data_batch("txn", 8, b)
        data_batch("plain")
        data_batch("txn", 7, a)
        if r % 2 == 0:
            marker("ABORT", 7, a)
            aborted.add(a)
        else:
            marker("COMMIT", 7, a)
        data_batch("txn", 8, b)
        marker("COMMIT", 8, b)
        data_batch("plain")
    return History(appends, aborted)


def write_history(directory, history, segment_bytes=6000, index_interval_bytes=1024):
    write_log(directory, [a.data for a in history.appends], segment_bytes=segment_bytes,
              index_interval_bytes=index_interval_bytes)
    return directory


def view(records):
    """Comparable (offset, timestamp, key, value, headers) tuples."""
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


def table_rows(table):
    out = []
    for row in table.to_pylist():
        ts = row["timestamp"]
        ts = None if ts is None else int(ts.timestamp() * 1000)
        headers = tuple((h["key"], h["value"]) for h in row["headers"] or ())
        out.append((row["offset"], ts, row["key"], row["value"], headers))
    return out


def entry_bounds(data):
    """(start, end, first offset, last offset) of each v2 batch of a record set,
    read with struct (independently of kcodec)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, size = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + size
        last = base + struct.unpack_from(">i", data, pos + 23)[0]
        out.append((pos, end, base, last))
        pos = end
    return out
