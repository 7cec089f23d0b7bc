"""A real schema registry for the tests: Apicurio Registry (built from Maven
Central by ci/schema-registry.sh), in-memory storage, its Confluent-compatible
API at ``/apis/ccompat/v6``: `from schema_registry_server import
schema_registry`.

The jar comes from KCODEC_SCHEMA_REGISTRY_JAR, or from the cache that script
writes. The registry listens on a free port of 127.0.0.1 and is stopped with
SIGTERM at the end of the session. Without Java or the jar the tests skip,
and fail when CI is set (tests/needs.py).

Also here: :class:`RegistryProxy`, a small stdlib reverse proxy to put in
front of it, which counts requests, can ask for HTTP basic auth, serve
HTTPS (with client certificates too) and fail the next requests on demand;
:func:`make_certificates` makes the certificates with the openssl command.

`python tests/schema_registry_server.py` runs one in the foreground."""
import base64
import collections
import ctypes
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from needs import unavailable

VERSION = os.environ.get("KCODEC_SCHEMA_REGISTRY_VERSION", "2.1.5.Final")
CACHE = Path(os.environ.get("KCODEC_KAFKA_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "kcodec" / "kafka")
API_PATH = "/apis/ccompat/v6"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
HEAP = "-Xmx384m"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
CERT_DAYS = 2


def registry_jar():
    """The registry's runner jar, or unavailable()."""
    jar = os.environ.get("KCODEC_SCHEMA_REGISTRY_JAR")
    if not jar:
        default = CACHE / f"schema-registry-{VERSION}" / "target" / "schema-registry-runner.jar"
        jar = str(default) if default.exists() else None
    if not jar or not os.path.exists(jar):
        unavailable("the schema registry (Apicurio Registry) is not built: run "
                    "`bash ci/schema-registry.sh` (or set KCODEC_SCHEMA_REGISTRY_JAR)")
    return jar


def java_executable():
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        unavailable("java is not installed (the schema registry needs it)")
    return java


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _terminate_with_parent():
    """In the registry's child process before exec: SIGTERM it when the
    process that started it dies, so a killed test run leaves no JVM behind."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class RegistryServer:
    """Apicurio Registry in a JVM of its own.

    Attributes:
        url: The Confluent-compatible API's base URL.
        startup_seconds: How long it took to answer.
    """

    def __init__(self, workdir, jar=None, java=None):
        self.workdir = Path(workdir)
        self.jar = jar or registry_jar()
        self.java = java or java_executable()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{API_PATH}"
        self.log = self.workdir / "registry.log"
        self.process = None
        self.startup_seconds = None

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if k not in ("CLASSPATH", "JAVA_TOOL_OPTIONS", "HTTP_PORT")}
        command = [self.java, HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8",
                   "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={self.port}",
                   "-Dquarkus.log.console.format=%d{HH:mm:ss.SSS} %-5p [%c{2.}] %s%e%n",
                   "-jar", self.jar]
        started = time.monotonic()
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.workdir, env=env,
                                            start_new_session=True,
                                            preexec_fn=_terminate_with_parent)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the schema registry exited with "
                                   f"{self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (OSError, http.client.HTTPException):      # not listening yet
                pass
            time.sleep(0.25)
        raise RuntimeError(f"the schema registry did not answer within {START_TIMEOUT:.0f} s:\n"
                           + self.log_tail())

    def log_tail(self, lines=40):
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self):
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)

    # ------------------------------------------------------------ helpers
    def register(self, subject, schema, schema_type=None):
        """Register a schema (text or decoded JSON) under a subject with the
        REST API (``POST /subjects/{subject}/versions``); its id."""
        body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
        if schema_type is not None:
            body["schemaType"] = schema_type
        answer = self.call("POST", f"/subjects/{subject}/versions", body)
        return answer["id"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE,
                                                  "Accept": CONTENT_TYPE})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


_SESSION = {}


@pytest.fixture(scope="session")
def schema_registry():
    """A started registry, one per test session (shared by the modules that
    import this fixture; stopped when the last of them is done)."""
    if "unavailable" in _SESSION:
        outcome, reason = _SESSION["unavailable"]
        outcome(reason)
    if "server" not in _SESSION:
        workdir = Path(tempfile.mkdtemp(prefix="kcodec-registry-"))
        try:
            _SESSION["server"] = RegistryServer(workdir).start()
        except BaseException as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            if isinstance(exc, pytest.skip.Exception):
                _SESSION["unavailable"] = (pytest.skip, str(exc))
            else:
                _SESSION["unavailable"] = (pytest.fail,
                                           f"the schema registry did not start: {exc}")
            raise
        _SESSION["workdir"] = workdir
    _SESSION["users"] = _SESSION.get("users", 0) + 1
    running = _SESSION["server"]
    yield running
    _SESSION["users"] -= 1
    if _SESSION["users"] == 0:
        try:
            code = running.stop()
            # 143: the JVM's exit status after a SIGTERM it handled by shutting down
            assert code in (0, 143), f"the schema registry stopped with {code}:\n" \
                                     f"{running.log_tail()}"
        finally:
            shutil.rmtree(_SESSION.pop("workdir"), ignore_errors=True)
            _SESSION.pop("server")


# ------------------------------------------------------------------ proxy

class RegistryProxy:
    """A reverse proxy in front of a registry, on a port of its own.

    Args:
        target: The registry's base URL (``http://host:port/path``).
        username, password: When given, requests without these basic auth
            credentials are answered 401.
        certfile, keyfile: When given, it serves HTTPS with this certificate.
        client_ca: With HTTPS, require a client certificate signed by this CA.

    Attributes:
        url: The proxy's base URL (the target's path kept).
        hits: How many requests reached the proxy, by path (a Counter).
    """

    def __init__(self, target, *, username=None, password=None, certfile=None, keyfile=None,
                 client_ca=None):
        split = urllib.parse.urlsplit(target)
        self.target_host, self.target_port = split.hostname, split.port
        self.base_path = split.path.rstrip("/")
        self.expected = None if username is None else "Basic " + base64.b64encode(
            f"{username}:{password}".encode()).decode()
        self.hits = collections.Counter()
        self.fail_next = 0          # answer the next N requests with 503
        self.drop_next = 0          # close the next N connections without an answer
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                proxy._handle(self)

            def do_POST(self):
                proxy._handle(self)

            def do_DELETE(self):
                proxy._handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if certfile is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile, keyfile)
            if client_ca is not None:
                context.load_verify_locations(client_ca)
                context.verify_mode = ssl.CERT_REQUIRED
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.port = self.server.server_address[1]
        self.url = f"{scheme}://127.0.0.1:{self.port}{self.base_path}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _handle(self, request):
        path = request.path
        with self._lock:
            self.hits[path] += 1
            drop, self.drop_next = self.drop_next > 0, max(0, self.drop_next - 1)
            fail = not drop and self.fail_next > 0
            if fail:
                self.fail_next -= 1
        if drop:
            request.close_connection = True
            return
        if fail:
            return self._answer(request, 503, {"error_code": 50301, "message": "not now"})
        if self.expected is not None and request.headers.get("Authorization") != self.expected:
            return self._answer(request, 401, {"error_code": 401, "message": "Unauthorized"},
                                {"WWW-Authenticate": 'Basic realm="registry"'})
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection(self.target_host, self.target_port, timeout=30)
        try:
            headers = {k: v for k, v in request.headers.items()
                       if k.lower() in ("content-type", "accept")}
            upstream.request(request.command, path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            request.send_response(answer.status)
            request.send_header("Content-Type", answer.getheader("Content-Type") or CONTENT_TYPE)
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
        finally:
            upstream.close()

    @staticmethod
    def _answer(request, status, body, headers=()):
        data = json.dumps(body).encode()
        request.send_response(status)
        request.send_header("Content-Type", CONTENT_TYPE)
        request.send_header("Content-Length", str(len(data)))
        for name, value in dict(headers).items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(data)

    def schema_hits(self, schema_id):
        """How many ``GET /schemas/ids/{schema_id}`` reached the proxy."""
        with self._lock:
            return self.hits[f"{self.base_path}/schemas/ids/{schema_id}"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make_certificates(directory):
    """A test CA, a server certificate for 127.0.0.1 / localhost and a client
    certificate, both signed by it, made with the openssl command:
    ``{"ca": ..., "server_cert": ..., "server_key": ..., "client_cert": ...,
    "client_key": ..., "other_ca": ...}`` (paths of PEM files; ``other_ca``
    signed neither)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        unavailable("the openssl command is not installed (it makes the TLS tests' certificates)")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args):
        subprocess.run([openssl, *map(str, args)], check=True, capture_output=True, cwd=directory)

    for ca in ("ca", "other_ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
            "-out", f"{ca}.pem", "-days", CERT_DAYS, "-subj", f"/CN=kcodec test {ca}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    extensions = {
        "server": "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                  "authorityKeyIdentifier=keyid\nbasicConstraints=CA:FALSE\n",
        "client": "extendedKeyUsage=clientAuth\nauthorityKeyIdentifier=keyid\n"
                  "basicConstraints=CA:FALSE\n",
    }
    for name, ext in extensions.items():
        (directory / f"{name}.ext").write_text(ext)
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", f"/CN=kcodec test {name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", CERT_DAYS,
            "-extfile", f"{name}.ext")
    return {"ca": str(directory / "ca.pem"), "other_ca": str(directory / "other_ca.pem"),
            "server_cert": str(directory / "server.pem"),
            "server_key": str(directory / "server.key"),
            "client_cert": str(directory / "client.pem"),
            "client_key": str(directory / "client.key")}


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    os.environ.setdefault("CI", "")
    with tempfile.TemporaryDirectory(prefix="kcodec-registry-") as workdir, \
            RegistryServer(workdir) as running:
        print(f"schema registry at {running.url} (answered after "
              f"{running.startup_seconds:.1f} s); log: {running.log}", flush=True)
        stop_signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        signal.sigwait(stop_signals)
    sys.exit(0)
