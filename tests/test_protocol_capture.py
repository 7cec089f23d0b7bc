"""kcodec capture: TCP reassembly and record extraction on captures built
here (retransmissions, reordering, overlaps, gaps, pcap and pcapng), and on a
real tcpdump capture of librdkafka talking to its mock cluster."""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import dpkt
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kcodec  # noqa: E402
from kcodec.protocol import ProtocolError, encode_request, encode_response  # noqa: E402
from kcodec.protocol.capture import CaptureReader  # noqa: E402
from needs import require_module, unavailable  # noqa: E402

PORT = 9092
BASE_TS = 1_700_000_000_000
CLIENT, SERVER = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "kcodec.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


class Tcp:
    """Builds the packets of one TCP connection, each direction's sequence
    numbers kept right; segments can then be reordered, repeated or dropped."""

    def __init__(self, client_port, isn_c=1000, isn_s=0xFFFFFF00):
        self.client_port = client_port
        self.seq = {True: isn_c, False: isn_s}     # True: client -> server
        self.packets = []

    def _packet(self, to_server, seq, payload, flags):
        tcp = dpkt.tcp.TCP(sport=self.client_port if to_server else PORT,
                           dport=PORT if to_server else self.client_port,
                           seq=seq & 0xFFFFFFFF, flags=flags, data=payload)
        ip = dpkt.ip.IP(src=CLIENT if to_server else SERVER, dst=SERVER if to_server else CLIENT,
                        p=dpkt.ip.IP_PROTO_TCP, data=tcp)
        ip.len = len(bytes(ip))
        return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                            type=dpkt.ethernet.ETH_TYPE_IP, data=ip))

    def syn(self):
        for to_server in (True, False):
            self.packets.append(self._packet(to_server, self.seq[to_server], b"",
                                             dpkt.tcp.TH_SYN))
            self.seq[to_server] += 1

    def send(self, to_server, data, pieces=1):
        """Segments of data (cut into `pieces`); returns their packets' indexes."""
        step = -(-len(data) // pieces)
        indexes = []
        for start in range(0, len(data), step):
            indexes.append(len(self.packets))
            self.packets.append(self._packet(to_server, self.seq[to_server] + start,
                                             data[start:start + step], dpkt.tcp.TH_ACK))
        self.seq[to_server] += len(data)
        return indexes

    def resend(self, to_server, data, offset_back):
        """A retransmission overlapping the last `offset_back` bytes sent."""
        self.packets.append(self._packet(to_server, self.seq[to_server] - offset_back, data,
                                         dpkt.tcp.TH_ACK))


def write_pcap(path, packets, ng=False):
    with open(path, "wb") as f:
        writer = (dpkt.pcapng.Writer if ng else dpkt.pcap.Writer)(f)
        for i, packet in enumerate(packets):
            writer.writepkt(packet, ts=1_700_000_000 + i / 1000)


def record_set(values, base=0):
    return kcodec.encode([(b"k-%d" % i, v, BASE_TS + i, []) for i, v in enumerate(values)],
                         base_offset=base)


def produce_frame(correlation_id, topic, data, version=9):
    return encode_request("Produce", version, {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 2, "records": data}]}]}, correlation_id)


def produce_reply(correlation_id, topic, version=9):
    return encode_response("Produce", version, {"responses": [{"name": topic,
                           "partition_responses": [{"index": 2}]}]}, correlation_id)


def fetch_frames(correlation_id, topic, data, version=12):
    request = encode_request("Fetch", version, {"max_wait_ms": 10, "min_bytes": 1, "topics": [
        {"topic": topic, "partitions": [{"partition": 2, "fetch_offset": 0,
                                         "partition_max_bytes": 1 << 20}]}]}, correlation_id)
    response = encode_response("Fetch", version, {"responses": [{"topic": topic, "partitions": [
        {"partition_index": 2, "high_watermark": 3, "records": data}]}]}, correlation_id)
    return request, response


def found_values(reader):
    return [(f.api, f.api_version, f.correlation_id, f.topic, f.partition,
             [r.value for r in kcodec.read_records(f.records)]) for f in reader]


@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_reassembly_with_reordering_retransmission_and_overlap(tmp_path, ng):
    tcp = Tcp(50000)
    tcp.syn()
    produce = produce_frame(5, "orders", record_set([b"a", b"b", b"c"]))
    idx = tcp.send(True, produce, pieces=4)
    tcp.packets[idx[1]], tcp.packets[idx[2]] = tcp.packets[idx[2]], tcp.packets[idx[1]]
    tcp.resend(True, produce[-30:], offset_back=30)            # a retransmission
    tcp.send(False, produce_reply(5, "orders"), pieces=2)
    request, response = fetch_frames(6, "orders", record_set([b"a", b"b", b"c"]))
    tcp.send(True, request)
    tcp.send(False, response[:50] + response[50:], pieces=5)
    tcp.resend(False, response[-10:] + b"", offset_back=10)
    path = tmp_path / ("c.pcapng" if ng else "c.pcap")
    write_pcap(path, tcp.packets, ng=ng)
    reader = CaptureReader(str(path), PORT)
    assert found_values(reader) == [
        ("Produce", 9, 5, "orders", 2, [b"a", b"b", b"c"]),
        ("Fetch", 12, 6, "orders", 2, [b"a", b"b", b"c"])]
    assert reader.warnings == [] and reader.frames == 4


def test_sequence_wraps_and_partial_overlap(tmp_path):
    tcp = Tcp(50001, isn_c=0xFFFFFFF0)                         # wraps within the first frame
    tcp.syn()
    frame = produce_frame(1, "t", record_set([b"x" * 100]))
    tcp.send(True, frame[:40])
    # one segment repeating 10 old bytes and carrying the rest
    tcp.packets.append(tcp._packet(True, tcp.seq[True] - 10, frame[30:], dpkt.tcp.TH_ACK))
    tcp.seq[True] += len(frame) - 40
    path = tmp_path / "wrap.pcap"
    write_pcap(path, tcp.packets)
    assert found_values(CaptureReader(str(path), PORT)) == [("Produce", 9, 1, "t", 2, [b"x" * 100])]


def test_gap_stops_that_stream_with_a_warning(tmp_path):
    good, bad = Tcp(50002), Tcp(50003)
    good.syn()
    bad.syn()
    bad.send(True, produce_frame(1, "t", record_set([b"before"])))
    lost = bad.send(True, produce_frame(2, "t", record_set([b"lost"])), pieces=3)
    del bad.packets[lost[1]]
    bad.send(True, produce_frame(3, "t", record_set([b"after"])))
    good.send(True, produce_frame(9, "u", record_set([b"fine"])))
    path = tmp_path / "gap.pcap"
    write_pcap(path, bad.packets + good.packets)
    reader = CaptureReader(str(path), PORT)
    assert [(f.correlation_id, f.topic) for f in reader] == [(1, "t"), (9, "u")]
    [warning] = reader.warnings
    assert "10.0.0.1:50003" in warning and "bytes missing at sequence" in warning


def test_garbage_stream_and_unmatched_response_are_warnings(tmp_path):
    tcp = Tcp(50004)
    tcp.syn()
    tcp.send(True, b"\x7f\xff\xff\xff" + b"GET / HTTP/1.1\r\n")   # a 2 GiB "frame"
    tcp.send(False, produce_reply(77, "t"))
    path = tmp_path / "junk.pcap"
    write_pcap(path, tcp.packets)
    reader = CaptureReader(str(path), PORT)
    assert list(reader) == []
    assert any("exceeds" in w and "skipped" in w for w in reader.warnings)
    assert any("response 77 answers no request" in w for w in reader.warnings)


@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_capture_cut_short_or_damaged_decodes_what_came_before(tmp_path, ng):
    """A capture cut inside a packet (tcpdump killed) or with damaged bytes
    gives the records before the damage and a warning, or a typed error;
    never a traceback from the capture library."""
    tcp = Tcp(50006)
    tcp.syn()
    tcp.send(True, produce_frame(8, "orders", record_set([b"a", b"b"])))
    tcp.send(False, produce_reply(8, "orders"))
    tcp.send(True, produce_frame(9, "orders", record_set([b"c"])))
    whole = tmp_path / "whole"
    write_pcap(whole, tcp.packets, ng=ng)
    data = whole.read_bytes()
    everything = found_values(CaptureReader(str(whole), PORT))
    assert [values for *_, values in everything] == [[b"a", b"b"], [b"c"]]
    cut = tmp_path / "cut"
    cut_in_header = 0
    for end in range(len(data) // 2, len(data)):
        cut.write_bytes(data[:end])
        reader = CaptureReader(str(cut), PORT)
        found = found_values(reader)
        assert found == everything[:len(found)]
        cut_in_header += any("the capture ends inside packet" in w for w in reader.warnings)
    assert cut_in_header
    rng = random.Random(6)
    for _ in range(300):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        cut.write_bytes(bytes(damaged))
        try:
            list(CaptureReader(str(cut), PORT))
        except ProtocolError:
            pass


def test_not_a_capture_is_a_typed_error(tmp_path):
    path = tmp_path / "x.pcap"
    path.write_bytes(b"this is not a capture file at all")
    result = run_cli("capture", path)
    assert result.returncode == 1 and "not a pcap or pcapng file" in result.stderr


def test_cli_prints_and_writes_parquet(tmp_path):
    tcp = Tcp(50005)
    tcp.syn()
    tcp.send(True, produce_frame(3, "orders", record_set([b"v1", b"v2" * 100])))
    request, response = fetch_frames(4, "orders", record_set([b"v1", b"v2" * 100], base=40),
                                     version=4)
    tcp.send(True, request)
    tcp.send(False, response)
    path = tmp_path / "cli.pcap"
    write_pcap(path, tcp.packets)
    result = run_cli("capture", path, "--port", PORT)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["api"], r["api_version"], r["correlation_id"], r["topic"], r["partition"],
             r["offset"], r["key"], r["value_size"]) for r in lines] == [
        ("Produce", 9, 3, "orders", 2, 0, "k-0", 2), ("Produce", 9, 3, "orders", 2, 1, "k-1", 200),
        ("Fetch", 4, 4, "orders", 2, 40, "k-0", 2), ("Fetch", 4, 4, "orders", 2, 41, "k-1", 200)]
    assert lines[1]["value"] == "v2" * 32                       # a summary: the first 64 bytes
    assert "4 records in 3 frames" in result.stderr
    out = tmp_path / "records.parquet"
    result = run_cli("capture", path, "--port", PORT, "--out", out)
    assert result.returncode == 0, result.stderr
    table = pq.read_table(out)
    assert table.column("api").to_pylist() == ["Produce"] * 2 + ["Fetch"] * 2
    assert table.column("correlation_id").to_pylist() == [3, 3, 4, 4]
    assert table.column("offset").to_pylist() == [0, 1, 40, 41]
    assert table.column("value").to_pylist() == [b"v1", b"v2" * 100] * 2
    assert set(table.column("topic").to_pylist()) == {"orders"}


# ----------------------------------------------------------------------------
# A real capture: tcpdump on the loopback interface, librdkafka and its mock
# ----------------------------------------------------------------------------

@pytest.fixture()
def tcpdump():
    path = shutil.which("tcpdump")
    if path is None:
        unavailable("tcpdump is not installed (apt-get install tcpdump)")
    return path


def start_capture(tcpdump, out, address):
    """tcpdump on lo for the broker's port, returned once packets reach the
    file (probe connections until one is written). Immediate mode: without
    it, packets wait in the kernel ring for up to a second and those still
    there at SIGINT are lost. A 64 MiB ring: each slot holds a whole loopback
    packet (up to 64 KiB), so the default 2 MiB ring holds a few dozen, and
    a burst while tcpdump waits for a CPU overflows it."""
    command = [tcpdump, "--immediate-mode", "-U", "-B", "65536", "-n", "-i", "lo",
               "-w", str(out),
               "tcp", "port", str(address[1])]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while not (out.exists() and out.stat().st_size > 24):     # 24: the pcap file header
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"tcpdump did not start capturing: "
                        f"{proc.communicate()[1].decode(errors='replace')}")
        socket.create_connection(address, timeout=5).close()
        time.sleep(0.05)
    return proc


def stop_capture(proc):
    """Stops tcpdump; returns how many packets the kernel dropped (its summary)."""
    time.sleep(0.3)                      # let the last packets reach the file
    proc.send_signal(signal.SIGINT)
    try:
        err = proc.communicate(timeout=15)[1].decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.kill()
        err = proc.communicate()[1].decode(errors="replace")
    dropped = re.search(r"(\d+) packets? dropped by kernel", err)
    return int(dropped.group(1)) if dropped else None


def test_tcpdump_capture_of_librdkafka_traffic(tmp_path, tcpdump):
    confluent_kafka = require_module("confluent_kafka")
    from peers.librdkafka_mock import Message, MockCluster

    from kcodec.protocol import Connection

    with MockCluster() as cluster:
        pcap = tmp_path / "kafka.pcap"
        proc = start_capture(tcpdump, pcap, cluster.address)
        try:
            sent = [Message(b"key-%d" % i, b"value-%d" % i, BASE_TS + i, (("h", b"x"),))
                    for i in range(40)]
            cluster.produce(sent, topic="captured", compression="lz4", batch_size=600)
            consumer = confluent_kafka.Consumer({
                "bootstrap.servers": cluster.bootstrap, "group.id": "capture",
                "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 3})
            consumer.assign([confluent_kafka.TopicPartition("captured", 0, 0)])
            consumed, deadline = [], time.monotonic() + 20
            while len(consumed) < len(sent) and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    consumed.append(msg.value())
            consumer.close()
            assert len(consumed) == len(sent)
            with Connection(cluster.host, cluster.port) as conn:
                conn.fetch("captured", 0, 0, version=11)
        finally:
            dropped = stop_capture(proc)
        assert dropped == 0, f"tcpdump's kernel ring dropped {dropped} packets"

    result = run_cli("capture", pcap, "--port", cluster.port, "--out", tmp_path / "r.parquet")
    assert result.returncode == 0, result.stderr
    table = pq.read_table(tmp_path / "r.parquet").to_pylist()
    produced = [r for r in table if r["api"] == "Produce"]
    fetched = [r for r in table if r["api"] == "Fetch"]
    assert [(r["key"], r["value"], r["topic"], r["partition"]) for r in produced] == \
        [(m.key, m.value, "captured", 0) for m in sent]
    assert [r["headers"] for r in produced] == [[{"key": "h", "value": b"x"}]] * len(sent)
    # librdkafka's consumer fetched everything once, our Fetch v11 at least the first set
    values = [r["value"] for r in fetched]
    assert set(values) == {m.value for m in sent}
    assert {r["topic"] for r in fetched} == {"captured"}
    assert {r["api_version"] for r in fetched} >= {11}
    assert max(r["api_version"] for r in fetched) >= 13    # librdkafka's: by topic id
    by_offset = {r["offset"]: r["value"] for r in fetched}
    assert by_offset == {i: m.value for i, m in enumerate(sent)}
