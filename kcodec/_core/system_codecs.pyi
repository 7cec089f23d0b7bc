from typing import Literal, Optional

def in_core(codec: Literal["snappy", "lz4", "zstd"], enabled_now: Optional[bool] = None) -> Optional[str]: ...

SNAPPY_MAX_EXPANSION: int
XERIAL_MAGIC: bytes

def snappy_blocks(data: bytes | bytearray | memoryview) -> list[memoryview]: ...
