"""kcodec's error hierarchy.

Every decoding failure is a :class:`KafkaFormatError` that names where it
happened: ``.position`` is the byte offset in the caller's input (of the
entry, or of the failing field when known), ``.offset`` the Kafka offset when
known, ``.source`` the file (or "record set N") when the input came from one.
They subclass :class:`ValueError` and pickle, so they cross process
boundaries (Spark executors) intact.

Bad input never crashes the process, never hangs and never allocates more
than the configured limits: it raises one of these."""
import copy
import operator


class KafkaFormatError(ValueError):
    """Input that does not follow Kafka's formats; the base of every kcodec
    decoding error.

    The message (``str(error)``) ends with where it happened, for example
    ``crc mismatch (at orders-0/00000000000000000000.log, byte 133, offset 3)``.

    Args:
        message: What is wrong, without the location.
        position: Byte offset in the input (or in ``source``) of the entry, or
            of the failing field when known.
        offset: The Kafka offset of the batch or record, when known.
        source: The file the input came from (a segment's path), or
            ``"record set N"`` for :func:`kcodec.decode_many`; None for a
            caller's buffer.

    Attributes:
        message (str): What is wrong.
        position (int | None): Byte offset, as above.
        offset (int | None): Kafka offset, as above.
        source (str | None): File or record set, as above.
    """

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
    """A batch's (v2: CRC-32C) or message's (v0/v1: CRC-32) stored CRC differs
    from the one computed over its bytes. Pass ``verify_crc=False`` to read
    such data anyway.

    Args:
        message: What is wrong.
        stored: The CRC stored in the entry.
        computed: The CRC computed over its bytes.
        **where: ``position``, ``offset`` and ``source``, as for
            :class:`KafkaFormatError`.

    Attributes:
        stored (int | None): The CRC stored in the entry.
        computed (int | None): The CRC computed over its bytes.
    """

    def __init__(self, message, *, stored=None, computed=None, **where):
        self.stored = stored
        self.computed = computed
        super().__init__(message, **where)


class UnsupportedFormatError(KafkaFormatError):
    """Unknown magic byte or compression codec id."""


class DecompressionError(KafkaFormatError):
    """A compressed stream could not be decoded."""


class DecompressionLimitError(KafkaFormatError):
    """Decompressed data would exceed the configured per-batch limit
    (``max_decompressed_bytes``, 256 MiB by default)."""


class CorruptIndexError(KafkaFormatError):
    """An .index, .timeindex, .txnindex or checkpoint file is inconsistent."""


class ObjectStoreError(OSError):
    """Object storage (``s3://``) failed or refused a request: nothing
    answers at the endpoint, the credentials are refused, the bucket or an
    object is missing. Not a decoding error: the message says what is wrong
    and where (the object's URI and the endpoint), for example ``no such
    object s3://logs/orders-0/00000000000000000000.log (endpoint
    http://127.0.0.1:9000): deleted after the read was planned?``.

    Args:
        message: What is wrong, and where.
        uri: The object, prefix or bucket concerned (``s3://bucket/key``).
        endpoint: The endpoint asked (None: AWS's own).

    Attributes:
        uri (str | None): As above.
        endpoint (str | None): As above.
    """

    def __init__(self, message, *, uri=None, endpoint=None):
        super().__init__(message)
        self.uri = uri
        self.endpoint = endpoint

    def __reduce__(self):
        return (_rebuild_store_error, (type(self), self.args[0], self.uri, self.endpoint))

    def __str__(self):
        return self.args[0]


class ObjectNotFoundError(ObjectStoreError, FileNotFoundError):
    """A bucket, prefix or object that is not there (also a
    :class:`FileNotFoundError`)."""


def _rebuild_store_error(cls, message, uri, endpoint):
    return cls(message, uri=uri, endpoint=endpoint)


__all__ = [
    "KafkaFormatError", "CorruptRecordError", "CrcMismatchError",
    "UnsupportedFormatError", "DecompressionError", "DecompressionLimitError",
    "CorruptIndexError", "ObjectStoreError", "ObjectNotFoundError",
]


def integer_option(name, value):
    """An option's value as an int; TypeError, naming it, for a float or
    anything else that is not an integer (a C conversion would cut it silently)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
