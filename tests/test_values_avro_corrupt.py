"""Corrupt Avro datums (kcodec/_core/avro.pyx): truncation at every byte,
every single-bit flip, random multi-byte mutations, lying lengths and block
counts (which must not allocate), bad varints, union and enum indexes out of
range, invalid UTF-8, oversized decimals, deep nesting, unknown schema ids,
wrong magic bytes and short frames. Every case gives only kcodec's errors
(ValueDecodeError / UnknownSchemaError, KafkaFormatError subclasses) with the
record's offset and the byte in the value; never a crash, a hang or another
exception type. With on_value_error="null" exactly the bad rows are null, a
valueError column says why, and the good rows around them are intact."""
import decimal
import io
import json
import random
import resource
import struct

import numpy as np
import pyarrow as pa
import pytest

import kcodec
from avro_values import (
    MappingSource, assert_rows, fastavro, frame, install_schema_source, normalize,
    read_fastavro, validate, write_fastavro,
)
from kcodec.errors import KafkaFormatError, SchemaError, UnknownSchemaError, ValueDecodeError
from kcodec.values.avro import decode_avro

SCHEMA_ID = 4


def zz(n):
    """An Avro long (zigzag varint)."""
    n = (n << 1) ^ (n >> 63)
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode(datums, schema, on_error="fail", framed=True, schema_id=SCHEMA_ID):
    values = [None if d is None else frame(schema_id, d) if framed else d for d in datums]
    source = MappingSource({schema_id: schema}) if framed else None
    decoded = decode_avro(pa.array(values, pa.binary()), framed=framed, source=source,
                          reader_schema=None if framed else schema, on_error=on_error,
                          offsets=np.arange(100, 100 + len(values)))
    validate(decoded.values)
    return decoded


def one_error(datum, schema, framed=True):
    """The error decoding `datum` alone gives (None: it decodes)."""
    try:
        decode([datum], schema, framed=framed)
    except KafkaFormatError as exc:
        assert isinstance(exc, ValueDecodeError), type(exc)
        assert exc.offset == 100 and exc.row == 0
        return exc
    return None


# Schemas of each kind of read (no booleans: kcodec reads a boolean byte as
# Java does, 1 is true and anything else false, where fastavro takes any
# non-zero byte as true, so bit flips there would differ by design).
DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}
EVENT = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "int", "bytes"]}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
    {"name": "amount", "type": DECIMAL},
    {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 4}},
    {"name": "score", "type": ["null", "double", "float"]},
    {"name": "when", "type": "long"},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "n", "type": "int"}, {"name": "u", "type": ["string", "long", "null"]}]}},
]}
EVENT_VALUE = {
    "id": -123456789, "name": "Zoë 😀", "tags": ["a", "", "ccc"],
    "attrs": {"x": None, "y": 7, "z": b"\x00\xff"}, "kind": "C",
    "amount": decimal.Decimal("-12345.678"), "hash": b"\x01\x02\x03\x04", "score": 2.5,
    "when": 1_700_000_000_000_000, "inner": {"n": 42, "u": "uu"},
}
NESTED = {"type": "array", "items": {"type": "map", "values": {"type": "array", "items": "int"}}}
NESTED_VALUE = [{"a": [1, 2, 3], "b": []}, {}, {"c": [-(2**31)]}]
CASES = [(EVENT, EVENT_VALUE), (NESTED, NESTED_VALUE),
         ("string", "héllo"), (["null", "long", "string"], "union"),
         ({"type": "map", "values": "string"}, {"k": "v", "kk": "vv"})]


def schema_for(schema):
    return json.dumps(schema) if isinstance(schema, str) else schema


def fastavro_reads(schema, datum):
    """fastavro's normalized value, or None where it fails (or reads past
    the datum's end, which it does not check)."""
    buf = io.BytesIO(datum)
    try:
        value = fastavro.schemaless_reader(buf, fastavro.parse_schema(
            schema if not isinstance(schema, str) else schema), None, return_named_type=True)
    except Exception:
        return None
    return ("ok", normalize(schema, value))


@pytest.mark.parametrize("schema, value", CASES, ids=lambda x: json.dumps(x, default=str)[:30])
def test_truncation_at_every_byte(schema, value):
    datum = write_fastavro(schema, value)
    truncated = [datum[:k] for k in range(len(datum))]
    for k, cut in enumerate(truncated):
        exc = one_error(cut, schema_for(schema))
        assert exc is not None, f"{k} bytes of {len(datum)} decoded"
        assert 5 <= exc.position <= 5 + k, (k, exc.position, str(exc))
        assert exc.schema_id == SCHEMA_ID
    # all at once, between good rows, with on_error="null"
    rows = [datum] + truncated + [datum]
    decoded = decode(rows, schema_for(schema), on_error="null")
    good = normalize(schema, value)
    assert_rows(decoded.values.to_pylist(), [good] + [None] * len(truncated) + [good])
    errors = decoded.errors.to_pylist()
    assert errors[0] is None and errors[-1] is None
    assert all(e and "offset" in e for e in errors[1:-1])


@pytest.mark.parametrize("schema, value", CASES, ids=lambda x: json.dumps(x, default=str)[:30])
def test_every_single_bit_flip(schema, value):
    datum = write_fastavro(schema, value)
    flipped = []
    for i in range(len(datum)):
        for bit in range(8):
            b = bytearray(datum)
            b[i] ^= 1 << bit
            flipped.append(bytes(b))
    decoded = decode(flipped, schema_for(schema), on_error="null")
    rows, errors = decoded.values.to_pylist(), decoded.errors.to_pylist()
    checked = 0
    for i, (row, error, mutated) in enumerate(zip(rows, errors, flipped)):
        exc = one_error(mutated, schema_for(schema))
        assert (exc is None) == (error is None), (i, error, exc)
        if exc is not None:
            # the same message (the offset differs: row i there, row 0 here)
            assert row is None and error.split(" (at ")[0] == exc.message
            assert 0 <= exc.position <= 5 + len(mutated)
            continue
        peer = fastavro_reads(schema, mutated)
        if peer is not None:
            assert_rows([last_key_wins(row)], [last_key_wins(peer[1])])
            checked += 1
    assert checked > 0


def test_random_multi_byte_mutations():
    rng = random.Random(48)
    for schema, value in CASES:
        datum = write_fastavro(schema, value)
        mutated = []
        for _ in range(600):
            b = bytearray(datum)
            for _ in range(rng.randint(1, 4)):
                kind = rng.random()
                at = rng.randrange(len(b)) if b else 0
                if kind < 0.5 and b:
                    b[at] = rng.randrange(256)
                elif kind < 0.7:
                    b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
                elif kind < 0.85 and b:
                    del b[at:at + rng.randint(1, 3)]
                else:
                    b[at:at] = rng.choice([zz(2**62), zz(-1), zz(-(2**63)), b"\xff" * 11,
                                           zz(2**31), b"\x80" * 9 + b"\x01"])
            mutated.append(bytes(b))
        # interleaved with good rows and tombstones
        rows = []
        for m in mutated:
            rows += [datum, m, None]
        decoded = decode(rows, schema_for(schema), on_error="null")
        values, errors = decoded.values.to_pylist(), decoded.errors.to_pylist()
        good = normalize(schema, value)
        for i in range(0, len(rows), 3):
            assert values[i] == good or _nan_same(values[i], good)
            assert errors[i] is None and errors[i + 2] is None and values[i + 2] is None
            if errors[i + 1] is not None:
                assert values[i + 1] is None
            else:
                peer = fastavro_reads(schema, rows[i + 1])
                if peer is not None:
                    assert_rows([last_key_wins(values[i + 1])], [last_key_wins(peer[1])])
        assert decoded.schema_ids.to_pylist() == [SCHEMA_ID, SCHEMA_ID, None] * len(mutated)


def last_key_wins(value):
    """Maps (lists of (key, value) tuples) with a key repeated as a dict
    would hold them: a flipped bit can repeat a key, which kcodec keeps as
    two entries (Arrow maps, like Spark's, may), and fastavro's dict merges."""
    if isinstance(value, dict):
        return {k: last_key_wins(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
            return list({k: last_key_wins(v) for k, v in value}.items())
        return [last_key_wins(v) for v in value]
    return value


def _nan_same(a, b):
    try:
        assert_rows([a], [b])
        return True
    except AssertionError:
        return False


# ------------------------------------------------------------------ lying lengths and counts

STR = {"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"},
                                                  {"name": "s", "type": "string"}]}


@pytest.mark.parametrize("length, message", [
    (2**62, "past the end"), (2**63 - 1, "past the end"), (6, "past the end"),
    (-1, "negative"), (-(2**63), "negative"),
])
@pytest.mark.parametrize("kind", ["string", "bytes"])
def test_lying_string_and_bytes_lengths(length, message, kind):
    schema = {"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"},
                                                         {"name": "s", "type": kind}]}
    datum = zz(3) + zz(length) + b"abcde"
    exc = one_error(datum, schema)
    assert message in str(exc)
    assert exc.position == 5 + 1          # the length's first byte, after the header
    assert exc.schema_id == SCHEMA_ID


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.footprint
@pytest.mark.parametrize("items", ["long", "string", "null", {"type": "record", "name": "E",
                                                              "fields": []},
                                   {"type": "array", "items": "null"}])
@pytest.mark.parametrize("container", ["array", "map"])
def test_huge_block_counts_do_not_allocate(items, container):
    schema = ({"type": "array", "items": items} if container == "array"
              else {"type": "map", "values": items})
    before = _peak_rss_mb()
    for count in (2**62, 2**40, 2**31, 2**25, -(2**62)):
        head = zz(count) + (zz(4) if count < 0 else b"")
        datum = head + b"\x02\x02\x02\x02" + b"\x00"
        exc = one_error(datum, schema_for(schema))
        assert exc is not None, count
        assert "count" in str(exc) or "past the end" in str(exc) or "ends early" in str(exc)
        assert exc.position == 5, (count, str(exc))
    assert _peak_rss_mb() - before < 100


@pytest.mark.footprint
def test_empty_items_are_capped_per_datum_not_per_array():
    """Items that take no bytes (nulls, empty records) are bounded by a fixed
    cap, 2**24 per datum (avro.pyx's MAX_EMPTY_ITEMS: "a datum may hold this
    many in all"). Nested arrays must not multiply it: here 64 inner arrays of
    2**24 - 1 nulls each (a 320-byte datum) would be 2**30 items."""
    schema = {"type": "array", "items": {"type": "array", "items": "null"}}
    inner = zz(2**24 - 1) + b"\x00"
    datum = zz(64) + inner * 64 + b"\x00"
    before = _peak_rss_mb()
    exc = one_error(datum, json.dumps(schema) if False else schema)
    assert exc is not None and "count" in str(exc)
    assert _peak_rss_mb() - before < 100
    # one full array of them is fine
    ok = zz(1) + zz(2**24) + b"\x00" + b"\x00"
    assert one_error(ok, schema) is None


def test_negative_block_counts_with_bad_sizes():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "array", "items": "long"}}, {"name": "z", "type": "int"}]}
    reader_skips = {"type": "record", "name": "R", "fields": [{"name": "z", "type": "int"}]}
    items = zz(1) + zz(2)
    good = zz(-2) + zz(len(items)) + items + zz(0) + zz(9)
    assert decode([good], schema).values.to_pylist() == [{"a": [1, 2], "z": 9}]
    cases = {
        "huge size": zz(-2) + zz(2**62) + items + zz(0) + zz(9),
        "negative size": zz(-2) + zz(-5) + items + zz(0) + zz(9),
        "INT64_MIN count": zz(-(2**63)) + zz(2) + items + zz(0) + zz(9),
        "size missing": zz(-2),
    }
    for name, datum in cases.items():
        for reader in (None, reader_skips):
            array = pa.array([frame(1, datum)], pa.binary())
            with pytest.raises(ValueDecodeError) as caught:
                decode_avro(array, framed=True, source=MappingSource({1: schema}),
                            reader_schema=reader)
            assert caught.value.position >= 5, name
    # a lying (short) size while skipping: the items are skipped by the size,
    # so the next field reads from inside them; it must stay in bounds
    lying = zz(-2) + zz(1) + items + zz(0) + zz(9)
    array = pa.array([frame(1, lying)], pa.binary())
    try:
        decode_avro(array, framed=True, source=MappingSource({1: schema}),
                    reader_schema=reader_skips)
    except ValueDecodeError:
        pass


@pytest.mark.parametrize("datum, message", [
    (b"\xff" * 10 + b"\x01", "varint"),
    (b"\x80" * 11 + b"\x00", "varint"),
    (b"\xff" * 20, "varint"),
    (b"\xff" * 9, "ends early"),
])
def test_overlong_varints(datum, message):
    exc = one_error(datum, json.dumps("long"))
    assert message in str(exc) and exc.position == 5
    exc = one_error(datum, {"type": "array", "items": "long"})
    assert message in str(exc) and exc.position == 5


def test_int_varints_longer_than_five_bytes():
    assert one_error(b"\xff\xff\xff\xff\x0f", json.dumps("int")) is None
    exc = one_error(b"\xff\xff\xff\xff\xff\x01", json.dumps("int"))
    assert "varint" in str(exc) and exc.position == 5


@pytest.mark.parametrize("index", [-1, 3, 2**40, -(2**63)])
def test_union_index_out_of_range(index):
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "u", "type": ["null", "int", "string"]}]}
    exc = one_error(zz(1) + zz(index) + zz(5), schema)
    assert "union branch" in str(exc) and exc.position == 6


@pytest.mark.parametrize("index", [-1, 3, 2**31 - 1])
def test_enum_index_out_of_range(index):
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}}]}
    exc = one_error(zz(1) + zz(index), schema)
    assert "enum" in str(exc) and exc.position == 6


INVALID_UTF8 = [
    b"\x80", b"\xbf", b"a\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xc3",
    b"\xe2\x82", b"\xf0\x9f\x98", b"ok\xf0\x9f\x98", b"\xf8\x88\x80\x80\x80",
]


@pytest.mark.parametrize("data", INVALID_UTF8)
def test_invalid_utf8_strings(data):
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "s", "type": "string"}]}
    exc = one_error(zz(1) + zz(len(data)) + data, schema)
    assert "UTF-8" in str(exc)
    assert exc.position == 5 + 2          # the string's first byte
    # as a map key too
    exc = one_error(zz(1) + zz(len(data)) + data + zz(0) + b"\x00",
                    {"type": "map", "values": "int"})
    assert "UTF-8" in str(exc) and exc.position == 7       # header, count, length
    # bytes take them as they are
    raw = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "s", "type": "bytes"}]}
    assert decode([zz(1) + zz(len(data)) + data], raw).values.to_pylist() == [
        {"a": 1, "s": data}]


def test_utf8_validation_agrees_with_python_on_random_bytes():
    rng = random.Random(4848)
    pieces = [b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\x80", b"\xc0",
              b"\xed\xa0\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xef\xbf\xbf",
              b"\xe0\xa0\x80", b"\x00", b"\x7f"]
    datums = []
    for _ in range(3000):
        if rng.random() < 0.5:
            s = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        else:
            s = bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))
        datums.append(s)
    decoded = decode([zz(len(s)) + s for s in datums], json.dumps("string"), on_error="null")
    for s, row, error in zip(datums, decoded.values.to_pylist(), decoded.errors.to_pylist()):
        try:
            expected = s.decode("utf-8")
        except UnicodeDecodeError:
            assert row is None and "UTF-8" in error, s
        else:
            assert row == expected and error is None, s


def _decimal_bytes(unscaled, width):
    return unscaled.to_bytes(width, "big", signed=True)


def test_decimals_longer_than_16_bytes_and_over_precision():
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2}
    ok = [_decimal_bytes(5, 20), _decimal_bytes(-5, 32), _decimal_bytes(10**38 - 1, 17),
          _decimal_bytes(-(10**38 - 1), 16), b""]
    decoded = decode([zz(len(d)) + d for d in ok], schema)
    assert decoded.values.to_pylist() == [
        decimal.Decimal("0.05"), decimal.Decimal("-0.05"),
        decimal.Decimal(10**38 - 1).scaleb(-2, decimal.Context(prec=60)),
        decimal.Decimal(-(10**38 - 1)).scaleb(-2, decimal.Context(prec=60)), decimal.Decimal(0)]
    bad = [_decimal_bytes(10**38, 17), _decimal_bytes(-(10**38), 17), _decimal_bytes(2**127, 17),
           b"\x01" + bytes(16), b"\x00\x80" + bytes(15),             # not sign-extended
           _decimal_bytes(2**200, 40), b"\xff" + _decimal_bytes(2**127 - 1, 16)]
    decoded = decode([zz(len(d)) + d for d in bad], schema, on_error="null")
    assert decoded.values.to_pylist() == [None] * len(bad)
    assert all("precision" in e for e in decoded.errors.to_pylist())
    for d in bad:
        exc = one_error(zz(len(d)) + d, schema)
        assert exc.position == 5 + len(zz(len(d)))
    small = {"type": "fixed", "name": "D", "size": 3, "logicalType": "decimal", "precision": 3,
             "scale": 0}
    decoded = decode([_decimal_bytes(999, 3), _decimal_bytes(1000, 3), _decimal_bytes(-1000, 3)],
                     small, on_error="null")
    assert decoded.values.to_pylist() == [decimal.Decimal(999), None, None]


# ------------------------------------------------------------------ nesting

def _nested_arrays(levels):
    schema = "long"
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


def test_schema_depth_limit():
    decode([], _nested_arrays(60))
    with pytest.raises(SchemaError, match="deeper"):
        decode([b"\x00"], _nested_arrays(65), framed=False)
    deep_records = "long"
    for i in range(70):
        deep_records = {"type": "record", "name": f"R{i}",
                        "fields": [{"name": "f", "type": deep_records}]}
    with pytest.raises(SchemaError, match="deeper"):
        decode([b"\x00"], deep_records, framed=False)


def test_nested_data_is_bounded_by_the_schema():
    # array<array<long>>: a datum that keeps opening arrays can only open
    # the two levels the schema has; the rest are read as longs
    schema = _nested_arrays(2)
    datum = zz(1) * 10000                 # blocks of one item, never closed
    exc = one_error(datum, schema)
    assert exc is not None and 5 + 9990 <= exc.position <= 5 + 10000
    good = write_fastavro(schema, [[1, 2], [], [3]])
    assert decode([good], schema).values.to_pylist() == [[[1, 2], [], [3]]]
    # 60 levels of data, as the schema says
    deep = _nested_arrays(60)
    datum = zz(1) * 60 + zz(7) + zz(0) * 60
    value = 7
    for _ in range(60):
        value = [value]
    assert decode([datum], deep).values.to_pylist() == [value]


# ------------------------------------------------------------------ frames and ids

def test_frames_short_bad_magic_and_unknown_ids(monkeypatch):
    install_schema_source(monkeypatch)
    schema = STR
    good = write_fastavro(schema, {"a": 1, "s": "x"})
    values = [frame(1, good), b"", b"\x00", b"\x00\x00\x00\x01", b"\x01" + frame(1, good)[1:],
              frame(99, good), frame(1, good), None, frame(-5, good), b"\x00\x00\x00\x00\x01"]
    data = kcodec.encode([kcodec.Record(value=v) for v in values], base_offset=70)
    table = kcodec.decode(data, value_format="avro", schemas={1: schema}, on_value_error="null")
    rows = table.column("value").to_pylist()
    assert rows == [{"a": 1, "s": "x"}, None, None, None, None, None, {"a": 1, "s": "x"},
                    None, None, None]
    errors = table.column("valueError").to_pylist()
    assert errors[0] is None and errors[6] is None and errors[7] is None
    for i in (1, 2, 3):
        assert "shorter than its 5-byte header" in errors[i]
    assert "magic byte" in errors[4]
    assert "99" in errors[5] and "offset 75" in errors[5]
    assert "-5" in errors[8]
    assert "ends early" in errors[9]          # id 1 with an empty datum
    assert table.column("valueSchemaId").to_pylist()[:2] == [1, None]
    validate(table.column("value"))
    # one by one, with on_value_error="fail"
    expected = {1: (ValueDecodeError, 0), 2: (ValueDecodeError, 0), 3: (ValueDecodeError, 0),
                4: (ValueDecodeError, 0), 5: (UnknownSchemaError, 0),
                8: (UnknownSchemaError, 0), 9: (ValueDecodeError, 5)}
    for i, (cls, position) in expected.items():
        one = kcodec.encode([kcodec.Record(value=frame(1, good)),
                             kcodec.Record(value=values[i])], base_offset=200 + i)
        with pytest.raises(cls) as caught:
            kcodec.decode(one, value_format="avro", schemas={1: schema})
        assert isinstance(caught.value, KafkaFormatError)
        assert caught.value.offset == 201 + i, (i, str(caught.value))
        assert caught.value.position == position, (i, str(caught.value))
        assert caught.value.column == "value"
        if cls is UnknownSchemaError:
            assert str(struct.unpack(">i", values[i][1:5])[0]) in str(caught.value)
            assert caught.value.schema_id == struct.unpack(">i", values[i][1:5])[0]


def test_key_errors_name_the_key(monkeypatch):
    install_schema_source(monkeypatch)
    data = kcodec.encode([kcodec.Record(key=frame(1, zz(1)), value=b"v"),
                          kcodec.Record(key=b"\x00\x00", value=b"v")], base_offset=10)
    with pytest.raises(ValueDecodeError) as caught:
        kcodec.decode(data, key_format="avro", schemas={1: json.dumps("long")})
    assert caught.value.column == "key" and caught.value.offset == 11
    assert "of the key" in str(caught.value)
    table = kcodec.decode(data, key_format="avro", schemas={1: json.dumps("long")},
                          on_value_error="null")
    assert table.column("key").to_pylist() == [1, None]
    assert table.column("keyError").to_pylist()[0] is None
    assert "header" in table.column("keyError").to_pylist()[1]
    assert table.column("value").type == pa.binary()


def test_null_mode_mixes_good_and_bad_rows_through_decode(monkeypatch):
    install_schema_source(monkeypatch)
    good = [write_fastavro(EVENT, dict(EVENT_VALUE, id=i)) for i in range(40)]
    values, expected, bad_rows = [], [], set()
    for i, g in enumerate(good):
        if i % 5 == 2:
            values.append(frame(SCHEMA_ID, g[: len(g) // 2]))
            expected.append(None)
            bad_rows.add(i)
        elif i % 7 == 3:
            values.append(frame(SCHEMA_ID, g.replace("Zoë".encode(), b"Zo\xff\xfe")))
            expected.append(None)
            bad_rows.add(i)
        elif i % 11 == 4:
            values.append(None)
            expected.append(None)
        else:
            values.append(frame(SCHEMA_ID, g))
            expected.append(normalize(EVENT, read_fastavro(EVENT, g)))
    data = kcodec.encode([kcodec.Record(value=v) for v in values], base_offset=1000,
                         max_batch_bytes=2000)
    table = kcodec.decode(data, value_format="avro", schemas={SCHEMA_ID: EVENT},
                          on_value_error="null")
    assert_rows(table.column("value").to_pylist(), expected)
    errors = table.column("valueError").to_pylist()
    assert {i for i, e in enumerate(errors) if e is not None} == bad_rows
    for i in bad_rows:
        assert f"offset {1000 + i}" in errors[i]
    validate(table.column("value"))
    for name in table.column_names:
        validate(table.column(name))
    with pytest.raises(ValueDecodeError) as caught:
        kcodec.decode(data, value_format="avro", schemas={SCHEMA_ID: EVENT})
    assert caught.value.offset == 1000 + min(bad_rows)
