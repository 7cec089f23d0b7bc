"""Helpers for the kcodec.protocol tests: random message bodies drawn from a
schema, comparable forms of decoded bodies, and the message catalogue."""
import random
import uuid

from kcodec.protocol import REQUESTS, RESPONSES
from kcodec.protocol.schema import Array, Bytes, Fixed, String, Struct, Uuid

MESSAGES = [m for table in (REQUESTS, RESPONSES) for m in table.values()]
MESSAGE_VERSIONS = [(m, v) for m in MESSAGES for v in m.valid]

_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535),
           "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
           "int64": (-2**63, 2**63 - 1)}


def random_value(rng, type_, version, flexible, nullable, depth=0):
    if nullable and rng.random() < 0.15:
        return None
    if isinstance(type_, Fixed):
        if type_.name == "bool":
            return rng.random() < 0.5
        if type_.name == "float64":
            return rng.choice([0.0, -1.5, 1e300, rng.random()])
        low, high = _RANGES[type_.name]
        return rng.choice([low, high, 0, -1 if low < 0 else 1, rng.randint(low, high)])
    if isinstance(type_, Uuid):
        return uuid.UUID(int=rng.getrandbits(128))
    if isinstance(type_, String):
        return rng.choice(["", "t", "topic-ü", "x" * rng.randrange(1, 300)])
    if isinstance(type_, Bytes):
        return rng.randbytes(rng.choice([0, 1, 70, 200]))
    if isinstance(type_, Array):
        count = rng.randrange(0, 4 if depth < 2 else 2)
        return [random_value(rng, type_.element, version, flexible, False, depth + 1)
                for _ in range(count)]
    if isinstance(type_, Struct):
        return random_struct(rng, type_, version, flexible, depth + 1)
    raise TypeError(type_)


def random_struct(rng, struct, version, flexible, depth=0):
    """A body with random values for the fields of `version` and defaults for
    the others (what decoding yields); tagged fields are random or default."""
    body = {}
    for f in struct.fields:
        present = version in f.versions and (f.tag is None or flexible)
        if not present or (f.tag is not None and rng.random() < 0.3):
            body[f.name] = f.make_default()
            continue
        body[f.name] = random_value(rng, f.type, version, flexible and f.compact,
                                    version in f.nullable, depth)
    if struct.record is not None:
        return struct.record(**body)
    if flexible and rng.random() < 0.2:
        known = {f.tag for f in struct.fields if f.tag is not None}
        tag = rng.choice([t for t in (5, 9, 40, 300) if t not in known])
        body["_unknown_tags"] = {tag: rng.randbytes(rng.randrange(0, 5))}
    return body


def random_body(message, version, seed):
    rng = random.Random(f"{message.api}-{message.kind}-{version}-{seed}")
    return random_struct(rng, message, version, version in message.flexible)


def plain(value):
    """Decoded bodies in comparable form: memoryviews as bytes, tuples as lists."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value
