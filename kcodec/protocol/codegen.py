"""The code generator of kcodec.protocol: each (message, version) is compiled on first
use into one Python decoder and one encoder, generated from the schema.

The generated code is straight-line: consecutive fixed-size fields are one
struct unpack (or pack), lengths are read inline (compact varints in flexible
versions, int16/int32 otherwise), nested arrays are loops in the same
function, tagged fields are only looked for in flexible versions, and absent
fields take their defaults as literals. Every read is checked against the end
of the buffer before it happens.

Errors: the generated code keeps in `at` which field it is on (an index into
the function's path templates such as "responses[{0}].partitions[{1}]"); the
one handler around the body fills in the API, version and field path (with the
loop indices) of any ProtocolError, so the checks themselves only give the
message and byte position. `source(message, version, "decode")` returns the
generated text.
"""
import linecache
import struct
import uuid

from .errors import ProtocolError
from .schema import _IMMUTABLE, Array, Bytes, Fixed, String, Struct, Uuid, write_uvarint

ENCODE_ERRORS = (struct.error, TypeError, ValueError, AttributeError, OverflowError)
_LITERAL = (int, float, str, bytes, bool, type(None))
_MISSING = object()


# ----------------------------------------------------------------------------
# Run-time helpers called by the generated code (errors are built here)
# ----------------------------------------------------------------------------

def _uvarint(buf, pos, end):
    """(value, position after) of an unsigned varint of at most 32 bits."""
    start = pos
    result = shift = 0
    while True:
        if pos >= end:
            raise ProtocolError("unsigned varint runs past the end", position=start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes", position=start)
    if result > 0xFFFFFFFF:
        raise ProtocolError("unsigned varint exceeds 32 bits", position=start)
    return result, pos


def _short(size, pos, end):
    return ProtocolError(f"{size} bytes needed, {end - pos} left", position=pos)


def _short_run(run, pos, end):
    """A run of fixed fields that does not fit: names the first field cut off."""
    size, names, ends = run
    left = end - pos
    error = ProtocolError(f"{size} bytes needed for {', '.join(names)}, {left} left",
                          position=pos)
    error.field = next(name for name, field_end in zip(names, ends) if field_end > left)
    return error


def _bad_length(n, pos):
    return ProtocolError("null in a non-nullable field" if n == -1 else f"negative length {n}",
                         position=pos)


def _bad_utf8(exc, pos):
    return ProtocolError(f"invalid UTF-8 in a string ({exc.reason})", position=pos + exc.start)


def _no_room(count, pos, end):
    return ProtocolError(f"array of {count} elements cannot fit in the {end - pos} bytes left",
                         position=pos)


def _too_many_tags(count, pos, end):
    return ProtocolError(f"{count} tagged fields cannot fit in the {end - pos} bytes left",
                         position=pos)


def _left_over(tag, left, pos):
    return ProtocolError(f"tagged field {tag} has {left} bytes left over", position=pos)


def _uuid(buf, pos):
    return uuid.UUID(bytes=bytes(buf[pos:pos + 16]))


def _uuid_bytes(value):
    raw = value.bytes if isinstance(value, uuid.UUID) else memoryview(value).tobytes()
    if len(raw) != 16:
        raise ValueError("a uuid is 16 bytes")
    return raw


def _as_bytes(value):
    return value if type(value) is bytes else memoryview(value).cast("B")


def _cannot_encode(exc, value, position):
    return ProtocolError(f"cannot encode {type(value).__name__} {value!r:.60}: {exc}",
                         position=position)


def _bad_run(run, values, position):
    """Which field of a run of fixed fields failed to pack, and why."""
    names, codecs = run
    for name, codec, value in zip(names, codecs, values):
        try:
            codec.pack(value)
        except ENCODE_ERRORS as exc:
            error = _cannot_encode(exc, value, position)
            error.field = name
            return error
        position += codec.size
    return ProtocolError(f"cannot encode {values!r:.60}", position=position)


def _write_tags(out, known, unknown, known_tags):
    """Tagged fields in tag order: those of the schema (not default) and
    unknown ones carried over from decoding."""
    items = list(known or ())
    for tag, payload in (unknown or {}).items():
        if tag not in known_tags:
            items.append((tag, payload))
    items.sort(key=lambda item: item[0])
    write_uvarint(out, len(items))
    for tag, payload in items:
        write_uvarint(out, tag)
        write_uvarint(out, len(payload))
        out += payload


def _locate(exc, template, indices, api, version):
    """Complete a ProtocolError raised in generated code: API, version and the
    field path (the template of the field being read, with the loop indices,
    then any field name the check itself gave)."""
    path = template.format(*indices)
    if exc.field:
        path = f"{path}.{exc.field}" if path else exc.field
    exc.field = path or None
    exc.api, exc.version = api, version
    exc.args = (exc._describe(),)


_HELPERS = {
    "ProtocolError": ProtocolError, "ENCODE_ERRORS": ENCODE_ERRORS, "_M": _MISSING,
    "_uvarint": _uvarint, "_short": _short, "_short_run": _short_run,
    "_bad_length": _bad_length, "_bad_utf8": _bad_utf8, "_no_room": _no_room,
    "_too_many_tags": _too_many_tags, "_left_over": _left_over, "_uuid": _uuid,
    "_uuid_bytes": _uuid_bytes, "_as_bytes": _as_bytes, "_cannot_encode": _cannot_encode,
    "_bad_run": _bad_run, "_write_tags": _write_tags, "_write_uvarint": write_uvarint,
    "_locate": _locate, "_unpack_from": struct.unpack_from, "_pack": struct.pack,
    "_i16": struct.Struct(">h").unpack_from, "_i32": struct.Struct(">i").unpack_from,
    "_p16": struct.Struct(">h").pack, "_p32": struct.Struct(">i").pack,
}


# ----------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------

def _runs(fields):
    """Fields grouped: lists of consecutive fixed-size fields, others alone."""
    groups, run = [], []
    for entry in fields:
        if isinstance(entry[0].type, Fixed):
            run.append(entry)
            continue
        if run:
            groups.append(run)
            run = []
        groups.append(entry)
    if run:
        groups.append(run)
    return groups


def _template(path):
    """A field path as a format string: ("responses", 0, "records") ->
    "responses[{0}].records" (ints are loop depths)."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += "[{%d}]" % step
        else:
            text += f".{step}" if text else step
    return text


class _Generator:
    def __init__(self, message, version, direction):
        self.message = message
        self.version = version
        self.flexible = version in message.flexible
        self.direction = direction
        self.lines = []
        self.namespace = dict(_HELPERS)
        self.paths = {}
        self.count = 0
        self.depth = 0

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    def fresh(self, hint):
        self.count += 1
        return f"{hint}{self.count}"

    def const(self, value, hint):
        name = self.fresh(hint.upper())
        self.namespace[name] = value
        return name

    def at(self, indent, path):
        """Record the field the code below works on (for error paths)."""
        index = self.paths.setdefault(_template(path), len(self.paths))
        line = "    " * indent + f"at = {index}"
        if not self.lines or self.lines[-1] != line:
            self.lines.append(line)

    def literal(self, value):
        """An expression for an immutable value."""
        if isinstance(value, _LITERAL) and not (isinstance(value, float) and value != value):
            return repr(value)
        return self.const(value, "k")

    def default(self, field):
        """An expression making a field's default (fresh if mutable)."""
        value = field.make_default()
        if isinstance(value, _IMMUTABLE):
            return self.literal(value)
        if type(value) is list and not value:
            return "[]"
        if type(value) is dict and all(isinstance(v, _IMMUTABLE) for v in value.values()):
            return self.const(value, "d") + ".copy()"
        return self.const(field.make_default, "f") + "()"

    def function(self, body, args):
        name = f"{self.direction}_{self.message.api}{self.message.kind.title()}_v{self.version}"
        indices = ", ".join(f"i{d}" for d in range(self.depth))
        head = [f"def {name}({args}):", "    at = 0"]
        if indices:
            head.append(f"    {' = '.join(f'i{d}' for d in range(self.depth))} = 0")
        if self.direction == "encode":
            head.append("    x = None")
        templates = sorted(self.paths, key=self.paths.get)
        self.namespace["PATHS"] = tuple(templates)
        self.namespace["API"], self.namespace["VERSION"] = self.message.api, self.version
        where = f"PATHS[at], ({indices}{',' if self.depth == 1 else ''}), API, VERSION"
        tail = ["    except ProtocolError as exc:", f"        _locate(exc, {where})",
                "        raise"]
        if self.direction == "encode":
            tail += ["    except ENCODE_ERRORS as exc:",
                     "        error = _cannot_encode(exc, x, len(out))",
                     f"        _locate(error, {where})",
                     "        raise error from None"]
        return name, "\n".join(head + ["    try:"] + body + tail) + "\n"


def _depth(path):
    return sum(1 for step in path if isinstance(step, int))


class _Decoder(_Generator):
    """Emits code reading from `buf` (a byte memoryview) at `pos`, bounded by
    the local named by `end`."""

    def struct(self, struct, flexible, indent, path, end, target):
        regular, tagged = struct.present(self.version, flexible)
        prefix = self.fresh("s")
        values = {}
        for group in _runs(regular):
            if isinstance(group, list):
                fields = [(f.name, f.type, f"{prefix}_{f.name}") for f, _, _ in group]
                values.update(self.fixed(fields, indent, path, end))
                continue
            f, compact, nullable = group
            local = values[f.name] = f"{prefix}_{f.name}"
            self.at(indent, path + (f.name,))
            self.value(f.type, compact, nullable, indent, path + (f.name,), end, local)
        for f in struct.fields:
            if f.name not in values:
                values[f.name] = self.default(f)     # absent, or tagged until read
        if struct.record is None:
            items = ", ".join(f"{f.name!r}: {values[f.name]}" for f in struct.fields)
            self.emit(indent, f"{target} = {{{items}}}")
            if flexible:
                self.tags(tagged, indent, path, end, prefix, target)
            return
        if flexible:       # a tuple is built last: tagged values and unknown tags as locals
            for f, _, _ in tagged:
                local = values[f.name] = f"{prefix}_{f.name}"
                self.emit(indent, f"{local} = {self.default(f)}")
            self.emit(indent, f"{prefix}_unknown = None")
            self.tags(tagged, indent, path, end, prefix, None)
        record = self.const(struct.record, "r")
        arguments = ", ".join(values[name] for name in struct.record._fields)
        self.emit(indent, f"{target} = {record}({arguments})")
        if flexible:
            self.emit(indent, f"if {prefix}_unknown:")
            self.emit(indent + 1, f"{target}.unknown_tags = {prefix}_unknown")

    def fixed(self, fields, indent, path, end):
        """Consecutive fixed-size values [(name, type, local)] in one unpack;
        returns {name: expression of its value}."""
        codec = struct.Struct(">" + "".join(type_.codec.format[1:] for _, type_, _ in fields))
        ends, at = [], 0
        for _, type_, _ in fields:
            at += type_.codec.size
            ends.append(at)
        unpack = self.const(codec.unpack_from, "u")
        facts = self.const((codec.size, tuple(name for name, _, _ in fields), tuple(ends)),
                           "run")
        self.at(indent, path)
        self.emit(indent, f"if pos + {codec.size} > {end}:")
        self.emit(indent + 1, f"raise _short_run({facts}, pos, {end})")
        self.emit(indent, f"{', '.join(local for _, _, local in fields)}, = {unpack}(buf, pos)")
        self.emit(indent, f"pos += {codec.size}")
        return {name: f"({local} != 0)" if type_.convert is bool else local
                for name, type_, local in fields}

    def length(self, indent, compact, short, nullable, end, target):
        """Emit a length read into `n`; returns the indent of the code for a
        non-null value (the null branch sets target to None)."""
        if compact:                         # varints of one and two bytes inline
            self.emit(indent, f"if pos < {end} and (n := buf[pos]) < 0x80:")
            self.emit(indent + 1, "pos += 1")
            self.emit(indent, f"elif pos + 1 < {end} and (high := buf[pos + 1]) < 0x80:")
            self.emit(indent + 1, "n = (n & 0x7F | high << 7)")
            self.emit(indent + 1, "pos += 2")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"n, pos = _uvarint(buf, pos, {end})")
            self.emit(indent, "n -= 1")
        else:
            size = 2 if short else 4
            self.emit(indent, f"if pos + {size} > {end}:")
            self.emit(indent + 1, f"raise _short({size}, pos, {end})")
            self.emit(indent, f"n = {'_i16' if short else '_i32'}(buf, pos)[0]")
            self.emit(indent, f"pos += {size}")
        self.emit(indent, "if n < 0:")
        if not nullable:
            self.emit(indent + 1, "raise _bad_length(n, pos)")
            return indent
        # Any negative length is null, as in Kafka's generated readers (which
        # also read a compact length of 2^31 or more as negative: not here).
        self.emit(indent + 1, f"{target} = None")
        self.emit(indent, "else:")
        return indent + 1

    def value(self, type_, compact, nullable, indent, path, end, target):
        if isinstance(type_, Fixed):
            value = self.fixed([(path[-1], type_, target)], indent, path[:-1], end)[path[-1]]
            if value != target:
                self.emit(indent, f"{target} = {value}")
        elif isinstance(type_, Uuid):
            self.emit(indent, f"if pos + 16 > {end}:")
            self.emit(indent + 1, f"raise _short(16, pos, {end})")
            self.emit(indent, f"{target} = _uuid(buf, pos)")
            self.emit(indent, "pos += 16")
        elif isinstance(type_, String):
            inner = self.length(indent, compact, True, nullable, end, target)
            self.emit(inner, f"if n > {end} - pos:")
            self.emit(inner + 1, f"raise _short(n, pos, {end})")
            if type_.errors == "strict":
                self.emit(inner, "try:")
                self.emit(inner + 1, f"{target} = str(buf[pos:pos + n], 'utf-8')")
                self.emit(inner, "except UnicodeDecodeError as exc:")
                self.emit(inner + 1, "raise _bad_utf8(exc, pos)")
            else:
                self.emit(inner, f"{target} = str(buf[pos:pos + n], 'utf-8', {type_.errors!r})")
            self.emit(inner, "pos += n")
        elif isinstance(type_, Bytes):
            inner = self.length(indent, compact, False, nullable, end, target)
            self.emit(inner, f"if n > {end} - pos:")
            self.emit(inner + 1, f"raise _short(n, pos, {end})")
            data = "buf[pos:pos + n]"
            self.emit(inner, f"{target} = {data if type_.view else f'bytes({data})'}")
            self.emit(inner, "pos += n")
        elif isinstance(type_, Array):
            self.array(type_, compact, nullable, indent, path, end, target)
        elif isinstance(type_, Struct):
            self.struct(type_, compact, indent, path, end, target)
        else:
            raise TypeError(f"no code for {type_!r}")

    def array(self, type_, compact, nullable, indent, path, end, target):
        element = type_.element
        least = max(1, element.min_size(compact, self.version))
        inner = self.length(indent, compact, False, nullable, end, target)
        self.emit(inner, f"if n * {least} > {end} - pos:")
        self.emit(inner + 1, f"raise _no_room(n, pos, {end})")
        if isinstance(element, Fixed):
            code = element.codec.format[1:]
            self.emit(inner, f"{target} = list(_unpack_from('>%d{code}' % n, buf, pos))")
            if element.convert is bool:
                self.emit(inner, f"{target} = [item != 0 for item in {target}]")
            self.emit(inner, f"pos += n * {element.codec.size}")
            return
        depth = _depth(path)
        self.depth = max(self.depth, depth + 1)
        item = self.fresh("e")
        self.emit(inner, f"{target} = []")
        self.emit(inner, f"for i{depth} in range(n):")
        if not isinstance(element, Struct):
            self.at(inner + 1, path + (depth,))
        self.value(element, compact, False, inner + 1, path + (depth,), end, item)
        self.emit(inner + 1, f"{target}.append({item})")

    def tags(self, tagged, indent, path, end, prefix, into):
        """Emit the tagged-field section: known tags are read into the dict
        `into` (or, if None, into locals named after the fields), unknown
        ones kept as bytes."""
        tag, tag_end = f"{prefix}_tag", f"{prefix}_end"
        self.emit(indent, f"if pos < {end} and buf[pos] == 0:     # the usual case: none")
        self.emit(indent + 1, "pos += 1")
        self.emit(indent, "else:")
        indent += 1
        self.at(indent, path)
        self.emit(indent, f"n, pos = _uvarint(buf, pos, {end})")
        self.emit(indent, f"if n * 2 > {end} - pos:")
        self.emit(indent + 1, f"raise _too_many_tags(n, pos, {end})")
        self.emit(indent, "for _ in range(n):")
        indent += 1
        self.emit(indent, f"{tag}, pos = _uvarint(buf, pos, {end})")
        self.emit(indent, f"n, pos = _uvarint(buf, pos, {end})")
        self.emit(indent, f"if n > {end} - pos:")
        self.emit(indent + 1, f"raise _short(n, pos, {end})")
        self.emit(indent, f"{tag_end} = pos + n")
        keyword = "if"
        for f, compact, nullable in sorted(tagged, key=lambda entry: entry[0].tag):
            self.emit(indent, f"{keyword} {tag} == {f.tag}:")
            keyword = "elif"
            self.at(indent + 1, path + (f.name,))
            target = f"{prefix}_{f.name}" if into is None else f"{into}[{f.name!r}]"
            self.value(f.type, compact, nullable, indent + 1, path + (f.name,), tag_end, target)
            self.at(indent + 1, path + (f.name,))
            self.emit(indent + 1, f"if pos != {tag_end}:")
            self.emit(indent + 2, f"raise _left_over({tag}, {tag_end} - pos, pos)")
            self.at(indent + 1, path)
        body = indent
        if tagged:
            self.emit(indent, "else:")
            body += 1
        unknown = f"bytes(buf[pos:{tag_end}])"
        if into is None:
            self.emit(body, f"if {prefix}_unknown is None:")
            self.emit(body + 1, f"{prefix}_unknown = {{}}")
            self.emit(body, f"{prefix}_unknown[{tag}] = {unknown}")
        else:
            self.emit(body, f"{into}.setdefault('_unknown_tags', {{}})[{tag}] = {unknown}")
        self.emit(indent, f"pos = {tag_end}")

    def build(self):
        self.struct(self.message, self.flexible, 2, (), "end", "body")
        self.emit(2, "return body, pos")
        return self.function(self.lines, "buf, pos, end")


class _Encoder(_Generator):
    """Emits code appending to the bytearray `out`; `x` always holds the value
    being written, for the error message."""

    def struct(self, struct, flexible, indent, path, value):
        regular, tagged = struct.present(self.version, flexible)
        prefix = self.fresh("s")
        get, unknown = f"{prefix}_get", f"{prefix}_unknown"
        self.at(indent, path)
        self.emit(indent, f"x = {value}")
        if struct.record is not None:
            names = self.const(struct.record._fields, "names")
            self.emit(indent, f"if isinstance({value}, dict):")
            self.emit(indent + 1, f"{get} = {value}.get")
            self.emit(indent + 1, f"{unknown} = {get}('_unknown_tags')")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{unknown} = getattr({value}, 'unknown_tags', None)")
            self.emit(indent + 1, f"{get} = dict(zip({names}, {value})).get")
        else:
            self.emit(indent, f"{get} = {value}.get")
            if flexible:
                self.emit(indent, f"{unknown} = {get}('_unknown_tags')")
        for group in _runs(regular):
            if isinstance(group, list):
                self.fixed(group, indent, path, prefix, get)
                continue
            f, compact, nullable = group
            self.at(indent, path + (f.name,))
            self.emit(indent, f"x = {get}({f.name!r}, {self.encode_default(f)})")
            self.value(f.type, compact, nullable, indent, path + (f.name,), "x")
        if flexible:
            self.tags(tagged, indent, path, prefix, get, unknown)

    def encode_default(self, field):
        """The value written for a missing field (only read, so shared)."""
        value = field.make_default()
        if type(value) is list and not value:
            return "()"
        return self.literal(value) if isinstance(value, _IMMUTABLE) else self.const(value, "k")

    def fixed(self, run, indent, path, prefix, get):
        codec = struct.Struct(">" + "".join(f.type.codec.format[1:] for f, _, _ in run))
        pack = self.const(codec.pack, "p")
        facts = self.const((tuple(f.name for f, _, _ in run),
                            tuple(f.type.codec for f, _, _ in run)), "run")
        locals_ = [f"{prefix}_{f.name}" for f, _, _ in run]
        self.at(indent, path)
        for (f, _, _), local in zip(run, locals_):
            self.emit(indent, f"{local} = {get}({f.name!r}, {self.encode_default(f)})")
        values = ", ".join(locals_)
        self.emit(indent, "try:")
        self.emit(indent + 1, f"out += {pack}({values})")
        self.emit(indent, "except ENCODE_ERRORS:")
        self.emit(indent + 1, f"raise _bad_run({facts}, ({values},), len(out)) from None")

    def length(self, indent, compact, short, value):
        if compact:
            self.emit(indent, f"if {value} < 0x7F:")
            self.emit(indent + 1, f"out.append({value} + 1)")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"_write_uvarint(out, {value} + 1)")
        else:
            self.emit(indent, f"out += {'_p16' if short else '_p32'}({value})")

    def null(self, indent, compact, short, nullable, value):
        """Emit the None case; returns the indent for a value."""
        self.emit(indent, f"if {value} is None:")
        if not nullable:
            self.emit(indent + 1, "raise ValueError('null in a non-nullable field')")
        elif compact:
            self.emit(indent + 1, "out.append(0)")
        else:
            null = bytes([0xFF] * (2 if short else 4))
            self.emit(indent + 1, f"out += {null!r}")
        self.emit(indent, "else:")
        return indent + 1

    def value(self, type_, compact, nullable, indent, path, value):
        if isinstance(type_, Fixed):
            pack = self.const(type_.codec.pack, "p")
            self.emit(indent, f"out += {pack}({value})")
        elif isinstance(type_, Uuid):
            self.emit(indent, f"out += _uuid_bytes({value})")
        elif isinstance(type_, String):
            inner = self.null(indent, compact, True, nullable, value)
            raw = self.fresh("raw")
            self.emit(inner, f"{raw} = {value}.encode('utf-8')")
            self.emit(inner, f"n = len({raw})")
            self.emit(inner, "if n > 0x7FFF:")
            self.emit(inner + 1,
                      "raise ValueError(f'string of {n} bytes exceeds the int16 length')")
            self.length(inner, compact, True, "n")
            self.emit(inner, f"out += {raw}")
        elif isinstance(type_, Bytes):
            inner = self.null(indent, compact, False, nullable, value)
            data = self.fresh("data")
            self.emit(inner, f"{data} = _as_bytes({value})")
            self.emit(inner, f"n = len({data})")
            self.length(inner, compact, False, "n")
            self.emit(inner, f"out += {data}")
        elif isinstance(type_, Array):
            self.array(type_, compact, nullable, indent, path, value)
        elif isinstance(type_, Struct):
            self.struct(type_, compact, indent, path, value)
        else:
            raise TypeError(f"no code for {type_!r}")

    def array(self, type_, compact, nullable, indent, path, value):
        element = type_.element
        inner = self.null(indent, compact, False, nullable, value)
        self.emit(inner, f"n = len({value})")
        self.length(inner, compact, False, "n")
        if isinstance(element, Fixed):
            code = element.codec.format[1:]
            self.emit(inner, f"out += _pack('>%d{code}' % n, *{value})")
            return
        depth = _depth(path)
        self.depth = max(self.depth, depth + 1)
        item = self.fresh("e")
        self.emit(inner, f"for i{depth}, {item} in enumerate({value}):")
        if not isinstance(element, Struct):
            self.at(inner + 1, path + (depth,))
            self.emit(inner + 1, f"x = {item}")
        self.value(element, compact, False, inner + 1, path + (depth,), item)

    def tags(self, tagged, indent, path, prefix, get, unknown):
        items, saved = f"{prefix}_tags", f"{prefix}_out"
        if tagged:
            self.emit(indent, f"{items} = None")
        for f, compact, nullable in sorted(tagged, key=lambda entry: entry[0].tag):
            self.at(indent, path + (f.name,))
            self.emit(indent, f"x = {get}({f.name!r}, _M)")
            value = f.make_default()
            default = self.literal(value) if isinstance(value, _IMMUTABLE) else \
                self.const(value, "k")
            self.emit(indent, f"if x is not _M and x != {default}:")
            self.emit(indent + 1, f"{saved}, out = out, bytearray()")
            self.value(f.type, compact, nullable, indent + 1, path + (f.name,), "x")
            self.emit(indent + 1, f"{saved}, out = out, {saved}")
            self.emit(indent + 1, f"if {items} is None:")
            self.emit(indent + 2, f"{items} = []")
            self.emit(indent + 1, f"{items}.append(({f.tag}, {saved}))")
        self.at(indent, path)
        none = f"not {unknown}" if not tagged else f"{items} is None and not {unknown}"
        self.emit(indent, f"if {none}:")
        self.emit(indent + 1, "out.append(0)")
        self.emit(indent, "else:")
        self.emit(indent + 1, f"x = {unknown}")
        known = self.literal(frozenset(f.tag for f, _, _ in tagged))
        self.emit(indent + 1, f"_write_tags(out, {items if tagged else None}, {unknown}, {known})")

    def build(self):
        self.struct(self.message, self.flexible, 2, (), "body")
        return self.function(self.lines, "out, body")


_GENERATORS = {"decode": _Decoder, "encode": _Encoder}


def source(message, version, direction="decode"):
    """The generated source of a message's decoder or encoder at a version."""
    message.check_version(version)
    return _GENERATORS[direction](message, version, direction).build()[1]


def compile_codec(message, version, direction):
    """A message's decoder, fn(buf, pos, end) -> (body, end of body) with buf a
    byte memoryview, or its encoder, fn(out, body) appending to a bytearray."""
    generator = _GENERATORS[direction](message, version, direction)
    name, text = generator.build()
    filename = f"<kcodec.protocol {name}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), generator.namespace)
    return generator.namespace[name]
