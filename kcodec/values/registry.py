"""Where framed schema ids resolve: a schema source.

Every source answers two questions: :meth:`~SchemaSource.schema` (the
schema registered under an id) and :meth:`~SchemaSource.latest` (the latest
version of a subject), each as a :class:`RegisteredSchema`. There are three:

- :class:`SchemaRegistry`: a Confluent-compatible registry's REST API
  (Confluent Schema Registry, Karapace, Apicurio Registry's ``ccompat``
  API, Redpanda), through the standard library alone. Each id is fetched
  once per process.
- :class:`SchemaLog`: a registry's ``_schemas`` topic, read offline from
  its partition directory with kcodec's own log reader.
- :class:`SchemaMapping`: schemas the caller gives, by id.

:func:`schema_source` picks one from what a user passes as ``schemas=``;
:func:`registry_from_options` builds a registry client from Spark-style
``schemaRegistry.*`` options.
"""
import base64
import http.client
import json
import operator
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import NamedTuple, Optional

from ..errors import (
    SchemaNotFoundError, SchemaRegistryAuthError, SchemaRegistryError,
    SchemaRegistryUnavailableError,
)

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
DEFAULT_SCHEMA_TYPE = "AVRO"
DEFAULT_TIMEOUT = 10.0
# A transient failure (a reset connection, a 5xx answer) is tried again this
# many times, after RETRY_BACKOFF seconds, then twice that, ...
RETRIES = 2
RETRY_BACKOFF = 0.2
ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, "
          "application/json")
USER_AGENT = "kcodec-schema-registry-client"
SCHEMES = ("http://", "https://")
AUTH_STATUSES = (401, 403)
NOT_FOUND_STATUS = 404
# A registry's own 404 answers carry an error code 404xx (40401: no such
# subject, 40402: no such version, 40403: no such schema).
NOT_FOUND_CODES = 100
SERVER_ERROR_STATUS = 500
SCHEMA_KEY_TYPE = "SCHEMA"
SCHEMAS_TOPIC = "_schemas"
MAX_SHOWN_BODY = 300
# Spark-style options (lower case, without "schemaregistry.") -> SchemaRegistry
# argument; the second group are confluent-kafka's SchemaRegistryClient names.
OPTION_PREFIX = "schemaregistry."
STORAGE_PREFIX = "s3."
OPTIONS = {
    "username": "username", "password": "password", "cafile": "cafile",
    "certfile": "certfile", "keyfile": "keyfile", "verify": "verify", "timeout": "timeout",
    "basic.auth.user.info": "user_info", "ssl.ca.location": "cafile",
    "ssl.certificate.location": "certfile", "ssl.key.location": "keyfile",
}
SPELLED = {"username": "username", "password": "password", "cafile": "cafile",
           "certfile": "certfile", "keyfile": "keyfile", "verify": "verify",
           "timeout": "timeout"}


class RegisteredSchema(NamedTuple):
    """A schema as a source has it.

    Attributes:
        id: The schema id that framed keys and values carry.
        schema_type: ``"AVRO"``, ``"JSON"`` or ``"PROTOBUF"``.
        text: The schema's text (Avro and JSON Schema: JSON).
        subject: The subject it is registered under, when the source says
            (:meth:`SchemaRegistry.schema` does not: an id can be in several).
        version: Its version in that subject, when the source says.
    """
    id: int
    schema_type: str
    text: str
    subject: Optional[str] = None
    version: Optional[int] = None


class SchemaSource:
    """What every schema source answers. Subclass it to give a source of
    your own to ``schemas=``."""

    def schema(self, schema_id):
        """The schema registered under an id.

        Args:
            schema_id: The id (an int).

        Returns:
            RegisteredSchema

        Raises:
            SchemaNotFoundError: When the source has no schema with this id.
        """
        raise NotImplementedError

    def latest(self, subject):
        """The latest (not deleted) version of a subject.

        Args:
            subject: The subject, e.g. ``"orders-value"``.

        Returns:
            RegisteredSchema

        Raises:
            SchemaNotFoundError: When the source has no such subject.
        """
        raise NotImplementedError


def _schema_id(schema_id):
    if isinstance(schema_id, bool):
        raise TypeError("a schema id is an int, not bool")
    try:
        return operator.index(schema_id)
    except TypeError:
        raise TypeError(f"a schema id is an int, not {type(schema_id).__name__}") from None


def _schema_type(value, where):
    kind = DEFAULT_SCHEMA_TYPE if value in (None, "") else str(value).upper()
    if kind not in SCHEMA_TYPES:
        raise ValueError(f"{where}: schema type {value!r} is not one of {', '.join(SCHEMA_TYPES)}")
    return kind


# ------------------------------------------------------------------ registry

class _IdCache:
    """The schemas one registry gave this process, by id, and a lock per id
    being fetched so that concurrent askers wait for one request."""

    def __init__(self):
        self.lock = threading.Lock()
        self.schemas = {}
        self.fetching = {}

    def get(self, schema_id, fetch):
        found = self.schemas.get(schema_id)
        if found is not None:
            return found
        with self.lock:
            found = self.schemas.get(schema_id)
            if found is not None:
                return found
            pending = self.fetching.setdefault(schema_id, threading.Lock())
        with pending:
            found = self.schemas.get(schema_id)
            if found is None:
                found = fetch()
                with self.lock:
                    self.schemas.setdefault(schema_id, found)
                    self.fetching.pop(schema_id, None)
            return found

    def put(self, registered):
        with self.lock:
            self.schemas.setdefault(registered.id, registered)


_CACHES = {}
_CACHES_LOCK = threading.Lock()


def _id_cache(url, username):
    with _CACHES_LOCK:
        return _CACHES.setdefault((url, username), _IdCache())


def clear_cache():
    """Forget every schema that registries gave this process (the next
    :meth:`SchemaRegistry.schema` of each id asks its registry again)."""
    with _CACHES_LOCK:
        _CACHES.clear()


def split_credentials(url):
    """A registry URL without the credentials it may carry
    (``https://user:password@host``), and those credentials.

    Args:
        url: The URL.

    Returns:
        tuple: ``(url, username, password)``; the last two None when the URL
        has none (percent-escapes in them are decoded).
    """
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, has_password, password = userinfo.partition(":")
    plain = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    return (plain, urllib.parse.unquote(user) or None,
            urllib.parse.unquote(password) if has_password else None)


class SchemaRegistry(SchemaSource):
    """A client of a Confluent-compatible schema registry's REST API.

    Only the standard library (``urllib``, ``ssl``) is used. Schemas are
    fetched with ``GET /schemas/ids/{id}`` and ``GET
    /subjects/{subject}/versions/latest``. Each id is fetched once per
    process: the schemas are kept in a cache shared by every client of the
    same URL and user (in Spark, by all the tasks and batches of a Python
    worker), safe to use from several threads. Transient failures (a reset
    connection, a 5xx answer) are tried again twice, after a short pause.

    Credentials may be given as arguments or in the URL, as Confluent's
    clients take them (``https://user:password@host:8081``); the password is
    never shown in ``repr`` or in errors. Clients pickle (with their
    credentials, not their cache) and so travel to Spark executors.

    Args:
        url: The API's base URL, e.g. ``http://registry:8081`` (Apicurio
            Registry: ``http://host:8080/apis/ccompat/v6``; ``v7`` from
            its release 3).
        username: HTTP basic auth user (None: none, or the URL's).
        password: HTTP basic auth password.
        cafile: PEM file of the certificate authorities to trust for HTTPS
            (None: the system's).
        certfile: PEM file of a client certificate (mutual TLS); it may hold
            the key too.
        keyfile: PEM file of the client certificate's key.
        verify: Check the server's certificate and host name (False: accept
            any; for tests only).
        timeout: Seconds to wait for a connection or an answer.

    Attributes:
        url (str): The base URL, without credentials or a trailing ``/``.
        username (str | None): The basic auth user.

    Raises:
        ValueError: When the URL is not ``http://`` or ``https://``, or a
            password comes without a user.
    """

    def __init__(self, url, *, username=None, password=None, cafile=None, certfile=None,
                 keyfile=None, verify=True, timeout=DEFAULT_TIMEOUT):
        url = os.fsdecode(url)
        if not url.lower().startswith(SCHEMES):
            raise ValueError(f"a schema registry URL begins with http:// or https://, "
                             f"not {split_credentials(url)[0]!r}")
        plain, url_user, url_password = split_credentials(url)
        self.url = plain.rstrip("/")
        self.username = username if username is not None else url_user
        self._password = password if password is not None else (
            url_password if username is None or username == url_user else None)
        if self._password is not None and self.username is None:
            raise ValueError(f"schema registry {self.url}: a password needs a username")
        self.cafile = None if cafile is None else os.fspath(cafile)
        self.certfile = None if certfile is None else os.fspath(certfile)
        self.keyfile = None if keyfile is None else os.fspath(keyfile)
        if self.keyfile is not None and self.certfile is None:
            raise ValueError(f"schema registry {self.url}: keyfile needs certfile")
        self.verify = bool(verify)
        self.timeout = float(timeout)
        if not self.timeout > 0:
            raise ValueError(f"schema registry {self.url}: timeout must be positive seconds, "
                             f"not {timeout!r}")
        self._cache = _id_cache(self.url, self.username)
        self._opener = None
        self._opener_lock = threading.Lock()

    # -------------------------------------------------------------- public
    def schema(self, schema_id):
        """The schema registered under an id (``GET /schemas/ids/{id}``),
        from the process's cache when any client of this registry fetched it
        before.

        Args:
            schema_id: The id.

        Returns:
            RegisteredSchema: ``subject`` and ``version`` are None unless
            :meth:`latest` brought the id first.

        Raises:
            SchemaNotFoundError: The registry has no such id (404).
            SchemaRegistryAuthError: It refused the credentials (401, 403).
            SchemaRegistryUnavailableError: Nothing answered, the request
                timed out, TLS failed, or the registry failed (5xx).
            SchemaRegistryError: Any other refusal, or an answer that is
                not a schema.
        """
        schema_id = _schema_id(schema_id)
        return self._cache.get(schema_id, lambda: self._fetch_id(schema_id))

    def latest(self, subject):
        """The latest version of a subject (``GET
        /subjects/{subject}/versions/latest``), asked each time (a subject
        gets new versions); its id is then cached for :meth:`schema`.

        Args:
            subject: The subject, e.g. ``"orders-value"``.

        Returns:
            RegisteredSchema

        Raises:
            SchemaNotFoundError: The registry has no such subject (404).
            SchemaRegistryAuthError, SchemaRegistryUnavailableError,
            SchemaRegistryError: As for :meth:`schema`.
        """
        path = f"/subjects/{urllib.parse.quote(str(subject), safe='')}/versions/latest"
        answer = self._get(path, subject=str(subject))
        try:
            found = RegisteredSchema(
                _schema_id(answer["id"]), _schema_type(answer.get("schemaType"), self.url),
                str(answer["schema"]), str(answer.get("subject", subject)),
                None if answer.get("version") is None else int(answer["version"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise self._odd_answer(path, answer, exc) from None
        self._cache.put(found)
        return found

    def spark_options(self):
        """This client's settings as ``schemaRegistry.*`` options (strings),
        for :func:`registry_from_options` (e.g. on a Spark executor).

        Returns:
            dict: Only the settings that differ from the defaults.
        """
        options = {}
        for name, value in (("username", self.username), ("password", self._password),
                            ("cafile", self.cafile), ("certfile", self.certfile),
                            ("keyfile", self.keyfile)):
            if value is not None:
                options[f"schemaRegistry.{name}"] = value
        if not self.verify:
            options["schemaRegistry.verify"] = "false"
        if self.timeout != DEFAULT_TIMEOUT:
            options["schemaRegistry.timeout"] = repr(self.timeout)
        return options

    def __repr__(self):
        user = "" if self.username is None else f", username={self.username!r}"
        return f"SchemaRegistry({self.url!r}{user})"

    def __reduce__(self):
        return (_rebuild_registry, (self.url, self._settings()))

    def _settings(self):
        return {"username": self.username, "password": self._password, "cafile": self.cafile,
                "certfile": self.certfile, "keyfile": self.keyfile, "verify": self.verify,
                "timeout": self.timeout}

    # ------------------------------------------------------------ requests
    def _fetch_id(self, schema_id):
        path = f"/schemas/ids/{schema_id}"
        answer = self._get(path, schema_id=schema_id)
        try:
            return RegisteredSchema(
                schema_id, _schema_type(answer.get("schemaType"), self.url), str(answer["schema"]),
                answer.get("subject"),
                None if answer.get("version") is None else int(answer["version"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._odd_answer(path, answer, exc) from None

    def _odd_answer(self, path, answer, exc):
        shown = json.dumps(answer)[:MAX_SHOWN_BODY]
        return SchemaRegistryError(f"schema registry {self.url}: GET {path} answered {shown}, "
                                   f"which is not a registered schema ({exc})", url=self.url)

    def _opener_for(self):
        with self._opener_lock:
            if self._opener is None:
                handlers = []
                if self.url.lower().startswith("https://"):
                    handlers.append(urllib.request.HTTPSHandler(context=self._ssl_context()))
                self._opener = urllib.request.build_opener(*handlers)
            return self._opener

    def _ssl_context(self):
        try:
            context = ssl.create_default_context(cafile=self.cafile)
            if self.certfile is not None:
                context.load_cert_chain(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise SchemaRegistryError(
                f"schema registry {self.url}: cannot load the TLS files (cafile="
                f"{self.cafile}, certfile={self.certfile}, keyfile={self.keyfile}): {exc}",
                url=self.url) from None
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _request(self, path):
        headers = {"Accept": ACCEPT, "User-Agent": USER_AGENT}
        if self.username is not None:
            token = f"{self.username}:{self._password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(token).decode("ascii")
        return urllib.request.Request(self.url + path, headers=headers, method="GET")

    def _get(self, path, *, schema_id=None, subject=None):
        """The JSON answer to GET `path`, tried again on transient failures."""
        opener = self._opener_for()
        where = f"schema registry {self.url}: GET {path}"
        attempt = 0
        while True:
            try:
                with opener.open(self._request(path), timeout=self.timeout) as response:
                    body = response.read()
                break
            except urllib.error.HTTPError as exc:
                status, body = exc.code, _read_body(exc)
                if status < SERVER_ERROR_STATUS or attempt >= RETRIES:
                    raise self._http_error(where, status, body, schema_id, subject) from None
            except (ssl.SSLError, ssl.CertificateError) as exc:
                raise SchemaRegistryUnavailableError(f"{where}: TLS failed: {exc}",
                                                     url=self.url) from None
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
                    raise SchemaRegistryUnavailableError(f"{where}: TLS failed: {reason}",
                                                         url=self.url) from None
                if not _transient(reason) or attempt >= RETRIES:
                    raise SchemaRegistryUnavailableError(f"{where}: {_describe_failure(reason)}",
                                                         url=self.url) from None
            except (TimeoutError, socket.timeout) as exc:
                raise SchemaRegistryUnavailableError(
                    f"{where}: no answer within {self.timeout:g} s ({exc})", url=self.url) from None
            except (http.client.HTTPException, ConnectionError) as exc:
                if attempt >= RETRIES:
                    raise SchemaRegistryUnavailableError(f"{where}: {_describe_failure(exc)}",
                                                         url=self.url) from None
            time.sleep(RETRY_BACKOFF * (2 ** attempt))
            attempt += 1
        try:
            answer = json.loads(body)
        except ValueError:
            raise SchemaRegistryError(
                f"{where} answered with something that is not JSON: "
                f"{body[:MAX_SHOWN_BODY]!r} (is this the registry's API?)", url=self.url) from None
        if not isinstance(answer, dict):
            raise self._odd_answer(path, answer, "not a JSON object")
        return answer

    def _http_error(self, where, status, body, schema_id, subject):
        message, code = _registry_message(body)
        said = f": {message}" if message else ""
        if status in AUTH_STATUSES:
            user = "no credentials" if self.username is None else f"user {self.username!r}"
            return SchemaRegistryAuthError(f"{where}: HTTP {status}, the registry refused "
                                           f"{user}{said}", url=self.url)
        if status == NOT_FOUND_STATUS:
            if not (isinstance(code, int) and code // NOT_FOUND_CODES == NOT_FOUND_STATUS):
                # not the registry saying so: a URL that is not its API
                return SchemaRegistryError(
                    f"{where}: HTTP 404 without a registry's not-found error code{said} (is "
                    f"{self.url} the registry's Confluent-compatible API? Apicurio Registry's "
                    f"is at /apis/ccompat/v7 or v6)", url=self.url)
            what = (f"no schema with id {schema_id}" if schema_id is not None
                    else f"no subject {subject!r}")
            return SchemaNotFoundError(f"{where}: HTTP 404, {what}{said}", url=self.url,
                                       schema_id=schema_id, subject=subject)
        if status >= SERVER_ERROR_STATUS:
            return SchemaRegistryUnavailableError(
                f"{where}: HTTP {status}, the registry failed (tried {RETRIES + 1} times){said}",
                url=self.url)
        return SchemaRegistryError(f"{where}: HTTP {status}{said}", url=self.url)


def _rebuild_registry(url, settings):
    return SchemaRegistry(url, **settings)


def _read_body(error):
    try:
        return error.read()
    except Exception:       # the connection may be gone already
        return b""


def _registry_message(body):
    """(message, error_code) of a registry's error answer (either may be None)."""
    try:
        answer = json.loads(body)
    except (ValueError, TypeError):
        text = body.decode("utf-8", "replace").strip() if isinstance(body, bytes) else ""
        return (text[:MAX_SHOWN_BODY] or None), None
    if not isinstance(answer, dict):
        return None, None
    return answer.get("message"), answer.get("error_code")


def _transient(reason):
    return isinstance(reason, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                               http.client.RemoteDisconnected))


def _describe_failure(reason):
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the registry running, and at this port?)"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host name ({reason})"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no answer in time ({reason})"
    if isinstance(reason, (ConnectionResetError, http.client.RemoteDisconnected)):
        return f"the connection was closed ({reason}; tried {RETRIES + 1} times)"
    return str(reason)


# ---------------------------------------------------------- _schemas log

class _HeldSchemas(SchemaSource):
    """A source that holds its schemas: ``_by_id`` ({id: RegisteredSchema})
    and ``_latest`` ({subject: RegisteredSchema}); ``_missing()`` says where
    a lookup failed."""

    def schema(self, schema_id):
        schema_id = _schema_id(schema_id)
        found = self._by_id.get(schema_id)
        if found is None:
            raise SchemaNotFoundError(f"no schema with id {schema_id} {self._missing()}",
                                      schema_id=schema_id)
        return found

    def latest(self, subject):
        found = self._latest.get(subject)
        if found is None:
            raise SchemaNotFoundError(f"no subject {subject!r} {self._missing()}",
                                      subject=subject)
        return found

    def _missing(self):
        raise NotImplementedError


class SchemaLog(_HeldSchemas):
    """A registry's ``_schemas`` topic, read offline from its partition
    directory (e.g. ``/var/lib/kafka/data/_schemas-0``) with kcodec's own log
    reader: no registry and no broker needed.

    Confluent Schema Registry, Karapace and Apicurio Registry's
    ``kafkasql``-compatible stores write one record per registered version:
    the key ``{"keytype": "SCHEMA", "subject": ..., "version": ..., "magic":
    1}``, the value ``{"subject", "version", "id", "schema", "schemaType",
    "deleted"}`` (``schemaType`` absent: Avro). It is read as the registry
    reads it at startup: a later record of a subject's version replaces an
    earlier one, a null value (a tombstone: the version was deleted for good)
    removes it; records of other key types (``CONFIG``, ``DELETE_SUBJECT``,
    ``NOOP``, ...) say nothing about ids and are skipped.

    As the registry answers: an id resolves while any version that has it is
    in the log, soft-deleted ones (``"deleted": true``) included; the latest
    version of a subject is its highest not deleted one.

    The log is read once, when the source is made; it pickles with what it
    read (not the path), so it travels to Spark executors that do not see
    the directory.

    The directory may be on object storage (``s3://bucket/.../_schemas-0``,
    or any filesystem pyarrow reaches), read as ``kafka-log`` reads one; this
    needs kcodec's Spark extra (``pip install 'kcodec[spark]'``), and
    ``s3://`` paths find their endpoint and credentials as
    :mod:`kcodec.spark.storage` says.

    Args:
        path: The partition directory (locally its name may be anything: the
            topic is taken to be ``_schemas``, partition 0, when it is not
            ``<topic>-<partition>``).
        storage_options: For a path on object storage: kafka-log's ``s3.*``
            options (``s3.endpoint``, ``s3.accessKey``, ...), as a mapping.

    Attributes:
        path (str): The directory read.

    Raises:
        FileNotFoundError: When ``path`` is not a directory.
        SchemaRegistryError: When a ``SCHEMA`` record's value is not a
            registered schema (naming its offset).
        KafkaFormatError: When the log itself is corrupt.
        ObjectStoreError: When object storage refuses the read or has no
            such directory.
    """

    def __init__(self, path, *, storage_options=()):
        self.path = os.fsdecode(path)
        if _is_uri(self.path):
            from ..spark.files import filesystem_of, open_partition
            from ..spark.storage import storage_options as s3_options
            store, directory = filesystem_of(self.path, s3_options(storage_options or {}))
            if store is None:
                log = _local_log(directory)
            else:
                log = open_partition(store, directory)
        else:
            log = _local_log(self.path)
        self._by_id, self._latest = _read_schemas_log(log, self.path)

    def _missing(self):
        return f"in the _schemas log {self.path}"

    @property
    def ids(self):
        """The ids the log resolves, ascending (list of int)."""
        return sorted(self._by_id)

    @property
    def subjects(self):
        """The subjects with a live version, sorted (list of str)."""
        return sorted(self._latest)

    def __repr__(self):
        return f"SchemaLog({self.path!r}, ids={len(self._by_id)}, subjects={len(self._latest)})"

    def __reduce__(self):
        return (_rebuild_log, (self.path, self._by_id, self._latest))


def _rebuild_log(path, by_id, latest):
    log = SchemaLog.__new__(SchemaLog)
    log.path, log._by_id, log._latest = path, by_id, latest
    return log


def _json_object(data):
    if data is None:
        return None
    try:
        found = json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError):
        return None
    return found if isinstance(found, dict) else None


def _is_uri(path):
    scheme, found, _ = path.partition("://")
    return bool(found) and scheme.replace("+", "").replace(".", "").replace("-", "").isalnum()


def _local_log(path):
    from ..log.partition import PartitionLog, parse_partition_dir
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such _schemas partition directory")
    try:
        parse_partition_dir(path)
        return PartitionLog(path)
    except ValueError:
        return PartitionLog(path, topic=SCHEMAS_TOPIC, partition=0)


def _read_schemas_log(log, path):
    """({id: RegisteredSchema}, {subject: latest RegisteredSchema}) of a
    ``_schemas`` partition (a PartitionLog of the directory `path`)."""
    versions = {}           # (subject, version) -> (RegisteredSchema, deleted)
    try:
        for record in log.read_records():
            key = _json_object(record.key)
            if key is None or str(key.get("keytype", "")).upper() != SCHEMA_KEY_TYPE:
                continue
            where = f"_schemas log {path}, offset {record.offset}"
            try:
                slot = (str(key["subject"]), int(key["version"]))
            except (KeyError, TypeError, ValueError):
                raise SchemaRegistryError(f"{where}: a SCHEMA key without a subject and "
                                          f"version: {bytes(record.key)[:MAX_SHOWN_BODY]!r}") \
                    from None
            if record.value is None:
                versions.pop(slot, None)
                continue
            versions[slot] = _logged_schema(record.value, slot, where)
    finally:
        for segment in log.segments:
            segment.close()
    by_id, latest = {}, {}
    for (subject, version), (found, deleted) in sorted(versions.items(),
                                                       key=lambda item: item[0][1]):
        if not deleted:
            latest[subject] = found
        if not deleted or found.id not in by_id:
            by_id[found.id] = found
    return by_id, latest


def _logged_schema(value, slot, where):
    found = _json_object(value)
    try:
        if found is None:
            raise ValueError("not a JSON object")
        return (RegisteredSchema(_schema_id(found["id"]),
                                 _schema_type(found.get("schemaType"), where),
                                 str(found["schema"]), slot[0], slot[1]),
                bool(found.get("deleted", False)))
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaRegistryError(f"{where}: the value of {slot[0]} version {slot[1]} is not "
                                  f"a registered schema ({exc}): "
                                  f"{bytes(value)[:MAX_SHOWN_BODY]!r}") from None


# ---------------------------------------------------------------- mapping

class SchemaMapping(_HeldSchemas):
    """Schemas the caller gives, by id.

    Each value is one of:

    - the schema's JSON text (``str`` or ``bytes``): an Avro schema;
    - its decoded JSON (a ``dict`` or, for an Avro union, a ``list``):
      written back with ``json.dumps``; an Avro schema;
    - a registry-style entry, a ``dict`` with a ``"schema"`` key (text or
      decoded JSON) and optionally ``"schemaType"`` (``"AVRO"``,
      ``"JSON"``, ``"PROTOBUF"``; absent: Avro), ``"subject"`` and
      ``"version"``;
    - a :class:`RegisteredSchema` (its id must be the key).

    :meth:`latest` knows the subjects of entries that name one.

    Args:
        schemas: A mapping ``{id: schema}``.

    Raises:
        TypeError: When an id is not an int or a schema none of the above.
        ValueError: When an Avro or JSON schema's text is not JSON, or a
            :class:`RegisteredSchema` is under another id.
    """

    def __init__(self, schemas):
        if not isinstance(schemas, Mapping):
            raise TypeError(f"SchemaMapping takes a mapping {{id: schema}}, "
                            f"not {type(schemas).__name__}")
        self._by_id = {}
        for key, value in schemas.items():
            schema_id = _schema_id(key)
            self._by_id[schema_id] = _mapped_schema(schema_id, value)
        self._latest = {}
        for found in sorted(self._by_id.values(), key=lambda s: (s.version or 0, s.id)):
            if found.subject is not None:
                self._latest[found.subject] = found

    def _missing(self):
        known = ", ".join(map(str, sorted(self._by_id)[:10]))
        return f"in the schemas given (ids: {known or 'none'})"

    def __len__(self):
        return len(self._by_id)

    def __repr__(self):
        return f"SchemaMapping(ids={sorted(self._by_id)})"

    def __reduce__(self):
        return (SchemaMapping, (dict(self._by_id),))


def _mapped_schema(schema_id, value):
    where = f"schemas[{schema_id}]"
    subject = version = None
    kind = DEFAULT_SCHEMA_TYPE
    if isinstance(value, RegisteredSchema):
        if value.id != schema_id:
            raise ValueError(f"{where} is a RegisteredSchema of id {value.id}")
        return value
    if isinstance(value, Mapping) and "schema" in value:
        kind = _schema_type(value.get("schemaType", value.get("schema_type")), where)
        subject = value.get("subject")
        version = None if value.get("version") is None else int(value["version"])
        value = value["schema"]
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8")
    if isinstance(value, (Mapping, list)):
        text = json.dumps(value)
    elif isinstance(value, str):
        text = value
        if kind != "PROTOBUF":
            try:
                json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{where}: an {kind} schema is JSON text, and this is not "
                                 f"({exc}): {text[:MAX_SHOWN_BODY]!r}") from None
    else:
        raise TypeError(f"{where} is a {type(value).__name__}; a schema is JSON text, its "
                        "decoded JSON (dict), {'schema': ..., 'schemaType': ...} or a "
                        "RegisteredSchema")
    return RegisteredSchema(schema_id, kind, text, subject, version)


# ----------------------------------------------------------------- choosing

_REGISTRIES = {}
_REGISTRIES_LOCK = threading.Lock()


def _registry_for_url(url):
    with _REGISTRIES_LOCK:
        found = _REGISTRIES.get(url)
        if found is None:
            found = _REGISTRIES[url] = SchemaRegistry(url)
        return found


def schema_source(schemas):
    """The schema source of what a user passes as ``schemas=``.

    Args:
        schemas: One of:

            - None: no source (None is returned);
            - a :class:`SchemaSource` (a :class:`SchemaRegistry`,
              :class:`SchemaLog`, :class:`SchemaMapping` or one of your
              own): itself;
            - a mapping ``{id: schema}``: a :class:`SchemaMapping`;
            - a URL beginning with ``http://`` or ``https://``: a
              :class:`SchemaRegistry` of it (one per URL in a process);
            - the path (``str`` or path-like) of a directory, or the URI of
              one on object storage (``s3://...``): a :class:`SchemaLog` of
              the ``_schemas`` partition there.

    Returns:
        SchemaSource | None

    Raises:
        TypeError: When ``schemas`` is none of these.
        ValueError: When a string is neither a registry URL nor a directory.
    """
    if schemas is None or isinstance(schemas, SchemaSource):
        return schemas
    if isinstance(schemas, Mapping):
        return SchemaMapping(schemas)
    if isinstance(schemas, (str, bytes)) or hasattr(schemas, "__fspath__"):
        text = os.fsdecode(schemas)
        if text.lower().startswith(SCHEMES):
            return _registry_for_url(text)
        if os.path.isdir(text) or _is_uri(text):
            return SchemaLog(text)
        raise ValueError(f"schemas={text!r} is neither a registry URL (http:// or https://) nor "
                         "a directory (a registry's _schemas partition)")
    raise TypeError(f"schemas= is a mapping {{id: schema}}, a registry URL, a "
                    f"kcodec.SchemaRegistry or a _schemas partition directory, not "
                    f"{type(schemas).__name__}")


def _parse_verify(name, text):
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, not {text!r}")
    return lowered == "true"


def _parse_timeout(name, text):
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"option {name} must be seconds (a number), not {text!r}") from None
    if not seconds > 0:
        raise ValueError(f"option {name} must be positive seconds, not {text!r}")
    return seconds


def registry_from_options(url, options):
    """The schema source of a URL and Spark-style options (strings).

    The options are those of a Spark reader (``kafka-log``) or of
    :meth:`SchemaRegistry.spark_options`; their names are case-insensitive
    and only those beginning with ``schemaRegistry.`` are read:

    - ``schemaRegistry.username``, ``schemaRegistry.password``: basic auth
      (or ``schemaRegistry.basic.auth.user.info``, ``user:password``, as
      Confluent's clients name it);
    - ``schemaRegistry.cafile``, ``schemaRegistry.certfile``,
      ``schemaRegistry.keyfile``: TLS files (or ``ssl.ca.location``,
      ``ssl.certificate.location``, ``ssl.key.location`` after the prefix);
    - ``schemaRegistry.verify``: ``true`` (default) or ``false``;
    - ``schemaRegistry.timeout``: seconds (default 10).

    Args:
        url: The registry's URL; or the path of a ``_schemas`` partition
            directory (then no ``schemaRegistry.*`` option may be given; on
            object storage, the ``s3.*`` options among ``options`` say where).
        options: A mapping of option names to values.

    Returns:
        SchemaRegistry | SchemaLog

    Raises:
        ValueError: For an unknown ``schemaRegistry.*`` option (naming it), a
            value that does not parse, or options given with a directory.
    """
    chosen, unknown, given, storage = {}, [], [], {}
    for name, value in dict(options or {}).items():
        lowered = str(name).lower()
        if lowered.startswith(STORAGE_PREFIX):
            storage[str(name)] = value
        if not lowered.startswith(OPTION_PREFIX):
            continue
        suffix = lowered[len(OPTION_PREFIX):]
        target = OPTIONS.get(suffix)
        if target is None:
            unknown.append(str(name))
            continue
        given.append(str(name))
        if target == "verify":
            chosen["verify"] = _parse_verify(name, value)
        elif target == "timeout":
            chosen["timeout"] = _parse_timeout(name, value)
        elif target == "user_info":
            user, has_password, password = str(value).partition(":")
            if not has_password:
                raise ValueError(f"option {name} is user:password")
            chosen.setdefault("username", user)
            chosen.setdefault("password", password)
        else:
            chosen[target] = str(value)
    if unknown:
        known = ", ".join(f"schemaRegistry.{n}" for n in list(SPELLED.values())
                          + ["basic.auth.user.info", "ssl.ca.location",
                             "ssl.certificate.location", "ssl.key.location"])
        raise ValueError(f"unknown schema registry option(s): {', '.join(sorted(unknown))} "
                         f"(known: {known})")
    text = os.fsdecode(url)
    if not text.lower().startswith(SCHEMES):
        if given:
            raise ValueError(f"option(s) {', '.join(sorted(given))} apply to a registry URL, and "
                             f"{text!r} is not one (a _schemas directory takes none)")
        if _is_uri(text):
            return SchemaLog(text, storage_options=storage)
        return schema_source(text)
    return SchemaRegistry(text, **chosen)


__all__ = ["RegisteredSchema", "SchemaSource", "SchemaRegistry", "SchemaLog", "SchemaMapping",
           "schema_source", "registry_from_options", "split_credentials", "clear_cache"]
