"""Which transactions a log aborted, learnt from its batches the way the
broker's producer state does when it appends them: a transaction opens at
its producer's first transactional batch and ends at its COMMIT or ABORT
marker; each ABORT becomes a .txnindex entry."""
from .indexes import AbortedTxn


def marker_type(batch):
    """"COMMIT", "ABORT" or another control type of a control batch."""
    for record in batch:
        return record.control.type
    return None


class TransactionTracker:
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
        first = self.open.pop(pid, marker)
        if kind != "ABORT":
            return None
        undecided = min(self.open.values(), default=marker + 1)
        return AbortedTxn(pid, first, marker, undecided)


def aborted_in(batches):
    """Every AbortedTxn of `batches`, in log order."""
    tracker = TransactionTracker()
    return [txn for txn in map(tracker.append, batches) if txn is not None]


def fetch_aborted(aborted, first_offset):
    """The (producer_id, first_offset) list a Fetch from `first_offset` would
    carry: transactions whose ABORT marker is at or after it."""
    return [(t.producer_id, t.first_offset) for t in aborted if t.last_offset >= first_offset]
