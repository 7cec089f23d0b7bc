from typing import Any, Iterable, Optional

import numpy as np
import pyarrow as pa

class Rows:
    def __len__(self) -> int: ...

def rows_from_records(records: Iterable[Any], default_timestamp: int, record_type: type,
                      base_offset: int) -> Rows: ...
def batch_starts(n: int, offsets: Optional[np.ndarray], timestamps: np.ndarray,
                 timestamp_types: Optional[np.ndarray],
                 sequences: Optional[np.ndarray], attributes: list) -> list: ...
def rows_from_arrow(key: Optional[pa.Array], value: pa.Array, timestamps: np.ndarray,
                    headers: Optional[pa.Array], n: int, offsets: Optional[np.ndarray],
                    base_offset: int) -> Rows: ...
def encode_v2(rows: Rows, starts: np.ndarray, *, codec: int, level: Optional[int],
              timestamp_type: np.ndarray, transactional: np.ndarray,
              producer_id: np.ndarray, producer_epoch: np.ndarray,
              base_sequence: np.ndarray, partition_leader_epoch: np.ndarray,
              max_batch_bytes: int) -> bytes: ...
def encode_control(type_id: int, *, producer_id: int, producer_epoch: int, offset: int,
                   coordinator_epoch: int, timestamp: int,
                   partition_leader_epoch: int = -1) -> bytes: ...
def encode_legacy(rows: Rows, first: int, end: int, *, magic: int, codec: int, level: Optional[int],
                  timestamp_type: int, max_batch_bytes: int) -> bytes: ...
