"""A small notation for Kafka's message schemas; codegen.py generates the
codec of each message and version from it.

A schema is a tree of fields: ``field(name, type, versions, ...)`` where type
is a primitive name ("int32", "string", "records", "[]int32", ...), ``many(...)``
(an array of structs) or ``one(...)`` (a single struct). Versions use Kafka's
notation ("0+", "3-12", "4", "none"). Flexible versions use compact lengths
(unsigned varints, length + 1, 0 for null) and end every struct with tagged
fields; a field with ``tag=`` lives there. Decoded messages are plain dicts
keyed by field name and hold every field of the struct: those absent from the
version (or untagged) take their default, so code reading them is version
independent. Unknown tags are kept as raw bytes under ``"_unknown_tags"`` and
written back, so a proxy round-trips them.

Decoding is bounded: every length is checked against the bytes that remain,
array counts against the least size of their elements, and failures raise
ProtocolError naming the API, version, field path and byte position.
"""
import struct
import uuid
from collections import namedtuple

from .errors import UnsupportedVersionError

_MISSING = object()
NULL_UUID = uuid.UUID(int=0)


class Versions:
    """A range of versions in Kafka's notation: "0+", "3-12", "4" or "none"."""
    __slots__ = ("low", "high", "spec")

    def __init__(self, spec):
        self.spec = spec
        if spec in (None, "none"):
            self.low, self.high = 1, 0
        elif spec.endswith("+"):
            self.low, self.high = int(spec[:-1]), 0x7FFF
        elif "-" in spec:
            self.low, self.high = (int(v) for v in spec.split("-"))
        else:
            self.low = self.high = int(spec)

    def __contains__(self, version):
        return self.low <= version <= self.high

    def __iter__(self):
        return iter(range(self.low, self.high + 1))

    def __repr__(self):
        return f"Versions({self.spec!r})"


def write_uvarint(out, value):
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# ----------------------------------------------------------------------------
# Types: what the code generator (codegen.py) needs to know of each: its
# default value and the least number of bytes it takes.
# ----------------------------------------------------------------------------

class Fixed:
    def __init__(self, name, fmt, default=0, convert=None):
        self.name = name
        self.codec = struct.Struct(">" + fmt)
        self.default_value = default
        self.convert = convert

    def default(self):
        return self.default_value

    def min_size(self, flexible, version):
        return self.codec.size


class Uuid:
    name = "uuid"

    def default(self):
        return NULL_UUID

    def min_size(self, flexible, version):
        return 16


class String:
    """`errors` is how invalid UTF-8 decodes (a codecs error handler): "strict"
    raises ProtocolError; Kafka's own readers of stored records replace it."""
    name = "string"

    def __init__(self, errors="strict"):
        self.errors = errors

    def default(self):
        return ""

    def min_size(self, flexible, version):
        return 1 if flexible else 2


class Bytes:
    """bytes (copied) or, for "records", a memoryview into the frame: record
    sets are handed to the record codec without a copy."""

    def __init__(self, name, view):
        self.name = name
        self.view = view

    def default(self):
        return None if self.view else b""

    def min_size(self, flexible, version):
        return 1 if flexible else 4


class Array:
    def __init__(self, element):
        self.element = element
        self.name = "[]" + element.name

    def default(self):
        return []

    def min_size(self, flexible, version):
        return 1 if flexible else 4


PRIMITIVES = {
    "bool": Fixed("bool", "B", False, bool),
    "int8": Fixed("int8", "b"),
    "int16": Fixed("int16", "h"),
    "uint16": Fixed("uint16", "H"),
    "int32": Fixed("int32", "i"),
    "uint32": Fixed("uint32", "I"),
    "int64": Fixed("int64", "q"),
    "float64": Fixed("float64", "d", 0.0),
    "uuid": Uuid(),
    "string": String(),
    "bytes": Bytes("bytes", view=False),
    "records": Bytes("records", view=True),
}


class Field:
    __slots__ = ("name", "type", "versions", "nullable", "tag", "default", "compact")

    def __init__(self, name, type, versions, nullable, tag, default, compact):
        self.name = name
        self.type = type
        self.versions = versions
        self.nullable = nullable
        self.tag = tag
        self.default = default
        self.compact = compact

    def make_default(self):
        if self.default is not _MISSING:
            return self.default
        return self.type.default()


def field(name, type, versions, *, nullable="none", tag=None, default=_MISSING, compact=True):
    """One field: `type` is a primitive name, "[]primitive", many(...) or one(...);
    `tag` makes it a tagged field (in the flexible versions where it exists);
    compact=False keeps non-compact lengths even in flexible versions (the
    request header's client_id)."""
    if isinstance(type, str):
        type = Array(PRIMITIVES[type[2:]]) if type.startswith("[]") else PRIMITIVES[type]
    return Field(name, type, Versions(versions), Versions(nullable), tag, default, compact)


_IMMUTABLE = (int, float, str, bytes, bool, type(None), uuid.UUID)


class Struct:
    """A struct of fields; `record` makes it decode as that namedtuple class
    (which must be a subclass with a __dict__, to hold unknown tags)."""

    name = "struct"

    def __init__(self, fields, record=None):
        self.fields = list(fields)
        self.record = record
        self._present = {}
        self._default_template = None
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {names}")

    def default(self):
        template = self._default_template
        if template is None:
            values = {f.name: f.make_default() for f in self.fields}
            if not all(isinstance(v, _IMMUTABLE) for v in values.values()):
                return self.record(**values) if self.record is not None else values
            template = self._default_template = values
        return self.record(**template) if self.record is not None else dict(template)

    def present(self, version, flexible):
        """([(field, compact, nullable)] of the regular fields in `version`,
        the same of its tagged fields); flexible versions have compact lengths
        (unless a field says otherwise) and tagged fields."""
        key = (version, flexible)
        found = self._present.get(key)
        if found is None:
            regular, tagged = [], []
            for f in self.fields:
                if version not in f.versions or (f.tag is not None and not flexible):
                    continue
                entry = (f, flexible and f.compact, version in f.nullable)
                (regular if f.tag is None else tagged).append(entry)
            found = self._present[key] = (regular, tagged)
        return found

    def min_size(self, flexible, version):
        regular, _ = self.present(version, flexible)
        return sum(f.type.min_size(compact, version) for f, compact, _ in regular) + flexible


def many(*fields, record=None):
    """An array of structs."""
    return Array(Struct(fields, record))


def one(*fields):
    """A single struct."""
    return Struct(fields)


def record_type(name, fields):
    """A namedtuple class for structs decoded as tuples (with room for unknown tags)."""
    return type(name, (namedtuple(name, fields),), {})


class Message(Struct):
    """A top-level request, response or header schema."""

    def __init__(self, api_key, name, kind, valid, flexible, fields):
        super().__init__(fields)
        self.api_key = api_key
        self.api = name
        self.kind = kind
        self.valid = Versions(valid)
        self.flexible = Versions(flexible)
        self._codecs = {}

    def __repr__(self):
        return f"<{self.api}{self.kind.title()} v{self.valid.spec}>"

    def check_version(self, version):
        if version not in self.valid:
            raise UnsupportedVersionError(
                f"{self.api} {self.kind} v{version} is outside v{self.valid.low}-v{self.valid.high}",
                api=self.api, version=version)

    def codec(self, version, direction):
        """The compiled decoder or encoder of `version` (see codegen.py)."""
        key = (version, direction)
        codec = self._codecs.get(key)
        if codec is None:
            from .codegen import compile_codec
            self.check_version(version)
            codec = self._codecs[key] = compile_codec(self, version, direction)
        return codec

    def decode(self, buf, version, pos=0, end=None):
        """(body dict, position after it) of this message at buf[pos:end]."""
        decode = self._codecs.get((version, "decode")) or self.codec(version, "decode")
        if type(buf) is not memoryview or buf.format != "B":
            buf = memoryview(buf).cast("B")
        return decode(buf, pos, len(buf) if end is None else end)

    def encode_into(self, out, body, version):
        encode = self._codecs.get((version, "encode")) or self.codec(version, "encode")
        encode(out, body)

    def encode(self, body, version):
        out = bytearray()
        self.encode_into(out, body, version)
        return bytes(out)
