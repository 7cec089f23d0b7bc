"""Aborted transactions of a log as a Fetch carries them. The rule that finds
them from the markers is kcodec.records.TransactionTracker."""


def fetch_aborted(aborted, first_offset):
    """The (producer_id, first_offset) list a Fetch from `first_offset` would
    carry: transactions whose ABORT marker is at or after it."""
    return [(t.producer_id, t.first_offset) for t in aborted if t.last_offset >= first_offset]
