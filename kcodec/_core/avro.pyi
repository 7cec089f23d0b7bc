import enum
from typing import Any, List, Optional, Sequence, Tuple

class Op(enum.IntEnum):
    OP_NULL: int
    OP_BOOLEAN: int
    OP_INT: int
    OP_LONG: int
    OP_FLOAT: int
    OP_DOUBLE: int
    OP_BYTES: int
    OP_STRING: int
    OP_FIXED: int
    OP_ENUM: int
    OP_DECIMAL_BYTES: int
    OP_DECIMAL_FIXED: int
    OP_RECORD: int
    OP_SEQUENCE: int
    OP_ARRAY: int
    OP_MAP: int
    OP_UNION: int
    OP_APPEND_NULL: int
    OP_STRUCT_VALID: int
    OP_DEFAULT: int
    OP_FAIL: int

class Kind(enum.IntEnum):
    KIND_NULL: int
    KIND_BOOLEAN: int
    KIND_INT32: int
    KIND_INT64: int
    KIND_FLOAT: int
    KIND_DOUBLE: int
    KIND_BINARY: int
    KIND_STRING: int
    KIND_DECIMAL: int
    KIND_STRUCT: int
    KIND_LIST: int
    KIND_MAP: int

class Fault(enum.IntEnum):
    FAULT_NONE: int
    FAULT_TRUNCATED: int
    FAULT_VARINT: int
    FAULT_NEGATIVE_LENGTH: int
    FAULT_LENGTH: int
    FAULT_COUNT: int
    FAULT_UNION_BRANCH: int
    FAULT_ENUM_SYMBOL: int
    FAULT_UTF8: int
    FAULT_DECIMAL: int
    FAULT_RESOLUTION: int
    FAULT_TOO_BIG: int
    FAULT_NO_MEMORY: int
    FAULT_FRAME: int

class OwnedBuffer: ...

class Decoder:
    rows: int
    def __init__(self, kinds: Sequence[int], widths: Sequence[int],
                 children: Sequence[Sequence[int]], nullable: Sequence[bool],
                 programs: Sequence[Tuple[Any, Any, Any]]) -> None: ...
    def decode(self, data: Any, starts: Any, ends: Any, value_starts: Any, program_of_row: Any,
               stop_at_fault: bool) -> List[Tuple[int, int, int, int]]: ...
    def column(self, col: int) -> Tuple[int, Optional[OwnedBuffer], Optional[OwnedBuffer],
                                        Optional[OwnedBuffer]]: ...
