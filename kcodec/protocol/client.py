"""A minimal blocking Kafka client: one TCP connection to one broker, requests
by API name and version with plain-dict bodies, responses matched by
correlation id, versions negotiated through ApiVersions. Enough for tests and
tools to produce raw batches and fetch raw record sets; no metadata routing,
retries or consumer groups."""
import socket
import struct
import time
from collections import deque, namedtuple

from .errors import API_NAMES, BrokerError, ConnectionLost, ProtocolError, \
    RequestTimedOut, UnsupportedVersionError
from .frames import (
    DEFAULT_MAX_FRAME_BYTES, Response, api_key, decode_response, encode_request, frame_size,
    peek_correlation_id, request_schema,
)

ListedOffset = namedtuple("ListedOffset", "offset timestamp")
ListedOffset.__doc__ = "What ListOffsets answers for a partition: an offset and its timestamp."

UNSUPPORTED_VERSION = 35
_ERROR_KEYS = ("error_code", "partition_error_code")
_PARTITION_KEYS = ("partition_index", "index", "partition")
_PARTITION_LISTS = ("partitions", "partition_data", "partition_responses", "results_by_partition")


def find_broker_error(api, value, topic=None, partition=None):
    """The first non-zero error code in a decoded response.

    Args:
        api: The API's name, for the error.
        value: A decoded response body (or any part of one).
        topic: The topic the value is under, if known.
        partition: The partition the value is under, if known.

    Returns:
        BrokerError | None: The error, with the topic and partition it was
        found under; None when there is none.
    """
    if isinstance(value, dict):
        if any(key in value for key in _PARTITION_LISTS):
            topic = value.get("name") or value.get("topic") or value.get("topic_id") or topic
        for key in _PARTITION_KEYS:
            if isinstance(value.get(key), int):
                partition = value[key]
                break
        for key in _ERROR_KEYS:
            code = value.get(key)
            if code:
                return BrokerError(code, api=api, topic=topic, partition=partition,
                                   message=value.get("error_message"))
        value = value.values()
    elif not isinstance(value, list):
        return None
    for item in value:
        if isinstance(item, (dict, list)):
            error = find_broker_error(api, item, topic, partition)
            if error is not None:
                return error
    return None


def _error_code_first(frame):
    return struct.unpack_from(">h", frame, 4)[0] if len(frame) >= 6 else None


def _unsupported_api_versions(frame, correlation_id):
    """A broker refusing our ApiVersions version answers in v0 (Kafka) or in a
    shape of its own (librdkafka's mock); either way the retry goes down."""
    try:
        return decode_response(frame, 18, 0)
    except ProtocolError:
        return Response(correlation_id, {"error_code": UNSUPPORTED_VERSION, "api_keys": []}, {})


class Connection:
    """A blocking connection to one broker.

    Versions are negotiated with ApiVersions, responses matched by
    correlation id (:meth:`send` / :meth:`receive` for several in flight). A
    Produce with ``acks=0`` expects no answer. No routing to partition
    leaders, retries or consumer groups. Use it as a context manager.

    Args:
        host: The broker's host.
        port: Its port.
        client_id: The client id sent in every request header.
        timeout: Seconds every wait is bounded by; a request that times out
            closes the connection (the stream position is lost) and raises
            :class:`RequestTimedOut`.
        max_frame_bytes: Responses larger than this are refused.
        negotiate: Ask the broker's API versions (ApiVersions) on connecting.

    Attributes:
        broker_versions (dict | None): ``{api_key: (min, max)}`` once
            negotiated.

    Raises:
        RequestTimedOut: When connecting times out.
        ConnectionLost: When the connection breaks.
    """

    def __init__(self, host, port, *, client_id="kcodec", timeout=10.0,
                 max_frame_bytes=DEFAULT_MAX_FRAME_BYTES, negotiate=True):
        self.client_id = client_id
        self.timeout = timeout
        self.max_frame_bytes = max_frame_bytes
        self.broker_versions = None        # {api_key: (min, max)} once negotiated
        self._next_correlation = 1
        self._pending = {}                 # correlation id -> (api_key, version)
        self._arrived = {}                 # correlation id -> decoded Response
        self._unanswered = deque(maxlen=1024)   # acks=0 produce requests
        self._topic_ids = {}
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except socket.timeout:
            raise RequestTimedOut(f"connecting to {host}:{port} timed out") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if negotiate:
            try:
                self._negotiate()
            except BaseException:
                self.close()
                raise

    # -- lifecycle ------------------------------------------------------------

    def close(self):
        """Close the connection (closing twice does nothing)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- versions -------------------------------------------------------------

    def _negotiate(self):
        ours = request_schema("ApiVersions").valid.high
        body = {"client_software_name": "kcodec", "client_software_version": "0.1.0"}
        response = self.request("ApiVersions", ours, body, check=False)
        if response["error_code"] == UNSUPPORTED_VERSION:
            # The broker answered in v0 with the versions it has; ask again in its highest.
            theirs = {k["api_key"]: k["max_version"] for k in response["api_keys"]}
            version = min(ours, theirs.get(18, 0))
            response = self.request("ApiVersions", version, body, check=False)
        error = find_broker_error("ApiVersions", response)
        if error is not None:
            raise error
        self.broker_versions = {k["api_key"]: (k["min_version"], k["max_version"])
                                for k in response["api_keys"]}

    def api_versions(self):
        """The API versions the broker supports.

        Returns:
            dict[str, tuple[int, int]]: ``{api_name: (min, max)}``.
        """
        if self.broker_versions is None:
            self._negotiate()
        return {API_NAMES.get(key, str(key)): span for key, span in self.broker_versions.items()}

    def version_for(self, api, version=None):
        """The version to use for an API.

        Args:
            api: The API's name or key.
            version: A version wanted, or None for the highest that both
                kcodec and the broker support.

        Returns:
            int: The version.

        Raises:
            UnsupportedVersionError: When the two sides share no such version.
        """
        key = api_key(api)
        ours = request_schema(key).valid
        low, high = ours.low, ours.high
        if self.broker_versions is not None:
            if key not in self.broker_versions:
                raise UnsupportedVersionError(f"the broker does not support {API_NAMES[key]}",
                                              api=API_NAMES[key])
            theirs = self.broker_versions[key]
            low, high = max(low, theirs[0]), min(high, theirs[1])
        if version is None:
            version = high
        if not low <= version <= high:
            raise UnsupportedVersionError(
                f"{API_NAMES[key]} v{version} is not supported by both sides (v{low}-v{high})",
                api=API_NAMES[key], version=version)
        return version

    # -- requests -------------------------------------------------------------

    def send(self, api, version, body):
        """Send a request without waiting for its response.

        Args:
            api: The API's name or key.
            version: The API version.
            body: The request body (a dict).

        Returns:
            int: Its correlation id, for :meth:`receive`.
        """
        key = api_key(api)
        correlation_id = self._next_correlation
        self._next_correlation = correlation_id + 1 if correlation_id < 0x7FFFFFFF else 1
        frame = encode_request(key, version, body, correlation_id, self.client_id)
        self._io(self._sendall, frame)
        if key == 0 and body.get("acks") == 0:
            self._unanswered.append(correlation_id)   # Kafka never answers these
        else:
            self._pending[correlation_id] = (key, version)
        return correlation_id

    def receive(self, correlation_id):
        """Wait for the response to an earlier :meth:`send`; responses to
        other requests in flight that arrive first are kept for their turn.

        Args:
            correlation_id: What :meth:`send` returned.

        Returns:
            Response: The decoded response.
        """
        if correlation_id in self._arrived:
            return self._arrived.pop(correlation_id)
        if correlation_id not in self._pending:
            raise ProtocolError(f"no request in flight with correlation id {correlation_id}")
        deadline = time.monotonic() + self.timeout
        while True:
            frame = self._io(self._read_frame, deadline)
            got = peek_correlation_id(frame)
            if got in self._unanswered:
                continue                   # librdkafka's mock answers acks=0 all the same
            if got not in self._pending:
                self.close()
                raise ProtocolError(f"response with unknown correlation id {got}", position=0)
            key, version = self._pending.pop(got)
            if key == 18 and _error_code_first(frame) == UNSUPPORTED_VERSION:
                response = _unsupported_api_versions(frame, got)
            else:
                response = decode_response(frame, key, version, trailing="ignore")
            if got == correlation_id:
                return response
            self._arrived[got] = response

    def request(self, api, version, body, *, check=True):
        """Send a request and return the body of its response.

        Args:
            api: The API's name (``"Metadata"``) or key.
            version: The API version; None: the highest both sides support.
            body: The request body: a dict keyed by Kafka's field names in
                snake_case.
            check: Raise :class:`BrokerError` for a non-zero error code
                anywhere in the response.

        Returns:
            dict | None: The response body (None for a Produce with
            ``acks=0``).
        """
        key = api_key(api)
        version = self.version_for(key, version)
        correlation_id = self.send(key, version, body)
        if correlation_id not in self._pending:
            return None
        body = self.receive(correlation_id).body
        if check:
            error = find_broker_error(API_NAMES[key], body)
            if error is not None:
                raise error
        return body

    # -- record-level helpers -------------------------------------------------

    def metadata(self, topics=None, version=None, allow_auto_topic_creation=True):
        """Send a Metadata request (which also learns topic ids).

        Args:
            topics: Topic names, or None for all topics.
            version: The API version (None: the highest both support).
            allow_auto_topic_creation: Let the broker create missing topics.

        Returns:
            dict: The Metadata response body (errors are not raised).
        """
        version = self.version_for("Metadata", version)
        wanted = None if topics is None else [{"name": t} for t in topics]
        if wanted is None and version == 0:
            wanted = []                    # v0 has no null: an empty list means all
        body = self.request("Metadata", version, {
            "topics": wanted, "allow_auto_topic_creation": allow_auto_topic_creation},
            check=False)
        for topic in body["topics"]:
            if topic["name"] is not None and topic["topic_id"].int:
                self._topic_ids[topic["name"]] = topic["topic_id"]
        return body

    def topic_id(self, topic):
        """A topic's id (from Metadata v10+), as Produce v13 and Fetch v13+
        need it.

        Args:
            topic: The topic's name.

        Returns:
            uuid.UUID: Its id.
        """
        if topic not in self._topic_ids:
            body = self.metadata([topic], version=self.version_for("Metadata"))
            error = find_broker_error("Metadata", body)
            if error is not None:
                raise error
        if topic not in self._topic_ids:
            raise UnsupportedVersionError(f"the broker gave no topic id for {topic!r}",
                                          api="Metadata")
        return self._topic_ids[topic]

    def produce(self, topic, partition, records, *, acks=-1, transactional_id=None,
                version=None, timeout_ms=30000):
        """Produce one record set to one partition.

        Args:
            topic: The topic.
            partition: The partition.
            records: A record set (bytes-like, e.g. from :func:`kcodec.encode`).
            acks: -1 (all in-sync replicas), 1 (the leader) or 0 (no answer).
            transactional_id: The transactional id of a transactional batch.
            version: The Produce version (None: the highest both support).
            timeout_ms: How long the broker may wait for the acks.

        Returns:
            int | None: The base offset the broker assigned (None for
            ``acks=0``).

        Raises:
            BrokerError: For a non-zero error code.
        """
        version = self.version_for("Produce", version)
        topic_id = self.topic_id(topic) if version >= 13 else None
        body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
                "topic_data": [{"name": topic, "topic_id": topic_id, "partition_data": [
                    {"index": partition, "records": records}]}]}
        response = self.request("Produce", version, body, check=False)
        if response is None:
            return None
        self._raise_for("Produce", response, topic)
        return response["responses"][0]["partition_responses"][0]["base_offset"]

    def fetch(self, topic, partition, offset, *, max_bytes=1 << 20, isolation_level=0,
              version=None, max_wait_ms=100, min_bytes=1):
        """Fetch one partition from an offset.

        Args:
            topic: The topic.
            partition: The partition.
            offset: The offset to fetch from.
            max_bytes: The most bytes of records wanted.
            isolation_level: 0 (read_uncommitted) or 1 (read_committed).
            version: The Fetch version (None: the highest both support).
            max_wait_ms: How long the broker may wait for ``min_bytes``.
            min_bytes: The least bytes the broker waits for.

        Returns:
            dict: The partition's part of the response: ``"records"`` (a
            memoryview into the response frame), ``"high_watermark"``,
            ``"last_stable_offset"``, ``"aborted_transactions"`` (a list of
            :data:`AbortedTransaction`, or None), ...

        Raises:
            BrokerError: For a non-zero error code.
        """
        version = self.version_for("Fetch", version)
        topic_id = self.topic_id(topic) if version >= 13 else None
        body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
                "max_bytes": max_bytes, "isolation_level": isolation_level,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                    {"partition": partition, "fetch_offset": offset,
                     "partition_max_bytes": max_bytes}]}]}
        response = self.request("Fetch", version, body, check=False)
        self._raise_for("Fetch", response, topic)
        for topic_data in response["responses"]:
            for part in topic_data["partitions"]:
                if part["partition_index"] == partition:
                    return part
        raise ProtocolError(f"the Fetch response has no partition {topic} {partition}",
                            api="Fetch", version=version)

    def list_offsets(self, topic, partition, timestamp, *, isolation_level=0, version=None):
        """Ask the offset for a timestamp (ListOffsets) of one partition.

        Args:
            topic: The topic.
            partition: The partition.
            timestamp: A time in ms, -1 (latest) or -2 (earliest).
            isolation_level: 0 (read_uncommitted) or 1 (read_committed).
            version: The ListOffsets version (None: the highest both support).

        Returns:
            ListedOffset: ``(offset, timestamp)``.

        Raises:
            BrokerError: For a non-zero error code.
        """
        version = self.version_for("ListOffsets", version)
        body = {"replica_id": -1, "isolation_level": isolation_level, "timeout_ms": 30000,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": partition, "timestamp": timestamp}]}]}
        response = self.request("ListOffsets", version, body, check=False)
        self._raise_for("ListOffsets", response, topic)
        part = response["topics"][0]["partitions"][0]
        if version == 0:
            offsets = part["old_style_offsets"]
            return ListedOffset(offsets[0] if offsets else -1, -1)
        return ListedOffset(part["offset"], part["timestamp"])

    @staticmethod
    def _raise_for(api, response, topic):
        error = find_broker_error(api, response)
        if error is not None:              # name the topic even where v13+ gives only its id
            raise BrokerError(error.code, api=api, topic=topic, partition=error.partition,
                              message=error.error_message)

    # -- socket ---------------------------------------------------------------

    def _io(self, operation, *args):
        if self._sock is None:
            raise ConnectionLost("the connection is closed")
        try:
            return operation(*args)
        except (socket.timeout, TimeoutError):
            self.close()
            raise RequestTimedOut(f"no response within {self.timeout} s") from None
        except (ProtocolError, ConnectionLost):
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise ConnectionLost(str(exc)) from exc

    def _sendall(self, frame):
        self._sock.settimeout(self.timeout)
        self._sock.sendall(frame)

    def _read_frame(self, deadline):
        prefix = self._read_exact(4, deadline)
        size = frame_size(prefix, 0, self.max_frame_bytes, position=0)
        return self._read_exact(size, deadline)

    def _read_exact(self, n, deadline):
        buffer = bytearray(n)
        view = memoryview(buffer)
        got = 0
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout()
            self._sock.settimeout(remaining)
            count = self._sock.recv_into(view[got:])
            if not count:
                raise ConnectionLost("the broker closed the connection")
            got += count
        view.release()
        return buffer


__all__ = ["Connection", "ListedOffset", "find_broker_error"]
