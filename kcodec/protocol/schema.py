"""A small notation for Kafka's message schemas and the one codec that walks it.

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

from .errors import ProtocolError, UnsupportedVersionError

_MISSING = object()
_ENCODE_ERRORS = (struct.error, TypeError, ValueError, AttributeError, OverflowError)
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


# ----------------------------------------------------------------------------
# Reading and writing
# ----------------------------------------------------------------------------

class Reader:
    """A bounded cursor over a buffer; positions are offsets in that buffer."""
    __slots__ = ("buf", "pos", "end", "api", "version")

    def __init__(self, buf, pos=0, end=None, api=None, version=None):
        self.buf = buf if isinstance(buf, memoryview) and buf.format == "B" else \
            memoryview(buf).cast("B")
        self.pos = pos
        self.end = len(self.buf) if end is None else end
        self.api = api
        self.version = version

    def fail(self, message, position=None, cls=ProtocolError):
        raise cls(message, api=self.api, version=self.version,
                  position=self.pos if position is None else position)

    def take(self, n):
        """Advance over n bytes and return where they start."""
        pos = self.pos
        if n > self.end - pos:
            self.fail(f"{n} bytes needed, {self.end - pos} left")
        self.pos = pos + n
        return pos

    def uvarint(self):
        """An unsigned varint of at most 32 bits (5 bytes)."""
        buf, pos, end = self.buf, self.pos, self.end
        result = shift = 0
        while True:
            if pos >= end:
                self.fail("unsigned varint runs past the end")
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 28:
                self.fail("unsigned varint longer than 5 bytes")
        if result > 0xFFFFFFFF:
            self.fail("unsigned varint exceeds 32 bits")
        self.pos = pos
        return result


def write_uvarint(out, value):
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _within(error, step):
    """Prefix a field-path step ("name" or "[i]") onto a ProtocolError."""
    path = error.field or ""
    if not path or path.startswith("["):
        error.field = step + path
    else:
        error.field = f"{step}.{path}"
    error.args = (error._describe(),)


# ----------------------------------------------------------------------------
# Types. Each builds a reader fn(reader) and a writer fn(bytearray, value) for
# a given (flexible, nullable, version); structs cache them per version.
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

    def reader(self, flexible, nullable, version):
        size, unpack, convert = self.codec.size, self.codec.unpack_from, self.convert

        def read(r):
            pos = r.pos
            if size > r.end - pos:
                r.fail(f"{size} bytes needed, {r.end - pos} left")
            r.pos = pos + size
            value = unpack(r.buf, pos)[0]
            return value if convert is None else convert(value)
        return read

    def writer(self, flexible, nullable, version):
        pack = self.codec.pack

        def write(out, value):
            out += pack(value)
        return write


class Uuid:
    name = "uuid"

    def default(self):
        return NULL_UUID

    def min_size(self, flexible, version):
        return 16

    def reader(self, flexible, nullable, version):
        def read(r):
            pos = r.take(16)
            return uuid.UUID(bytes=bytes(r.buf[pos:pos + 16]))
        return read

    def writer(self, flexible, nullable, version):
        def write(out, value):
            raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
            if len(raw) != 16:
                raise ValueError("a uuid is 16 bytes")
            out += raw
        return write


def _length_reader(flexible, nullable, short):
    """Reads a length: compact (uvarint n + 1) or int16/int32; -1 means null."""
    def length(r):
        if flexible:
            n = r.uvarint() - 1
        else:
            pos = r.take(2 if short else 4)
            n = int.from_bytes(r.buf[pos:r.pos], "big", signed=True)
        if n < 0:
            if n == -1 and nullable:
                return -1
            r.fail("null in a non-nullable field" if n == -1 else f"negative length {n}",
                   r.pos)
        return n
    return length


def _length_writer(flexible, nullable, short):
    fmt = struct.Struct(">h" if short else ">i").pack

    def length(out, n):
        if n < 0 and not nullable:
            raise ValueError("null in a non-nullable field")
        if flexible:
            write_uvarint(out, n + 1)
        else:
            out += fmt(n)
    return length


class String:
    name = "string"

    def default(self):
        return ""

    def min_size(self, flexible, version):
        return 1 if flexible else 2

    def reader(self, flexible, nullable, version):
        length = _length_reader(flexible, nullable, short=True)

        def read(r):
            n = length(r)
            if n < 0:
                return None
            pos = r.take(n)
            try:
                return str(r.buf[pos:pos + n], "utf-8")
            except UnicodeDecodeError as exc:
                r.fail(f"invalid UTF-8 in a string ({exc.reason})", pos + exc.start)
        return read

    def writer(self, flexible, nullable, version):
        length = _length_writer(flexible, nullable, short=True)

        def write(out, value):
            if value is None:
                length(out, -1)
                return
            raw = value.encode("utf-8")
            if len(raw) > 0x7FFF:
                raise ValueError(f"string of {len(raw)} bytes exceeds the int16 length")
            length(out, len(raw))
            out += raw
        return write


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

    def reader(self, flexible, nullable, version):
        length = _length_reader(flexible, nullable, short=False)
        view = self.view

        def read(r):
            n = length(r)
            if n < 0:
                return None
            pos = r.take(n)
            data = r.buf[pos:pos + n]
            return data if view else bytes(data)
        return read

    def writer(self, flexible, nullable, version):
        length = _length_writer(flexible, nullable, short=False)

        def write(out, value):
            if value is None:
                length(out, -1)
                return
            data = memoryview(value).cast("B")
            length(out, data.nbytes)
            out += data
        return write


class Array:
    def __init__(self, element):
        self.element = element
        self.name = "[]" + element.name

    def default(self):
        return []

    def min_size(self, flexible, version):
        return 1 if flexible else 4

    def reader(self, flexible, nullable, version):
        length = _length_reader(flexible, nullable, short=False)
        read_element = self.element.reader(flexible, False, version)
        least = max(1, self.element.min_size(flexible, version))

        def read(r):
            count = length(r)
            if count < 0:
                return None
            if count * least > r.end - r.pos:
                r.fail(f"array of {count} elements cannot fit in the {r.end - r.pos} bytes left")
            items = []
            append = items.append
            for i in range(count):
                try:
                    append(read_element(r))
                except ProtocolError as exc:
                    _within(exc, f"[{i}]")
                    raise
            return items
        return read

    def writer(self, flexible, nullable, version):
        length = _length_writer(flexible, nullable, short=False)
        write_element = self.element.writer(flexible, False, version)

        def write(out, value):
            if value is None:
                length(out, -1)
                return
            length(out, len(value))
            for i, item in enumerate(value):
                try:
                    write_element(out, item)
                except ProtocolError as exc:
                    _within(exc, f"[{i}]")
                    raise
        return write


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


class _Plan:
    __slots__ = ("regular", "tagged", "absent", "min_size", "flexible", "steps", "template",
                 "fresh", "tagged_template", "tagged_fresh")


_IMMUTABLE = (int, float, str, bytes, bool, type(None), uuid.UUID)


def _defaults(fields):
    """({name: value} of immutable defaults, [(name, factory)] of the others);
    factories are C callables where possible (decoding fills many defaults)."""
    template, fresh = {}, []
    for name, make in fields:
        value = make()
        if isinstance(value, _IMMUTABLE):
            template[name] = value
        elif type(value) is dict and all(isinstance(v, _IMMUTABLE) for v in value.values()):
            fresh.append((name, value.copy))
        elif type(value) is list and not value:
            fresh.append((name, list))
        else:
            fresh.append((name, make))
    return template, fresh


def _fixed_run(fields):
    """One reader for consecutive fixed-size fields: a single unpack."""
    names = tuple(f.name for f in fields)
    codec = struct.Struct(">" + "".join(f.type.codec.format[1:] for f in fields))
    size, unpack = codec.size, codec.unpack_from
    bools = tuple(f.name for f in fields if f.type.convert is bool)
    offsets, at = [], 0
    for f in fields:
        offsets.append((at + f.type.codec.size, f.name))
        at += f.type.codec.size

    def read_run(r, out):
        pos = r.pos
        if size > r.end - pos:
            left = r.end - pos
            name = next(name for end, name in offsets if end > left)
            try:
                r.fail(f"{size} bytes needed for {', '.join(names)}, {left} left")
            except ProtocolError as exc:
                _within(exc, name)
                raise
        r.pos = pos + size
        out.update(zip(names, unpack(r.buf, pos)))
        for name in bools:
            out[name] = bool(out[name])
    return read_run


def _one_field(name, read_field):
    def read_one(r, out):
        try:
            out[name] = read_field(r)
        except ProtocolError as exc:
            _within(exc, name)
            raise
    return read_one


class Struct:
    """A struct of fields; `record` makes it decode as that namedtuple class
    (which must be a subclass with a __dict__, to hold unknown tags)."""

    name = "struct"

    def __init__(self, fields, record=None):
        self.fields = list(fields)
        self.record = record
        self._plans = {}
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

    def plan(self, version, flexible):
        key = (version, flexible)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._make_plan(version, flexible)
        return plan

    def _make_plan(self, version, flexible):
        plan = _Plan()
        plan.flexible = flexible
        plan.regular, plan.tagged, plan.absent = [], {}, []
        plan.min_size = 1 if flexible else 0
        for f in self.fields:
            present = version in f.versions and (f.tag is None or flexible)
            if not present:
                plan.absent.append((f.name, f.make_default))
                continue
            compact = flexible and f.compact
            nullable = version in f.nullable
            entry = (f.name, f.type.reader(compact, nullable, version),
                     f.type.writer(compact, nullable, version), f.make_default)
            if f.tag is None:
                plan.regular.append(entry)
                plan.min_size += f.type.min_size(compact, version)
            else:
                plan.tagged[f.tag] = entry
        plan.steps = self._steps(version, flexible)
        plan.template, plan.fresh = _defaults(plan.absent)
        plan.tagged_template, plan.tagged_fresh = _defaults(
            [(name, make) for name, _, _, make in plan.tagged.values()])
        return plan

    def _steps(self, version, flexible):
        steps, run = [], []
        for f in self.fields:
            if version not in f.versions or f.tag is not None:
                continue
            if isinstance(f.type, Fixed):
                run.append(f)
                continue
            if run:
                steps.append(_fixed_run(run))
                run = []
            compact = flexible and f.compact
            steps.append(_one_field(f.name, f.type.reader(compact, version in f.nullable,
                                                          version)))
        if run:
            steps.append(_fixed_run(run))
        return steps

    def min_size(self, flexible, version):
        return self.plan(version, flexible).min_size

    def reader(self, flexible, nullable, version):
        plan = self.plan(version, flexible)
        steps, template, fresh, record = plan.steps, plan.template, plan.fresh, self.record

        def read(r):
            out = dict(template)
            for step in steps:
                step(r, out)
            for name, make in fresh:
                out[name] = make()
            unknown = _read_tagged(r, plan, out) if flexible else None
            if record is None:
                if unknown:
                    out["_unknown_tags"] = unknown
                return out
            value = record(**out)
            if unknown:
                value.unknown_tags = unknown
            return value
        return read

    def writer(self, flexible, nullable, version):
        plan = self.plan(version, flexible)
        regular, tagged, record = plan.regular, plan.tagged, self.record

        def write(out, value):
            if record is not None and not isinstance(value, dict):
                unknown = getattr(value, "unknown_tags", None)
                value = dict(zip(record._fields, value))
            else:
                unknown = value.get("_unknown_tags")
            get = value.get
            for name, _, write_field, make in regular:
                item = get(name, _MISSING)
                if item is _MISSING:
                    item = make()
                _write_field(out, name, write_field, item)
            if flexible:
                _write_tagged(out, tagged, get, unknown)
        return write


def _write_field(out, name, write_field, item):
    try:
        write_field(out, item)
    except ProtocolError as exc:
        _within(exc, name)
        raise
    except _ENCODE_ERRORS as exc:
        raise ProtocolError(f"cannot encode {type(item).__name__} {item!r:.60}: {exc}",
                            field=name, position=len(out)) from None


def _read_tagged(r, plan, out):
    out.update(plan.tagged_template)
    for name, make in plan.tagged_fresh:
        out[name] = make()
    if r.pos < r.end and r.buf[r.pos] == 0:       # the usual case: no tagged fields
        r.pos += 1
        return None
    count = r.uvarint()
    if count * 2 > r.end - r.pos:
        r.fail(f"{count} tagged fields cannot fit in the {r.end - r.pos} bytes left")
    tagged = plan.tagged
    unknown = None
    for _ in range(count):
        tag = r.uvarint()
        size = r.uvarint()
        start = r.take(size)
        entry = tagged.get(tag)
        if entry is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = bytes(r.buf[start:start + size])
            continue
        name, read_field = entry[0], entry[1]
        end, r.pos, r.end = r.end, start, start + size
        try:
            out[name] = read_field(r)
            if r.pos != start + size:
                r.fail(f"tagged field {tag} has {start + size - r.pos} bytes left over")
        except ProtocolError as exc:
            _within(exc, name)
            raise
        finally:
            r.end = end
        r.pos = start + size
    return unknown


def _write_tagged(out, tagged, get, unknown):
    items = []
    for tag, (name, _, write_field, make) in tagged.items():
        item = get(name, _MISSING)
        if item is _MISSING or item == make():
            continue                       # Kafka writes a tagged field only when not default
        payload = bytearray()
        _write_field(payload, name, write_field, item)
        items.append((tag, payload))
    for tag, payload in (unknown or {}).items():
        if tag not in tagged:
            items.append((tag, payload))
    items.sort(key=lambda item: item[0])
    write_uvarint(out, len(items))
    for tag, payload in items:
        write_uvarint(out, tag)
        write_uvarint(out, len(payload))
        out += payload


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

    def __repr__(self):
        return f"<{self.api}{self.kind.title()} v{self.valid.spec}>"

    def check_version(self, version):
        if version not in self.valid:
            raise UnsupportedVersionError(
                f"{self.api} {self.kind} v{version} is outside v{self.valid.low}-v{self.valid.high}",
                api=self.api, version=version)

    def decode(self, buf, version, pos=0, end=None):
        """(body dict, position after it) of this message at buf[pos:end]."""
        self.check_version(version)
        r = buf if isinstance(buf, Reader) else Reader(buf, pos, end, self.api, version)
        r.api, r.version = self.api, version
        body = self.reader(version in self.flexible, False, version)(r)
        return body, r.pos

    def encode_into(self, out, body, version):
        self.check_version(version)
        try:
            self.writer(version in self.flexible, False, version)(out, body)
        except ProtocolError as exc:
            exc.api, exc.version = self.api, version
            exc.args = (exc._describe(),)
            raise

    def encode(self, body, version):
        out = bytearray()
        self.encode_into(out, body, version)
        return bytes(out)

    def reader(self, flexible, nullable, version):
        key = ("reader", version)
        cached = self._plans.get(key)
        if cached is None:
            cached = self._plans[key] = super().reader(flexible, nullable, version)
        return cached

    def writer(self, flexible, nullable, version):
        key = ("writer", version)
        cached = self._plans.get(key)
        if cached is None:
            cached = self._plans[key] = super().writer(flexible, nullable, version)
        return cached
