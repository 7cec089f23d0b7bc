from typing import Any, List, Optional, Tuple

def encode_v2(keys: list, values: list, timestamps: list, headers: list, *, base_offset: int,
              codec: int, level: Optional[int], attributes: int, producer_id: int,
              producer_epoch: int, base_sequence: int, partition_leader_epoch: int,
              max_batch_bytes: int) -> List[bytes]: ...
def encode_control(type_id: int, *, producer_id: int, producer_epoch: int, offset: int,
                   coordinator_epoch: int, timestamp: int,
                   partition_leader_epoch: int = -1) -> bytes: ...
def encode_legacy(keys: list, values: list, timestamps: list, *, magic: int, base_offset: int,
                  codec: int, level: Optional[int], timestamp_type: int,
                  max_batch_bytes: int) -> List[bytes]: ...
def columns(records: Any, default_timestamp: int,
            record_type: type) -> Tuple[list, list, list, list]: ...
