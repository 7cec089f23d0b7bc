"""Kafka's wire protocol around record data: framing, request and response
headers, one schema-driven codec for the APIs that carry and locate records
(ApiVersions, Metadata, Produce, Fetch, ListOffsets, FindCoordinator,
InitProducerId, AddPartitionsToTxn, EndTxn), a minimal blocking client and a
capture decoder. Record sets inside messages are memoryviews into the frame,
read directly by kcodec.read_batches / kcodec.decode."""
from .errors import (
    API_KEYS, API_NAMES, ERROR_NAMES, BrokerError, ConnectionLost, ProtocolError,
    RequestTimedOut, UnsupportedVersionError, error_name,
)
from .frames import (
    DEFAULT_MAX_FRAME_BYTES, FrameSplitter, Request, Response, decode_request,
    decode_response, encode_request, encode_response, peek_correlation_id, peek_request,
    request_header_version, request_schema, response_header_version, response_schema,
)
from .messages import REQUESTS, RESPONSES, AbortedTransaction
from .client import Connection, ListedOffset

__all__ = [
    "API_KEYS", "API_NAMES", "ERROR_NAMES", "BrokerError", "ConnectionLost", "ProtocolError",
    "RequestTimedOut", "UnsupportedVersionError", "error_name", "DEFAULT_MAX_FRAME_BYTES",
    "FrameSplitter", "Request", "Response", "decode_request", "decode_response",
    "encode_request", "encode_response", "peek_correlation_id", "peek_request",
    "request_header_version", "request_schema", "response_header_version", "response_schema",
    "REQUESTS", "RESPONSES", "AbortedTransaction", "Connection", "ListedOffset",
]
