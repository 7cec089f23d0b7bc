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


class ValueDecodeError(KafkaFormatError):
    """A record's key or value that does not decode in the format asked for
    (``value_format="avro"``, ``"json"``): a frame with the wrong magic byte
    or too short for its header, a truncated or corrupt Avro datum, JSON that
    does not parse or does not fit the schema.

    ``.offset`` is the record's Kafka offset (its row in the input when no
    offsets are known, ``.row``), ``.position`` the byte in the key or value
    (counted from its first byte, the frame's magic byte when framed) where
    decoding failed.

    Args:
        message: What is wrong.
        column: ``"value"`` or ``"key"``.
        row: The record's row in the input.
        schema_id: The frame's schema id (None: unframed, or not read).
        **where: ``position``, ``offset`` and ``source``, as for
            :class:`KafkaFormatError`.

    Attributes:
        column (str): As above.
        row (int | None): As above.
        schema_id (int | None): As above.
    """

    def __init__(self, message, *, column="value", row=None, schema_id=None, **where):
        self.column = column
        self.row = row
        self.schema_id = schema_id
        super().__init__(message, **where)

    def _describe(self):
        where = []
        if self.source is not None:
            where.append(str(self.source))
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        elif self.row is not None:
            where.append(f"row {self.row}")
        if self.position is not None:
            where.append(f"byte {self.position} of the {self.column}")
        if self.schema_id is not None:
            where.append(f"schema id {self.schema_id}")
        return f"{self.message} (at {', '.join(where)})" if where else self.message


class UnknownSchemaError(ValueDecodeError):
    """A frame names a schema id that the schema source does not have."""


class SchemaError(ValueError):
    """A schema kcodec cannot decode with: not valid Avro (or JSON Schema), a
    recursive type (Spark cannot type one either), or a writer schema that
    Avro's resolution rules cannot read as the reader schema. The message
    names the schema id (when known) and the field's path.

    Attributes:
        schema_id (int | None): The writer schema's id, when known.
    """

    def __init__(self, message, *, schema_id=None):
        self.schema_id = schema_id
        super().__init__(message if schema_id is None else f"{message} (schema id {schema_id})")

    def __reduce__(self):
        return (_rebuild_schema_error, (type(self), self.args[0], self.schema_id))


def _rebuild_schema_error(cls, message, schema_id):
    err = cls.__new__(cls)
    ValueError.__init__(err, message)
    err.schema_id = schema_id
    return err


class SchemaRegistryError(OSError):
    """A schema registry failed or refused a request. Not a decoding error:
    the message says what went wrong and names the registry's URL.

    Args:
        message: What is wrong, and where.
        url: The registry's URL (None for an offline source).

    Attributes:
        url (str | None): As above.
    """

    def __init__(self, message, *, url=None):
        super().__init__(message)
        self.url = url

    def __reduce__(self):
        return (_rebuild_registry_error, (type(self), self.args[0], self.__dict__.copy()))

    def __str__(self):
        return self.args[0]


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """Nothing answers at the registry's URL, the request timed out, TLS
    failed, or the registry answered with a server error."""


class SchemaRegistryAuthError(SchemaRegistryError):
    """The registry refused the credentials (HTTP 401 or 403)."""


class SchemaNotFoundError(SchemaRegistryError, LookupError):
    """The source has no schema with this id (HTTP 404 from a registry; not
    in a mapping or a ``_schemas`` log), or no such subject.

    Attributes:
        schema_id (int | None): The id asked for.
        subject (str | None): The subject asked for.
    """

    def __init__(self, message, *, url=None, schema_id=None, subject=None):
        super().__init__(message, url=url)
        self.schema_id = schema_id
        self.subject = subject


def _rebuild_registry_error(cls, message, state):
    err = cls.__new__(cls)
    OSError.__init__(err, message)
    err.__dict__.update(state)
    return err


__all__ = [
    "KafkaFormatError", "CorruptRecordError", "CrcMismatchError",
    "UnsupportedFormatError", "DecompressionError", "DecompressionLimitError",
    "CorruptIndexError", "ObjectStoreError", "ObjectNotFoundError", "ValueDecodeError",
    "UnknownSchemaError", "SchemaError", "SchemaRegistryError", "SchemaRegistryUnavailableError",
    "SchemaRegistryAuthError", "SchemaNotFoundError",
]


def integer_option(name, value):
    """An option's value as an int; TypeError, naming it, for a float or
    anything else that is not an integer (a C conversion would cut it silently)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
