"""kcodec: a compiled codec for Apache Kafka record data."""
from . import errors
from ._core.crc import crc32, crc32c, hardware_crc32c
from .errors import (
    CorruptIndexError, CorruptRecordError, CrcMismatchError, DecompressionError,
    DecompressionLimitError, KafkaFormatError, SchemaError, SchemaNotFoundError,
    SchemaRegistryAuthError, SchemaRegistryError, SchemaRegistryUnavailableError,
    UnknownSchemaError, UnsupportedFormatError, ValueDecodeError,
)
from .arrow import decode, decode_many
from ._core.columns import kept_memory_limit
from .records import (
    Batch, ControlRecord, Record, encode, encode_control, read_batches, read_records,
)

__version__ = "0.1.0"

__all__ = [
    "Batch", "ControlRecord", "Record", "read_batches", "read_records", "decode", "decode_many", "encode",
    "encode_control", "kept_memory_limit", "crc32", "crc32c", "hardware_crc32c", "errors",
    "KafkaFormatError", "CorruptRecordError", "CrcMismatchError", "UnsupportedFormatError",
    "DecompressionError", "DecompressionLimitError", "CorruptIndexError", "ValueDecodeError",
    "UnknownSchemaError", "SchemaError", "SchemaRegistryError", "SchemaRegistryUnavailableError",
    "SchemaRegistryAuthError", "SchemaNotFoundError", "SchemaRegistry",
]


def __getattr__(name):
    # The registry client imports ssl and urllib: only when asked for.
    if name == "SchemaRegistry":
        from .values.registry import SchemaRegistry
        return SchemaRegistry
    raise AttributeError(f"module 'kcodec' has no attribute {name!r}")
