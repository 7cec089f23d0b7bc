"""kcodec's error hierarchy. Every decoding failure is a KafkaFormatError that
names where it happened: `.position` is the byte offset in the caller's input
(of the entry, or of the failing field when known), `.offset` the Kafka offset
when known. They subclass ValueError and pickle, so they cross process
boundaries (Spark executors) intact."""
import copy
import operator


class KafkaFormatError(ValueError):
    def __init__(self, message, *, position=None, offset=None, source=None):
        self.message = message
        self.position = position
        self.offset = offset
        self.source = source
        super().__init__(self._describe())

    def _describe(self):
        where = []
        if self.source is not None:
            where.append(str(self.source))
        if self.position is not None:
            where.append(f"byte {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.message} (at {', '.join(where)})" if where else self.message

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.__dict__.copy()))


def located(exc, source, first_byte):
    """`exc` (a KafkaFormatError about input that starts at byte `first_byte`
    of the file `source`) as the same error naming the file and the byte in
    it; as it is when it names a file already, or `source` is None."""
    if source is None or exc.source is not None:
        return exc
    moved = copy.copy(exc)
    moved.source = str(source)
    if exc.position is not None:
        moved.position = exc.position + first_byte
    moved.args = (moved._describe(),)
    return moved


def _rebuild(cls, message, state):
    err = cls.__new__(cls)
    ValueError.__init__(err, message)
    err.__dict__.update(state)
    err.args = (err._describe(),)
    return err


class CorruptRecordError(KafkaFormatError):
    """Framing, sizes, counts, varints or record lengths are inconsistent."""


class CrcMismatchError(KafkaFormatError):
    def __init__(self, message, *, stored=None, computed=None, **where):
        self.stored = stored
        self.computed = computed
        super().__init__(message, **where)


class UnsupportedFormatError(KafkaFormatError):
    """Unknown magic byte or compression codec id."""


class DecompressionError(KafkaFormatError):
    """A compressed stream could not be decoded."""


class DecompressionLimitError(KafkaFormatError):
    """Decompressed data would exceed the configured per-batch limit."""


class CorruptIndexError(KafkaFormatError):
    """An .index, .timeindex, .txnindex or checkpoint file is inconsistent."""


__all__ = [
    "KafkaFormatError", "CorruptRecordError", "CrcMismatchError",
    "UnsupportedFormatError", "DecompressionError", "DecompressionLimitError",
    "CorruptIndexError",
]


def integer_option(name, value):
    """An option's value as an int; TypeError, naming it, for a float or
    anything else that is not an integer (a C conversion would cut it silently)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
