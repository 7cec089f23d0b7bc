from typing import Any, Dict, Iterable

import pyarrow as pa

HEADER_TYPE: pa.StructType

def decode_columns(batches: Iterable[Any], include_control: bool = False,
                   batch_columns: bool = False, views: bool = False) -> Dict[str, pa.Array]: ...
