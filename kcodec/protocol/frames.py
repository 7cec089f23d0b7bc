"""Kafka's framing: an int32 size before every request and response, request
headers v0-v2 and response headers v0-v1, and a splitter that cuts a byte
stream arriving in arbitrary chunks into whole frames."""
import struct
from collections import namedtuple

from .errors import API_KEYS, API_NAMES, ProtocolError, UnsupportedVersionError
from .messages import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES

#: The largest frame accepted by default: 100 MiB.
DEFAULT_MAX_FRAME_BYTES = 100 << 20
API_VERSIONS_KEY = 18

Request = namedtuple("Request", "api_key api_version correlation_id client_id body header")
Request.__doc__ = ("A decoded request: api_key, api_version, correlation_id, client_id, body "
                   "(a dict keyed by Kafka's field names in snake_case) and header (a dict).")
Response = namedtuple("Response", "correlation_id body header")
Response.__doc__ = ("A decoded response: correlation_id, body (a dict keyed by Kafka's field "
                    "names in snake_case) and header (a dict).")

_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")


def api_key(api):
    """The key of an API given by name ("Fetch") or key (1)."""
    if isinstance(api, int):
        return api
    try:
        return API_KEYS[api]
    except KeyError:
        raise UnsupportedVersionError(f"unknown API {api!r}") from None


def _schema(table, api, kind):
    key = api_key(api)
    try:
        return table[key]
    except KeyError:
        raise UnsupportedVersionError(
            f"no schema for the {API_NAMES.get(key, key)} {kind}",
            api=API_NAMES.get(key, key)) from None


def request_schema(api):
    """The request schema of an API.

    Args:
        api: The API's name (``"Fetch"``) or key (1).

    Returns:
        The ``Message`` schema, with ``valid`` and ``flexible`` version ranges.

    Raises:
        UnsupportedVersionError: For an API kcodec has no schema for.
    """
    return _schema(REQUESTS, api, "request")


def response_schema(api):
    """The response schema of an API; see :func:`request_schema`."""
    return _schema(RESPONSES, api, "response")


def request_header_version(api, version):
    """The request header version (1, or 2 for flexible versions) of an API
    version.

    Args:
        api: The API's name or key.
        version: The API version.

    Returns:
        int: The header version.
    """
    return 2 if version in request_schema(api).flexible else 1


def response_header_version(api, version):
    """The response header version (0, or 1 for flexible versions; always 0
    for ApiVersions, so that a client can read any broker's answer).

    Args:
        api: The API's name or key.
        version: The API version.

    Returns:
        int: The header version.
    """
    # ApiVersions responses keep header v0 even when flexible, so that a client
    # can always read the versions a broker supports.
    key = api_key(api)
    if key == API_VERSIONS_KEY:
        return 0
    return 1 if version in response_schema(key).flexible else 0


def encode_request(api, version, body, correlation_id, client_id="kcodec", header_tags=None):
    """Encode a request as a whole frame.

    Args:
        api: The API's name (``"Metadata"``) or key.
        version: The API version.
        body: A dict keyed by Kafka's field names in snake_case; fields left
            out take their defaults.
        correlation_id: The request's correlation id.
        client_id: The header's client id.
        header_tags: Tagged fields for a flexible header (``{tag: bytes}``).

    Returns:
        bytes: The frame, its int32 size prefix included.

    Raises:
        UnsupportedVersionError: For an API or version kcodec has no schema for.
        ProtocolError: For a body that does not fit the schema.
    """
    schema = request_schema(api)
    header = {"request_api_key": schema.api_key, "request_api_version": version,
              "correlation_id": correlation_id, "client_id": client_id}
    return _frame(REQUEST_HEADER, header, request_header_version(api, version), header_tags,
                  schema, body, version)


def encode_response(api, version, body, correlation_id, header_tags=None):
    """Encode a response as a whole frame.

    Args:
        api: The API's name or key.
        version: The API version.
        body: A dict keyed by Kafka's field names in snake_case.
        correlation_id: The correlation id of the request it answers.
        header_tags: Tagged fields for a flexible header.

    Returns:
        bytes: The frame, its int32 size prefix included.
    """
    schema = response_schema(api)
    return _frame(RESPONSE_HEADER, {"correlation_id": correlation_id},
                  response_header_version(api, version), header_tags, schema, body, version)


def _frame(header_schema, header, header_version, header_tags, schema, body, version):
    """Size prefix, header and body of one frame."""
    if header_tags:
        header["_unknown_tags"] = header_tags
    out = bytearray(4)
    header_schema.encode_into(out, header, header_version)
    schema.encode_into(out, body, version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def peek_request(frame):
    """The start of a request frame's header, whatever its API.

    Args:
        frame: The frame, without its size prefix.

    Returns:
        tuple[int, int, int]: ``(api_key, api_version, correlation_id)``.

    Raises:
        ProtocolError: For a frame too short to hold them.
    """
    if len(frame) < _PEEK.size:
        raise ProtocolError(f"a request header needs {_PEEK.size} bytes, the frame has "
                            f"{len(frame)}", position=0)
    return _PEEK.unpack_from(frame, 0)


def peek_correlation_id(frame):
    """The correlation id of a response frame (without its size prefix).

    Raises:
        ProtocolError: For a frame too short to hold it.
    """
    if len(frame) < 4:
        raise ProtocolError(f"a response header needs 4 bytes, the frame has {len(frame)}",
                            position=0)
    return _SIZE.unpack_from(frame, 0)[0]


def decode_request(frame, *, trailing="error"):
    """Decode a request frame.

    Record sets (a Produce request's ``records``) stay memoryviews into
    ``frame``, which :func:`kcodec.read_batches` and :func:`kcodec.decode`
    read directly. Unknown tagged fields are kept as ``"_unknown_tags":
    {tag: bytes}`` and written back by the encoders.

    Args:
        frame: The frame, without its size prefix (as :class:`FrameSplitter`
            gives it).
        trailing: ``"error"``: bytes after the message raise ProtocolError;
            ``"ignore"``: they are accepted.

    Returns:
        Request: The header's fields and the body.

    Raises:
        ProtocolError: Naming the API, version, field path and byte.
        UnsupportedVersionError: For an API or version with no schema.
    """
    key, version, _ = peek_request(frame)
    schema = request_schema(key)
    schema.check_version(version)
    buf = memoryview(frame).cast("B")
    header, pos = REQUEST_HEADER.decode(buf, request_header_version(key, version))
    body, end = schema.decode(buf, version, pos)
    _check_consumed(buf, end, schema.api, version, trailing)
    return Request(key, version, header["correlation_id"], header["client_id"], body, header)


def decode_response(frame, api, version, *, trailing="error"):
    """Decode a response frame.

    A response does not say which request it answers: the caller gives the
    request's API and version (matched by correlation id). Record sets (a
    Fetch response's ``records``) stay memoryviews into ``frame``.

    Args:
        frame: The frame, without its size prefix.
        api: The request's API name or key.
        version: The request's API version.
        trailing: ``"error"`` or ``"ignore"`` bytes after the message, as
            Kafka's own client does (librdkafka's mock broker leaves one after
            flexible Metadata responses).

    Returns:
        Response: The correlation id and the body.

    Raises:
        ProtocolError: Naming the API, version, field path and byte.
    """
    schema = response_schema(api)
    schema.check_version(version)
    buf = memoryview(frame).cast("B")
    header, pos = RESPONSE_HEADER.decode(buf, response_header_version(api, version))
    body, end = schema.decode(buf, version, pos)
    _check_consumed(buf, end, schema.api, version, trailing)
    return Response(header["correlation_id"], body, header)


def _check_consumed(buf, end, api, version, trailing):
    if trailing not in ("error", "ignore"):
        raise ValueError(f"trailing must be 'error' or 'ignore', not {trailing!r}")
    if end != len(buf) and trailing == "error":
        raise ProtocolError(f"{len(buf) - end} bytes left after the message", api=api,
                            version=version, position=end)


def frame_size(buf, offset=0, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES, position=None):
    """The size in the int32 prefix at buf[offset:], checked against the limit."""
    size = _SIZE.unpack_from(buf, offset)[0]
    if size < 0:
        raise ProtocolError(f"negative frame size {size}", position=position)
    if size > max_frame_bytes:
        raise ProtocolError(f"frame of {size} bytes exceeds the {max_frame_bytes}-byte limit",
                            position=position)
    return size


class FrameSplitter:
    """Cuts a byte stream into Kafka frames.

    :meth:`feed` it chunks as they arrive and get back the frames completed
    so far; a partial frame waits for the next chunk.

    Args:
        max_frame_bytes: The largest frame accepted. A larger size, or a
            negative one, raises :class:`ProtocolError` (the stream cannot be
            resynchronised).

    Attributes:
        consumed (int): Stream bytes before those still held.
    """

    def __init__(self, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES):
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self.consumed = 0          # stream bytes before the buffer

    @property
    def pending(self):
        """Bytes held for a frame not yet complete."""
        return len(self._buffer)

    def feed(self, chunk):
        """Add bytes of the stream.

        Args:
            chunk: The next bytes (any bytes-like object).

        Returns:
            list[bytes]: The frames completed, without their size prefixes.

        Raises:
            ProtocolError: For a frame over ``max_frame_bytes`` or with a
                negative size.
        """
        buffer = self._buffer
        buffer += chunk
        frames = []
        start, end = 0, len(buffer)
        # A view's slice is copied once; a bytearray slice would be copied again
        # by bytes(). The view is released before the buffer is trimmed.
        with memoryview(buffer) as view:
            while end - start >= 4:
                size = frame_size(buffer, start, self.max_frame_bytes, self.consumed + start)
                if end - start - 4 < size:
                    break
                frames.append(bytes(view[start + 4:start + 4 + size]))
                start += 4 + size
        if start:
            del buffer[:start]
            self.consumed += start
        return frames
