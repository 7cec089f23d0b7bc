from typing import Any, Optional, Tuple

import numpy as np

def split_frames(data: Any, offsets: Any, valid_bitmap: Optional[Any], bit_offset: int,
                 framed: bool) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                        np.ndarray]: ...
def join_lines(data: Any, starts: Any, ends: Any,
               rows: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...
