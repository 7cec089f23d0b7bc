"""Object storage (``s3://``): where a path's bucket is served, with which
credentials, and errors that say what is wrong and where.

Each setting is taken from the first of these that gives it:

1. the URI's query, with pyarrow's names: ``endpoint_override``,
   ``scheme``, ``region``, ``access_key``, ``secret_key``, ``session_token``;
2. options: kafka-log's ``s3.endpoint``, ``s3.region``, ``s3.accessKey``,
   ``s3.secretKey``, ``s3.sessionToken``, ``s3.profile`` (spark-convert's
   ``--s3-*`` flags);
3. the environment the AWS SDKs and CLI read: ``AWS_ENDPOINT_URL_S3``,
   ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``,
   ``AWS_ACCESS_KEY_ID`` with ``AWS_SECRET_ACCESS_KEY`` (and
   ``AWS_SESSION_TOKEN``), ``AWS_PROFILE``;
4. that profile (``default`` unless named) in the shared config and
   credentials files (``~/.aws/config``, ``~/.aws/credentials``, or
   ``AWS_CONFIG_FILE``, ``AWS_SHARED_CREDENTIALS_FILE``): ``endpoint_url``
   (also in its ``s3 =`` section), ``region``, ``aws_access_key_id``,
   ``aws_secret_access_key``, ``aws_session_token``.

Credentials found nowhere are left to pyarrow's default chain (instance
profiles and the like), on every machine that reads. Settings are resolved
once, where a read is planned, and travel with the plan (its splits, the
conversion's tasks): executors use the same endpoint and credentials,
whatever their own environment holds.

Requests time out in seconds and are tried three times at most, so that a
wrong endpoint or refused credentials fail a job quickly, not after minutes
of retries.
"""
import configparser
import contextlib
import os
import re
import threading
import urllib.parse
from dataclasses import dataclass, field, replace

import pyarrow.fs as pafs

from ..errors import ObjectNotFoundError, ObjectStoreError

# kafka-log option (lower case) -> S3Settings field
OPTION_NAMES = {"s3.endpoint": "endpoint", "s3.region": "region", "s3.accesskey": "access_key",
                "s3.secretkey": "secret_key", "s3.sessiontoken": "session_token",
                "s3.profile": "profile", "s3.connecttimeout": "connect_timeout",
                "s3.requesttimeout": "request_timeout", "s3.maxattempts": "max_attempts"}
_SPELLED = {name.lower(): name for name in (
    "s3.endpoint", "s3.region", "s3.accessKey", "s3.secretKey", "s3.sessionToken", "s3.profile",
    "s3.connectTimeout", "s3.requestTimeout", "s3.maxAttempts")}
QUERY_NAMES = {"endpoint_override": "endpoint", "scheme": "scheme", "region": "region",
               "access_key": "access_key", "secret_key": "secret_key",
               "session_token": "session_token", "connect_timeout": "connect_timeout",
               "request_timeout": "request_timeout"}
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_MAX_ATTEMPTS = 3
# Where an endpoint is given but no region, requests are signed for this one
# (S3-compatible servers mostly ignore it).
FALLBACK_REGION = "us-east-1"
# AWS SDKs since 2025 send checksum trailers that many S3-compatible servers
# refuse; the SDKs' own switches turn them back to what every SDK did before
# (unless the environment sets them).
_CHECKSUM_SWITCHES = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                      "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}
# pyarrow filesystems whose files appear whole, when their upload completes.
OBJECT_STORE_TYPES = ("s3", "gcs", "abfs")
_QUERY = re.compile(r"\?((?:[A-Za-z_]+=[^?&]*)(?:&[A-Za-z_]+=[^?&]*)*)$")


@dataclass(frozen=True)
class S3Settings:
    """Where a bucket is served and how to sign requests to it.

    Attributes:
        endpoint (str | None): ``scheme://host[:port]``; None: AWS's own.
        region (str | None): The region requests are signed for.
        access_key, secret_key, session_token (str | None): Credentials;
            None: pyarrow's default chain.
        connect_timeout, request_timeout (float): Seconds.
        max_attempts (int): Tries per request.
        origins (tuple): ``(setting, where it came from)`` pairs, for messages.
    """
    endpoint: str = None
    region: str = None
    access_key: str = field(default=None, repr=False)
    secret_key: str = field(default=None, repr=False)
    session_token: str = field(default=None, repr=False)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    origins: tuple = ()

    def origin(self, name):
        return dict(self.origins).get(name)

    def where(self):
        """The endpoint as messages name it, with where it was set."""
        if self.endpoint is None:
            return f"AWS S3, region {self.region}"
        origin = self.origin("endpoint")
        return f"endpoint {self.endpoint}" + (f" (from {origin})" if origin else "")


def storage_options(options):
    """The ``s3.*`` entries of a mapping of options, as sorted
    ``(lower-case name, value)`` pairs; ValueError for an unknown one."""
    found = []
    for name, value in dict(options).items():
        lowered = str(name).lower()
        if lowered.startswith("s3."):
            if lowered not in OPTION_NAMES:
                known = ", ".join(sorted(_SPELLED.values()))
                raise ValueError(f"unknown object storage option {name} (known: {known})")
            found.append((lowered, str(value)))
    return tuple(sorted(found))


def split_query(uri):
    """(URI without its query, {name: value}): a trailing ``?name=value&...``
    is a query; any other ``?`` is a glob's."""
    found = _QUERY.search(uri)
    if found is None:
        return uri, {}
    query = dict(urllib.parse.parse_qsl(found[1], keep_blank_values=True))
    return uri[:found.start()], query


def _profile_files(env):
    home = os.path.expanduser("~")
    config = env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    credentials = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws",
                                                                          "credentials")
    return config, credentials


def _read_ini(path):
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise ValueError(f"{path}: not a readable AWS config file: {exc}") from None
    return parser


def _profile(name, env):
    """{setting: (value, origin)} of a profile in the shared files."""
    config_path, credentials_path = _profile_files(env)
    found = {}
    config = _read_ini(config_path)
    section = "default" if name == "default" else f"profile {name}"
    if not config.has_section(section) and config.has_section(name):
        section = name
    if config.has_section(section):
        values = dict(config.items(section))
        origin = f"profile {name} in {config_path}"
        nested = values.get("s3", "")
        for line in nested.splitlines():        # s3 =\n  endpoint_url = ...
            key, _, value = line.partition("=")
            if key.strip() == "endpoint_url" and value.strip():
                found["endpoint"] = (value.strip(), origin)
        if "endpoint_url" in values and "endpoint" not in found:
            found["endpoint"] = (values["endpoint_url"], origin)
        if values.get("region"):
            found["region"] = (values["region"], origin)
        if values.get("aws_access_key_id") and values.get("aws_secret_access_key"):
            found["credentials"] = ((values["aws_access_key_id"], values["aws_secret_access_key"],
                                     values.get("aws_session_token")), origin)
    credentials = _read_ini(credentials_path)
    if credentials.has_section(name):
        values = dict(credentials.items(name))
        if values.get("aws_access_key_id") and values.get("aws_secret_access_key"):
            found["credentials"] = ((values["aws_access_key_id"], values["aws_secret_access_key"],
                                     values.get("aws_session_token")),
                                    f"profile {name} in {credentials_path}")
    return found


def _number(name, text, kind):
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {text!r}")
    return value


_REGIONS = {}


def resolve_s3_settings(bucket, query=None, options=(), env=None):
    """The :class:`S3Settings` of a bucket from a URI's query, the ``s3.*``
    options and the AWS environment and profile files (see the module's
    documentation for the order)."""
    env = os.environ if env is None else env
    query, opts = dict(query or {}), dict(options)
    unknown = sorted(set(query) - set(QUERY_NAMES))
    if unknown:
        raise ValueError(f"unknown query parameter(s) in an s3:// URI: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(QUERY_NAMES))})")
    given = {}          # field -> (value, origin)
    for name, key in QUERY_NAMES.items():
        if query.get(name):
            given.setdefault(key, (query[name], f"the URI's {name}"))
    option_names = {v: k for k, v in OPTION_NAMES.items()}
    for key, name in option_names.items():
        if opts.get(name):
            given.setdefault(key, (opts[name], f"option {_SPELLED[name]}"))
    if "access_key" in given or "secret_key" in given:
        if not ("access_key" in given and "secret_key" in given):
            raise ValueError("an access key needs its secret key, and a secret key its access "
                             "key: give both (s3.accessKey and s3.secretKey)")
        given["credentials"] = ((given["access_key"][0], given["secret_key"][0],
                                 given.get("session_token", (None,))[0]),
                                given["access_key"][1])
    ignore_endpoints = env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true"
    for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if env.get(variable) and not ignore_endpoints:
            given.setdefault("endpoint", (env[variable], variable))
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if env.get(variable):
            given.setdefault("region", (env[variable], variable))
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        given.setdefault("credentials", ((env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"],
                                          env.get("AWS_SESSION_TOKEN")), "AWS_ACCESS_KEY_ID"))
    profile = given.get("profile", (env.get("AWS_PROFILE") or "default",))[0]
    if not ("endpoint" in given and "region" in given and "credentials" in given):
        for key, value in _profile(profile, env).items():
            if key == "endpoint" and ignore_endpoints:
                continue
            given.setdefault(key, value)
    endpoint = given.get("endpoint", (None,))[0]
    if endpoint is not None:
        endpoint = endpoint.rstrip("/")
        if "://" not in endpoint:
            endpoint = f"{given.get('scheme', ('https',))[0]}://{endpoint}"
        elif "scheme" in given:
            endpoint = f"{given['scheme'][0]}://{endpoint.split('://', 1)[1]}"
    region = given.get("region", (None,))[0]
    if region is None:
        region = FALLBACK_REGION if endpoint is not None else _bucket_region(bucket)
    access_key = secret_key = session_token = None
    if "credentials" in given:
        access_key, secret_key, session_token = given["credentials"][0]
    settings = S3Settings(
        endpoint=endpoint, region=region, access_key=access_key, secret_key=secret_key,
        session_token=session_token or None,
        connect_timeout=_number("s3.connectTimeout", given.get(
            "connect_timeout", (DEFAULT_CONNECT_TIMEOUT,))[0], float),
        request_timeout=_number("s3.requestTimeout", given.get(
            "request_timeout", (DEFAULT_REQUEST_TIMEOUT,))[0], float),
        max_attempts=_number("s3.maxAttempts", given.get(
            "max_attempts", (DEFAULT_MAX_ATTEMPTS,))[0], int))
    origins = tuple((key, given[key][1]) for key in ("endpoint", "region", "credentials")
                    if key in given)
    return replace(settings, origins=origins)


def _bucket_region(bucket):
    """The region AWS serves a bucket from (as pyarrow's from_uri finds it)."""
    if bucket not in _REGIONS:
        try:
            _REGIONS[bucket] = pafs.resolve_s3_region(bucket)
        except OSError as exc:
            raise ObjectStoreError(
                f"cannot find the region of bucket {bucket!r} on AWS S3 ({exc}); for another "
                "S3-compatible server give its endpoint (s3.endpoint, AWS_ENDPOINT_URL or "
                "?endpoint_override=...), or give the region (s3.region, AWS_REGION)",
                uri=f"s3://{bucket}") from None
    return _REGIONS[bucket]


_BUILT = {}
_BUILDING = threading.Lock()


def s3_filesystem(settings):
    """The pyarrow S3FileSystem of some settings (one per process)."""
    with _BUILDING:
        fs = _BUILT.get(settings)
        if fs is None:
            kw = dict(region=settings.region, connect_timeout=settings.connect_timeout,
                      request_timeout=settings.request_timeout,
                      retry_strategy=pafs.AwsStandardS3RetryStrategy(
                          max_attempts=settings.max_attempts))
            if settings.endpoint is not None:
                scheme, _, address = settings.endpoint.partition("://")
                kw.update(endpoint_override=address, scheme=scheme)
            if settings.access_key is not None:
                kw.update(access_key=settings.access_key, secret_key=settings.secret_key)
                if settings.session_token:
                    kw["session_token"] = settings.session_token
            # The SDK reads its checksum switches when the client is made.
            switched = {}
            if settings.endpoint is not None:
                switched = {k: v for k, v in _CHECKSUM_SWITCHES.items() if k not in os.environ}
            os.environ.update(switched)
            try:
                fs = pafs.S3FileSystem(**kw)
            finally:
                for name in switched:
                    os.environ.pop(name, None)
            _BUILT[settings] = fs
        return fs


class Store:
    """A pyarrow filesystem, with what messages need: the URI of a path, and
    its errors as they are (see S3Store for one that names more)."""

    def __init__(self, fs):
        self._fs = fs

    @property
    def fs(self):
        return self._fs

    @property
    def identity(self):
        return self._fs.type_name

    def uri(self, path):
        return path

    @contextlib.contextmanager
    def errors(self, path, doing):
        yield

    def missing(self, path):
        """The error for a path that is not there."""
        return FileNotFoundError(f"{path}: no such directory")

    @property
    def writes_appear_whole(self):
        """Whether a file written here appears only once it is complete (an
        object store's upload), rather than growing where readers see it."""
        return self.fs.type_name in OBJECT_STORE_TYPES


class S3Store(Store):
    """An s3:// bucket's filesystem, pickled as its settings: built again
    from them (once per process) wherever it is unpickled."""

    def __init__(self, settings):
        self.settings = settings

    def __getstate__(self):
        return {"settings": self.settings}

    def __setstate__(self, state):
        self.settings = state["settings"]

    @property
    def fs(self):
        return s3_filesystem(self.settings)

    @property
    def identity(self):
        return self.settings

    def uri(self, path):
        return f"s3://{path}"

    def missing(self, path):
        bucket = path.split("/", 1)[0]
        with self.errors(bucket, "looking up the bucket of"):
            there = self.fs.get_file_info(bucket).type != pafs.FileType.NotFound
        if not there:
            return ObjectNotFoundError(f"no such bucket {bucket!r} at {self.settings.where()}",
                                       uri=f"s3://{bucket}", endpoint=self.settings.endpoint)
        return ObjectNotFoundError(f"nothing under {self.uri(path)} ({self.settings.where()}): "
                                   "no object has that prefix",
                                   uri=self.uri(path), endpoint=self.settings.endpoint)

    @contextlib.contextmanager
    def errors(self, path, doing):
        """OSErrors of pyarrow (the AWS SDK's) as ObjectStoreErrors naming
        the object, the endpoint and what went wrong."""
        try:
            yield
        except (ObjectStoreError, FileExistsError):     # kcodec's own words already
            raise
        except OSError as exc:
            raise self.error(exc, path, doing) from None

    def error(self, exc, path, doing):
        text = str(exc)
        where, uri = self.settings.where(), self.uri(path)
        bucket = path.split("/", 1)[0]
        kw = dict(uri=uri, endpoint=self.settings.endpoint)
        if re.search(r"NETWORK_CONNECTION|Couldn't connect|Could not resolve|curlCode|"
                     r"[Tt]imed? ?out|REQUEST_TIMEOUT|Connection refused", text):
            return ObjectStoreError(f"cannot reach the object store at {where}, {doing} {uri}: "
                                    f"{_reason(text)}", **kw)
        if re.search(r"ACCESS_DENIED|InvalidAccessKeyId|INVALID_ACCESS_KEY_ID|"
                     r"SignatureDoesNotMatch|SIGNATURE_DOES_NOT_MATCH|HTTP status 403|"
                     r"AccessDenied|Forbidden", text):
            who = self.settings.access_key
            whose = (f"access key {who[:4]}... from {self.settings.origin('credentials')}"
                     if who else "pyarrow's default credentials")
            return ObjectStoreError(f"credentials refused by {where} ({whose}), {doing} {uri}: "
                                    f"{_reason(text)}", **kw)
        if re.search(r"NO_SUCH_BUCKET|NoSuchBucket|[Bb]ucket '[^']*' not found", text):
            return ObjectNotFoundError(f"no such bucket {bucket!r} at {where}, {doing} {uri}",
                                       uri=f"s3://{bucket}", endpoint=self.settings.endpoint)
        if isinstance(exc, FileNotFoundError) or re.search(
                r"NO_SUCH_KEY|NoSuchKey|HTTP status 404|RESOURCE_NOT_FOUND|does not exist", text):
            if doing.startswith(("reading", "opening", "copying")):
                return ObjectNotFoundError(f"no such object {uri} ({where}), {doing} it: "
                                           "deleted or moved since the read was planned?", **kw)
            return ObjectNotFoundError(f"no such object {uri} ({where}), {doing} it: {text}",
                                       **kw)
        return ObjectStoreError(f"{doing} {uri} failed ({where}): {text}", **kw)


_MEANINGS = {
    "ACCESS_DENIED": "access denied (HTTP 403): wrong keys, or no permission",
    "SIGNATURE_DOES_NOT_MATCH": "the signature does not match: a wrong secret key",
    "INVALID_ACCESS_KEY_ID": "the server knows no such access key",
    "NETWORK_CONNECTION": "no connection",
}


def _reason(text):
    """The AWS error's own words, without pyarrow's preamble."""
    found = re.search(r"AWS Error (\w+) during (\w+) operation: ?(.*)", text, re.S)
    if not found:
        return text.strip()
    code, operation, detail = found[1], found[2], found[3].strip()
    if detail == "No response body.":
        detail = ""
    meaning = _MEANINGS.get(code)
    return (f"{operation}: {code}" + (f", {meaning}" if meaning else "")
            + (f" ({detail})" if detail else ""))


def store_of(uri, options=()):
    """(S3Store or a Store, path on its filesystem) of a URI of a filesystem
    pyarrow reaches (its query, if any, split off); glob characters stay in
    the path (the filesystem is found from the part before the first)."""
    uri, query = split_query(uri)
    scheme, _, rest = uri.partition("://")
    if scheme.lower() in ("s3", "s3a"):     # not urlsplit: a glob's "?" is no query
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ValueError(f"{uri}: no bucket (s3://bucket/prefix)")
        path = f"{bucket}/{key.strip('/')}".rstrip("/")
        return S3Store(resolve_s3_settings(bucket, query, options)), path
    glob_at = _GLOB.search(uri)
    prefix = uri if glob_at is None else uri[:uri.rfind("/", 0, glob_at.start())]
    fs, path = pafs.FileSystem.from_uri(
        prefix + ("?" + urllib.parse.urlencode(query) if query else ""))
    return Store(fs), path + uri[len(prefix):]


_GLOB = re.compile(r"[*?\[]")
