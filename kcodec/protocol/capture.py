"""Decode the Kafka traffic in a packet capture (pcap or pcapng, read with
dpkt): reassemble each TCP direction, split it into frames, match responses to
requests by correlation id, and yield the record sets carried by Produce
requests and Fetch responses. Damage (gaps, frames that do not parse) is
reported through `warn` and stops only the stream or frame concerned."""
import socket
from collections import namedtuple

from .._extras import require
from .errors import ProtocolError
from .frames import (
    DEFAULT_MAX_FRAME_BYTES, FrameSplitter, decode_request, decode_response,
    peek_correlation_id, peek_request,
)
from .messages import RESPONSES

PRODUCE, FETCH, METADATA = 0, 1, 3
MAX_PENDING_BYTES = 64 << 20     # out-of-order data held per direction before giving up
MAX_PENDING_REQUESTS = 100_000   # requests awaiting a response per connection

dpkt = require("dpkt", "reading pcap and pcapng captures")

CapturedRecords = namedtuple(
    "CapturedRecords",
    "api api_version correlation_id topic partition records time client server")
CapturedRecords.__doc__ = ("A record set found in a capture: the API and version, correlation id, "
                           "topic, partition, records (a memoryview), packet time, client and "
                           "server addresses.")

_RAW_LINKS = (dpkt.pcap.DLT_RAW, 14, 101)


def _ip_packet(linktype, buf):
    if linktype == dpkt.pcap.DLT_EN10MB:
        return dpkt.ethernet.Ethernet(buf).data
    if linktype == dpkt.pcap.DLT_LINUX_SLL:
        return dpkt.sll.SLL(buf).data
    if linktype == 276:                                  # LINUX_SLL2
        return dpkt.sll2.SLL2(buf).data
    if linktype in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
        return dpkt.loopback.Loopback(buf).data
    if linktype in _RAW_LINKS:
        return (dpkt.ip6.IP6 if buf[:1] and buf[0] >> 4 == 6 else dpkt.ip.IP)(buf)
    raise ProtocolError(f"unsupported capture link type {linktype}")


def _address(ip, raw):
    family = socket.AF_INET6 if isinstance(ip, dpkt.ip6.IP6) else socket.AF_INET
    return socket.inet_ntop(family, raw)


class _Direction:
    """One direction of a TCP connection: segments in sequence order, with
    retransmissions and overlaps trimmed, into a frame splitter."""

    def __init__(self, name, max_frame_bytes, warn):
        self.name = name
        self.warn = warn
        self.next_seq = None
        self.held = {}            # seq -> payload arrived ahead of next_seq
        self.held_bytes = 0
        self.splitter = FrameSplitter(max_frame_bytes)
        self.stopped = False

    def add(self, seq, payload, syn):
        if self.stopped:
            return []
        if syn:
            self.next_seq = (seq + 1) & 0xFFFFFFFF
        if not payload:
            return []
        if self.next_seq is None:                 # joined mid-stream: start here
            self.next_seq = seq
        ahead = ((seq - self.next_seq + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        if ahead > 0:
            if len(payload) > len(self.held.get(seq, b"")):
                self.held_bytes += len(payload) - len(self.held.get(seq, b""))
                self.held[seq] = payload
            if self.held_bytes > MAX_PENDING_BYTES:
                self.stop(f"more than {MAX_PENDING_BYTES} bytes arrived after a gap at "
                          f"sequence {self.next_seq}")
            return []
        frames = self._deliver(payload[-ahead:] if ahead < 0 else payload)
        while self.held and not self.stopped:
            progressed = False
            for held_seq in list(self.held):
                offset = ((held_seq - self.next_seq + 0x80000000) & 0xFFFFFFFF) - 0x80000000
                if offset > 0:
                    continue
                data = self.held.pop(held_seq)
                self.held_bytes -= len(data)
                frames += self._deliver(data[-offset:])
                progressed = True
            if not progressed:
                break
        return frames

    def _deliver(self, data):
        if not data:
            return []
        self.next_seq = (self.next_seq + len(data)) & 0xFFFFFFFF
        try:
            return self.splitter.feed(data)
        except ProtocolError as exc:
            self.stop(f"not a Kafka stream here: {exc}")
            return []

    def stop(self, reason):
        self.stopped = True
        self.held.clear()
        self.warn(f"{self.name}: {reason}; the rest of this direction is skipped")

    def finish(self):
        if self.stopped:
            return
        if self.held:
            missing = min(((s - self.next_seq) & 0xFFFFFFFF) for s in self.held)
            self.warn(f"{self.name}: {missing} bytes missing at sequence {self.next_seq}; "
                      f"{self.held_bytes} bytes after the gap are skipped")
        elif self.splitter.pending:
            self.warn(f"{self.name}: capture ends inside a frame "
                      f"({self.splitter.pending} bytes of it)")


class _Connection:
    def __init__(self, client, server, max_frame_bytes, warn):
        label = f"{client[0]}:{client[1]} -> {server[0]}:{server[1]}"
        self.client, self.server = client, server
        self.requests = _Direction(f"{label} (requests)", max_frame_bytes, warn)
        self.responses = _Direction(f"{label} (responses)", max_frame_bytes, warn)
        self.pending = {}     # correlation id -> (api_key, api_version)


class CaptureReader:
    """Reads the Kafka traffic of one capture file (pcap or pcapng); iterate
    to get a ``CapturedRecords`` per record set carried by a Produce request
    or a Fetch response: ``api, api_version, correlation_id, topic,
    partition, records`` (a memoryview), ``time, client, server``.

    ``topic_names`` fills in the topic of Produce v13+ / Fetch v13+ (which
    carry topic ids) from Metadata responses seen earlier in the capture.

    Args:
        path: The capture file.
        port: The broker's TCP port.
        max_frame_bytes: The largest Kafka frame accepted.
        warn: Called with a message for each stream or frame given up on
            (a gap, a frame that does not parse); they are also kept in
            ``warnings``.
    """

    def __init__(self, path, port, *, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES, warn=None):
        self.path = path
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.warnings = []
        self._warn_to = warn
        self.topic_names = {}
        self.frames = 0

    def warn(self, message):
        self.warnings.append(message)
        if self._warn_to is not None:
            self._warn_to(message)

    def __iter__(self):
        connections = {}
        with open(self.path, "rb") as f:
            try:
                reader = dpkt.pcap.UniversalReader(f)
            except (ValueError, dpkt.dpkt.UnpackError) as exc:
                raise ProtocolError(f"not a pcap or pcapng file: {exc}", source=self.path) \
                    from None
            linktype = reader.datalink()
            for time, buf in self._packets(reader):
                try:
                    ip = _ip_packet(linktype, buf)
                except (dpkt.dpkt.UnpackError, IndexError, ValueError):
                    continue
                tcp = getattr(ip, "data", None)
                if not isinstance(tcp, dpkt.tcp.TCP) or self.port not in (tcp.sport, tcp.dport):
                    continue
                yield from self._segment(connections, ip, tcp, time)
        for conn in connections.values():
            conn.requests.finish()
            conn.responses.finish()

    def _packets(self, reader):
        """The capture's packets, up to the first that cannot be read: a capture
        cut short (a killed tcpdump) or damaged ends there, with a warning."""
        packets = iter(reader)
        number = 0
        while True:
            number += 1
            try:
                packet = next(packets)
            except StopIteration:
                return
            except (dpkt.dpkt.UnpackError, ValueError, EOFError) as exc:
                self.warn(f"{self.path}: the capture ends inside packet {number} "
                          f"({type(exc).__name__}: {exc}); decoded what came before")
                return
            yield packet

    def _segment(self, connections, ip, tcp, time):
        src = (_address(ip, ip.src), tcp.sport)
        dst = (_address(ip, ip.dst), tcp.dport)
        to_server = tcp.dport == self.port
        client, server = (src, dst) if to_server else (dst, src)
        conn = connections.get((client, server))
        if conn is None:
            conn = connections[(client, server)] = _Connection(
                client, server, self.max_frame_bytes, self.warn)
        direction = conn.requests if to_server else conn.responses
        syn = bool(tcp.flags & dpkt.tcp.TH_SYN)
        for frame in direction.add(tcp.seq, bytes(tcp.data), syn):
            self.frames += 1
            if to_server:
                yield from self._request(conn, frame, time)
            else:
                yield from self._response(conn, frame, time)

    def _request(self, conn, frame, time):
        try:
            api_key, version, correlation_id = peek_request(frame)
        except ProtocolError as exc:
            self.warn(f"{conn.requests.name}: {exc}")
            return
        if len(conn.pending) < MAX_PENDING_REQUESTS:
            conn.pending[correlation_id] = (api_key, version)
        if api_key != PRODUCE:
            return
        try:
            request = decode_request(frame, trailing="ignore")
        except ProtocolError as exc:
            self.warn(f"{conn.requests.name}: {exc}")
            return
        if request.body["acks"] == 0:
            conn.pending.pop(correlation_id, None)
        for topic in request.body["topic_data"]:
            name = self._topic(topic["name"], topic["topic_id"], version)
            for part in topic["partition_data"]:
                if part["records"] is not None:
                    yield CapturedRecords("Produce", version, correlation_id, name,
                                          part["index"], part["records"], time, conn.client,
                                          conn.server)

    def _response(self, conn, frame, time):
        try:
            correlation_id = peek_correlation_id(frame)
        except ProtocolError as exc:
            self.warn(f"{conn.responses.name}: {exc}")
            return
        request = conn.pending.pop(correlation_id, None)
        if request is None:
            self.warn(f"{conn.responses.name}: response {correlation_id} answers no request "
                      f"seen in the capture")
            return
        api_key, version = request
        if api_key not in (FETCH, METADATA):
            return
        if api_key not in RESPONSES or version not in RESPONSES[api_key].valid:
            return
        try:
            body = decode_response(frame, api_key, version, trailing="ignore").body
        except ProtocolError as exc:
            self.warn(f"{conn.responses.name}: {exc}")
            return
        if api_key == METADATA:
            for topic in body["topics"]:
                if topic["name"] and topic["topic_id"].int:
                    self.topic_names[topic["topic_id"]] = topic["name"]
            return
        for topic in body["responses"]:
            name = self._topic(topic["topic"], topic["topic_id"], version)
            for part in topic["partitions"]:
                if part["records"] is not None and len(part["records"]):
                    yield CapturedRecords("Fetch", version, correlation_id, name,
                                          part["partition_index"], part["records"], time,
                                          conn.client, conn.server)

    def _topic(self, name, topic_id, version):
        if version >= 13:
            return self.topic_names.get(topic_id, str(topic_id))
        return name

