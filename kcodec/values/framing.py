"""The Confluent wire format around a key or value: a magic byte 0, the
schema id (big-endian int32), then the datum. Found for a whole column at once
in the core, so the decoders see only datum bounds and schema ids.

    0        1               5
    | magic  | schema id     | datum ...
"""
import enum
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .._core.framing import Framing, split_frames

MAGIC_BYTE = 0
HEADER_BYTES = 5
NO_SCHEMA_ID = -1


class FrameStatus(enum.IntEnum):
    """What a row of a column holds, before its datum is decoded."""
    DATUM = 0        # a datum to decode (framed or not)
    NULL = 1         # a null key or value (a tombstone): a null row, not an error
    SHORT = 2        # framed, but fewer bytes than the header
    BAD_MAGIC = 3    # framed, but the first byte is not the magic byte


class Frames(NamedTuple):
    """The rows of one binary column, split into headers and datums.

    Attributes:
        data: The column's data buffer (uint8).
        starts: Where each row's datum begins in ``data`` (int64).
        ends: Where each row's key or value ends in ``data`` (int64).
        value_starts: Where each row's key or value begins (int64): error
            positions count from here.
        ids: Each row's schema id (int32; ``NO_SCHEMA_ID`` when unframed).
        status: Each row's :class:`FrameStatus` (int8).
    """
    data: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    value_starts: np.ndarray
    ids: np.ndarray
    status: np.ndarray

    def __len__(self):
        return len(self.status)


def _binary(array):
    """A binary-like Arrow array as binary or large_binary (views and strings
    cast: their bytes are not in one data buffer, or not typed as bytes)."""
    kind = array.type
    if pa.types.is_binary_view(kind) or pa.types.is_string_view(kind):
        return array.cast(pa.large_binary())
    if pa.types.is_string(kind):
        return array.view(pa.binary())
    if pa.types.is_large_string(kind):
        return array.view(pa.large_binary())
    if not (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        raise TypeError(f"a column of keys or values is binary, not {kind}")
    return array


def frames(array, framed):
    """The :class:`Frames` of a binary-like Arrow array, in the core, one
    pass: with ``framed`` true, each non-null row's header read and checked;
    false, each row is a datum; ``"auto"``, a row is framed when it begins
    with the magic byte (JSON text never does)."""
    array = _binary(array)
    n = len(array)
    validity, offsets_buffer, data_buffer = array.buffers()
    width = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, width, n + 1, array.offset * width().itemsize)
    data = (np.frombuffer(data_buffer, np.uint8) if data_buffer is not None and data_buffer.size
            else np.zeros(0, np.uint8))
    bitmap = (np.frombuffer(validity, np.uint8) if validity is not None and array.null_count
              else None)
    framing = (Framing.FRAMING_AUTO if framed == "auto" else
               Framing.FRAMING_FRAMED if framed else Framing.FRAMING_PLAIN)
    starts, ends, value_starts, ids, status = split_frames(data, offsets, bitmap, array.offset,
                                                           framing)
    return Frames(data, starts, ends, value_starts, ids, status)


def frame_error(status):
    """The message for a row whose frame is not whole."""
    if status == FrameStatus.SHORT:
        return f"framed value shorter than its {HEADER_BYTES}-byte header"
    return f"framed value does not begin with the magic byte {MAGIC_BYTE}"
