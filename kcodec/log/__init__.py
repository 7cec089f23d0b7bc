"""Kafka partition directories without a broker: segments, their indexes,
read_committed, verification, salvage and a writer that lays out logs as a
broker does (shared/spec/kafka-formats.md §4-6)."""
from .indexes import (
    AbortedTxn, EpochEntry, IndexEntry, OffsetIndex, ProducerSnapshotEntry, TimeIndex,
    TimeIndexEntry, encode_producer_snapshot, read_leader_epoch_checkpoint,
    read_producer_snapshot, read_txn_index,
)
from .partition import PartitionLog, open_logs, parse_partition_dir
from .segment import Segment
from .verify import Problem, SalvagedBatch, VerifyReport, salvage, verify_log
from .writer import write_log

__all__ = [
    "PartitionLog", "Segment", "write_log", "salvage", "VerifyReport", "Problem",
    "SalvagedBatch", "verify_log", "open_logs", "parse_partition_dir", "OffsetIndex",
    "TimeIndex", "IndexEntry", "TimeIndexEntry", "AbortedTxn", "EpochEntry",
    "ProducerSnapshotEntry", "read_txn_index", "read_leader_epoch_checkpoint",
    "read_producer_snapshot", "encode_producer_snapshot",
]
