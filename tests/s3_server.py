"""A real S3-compatible server for the object storage tests: S3Proxy (its
jar from ci/s3proxy.sh, KCODEC_S3PROXY_JAR) with jclouds' filesystem
backend in a temporary directory, on a free port of 127.0.0.1, started once
per session (`from s3_server import s3`) and stopped after it. Without Java
or the jar the tests skip, and fail when CI is set (tests/needs.py).

In front of it, a TCP relay that counts the bytes the server sends: what
every client (the driver, Spark's Python workers) fetched, whatever process
it runs in.

`python tests/s3_server.py` runs one in the foreground, for a look by hand."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from needs import unavailable

ACCESS_KEY = "kcodec-test"
SECRET_KEY = "kcodec-test-secret"
START_TIMEOUT = 60.0
# S3Proxy 2.7.0 refuses the checksum trailers newer AWS SDKs send unless
# asked not to; kcodec sets these itself for a custom endpoint, the tests'
# own uploads need them too.
CHECKSUM_SWITCHES = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                     "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}


def s3proxy_jar():
    jar = os.environ.get("KCODEC_S3PROXY_JAR")
    if not jar:
        default = (Path.home() / ".m2" / "repository" / "org" / "gaul" / "s3proxy" / "2.7.0"
                   / "s3proxy-2.7.0-jar-with-dependencies.jar")
        jar = str(default) if default.exists() else None
    if not jar or not os.path.exists(jar):
        unavailable("S3Proxy's jar is missing: run `bash ci/s3proxy.sh` "
                    "(or set KCODEC_S3PROXY_JAR)")
    java = shutil.which("java")
    if java is None:
        unavailable("java is not installed (S3Proxy needs it)")
    return java, jar


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class CountingRelay:
    """Forwards TCP connections from a port of its own to the server's,
    counting the bytes the server sends back."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = 0
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self):
        with self._lock:
            self.received = 0

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source, sink, counted):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                if counted:
                    with self._lock:
                        self.received += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self):
        self._closed = True
        self.listener.close()


class S3Server:
    def __init__(self, workdir):
        self.java, self.jar = s3proxy_jar()
        self.workdir = Path(workdir)
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = None
        self.relay = None

    def start(self):
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "s3proxy.conf"
        config.write_text(
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={ACCESS_KEY}\n"
            f"s3proxy.credential={SECRET_KEY}\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={data}\n")
        self.log = self.workdir / "s3proxy.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [self.java, "-Xmx256m", "-jar", self.jar, "--properties", str(config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"S3Proxy exited with {self.process.returncode}:\n"
                                   + self.log.read_text(errors="replace")[-3000:])
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"S3Proxy did not listen within {START_TIMEOUT:.0f} s")
                time.sleep(0.2)
        self.relay = CountingRelay(self.port)
        self.counted_endpoint = f"http://127.0.0.1:{self.relay.port}"
        return self

    def stop(self):
        if self.relay is not None:
            self.relay.close()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    # ------------------------------------------------------------ helpers
    def options(self, endpoint=None):
        """kafka-log's options for this server."""
        return {"s3.endpoint": endpoint or self.endpoint, "s3.accessKey": ACCESS_KEY,
                "s3.secretKey": SECRET_KEY}

    def filesystem(self):
        """A pyarrow filesystem of the server that may create buckets."""
        saved = {k: os.environ.get(k) for k in CHECKSUM_SWITCHES}
        os.environ.update(CHECKSUM_SWITCHES)
        try:
            return pafs.S3FileSystem(endpoint_override=self.endpoint, access_key=ACCESS_KEY,
                                     secret_key=SECRET_KEY, region="us-east-1",
                                     allow_bucket_creation=True, allow_bucket_deletion=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k)
                else:
                    os.environ[k] = v

    def upload(self, local_dir, target):
        """Upload a directory as a backup tool (aws s3 sync) lays it out:
        one object per file, same relative keys, no directory markers."""
        fs = self.filesystem()
        fs.create_dir(target.split("/", 1)[0])
        for root, _, names in os.walk(local_dir):
            for name in names:
                path = os.path.join(root, name)
                key = f"{target}/{os.path.relpath(path, local_dir)}"
                with open(path, "rb") as src, fs.open_output_stream(key) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("s3proxy"))
    server.start()
    yield server
    server.stop()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    os.environ.setdefault("CI", "")
    server = S3Server(tempfile.mkdtemp(prefix="kcodec-s3proxy-")).start()
    print(f"S3Proxy at {server.endpoint} (counted: {server.counted_endpoint}), "
          f"access key {ACCESS_KEY}, secret key {SECRET_KEY}; Ctrl-C stops it")
    try:
        server.process.wait()
    except KeyboardInterrupt:
        server.stop()
