"""librdkafka as a peer: produce through librdkafka's in-process mock cluster
(``test.mock.num.brokers``), then fetch the stored log raw over TCP.

The mock broker stores each produced record set verbatim (it only patches the
base offset), so the bytes returned by :func:`fetch_raw` are what librdkafka
wrote.  Exceptions: transaction markers (control batches) are written by the
mock itself, with CRC 0 and zero timestamps -- see :func:`fix_control_crcs`.

What the mock (librdkafka 2.16) accepts, found by trying:

* magic 2 with none/gzip/snappy/lz4/zstd, idempotent and transactional
  producers; commit/abort store a one-record COMMIT/ABORT control batch.
* legacy magic 0/1 only *uncompressed* (compressed legacy sets are refused
  with UNSUPPORTED_VERSION).  Magic 0 comes from ``broker_version="0.9.0"``;
  magic 1 needs the mock's Produce API capped at v2 (``produce_api_max=2``,
  done through ctypes because confluent-kafka does not expose the mock API).
  librdkafka silently drops zstd to "none" when talking to such old brokers.
* Fetch answers: LastStableOffset == HighWatermark and the aborted
  transactions list is always empty; one stored record set per response.
"""
from __future__ import annotations

import ctypes
import glob
import os
import socket
import struct
from dataclasses import dataclass, field

import confluent_kafka

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

API_PRODUCE = 0
API_FETCH = 1
API_VERSIONS = 18

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms since epoch (0 would mean "now" to librdkafka)
    headers: tuple = ()  # ((str, bytes | None), ...)


# --------------------------------------------------------------------------
# The mock cluster
# --------------------------------------------------------------------------


def _librdkafka():
    """The librdkafka shared object confluent-kafka already loaded."""
    pkg = os.path.dirname(confluent_kafka.__file__)
    found = glob.glob(os.path.join(pkg + ".libs", "librdkafka*.so*"))
    lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [vp]
    lib.rd_kafka_handle_mock_cluster.restype = vp
    lib.rd_kafka_handle_mock_cluster.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_set_apiversion.argtypes = [vp] + [ctypes.c_int16] * 3
    return lib


class _NativeMock:
    """A mock cluster created through the C API, so its API versions can be
    restricted (rd_kafka_mock_set_apiversion)."""

    def __init__(self, num_brokers: int):
        self.lib = lib = _librdkafka()
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for k, v in (("test.mock.num.brokers", str(num_brokers)), ("log_level", "3")):
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), err, len(err)):
                raise RuntimeError(err.value.decode())
        self.rk = lib.rd_kafka_new(0, conf, err, len(err))  # 0 = producer
        if not self.rk:
            raise RuntimeError(err.value.decode())
        self.mcluster = lib.rd_kafka_handle_mock_cluster(self.rk)
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self.mcluster).decode()

    def set_api_versions(self, api_key: int, lo: int, hi: int) -> None:
        if self.lib.rd_kafka_mock_set_apiversion(self.mcluster, api_key, lo, hi):
            raise RuntimeError("rd_kafka_mock_set_apiversion failed")

    def close(self) -> None:
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None


class MockCluster:
    """A librdkafka mock cluster living inside this process.

    By default it is owned by a confluent_kafka.Producer created with
    ``test.mock.num.brokers``.  With ``produce_api_max`` it is created through
    the C API instead and the broker advertises Produce v0..produce_api_max
    (2 -> producers write magic 1, 0 or 1 -> magic 0).
    """

    def __init__(self, num_brokers: int = 1, *, produce_api_max: int | None = None):
        self._native = None
        self._owner = None
        if produce_api_max is None:
            self._owner = confluent_kafka.Producer(
                {"test.mock.num.brokers": num_brokers, "log_level": 3})
            brokers = self._owner.list_topics(timeout=10).brokers
            first = brokers[min(brokers)]
            self.host, self.port = first.host, first.port
        else:
            self._native = _NativeMock(num_brokers)
            self._native.set_api_versions(API_PRODUCE, 0, produce_api_max)
            host, port = self._native.bootstrap.split(",")[0].rsplit(":", 1)
            self.host, self.port = host, int(port)
        self._topics = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def new_topic(self, prefix: str = "t") -> str:
        self._topics += 1
        return f"{prefix}-{self._topics}"

    def close(self) -> None:
        self._owner = None  # last reference: destroys the client and cluster
        if self._native is not None:
            self._native.close()
            self._native = None

    def __enter__(self) -> "MockCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def produce(self, messages, *, topic: str, **kwargs) -> list[Message]:
        return produce(self.bootstrap, messages, topic=topic, **kwargs)

    def fetch(self, topic: str, partition: int = 0, **kwargs) -> "FetchResult":
        return fetch_raw(self.address, topic, partition, **kwargs)


# --------------------------------------------------------------------------
# Producing with librdkafka
# --------------------------------------------------------------------------


def produce(
    bootstrap: str,
    messages,
    *,
    topic: str,
    partition: int = 0,
    compression: str = "none",
    idempotent: bool = False,
    transactional: str | None = None,  # None | "commit" | "abort"
    linger_ms: int = 20,
    batch_size: int = 16384,
    broker_version: str | None = None,  # "0.9.0" -> no ApiVersions, magic 0
    extra_config: dict | None = None,
    timeout: float = 15.0,
) -> list[Message]:
    """Produce ``messages`` (Message or (key, value, timestamp, headers)) with
    a fresh confluent_kafka.Producer, wait for every delivery report and
    return the messages sent, in order.  A transaction (if any) spans all of
    them; each call with ``transactional`` uses a new producer id."""
    if compression not in CODECS:
        raise ValueError(f"unknown codec {compression!r}")
    if transactional not in (None, "commit", "abort"):
        raise ValueError("transactional must be None, 'commit' or 'abort'")
    messages = [m if isinstance(m, Message) else Message(*m) for m in messages]
    conf = {
        "bootstrap.servers": bootstrap,
        "compression.codec": compression,
        "linger.ms": linger_ms,
        "batch.size": batch_size,
        "enable.idempotence": idempotent or transactional is not None,
        "log_level": 3,
    }
    if broker_version is not None:
        conf["api.version.request"] = False
        conf["broker.version.fallback"] = broker_version
    if transactional is not None:
        conf["transactional.id"] = f"kcodec-{topic}"
    conf.update(extra_config or {})

    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    producer = confluent_kafka.Producer(conf)
    if transactional is not None:
        producer.init_transactions(timeout)
        producer.begin_transaction()
    for m in messages:
        producer.produce(
            topic, value=m.value, key=m.key, partition=partition,
            timestamp=m.timestamp, headers=list(m.headers) or None,
            on_delivery=on_delivery)
        producer.poll(0)
    if transactional == "commit":
        producer.commit_transaction(timeout)
    elif transactional == "abort":
        producer.flush(timeout)  # store the data, then abort it
        producer.abort_transaction(timeout)
    undelivered = producer.flush(timeout)
    if undelivered or errors:
        raise RuntimeError(f"produce failed: {undelivered} undelivered, errors {errors[:3]}")
    return messages


# --------------------------------------------------------------------------
# Minimal Kafka wire client: ApiVersions v0, Fetch v4..v11 (non-flexible)
# --------------------------------------------------------------------------


@dataclass
class FetchResult:
    records: bytes  # the partition's raw `records` fields, concatenated
    high_watermark: int
    last_stable_offset: int
    aborted: list = field(default_factory=list)  # [(producer_id, first_offset)]
    version: int = 0  # Fetch version used
    rounds: int = 0  # Fetch requests needed


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        vals = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(">" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def raw(self, n: int) -> bytes:
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def string(self) -> str | None:
        n = self.take("h")
        return None if n < 0 else self.raw(n).decode()


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Connection:
    """One blocking TCP connection; requests use header v1, responses v0."""

    def __init__(self, address, timeout: float = 10.0, client_id: str = "kcodec-test"):
        self.sock = socket.create_connection(address, timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: bytes) -> _Reader:
        self._correlation += 1
        msg = struct.pack(">hhi", api_key, version, self._correlation)
        msg += _string(self.client_id) + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        (size,) = struct.unpack(">i", self._recv_exact(4))
        reply = _Reader(self._recv_exact(size))
        if reply.take("i") != self._correlation:
            raise ConnectionError("correlation id mismatch")
        return reply

    def api_versions(self) -> dict[int, tuple[int, int]]:
        r = self.request(API_VERSIONS, 0, b"")
        if err := r.take("h"):
            raise RuntimeError(f"ApiVersions error {err}")
        return {key: (lo, hi) for key, lo, hi in (r.take("hhh") for _ in range(r.take("i")))}

    def fetch(self, topic: str, partition: int, offset: int, *, version: int,
              isolation: int = READ_UNCOMMITTED, max_bytes: int = 64 << 20):
        """One Fetch round trip for one partition.
        Returns (error_code, high_watermark, last_stable_offset, aborted, records)."""
        if not 4 <= version <= 11:
            raise ValueError("only the non-flexible Fetch v4..v11 is implemented")
        # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level
        body = struct.pack(">iiiib", -1, 100, 1, max_bytes, isolation)
        if version >= 7:
            body += struct.pack(">ii", 0, -1)  # session id/epoch: no session
        part = struct.pack(">i", partition)
        if version >= 9:
            part += struct.pack(">i", -1)  # current leader epoch: unknown
        part += struct.pack(">q", offset)
        if version >= 5:
            part += struct.pack(">q", -1)  # log start offset (followers only)
        part += struct.pack(">i", max_bytes)
        body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1) + part
        if version >= 7:
            body += struct.pack(">i", 0)  # forgotten topics
        if version >= 11:
            body += _string("")  # rack id

        r = self.request(API_FETCH, version, body)
        r.take("i")  # throttle_time_ms
        if version >= 7:
            err, _session_id = r.take("hi")
            if err:
                return err, -1, -1, [], b""
        found = None
        for _ in range(r.take("i")):
            name = r.string()
            for _ in range(r.take("i")):
                index, err, hw, lso = r.take("ihqq")
                if version >= 5:
                    r.take("q")  # log_start_offset
                n = r.take("i")  # -1 means null
                aborted = [tuple(r.take("qq")) for _ in range(max(n, 0))]
                if version >= 11:
                    r.take("i")  # preferred_read_replica
                size = r.take("i")
                records = r.raw(size) if size > 0 else b""
                if (name, index) == (topic, partition):
                    found = (err, hw, lso, aborted, records)
        if found is None:
            raise RuntimeError("partition missing from the Fetch response")
        return found


def next_offset(records: bytes, start: int) -> int:
    """The offset following the last complete entry of ``records``.

    Each entry starts with [int64 offset][int32 size] and has its magic at
    byte 16.  A v2 batch's offset is its base offset (lastOffsetDelta is the
    int32 at byte 23); a legacy (wrapper) message carries its last offset.
    """
    pos, nxt = 0, start
    while pos + 17 <= len(records):
        offset, size = struct.unpack_from(">qi", records, pos)
        if pos + 12 + size > len(records):
            break  # a truncated entry ends the data
        if records[pos + 16] >= 2:
            offset += struct.unpack_from(">i", records, pos + 23)[0]
        nxt = max(nxt, offset + 1)
        pos += 12 + size
    return nxt


def fetch_raw(address, topic: str, partition: int = 0, *, version: int = 11,
              read_committed: bool = False, timeout: float = 10.0,
              max_rounds: int = 10_000) -> FetchResult:
    """Fetch ``topic``/``partition`` from offset 0 up to the high watermark
    (last stable offset with ``read_committed``) and return the raw record
    bytes exactly as the broker sent them, concatenated over the Fetch
    responses needed."""
    isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
    chunks, aborted, offset = [], [], 0
    with Connection(address, timeout=timeout) as conn:
        lo, hi = conn.api_versions().get(API_FETCH, (0, -1))
        if not lo <= version <= hi:
            raise RuntimeError(f"broker supports Fetch v{lo}..v{hi}, not v{version}")
        for rounds in range(1, max_rounds + 1):
            err, hw, lso, ab, records = conn.fetch(
                topic, partition, offset, version=version, isolation=isolation)
            if err:
                raise RuntimeError(f"Fetch error code {err} at offset {offset}")
            aborted += [a for a in ab if a not in aborted]
            end = lso if read_committed else hw
            if records:
                chunks.append(records)
                offset = next_offset(records, offset)
            if offset >= end:
                return FetchResult(b"".join(chunks), hw, lso, aborted, version, rounds)
            if not records:
                raise RuntimeError(f"no data at offset {offset} below {end}")
    raise RuntimeError("Fetch did not reach the end of the partition")


# --------------------------------------------------------------------------
# Mock quirk
# --------------------------------------------------------------------------


def fix_control_crcs(records: bytes) -> bytes:
    """Return ``records`` with the CRC of every v2 *control* batch recomputed.

    The mock broker writes its COMMIT/ABORT batches with CRC 0 (a real broker
    writes a valid CRC-32C); data batches are left untouched.
    """
    from kafka.record.util import calc_crc32c

    out = bytearray(records)
    pos = 0
    while pos + 12 <= len(out):
        end = pos + 12 + struct.unpack_from(">i", out, pos + 8)[0]
        if end > len(out):
            break
        if out[pos + 16] == 2 and out[pos + 22] & 0x20:  # attributes, low byte
            struct.pack_into(">I", out, pos + 17, calc_crc32c(memoryview(out)[pos + 21 : end]))
        pos = end
    return bytes(out)
