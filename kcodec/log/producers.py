"""What a broker's producer state holds after appending batches: the entries
of its .snapshot files, which it writes at every segment roll (named after the
new segment's base offset) and at the log end on a clean shutdown.

Only batches with a producer id change it (legacy batches have none). A data
batch becomes its producer's last batch (sequence, offsets, max timestamp); a
COMMIT or ABORT marker sets the producer's coordinator epoch and last
timestamp (the marker record's). Either one with another producer epoch
forgets the producer's last batch. The ongoing transactions are
TransactionTracker's.

Every producer seen is kept, in producer id order. A running broker also
drops producers idle for longer than producer.id.expiration.ms (a day by
default), and writes its entries in the order of its hash map (ascending for
producer ids below the map's size)."""
from ..records import TransactionTracker, marker_record
from .indexes import ProducerSnapshotEntry, encode_producer_snapshot, snapshot_path

NO_SEQUENCE = -1


class _Producer:
    __slots__ = ("epoch", "last_sequence", "last_offset", "offset_delta", "timestamp",
                 "coordinator_epoch")

    def __init__(self):
        self.epoch = -1
        self.coordinator_epoch = -1
        self.timestamp = -1
        self.forget_last_batch()

    def forget_last_batch(self):
        self.last_sequence, self.last_offset, self.offset_delta = NO_SEQUENCE, -1, 0

    def take_epoch(self, epoch):
        if epoch != self.epoch:
            self.forget_last_batch()
            self.epoch = epoch


class ProducerStates:
    """Producer states learnt from batches appended in log order."""

    def __init__(self):
        self.transactions = TransactionTracker()
        self.producers = {}

    def append(self, batch):
        """Feed one batch; returns the AbortedTxn it completes, if any
        (TransactionTracker.append)."""
        completed = self.transactions.append(batch)
        if batch.producer_id < 0:
            return completed
        producer = self.producers.setdefault(batch.producer_id, _Producer())
        if batch.is_control:
            record = marker_record(batch)
            if record is not None and record.control.type in ("COMMIT", "ABORT"):
                producer.take_epoch(batch.producer_epoch)
                producer.coordinator_epoch = record.control.coordinator_epoch
                producer.timestamp = record.timestamp
        else:
            producer.take_epoch(batch.producer_epoch)
            producer.last_sequence = batch.last_sequence
            producer.last_offset = batch.last_offset
            producer.offset_delta = batch.last_offset - batch.base_offset
            producer.timestamp = batch.max_timestamp
        return completed

    def entries(self):
        """The ProducerSnapshotEntry of every producer seen, by producer id."""
        ongoing = self.transactions.open
        return [ProducerSnapshotEntry(pid, p.epoch, p.last_sequence, p.last_offset,
                                      p.offset_delta, p.timestamp, p.coordinator_epoch,
                                      ongoing.get(pid, -1))
                for pid, p in sorted(self.producers.items())]

    def write_snapshot(self, directory, offset):
        """Write the snapshot taken at `offset` in `directory`; returns its path."""
        path = snapshot_path(directory, offset)
        with open(path, "wb") as f:
            f.write(encode_producer_snapshot(self.entries()))
        return path
