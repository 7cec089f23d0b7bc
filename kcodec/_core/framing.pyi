import enum
from typing import Any, Optional, Tuple

import numpy as np

class Framing(enum.IntEnum):
    FRAMING_PLAIN: int
    FRAMING_FRAMED: int
    FRAMING_AUTO: int

def split_frames(data: Any, offsets: Any, valid_bitmap: Optional[Any], bit_offset: int,
                 framing: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                        np.ndarray]: ...
def join_lines(data: Any, starts: Any, ends: Any,
               rows: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...
