"""The read options of the "kafka-log" source and of spark-convert, named as
Spark's Kafka source names them where they mean the same thing.

Offsets given as Spark's JSON (`{"orders": {"0": 23, "1": -2}}`) use -2 for
earliest and -1 for latest; partitions the JSON does not name read from the
default (earliest for the start, latest for the end). A plain number applies
to every partition.
"""
import json
import re
from dataclasses import dataclass, field

from ..values import FORMATS, ON_ERROR
from .storage import storage_options

EARLIEST = -2
LATEST = -1
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
CORRUPT_POLICIES = ("fail", "skip")
REGISTRY_PREFIX = "schemaregistry."
DEFAULT_MAX_BYTES_PER_PARTITION = 128 << 20
DEFAULT_MAX_BATCH_BYTES = 8 << 20


def parse_bool(name, text):
    """A boolean option's value (``true`` or ``false``, any case)."""
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, not {text!r}")
    return lowered == "true"


def parse_positive_int(name, text):
    """A positive integer option's value."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {text!r}") from None
    if value < 1:
        raise ValueError(f"option {name} must be positive, not {value}")
    return value


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: `default` for partitions not listed in
    `per_partition` ({(topic, partition): value}); values are offsets (or
    EARLIEST/LATEST), or timestamps in ms when `timestamps` is true."""
    default: int
    per_partition: dict = field(default_factory=dict)
    timestamps: bool = False

    def for_partition(self, topic, partition, fallback):
        """(value, is_timestamp) for one partition; `fallback` is the offset
        used when neither the JSON nor a default names one."""
        value = self.per_partition.get((topic, partition), self.default)
        if value is None:
            return fallback, False
        return value, self.timestamps


def parse_offset_spec(name, text, default, timestamps=False):
    """The OffsetSpec of option `name`'s text: earliest, latest, a number, or
    Spark's JSON per partition; `default` for partitions it leaves out."""
    text = text.strip()
    words = {"earliest": EARLIEST, "latest": LATEST}
    if not timestamps and text.lower() in words:
        return OffsetSpec(words[text.lower()])
    if re.fullmatch(r"-?\d+", text):
        return OffsetSpec(int(text), timestamps=timestamps)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        expected = ('a timestamp in ms or JSON like {"topic": {"0": 1700000000000}}' if timestamps
                    else 'earliest, latest, an offset or JSON like {"topic": {"0": 23, "1": -2}}')
        raise ValueError(f"option {name}: expected {expected}, not {text!r}")
    per_partition = {}
    for topic, partitions in parsed.items():
        for partition, value in partitions.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"option {name}: {topic}/{partition} is not an integer: {value!r}")
            per_partition[(topic, int(partition))] = value
    return OffsetSpec(default, per_partition, timestamps)


def offsets_json(offsets):
    """Spark's Kafka-source offset JSON of ``{(topic, partition): offset}``."""
    out = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def parse_offsets(offset):
    """``{(topic, partition): offset}`` of Spark's Kafka-source offset JSON."""
    if isinstance(offset, str):
        offset = json.loads(offset)
    return {(topic, int(partition)): int(value)
            for topic, partitions in offset.items() for partition, value in partitions.items()}


@dataclass(frozen=True)
class ReadOptions:
    """The parsed options of a read (see :func:`parse_options` for the option
    names).

    Attributes:
        starting (OffsetSpec): Where each partition's read starts.
        ending (OffsetSpec): Where it ends.
        starting_by_timestamp_strategy (str): ``"error"`` or ``"latest"``.
        include_headers (bool): Add the ``headers`` column.
        isolation (str): ``"read_uncommitted"`` or ``"read_committed"``.
        fail_on_data_loss (bool): Raise when requested offsets are gone.
        min_partitions (int | None): At least this many splits.
        max_records_per_partition (int | None): Cut splits at about this many
            records.
        max_bytes_per_partition (int): Cut segments larger than this.
        max_batch_bytes (int): Log bytes decoded into one Arrow batch.
        verify_crc (bool): Check CRCs.
        on_corrupt_data (str): ``"fail"`` or ``"skip"``.
        corrupt_data_report (str | None): Directory for the skip reports.
        topics (tuple | None): Only these topics (``subscribe``).
        topic_pattern (str | None): Only topics matching this regular
            expression (``subscribePattern``).
        assign (frozenset | None): Only these ``(topic, partition)`` pairs.
        filter_pushdown (bool): Let Spark push filters down to the read
            (``filterPushdown``, off by default).
        storage (tuple): The ``s3.*`` options, as ``(lower-case name,
            value)`` pairs (see :doc:`the object storage guide
            </guide/object-storage>`).
        value_format (str): ``valueFormat``: ``"raw"``, ``"avro"`` or
            ``"json"``.
        key_format (str): ``keyFormat``, the same for keys.
        schema_registry_url (str | None): ``schemaRegistryUrl``: a registry
            URL, or the path of a registry's ``_schemas`` partition directory.
        registry_options (tuple): The ``schemaRegistry.*`` options, as
            ``(name, value)`` pairs (names as given).
        value_schema (str | None): ``valueSchema``, the reader schema text.
        key_schema (str | None): ``keySchema``.
        on_value_error (str): ``onValueError``: ``"fail"`` or ``"null"``.
    """

    starting: OffsetSpec = OffsetSpec(EARLIEST)
    ending: OffsetSpec = OffsetSpec(LATEST)
    starting_by_timestamp_strategy: str = "error"
    include_headers: bool = False
    isolation: str = "read_uncommitted"
    fail_on_data_loss: bool = True
    min_partitions: int = None
    max_records_per_partition: int = None
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    verify_crc: bool = True
    on_corrupt_data: str = "fail"
    corrupt_data_report: str = None
    topics: tuple = None            # subscribe
    topic_pattern: str = None       # subscribePattern
    assign: frozenset = None        # assign: {(topic, partition)}
    filter_pushdown: bool = False
    storage: tuple = ()             # s3.* options: ((lower-case name, value), ...)
    value_format: str = "raw"
    key_format: str = "raw"
    schema_registry_url: str = None
    registry_options: tuple = ()    # schemaRegistry.* options: ((name, value), ...)
    value_schema: str = None
    key_schema: str = None
    on_value_error: str = "fail"

    @property
    def typed(self):
        """Whether keys or values are decoded (a format other than raw)."""
        return self.value_format != "raw" or self.key_format != "raw"

    def wants(self, topic, partition):
        """Whether the topic filters let this partition be read."""
        if self.topics is not None and topic not in self.topics:
            return False
        if self.topic_pattern is not None and not re.fullmatch(self.topic_pattern, topic):
            return False
        return self.assign is None or (topic, partition) in self.assign


KNOWN = {
    "path", "paths", "startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "includeheaders", "kafka.isolation.level", "isolation.level", "failondataloss",
    "minpartitions", "maxrecordsperpartition", "maxbytesperpartition", "maxbatchbytes",
    "verifycrc", "oncorruptdata", "corruptdatareport", "subscribe", "subscribepattern", "assign",
    "filterpushdown", "valueformat", "keyformat", "schemaregistryurl", "valueschema",
    "keyschema", "onvalueerror",
}


def parse_options(options):
    """The options of the ``kafka-log`` source (and of ``spark-convert``),
    from Spark's string options.

    Names are matched in any case and follow Spark's Kafka source where they
    mean the same thing:

    - ``startingOffsets`` / ``endingOffsets``: ``earliest`` / ``latest``, an
      offset for every partition, or JSON per topic and partition
      (``{"orders": {"0": 23, "1": -2}}``, -2 earliest, -1 latest; partitions
      left out read from earliest / to latest).
    - ``startingTimestamp`` / ``endingTimestamp`` (ms, every partition) and
      ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON per
      partition); ``startingOffsetsByTimestampStrategy``: ``error`` (default)
      or ``latest``.
    - ``includeHeaders`` (default false), ``kafka.isolation.level`` or
      ``isolation.level``, ``failOnDataLoss`` (default true),
      ``minPartitions``, ``maxRecordsPerPartition``, ``subscribe``,
      ``subscribePattern``, ``assign`` (JSON ``{"topic": [0, 1]}``).
    - Object storage (``s3://`` paths): ``s3.endpoint``, ``s3.region``,
      ``s3.accessKey``, ``s3.secretKey``, ``s3.sessionToken``,
      ``s3.profile``, ``s3.connectTimeout``, ``s3.requestTimeout`` (seconds),
      ``s3.maxAttempts``; without them, the AWS environment and config files.
    - kcodec's own: ``verifyCrc`` (default true), ``onCorruptData``
      (``fail``, the default, or ``skip``), ``corruptDataReport`` (a
      directory for the skip reports), ``maxBytesPerPartition`` (128 MiB),
      ``maxBatchBytes`` (8 MiB of log per Arrow batch), ``filterPushdown``
      (default false; true: filters on topic, partition, offset and
      timestamp narrow what is read, where Spark pushes them down; see the
      Spark guide for the caveat that keeps it off by default).
    - Typed values: ``valueFormat`` / ``keyFormat`` (``raw``, the default,
      ``avro`` or ``json``), ``schemaRegistryUrl`` (a Confluent-compatible
      registry, or the path of its ``_schemas`` partition directory),
      ``schemaRegistry.*`` (the registry's auth and TLS options),
      ``valueSchema`` / ``keySchema`` (the reader schema's text) and
      ``onValueError`` (``fail``, the default, or ``null``: a value that does
      not decode is null and ``valueError`` says why).

    Other ``kafka.*`` options are accepted and ignored.

    Args:
        options: A mapping of option names to values (strings, as Spark
            passes them).

    Returns:
        ReadOptions: The parsed options.

    Raises:
        ValueError: For an unknown option or a value it does not take.
    """
    opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
    unknown = sorted(k for k in opts if k not in KNOWN
                     and not k.startswith(("kafka.", "s3.", REGISTRY_PREFIX)))
    if unknown:
        raise ValueError(f"unknown option(s) for kafka-log: {', '.join(unknown)}")
    kw = {}
    # Spark's order of precedence: a global timestamp, then per-partition
    # timestamps, then offsets.
    for side, default in (("starting", EARLIEST), ("ending", LATEST)):
        if f"{side}timestamp" in opts:
            kw[side] = parse_offset_spec(f"{side}Timestamp", opts[f"{side}timestamp"], None, True)
        elif f"{side}offsetsbytimestamp" in opts:
            kw[side] = parse_offset_spec(f"{side}OffsetsByTimestamp",
                                    opts[f"{side}offsetsbytimestamp"], None, True)
        elif f"{side}offsets" in opts:
            kw[side] = parse_offset_spec(f"{side}Offsets", opts[f"{side}offsets"], default)
    starting, ending = kw.get("starting"), kw.get("ending")
    if starting is not None and not starting.timestamps and LATEST in (
            starting.default, *starting.per_partition.values()):
        raise ValueError("startingOffsets: latest (-1) is not allowed for a batch read")
    if ending is not None and not ending.timestamps and EARLIEST in (
            ending.default, *ending.per_partition.values()):
        raise ValueError("endingOffsets: earliest (-2) is not allowed for a batch read")
    if "startingoffsetsbytimestampstrategy" in opts:
        strategy = opts["startingoffsetsbytimestampstrategy"].lower()
        if strategy not in ("error", "latest"):
            raise ValueError("startingOffsetsByTimestampStrategy must be error or latest")
        kw["starting_by_timestamp_strategy"] = strategy
    if "includeheaders" in opts:
        kw["include_headers"] = parse_bool("includeHeaders", opts["includeheaders"])
    level = opts.get("kafka.isolation.level", opts.get("isolation.level"))
    if level is not None:
        if level.lower() not in ISOLATION_LEVELS:
            raise ValueError(f"isolation level must be one of {ISOLATION_LEVELS}, not {level!r}")
        kw["isolation"] = level.lower()
    if "failondataloss" in opts:
        kw["fail_on_data_loss"] = parse_bool("failOnDataLoss", opts["failondataloss"])
    for name, key in (("minPartitions", "min_partitions"),
                      ("maxRecordsPerPartition", "max_records_per_partition"),
                      ("maxBytesPerPartition", "max_bytes_per_partition"),
                      ("maxBatchBytes", "max_batch_bytes")):
        if name.lower() in opts:
            kw[key] = parse_positive_int(name, opts[name.lower()])
    if "verifycrc" in opts:
        kw["verify_crc"] = parse_bool("verifyCrc", opts["verifycrc"])
    if "oncorruptdata" in opts:
        policy = opts["oncorruptdata"].lower()
        if policy not in CORRUPT_POLICIES:
            raise ValueError(f"onCorruptData must be one of {CORRUPT_POLICIES}, not {policy!r}")
        kw["on_corrupt_data"] = policy
    if "corruptdatareport" in opts:
        kw["corrupt_data_report"] = opts["corruptdatareport"]
    if "filterpushdown" in opts:
        kw["filter_pushdown"] = parse_bool("filterPushdown", opts["filterpushdown"])
    if "subscribe" in opts:
        kw["topics"] = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
    if "subscribepattern" in opts:
        kw["topic_pattern"] = opts["subscribepattern"]
    if "assign" in opts:
        try:
            assigned = json.loads(opts["assign"])
            kw["assign"] = frozenset((t, int(p)) for t, ps in assigned.items() for p in ps)
        except (ValueError, AttributeError, TypeError):
            raise ValueError(f'assign: expected JSON like {{"topic": [0, 1]}}, '
                             f'not {opts["assign"]!r}') from None
    kw["storage"] = storage_options(opts)
    kw.update(_value_options(options, opts))
    return ReadOptions(**kw)


def _value_options(options, opts):
    """The typed-value options' ReadOptions keywords."""
    kw = {}
    for name, key in (("valueFormat", "value_format"), ("keyFormat", "key_format")):
        if name.lower() in opts:
            value = opts[name.lower()].strip().lower()
            if value not in FORMATS:
                raise ValueError(f"option {name} must be one of {', '.join(FORMATS)}, "
                                 f"not {opts[name.lower()]!r}")
            kw[key] = value
    if "onvalueerror" in opts:
        policy = opts["onvalueerror"].strip().lower()
        if policy not in ON_ERROR:
            raise ValueError(f"onValueError must be fail or null, not {opts['onvalueerror']!r}")
        kw["on_value_error"] = policy
    if opts.get("schemaregistryurl", "").strip():
        kw["schema_registry_url"] = opts["schemaregistryurl"].strip()
    for name, key in (("valueschema", "value_schema"), ("keyschema", "key_schema")):
        if opts.get(name, "").strip():
            kw[key] = opts[name]
    # Names as given: the registry's options are its own (basic.auth.user.info, ...).
    kw["registry_options"] = tuple(sorted(
        (str(k), str(v)) for k, v in dict(options).items()
        if str(k).lower().startswith(REGISTRY_PREFIX)))
    return kw


# The options schema() reads: the typed-value ones, and those that say
# which topics a read covers (the registry's subjects are per topic).
SCHEMA_OPTIONS = ("subscribe", "subscribepattern", "assign", "valueformat", "keyformat",
                  "schemaregistryurl", "valueschema", "keyschema", "onvalueerror")


def schema_options(options):
    """The ReadOptions of only the options that shape a kafka-log
    DataFrame's schema (the typed-value options, the topic filters and the
    storage options to list the paths with), for ``DataSource.schema()``:
    the batch and stream readers check the rest, by rules of their own."""
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    return parse_options({k: v for k, v in opts.items()
                          if k in SCHEMA_OPTIONS or k.startswith(("s3.", REGISTRY_PREFIX))})


def load_paths(options):
    """The paths given to load(): Spark passes one as "path", several as a
    JSON list in "paths"."""
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    paths = []
    if opts.get("paths"):
        paths += json.loads(opts["paths"])
    if opts.get("path"):
        paths.append(opts["path"])
    if not paths:
        raise ValueError("kafka-log needs at least one path: .load(path) or .load([paths])")
    return paths
