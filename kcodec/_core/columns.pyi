from typing import Iterable, List, Optional, Tuple, Union

import pyarrow as pa

from .records import Batch, BatchReader

HEADER_TYPE: pa.StructType
HEADER_LIST_TYPE: pa.ListType
TIMESTAMP_TYPE: pa.TimestampType

def record_schema(views: bool = False, batch_columns: bool = False) -> pa.Schema: ...

def handed_back_batches() -> int: ...
def kept_memory_limit(limit: Optional[int] = None) -> int: ...
def kept_memory_bytes() -> int: ...

def decode_columns(batches: Iterable[Batch], include_control: bool = False,
                   batch_columns: bool = False, views: bool = False) -> pa.Table: ...
def decode_record_set(reader: BatchReader, include_control: bool = False, batch_columns: bool = False,
                      views: bool = False, start_offset: Optional[int] = None,
                      end_offset: Optional[int] = None) -> pa.Table: ...
def decode_parts(parts: Iterable[Union[BatchReader, Iterable[Batch], None]],
                 include_control: bool = False, batch_columns: bool = False,
                 views: bool = False, first_index: int = 0) -> Tuple[pa.Table, List[int]]: ...
