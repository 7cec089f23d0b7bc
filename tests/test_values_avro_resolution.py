"""Avro schema resolution (the specification's "Schema Resolution"): each
rule as a writer/reader schema pair, datums written by fastavro with the
writer schema and decoded by kcodec with the reader schema, equal to what
fastavro's ``schemaless_reader(buf, writer, reader)`` and Apache avro's
``DatumReader(writer, reader)`` read (both implement resolution), normalized
to Spark's shapes. Where the peers disagree, a comment says which kcodec
follows (Java's reference behaviour)."""
import json

import pyarrow as pa
import pytest

import kcodec
from avro_values import (
    MappingSource, assert_rows, frame, install_schema_source, normalize, read_apache,
    read_fastavro, validate, write_fastavro,
)
from kcodec.errors import KafkaFormatError, SchemaError, ValueDecodeError
from kcodec.values.avro import arrow_type, decode_avro


def kcodec_read(writer, reader, values, on_error="fail", schema_id=3):
    """kcodec's rows for `values` written with `writer`, read as `reader`
    (framed, the writer found by its id)."""
    datums = [write_fastavro(writer, v) for v in values]
    array = pa.array([frame(schema_id, d) for d in datums], pa.binary())
    decoded = decode_avro(array, framed=True, source=MappingSource({schema_id: writer}),
                          reader_schema=reader, on_error=on_error)
    validate(decoded.values)
    assert decoded.values.type == arrow_type(reader)
    return decoded


def check(writer, reader, values, apache=True, fast=True, expected=None):
    """kcodec's rows, checked against each peer that is asked (fastavro,
    Apache avro) and against `expected` when given."""
    rows = kcodec_read(writer, reader, values).values.to_pylist()
    datums = [write_fastavro(writer, v) for v in values]
    if fast:
        assert_rows(rows, [normalize(reader, read_fastavro(writer, d, reader)) for d in datums])
    if apache:
        assert_rows(rows, [normalize(reader, read_apache(writer, d, reader)) for d in datums])
    if expected is not None:
        assert_rows(rows, expected)
    return rows


SAMPLE = {"null": None, "boolean": True, "int": 1, "long": 2, "float": 1.5, "double": 2.5,
          "bytes": b"b", "string": "s", "array": [1], "map": {"k": 1}, "enum": "A",
          "fixed": b"abcd"}


def sample(schema):
    return SAMPLE[schema if isinstance(schema, str) else schema["type"]]


def rec(*fields, name="R", **extra):
    out = {"type": "record", "name": name, "fields": [
        f if isinstance(f, dict) else {"name": f[0], "type": f[1]} for f in fields]}
    out.update(extra)
    return out


# ------------------------------------------------------------------ promotions

@pytest.mark.parametrize("writer, reader, values, expected", [
    ("int", "long", [0, -1, 2**31 - 1, -2**31], [0, -1, 2**31 - 1, -2**31]),
    ("int", "float", [0, 16777217, -2**31], [0.0, 16777216.0, -2147483648.0]),
    ("int", "double", [2**31 - 1, -5], [2147483647.0, -5.0]),
    ("long", "float", [2**63 - 1, -3, 2**24 + 1], [9.223372036854775807e18, -3.0, 16777216.0]),
    ("long", "double", [2**53 + 1, -2**63], [9007199254740992.0, -9.223372036854775808e18]),
    ("float", "double", [1.5, float("inf"), 0.1], [1.5, float("inf"), 0.10000000149011612]),
    ("string", "bytes", ["", "Zoë"], [b"", "Zoë".encode()]),
    ("bytes", "string", [b"", "Zoë".encode()], ["", "Zoë"]),
])
def test_promotions(writer, reader, values, expected):
    w, r = rec(("x", writer)), rec(("x", reader))
    # Apache avro's Python reader lacks the string <-> bytes promotions (Java
    # and fastavro have them)
    rows = check(w, r, [{"x": v} for v in values], apache="string" not in (writer, reader))
    assert_rows([row["x"] for row in rows], [normalize(reader, e) for e in expected])


def test_bytes_that_are_not_utf8_read_as_string_fail_that_datum():
    w, r = rec(("x", "bytes")), rec(("x", "string"))
    values = [{"x": b"ok"}, {"x": b"\xff\xfe"}, {"x": b"fine"}]
    decoded = kcodec_read(w, r, values, on_error="null")
    assert decoded.values.to_pylist() == [{"x": "ok"}, None, {"x": "fine"}]
    assert "UTF-8" in decoded.errors[1].as_py()
    with pytest.raises(ValueDecodeError) as caught:
        kcodec_read(w, r, values)
    assert caught.value.row == 1 and caught.value.position == 6    # header 5, length 1


@pytest.mark.parametrize("writer, reader", [
    ("long", "int"), ("double", "float"), ("float", "long"), ("string", "int"),
    ("int", "string"), ("boolean", "int"), ("null", "int"),
    ({"type": "array", "items": "int"}, {"type": "map", "values": "int"}),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "string"),
])
def test_no_promotion_is_a_schema_error(writer, reader):
    # (a writer schema is compiled when a datum names it)
    with pytest.raises(SchemaError):
        kcodec_read(rec(("x", writer)), rec(("x", reader)), [{"x": sample(writer)}])


# ------------------------------------------------------------------ records

def test_fields_reordered():
    w = rec(("a", "int"), ("b", "string"), ("c", ["null", "long"]))
    r = rec(("c", ["null", "long"]), ("a", "int"), ("b", "string"))
    values = [{"a": 1, "b": "x", "c": None}, {"a": -2, "b": "", "c": 2**40}]
    assert check(w, r, values) == [{"c": None, "a": 1, "b": "x"}, {"c": 2**40, "a": -2, "b": ""}]


SKIPPED_NESTED = rec(("k", "long"), ("deep", ["null", rec(
    ("s", "string"),
    ("arr", {"type": "array", "items": rec(("f", {"type": "fixed", "name": "F", "size": 3}),
                                           ("m", {"type": "map", "values": "bytes"}),
                                           name="Inner")}),
    ("u", ["null", "double", "string", {"type": "enum", "name": "E", "symbols": ["X", "Y"]}]),
    ("d", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
    name="Deep")]), ("tail", "string"))


def test_writer_fields_missing_in_reader_are_skipped():
    r = rec(("tail", "string"), ("k", "long"))
    import decimal
    values = [
        {"k": 1, "deep": None, "tail": "t1"},
        {"k": 2, "deep": {"s": "ss", "arr": [
            {"f": b"abc", "m": {"x": b"1", "y": b""}}, {"f": b"\x00\x00\x00", "m": {}}],
            "u": "str", "d": decimal.Decimal("1.25")}, "tail": "t2"},
        {"k": 3, "deep": {"s": "", "arr": [], "u": 2.5, "d": decimal.Decimal("-0.01")},
         "tail": "t3"},
        {"k": 4, "deep": {"s": "", "arr": [], "u": None, "d": decimal.Decimal("0")},
         "tail": ""},
    ]
    rows = check(SKIPPED_NESTED, r, values)
    assert rows == [{"tail": "t1", "k": 1}, {"tail": "t2", "k": 2}, {"tail": "t3", "k": 3},
                    {"tail": "", "k": 4}]


def test_skipped_arrays_and_maps_written_in_sized_blocks():
    # Java's BlockingBinaryEncoder writes negative counts with block sizes,
    # which lets a reader skip a block whole: hand-made here.
    w = rec(("a", {"type": "array", "items": "long"}), ("m", {"type": "map", "values": "string"}),
            ("z", "int"))
    r = rec(("z", "int"))
    full = rec(("a", {"type": "array", "items": "long"}), ("z", "int"))

    def zz(n):
        return write_fastavro("long", n)
    items = zz(1) + zz(-5)
    block = zz(-2) + zz(len(items)) + items + zz(0)
    entry = zz(1) + b"k" + zz(2) + b"vv"
    mblock = zz(-1) + zz(len(entry)) + entry + zz(0)
    datum = block + mblock + zz(7)
    assert read_fastavro(w, datum) == {"a": [1, -5], "m": {"k": "vv"}, "z": 7}
    array = pa.array([frame(1, datum)], pa.binary())
    assert decode_avro(array, framed=True, source=MappingSource({1: w}),
                       reader_schema=r).values.to_pylist() == [{"z": 7}]
    # read (not skipped), the sized blocks decode too
    assert decode_avro(array, framed=True, source=MappingSource({1: w}), reader_schema=full) \
        .values.to_pylist() == [{"a": [1, -5], "z": 7}]


RECORD_DEFAULT = rec(("p", "int"), ("q", ["null", "string"]), name="P")
DEFAULTS = [
    ("null", None, None),
    ("boolean", True, True),
    ("int", -7, -7),
    ("long", 2**40, 2**40),
    ("float", 1.5, 1.5),
    ("double", -0.25, -0.25),
    ("double", 3, 3.0),                                 # a JSON integer for a double
    ("bytes", "\u00ff\u0000a", b"\xff\x00a"),           # bytes defaults are ISO-8859-1 text
    ("string", "dëfault", "dëfault"),
    ({"type": "fixed", "name": "Fx", "size": 2}, "\u00ab\u00cd", b"\xab\xcd"),
    ({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}, "GREEN", "GREEN"),
    ({"type": "array", "items": "int"}, [1, 2, 3], [1, 2, 3]),
    ({"type": "array", "items": "string"}, [], []),
    ({"type": "map", "values": "long"}, {"a": 1, "b": -1}, [("a", 1), ("b", -1)]),
    (RECORD_DEFAULT, {"p": 4, "q": None}, {"p": 4, "q": None}),
    (["null", "string"], None, None),                  # a union's default: its first branch
    (["string", "null"], "first", "first"),
    (["int", "string"], 5, {"member0": 5, "member1": None}),
    ({"type": "int", "logicalType": "date"}, 19000, None),
    ({"type": "long", "logicalType": "timestamp-millis"}, 1_700_000_000_000, None),
    ({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}, "\u0001\u0000", None),
]


@pytest.mark.parametrize("kind, default, expected", DEFAULTS,
                         ids=lambda x: json.dumps(x, default=repr)[:40])
def test_reader_field_missing_in_writer_takes_its_default(kind, default, expected):
    w = rec(("id", "long"))
    r = rec(("id", "long"), {"name": "added", "type": kind, "default": default})
    values = [{"id": 1}, {"id": -1}]
    # Bytes and fixed defaults are JSON strings of ISO-8859-1 code points (the
    # spec; Java): neither Python peer reads them (fastavro: "string argument
    # without an encoding"), so those are checked against `expected` only.
    # Apache avro's Python reader also refuses an integer default for a
    # double and a logical type's default.
    binary = kind == "bytes" or isinstance(kind, dict) and kind.get("type") in ("bytes", "fixed")
    logical = isinstance(kind, dict) and "logicalType" in kind
    rows = check(w, r, values, fast=not binary,
                 apache=not (binary or logical or (kind, default) == ("double", 3)))
    if expected is not None:
        assert [row["added"] for row in rows] == [expected, expected]


def test_nested_record_gains_a_field_with_default_in_an_array():
    w = rec(("items", {"type": "array", "items": rec(("a", "int"), name="I")}))
    r = rec(("items", {"type": "array", "items": rec(
        ("a", "int"), {"name": "b", "type": "string", "default": "B"}, name="I")}))
    rows = check(w, r, [{"items": [{"a": 1}, {"a": 2}]}, {"items": []}])
    assert rows == [{"items": [{"a": 1, "b": "B"}, {"a": 2, "b": "B"}]}, {"items": []}]


def test_reader_field_without_default_is_a_schema_error():
    w = rec(("id", "long"))
    r = rec(("id", "long"), ("added", "string"))
    with pytest.raises(SchemaError, match="added"):
        kcodec_read(w, r, [{"id": 1}])


@pytest.mark.parametrize("kind, default", [
    ("int", "five"), ("string", 5), ("boolean", None), (["string", "null"], 5),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "B"),
    ({"type": "fixed", "name": "F", "size": 2}, "abc"), ("int", 2**31),
])
def test_default_not_of_its_type_is_a_schema_error(kind, default):
    w = rec(("id", "long"))
    r = rec(("id", "long"), {"name": "added", "type": kind, "default": default})
    with pytest.raises(SchemaError):
        kcodec_read(w, r, [{"id": 1}])


def test_field_aliases():
    w = rec(("old_name", "string"), ("n", "int"))
    r = rec({"name": "new_name", "type": "string", "aliases": ["old_name"]}, ("n", "int"))
    # Apache avro's Python reader ignores field aliases; fastavro and Java follow them
    check(w, r, [{"old_name": "x", "n": 1}], apache=False, expected=[{"new_name": "x", "n": 1}])


def test_named_type_aliases():
    w = {"type": "record", "name": "OldRecord", "namespace": "a", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "OldEnum", "symbols": ["A", "B"]}},
        {"name": "f", "type": {"type": "fixed", "name": "OldFixed", "size": 2}}]}
    r = {"type": "record", "name": "NewRecord", "namespace": "b", "aliases": ["a.OldRecord"],
         "fields": [
             {"name": "e", "type": {"type": "enum", "name": "NewEnum", "aliases": ["a.OldEnum"],
                                    "symbols": ["B", "A"]}},
             {"name": "f", "type": {"type": "fixed", "name": "NewFixed", "size": 2,
                                    "aliases": ["a.OldFixed"]}}]}
    # Apache avro's Python reader ignores named-type aliases; Java and fastavro
    # follow them, and so does kcodec.
    check(w, r, [{"e": "A", "f": b"xy"}, {"e": "B", "f": b"zz"}], apache=False,
          expected=[{"e": "A", "f": b"xy"}, {"e": "B", "f": b"zz"}])


def test_named_types_of_other_names_do_not_resolve():
    w = rec(("e", {"type": "enum", "name": "One", "symbols": ["A"]}))
    r = rec(("e", {"type": "enum", "name": "Two", "symbols": ["A"]}))
    with pytest.raises(SchemaError):
        kcodec_read(w, r, [{"e": "A"}])


# ------------------------------------------------------------------ enums

def test_enum_symbol_not_in_reader_takes_the_readers_default():
    w = rec(("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}))
    r = rec(("e", {"type": "enum", "name": "E", "symbols": ["C", "A", "UNKNOWN"],
                   "default": "UNKNOWN"}))
    # Apache avro's Python reader does not apply enum defaults (it raises);
    # fastavro and Java do, as kcodec.
    check(w, r, [{"e": "A"}, {"e": "B"}, {"e": "C"}], apache=False,
          expected=[{"e": "A"}, {"e": "UNKNOWN"}, {"e": "C"}])


def test_enum_symbol_not_in_reader_without_default_fails_only_its_datums():
    w = rec(("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}), ("n", "int"))
    r = rec(("e", {"type": "enum", "name": "E", "symbols": ["A", "C"]}), ("n", "int"))
    values = [{"e": "A", "n": 1}, {"e": "B", "n": 2}, {"e": "C", "n": 3}, {"e": "B", "n": 4}]
    decoded = kcodec_read(w, r, values, on_error="null")
    assert decoded.values.to_pylist() == [{"e": "A", "n": 1}, None, {"e": "C", "n": 3}, None]
    errors = decoded.errors.to_pylist()
    assert errors[0] is None and errors[2] is None
    assert "'B'" in errors[1] and "'B'" in errors[3]
    for peer_read in (read_fastavro, read_apache):
        with pytest.raises(Exception):
            peer_read(w, write_fastavro(w, values[1]), r)
        assert normalize(r, peer_read(w, write_fastavro(w, values[0]), r)) == values[0]
    with pytest.raises(ValueDecodeError) as caught:
        kcodec_read(w, r, values)
    assert caught.value.row == 1 and caught.value.position == 5     # the enum's index


# ------------------------------------------------------------------ unions

def test_writer_union_to_reader_non_union():
    w = rec(("u", ["null", "int", "string"]), ("n", "int"))
    r = rec(("u", "long"), ("n", "int"))
    values = [{"u": 5, "n": 1}, {"u": "s", "n": 2}, {"u": None, "n": 3}, {"u": -9, "n": 4}]
    decoded = kcodec_read(w, r, values, on_error="null")
    assert decoded.values.to_pylist() == [{"u": 5, "n": 1}, None, None, {"u": -9, "n": 4}]
    assert decoded.errors.to_pylist()[0] is None and decoded.errors.to_pylist()[3] is None
    assert all(decoded.errors.to_pylist()[i] for i in (1, 2))
    # fastavro (and Java) read the matching branch and fail the others;
    # Apache avro's Python reader refuses a writer union for a non-union reader
    for i in (0, 3):
        assert normalize(r, read_fastavro(w, write_fastavro(w, values[i]), r)) == values[i]
    for i in (1, 2):
        with pytest.raises(Exception):
            read_fastavro(w, write_fastavro(w, values[i]), r)
    with pytest.raises(ValueDecodeError) as caught:
        kcodec_read(w, r, values)
    assert caught.value.row == 1


def test_writer_non_union_to_reader_union_takes_the_first_match():
    # int read into [null, string, long, double]: long (the first it promotes to
    # in order); the writer's exact type wins where present
    w = rec(("x", "int"), ("s", "string"), ("f", "float"))
    r = rec(("x", ["null", "string", "double", "long"]),
            ("s", ["null", "bytes", "string"]),
            ("f", ["null", "float", "double"]))
    values = [{"x": 3, "s": "a", "f": 1.5}]
    # The spec: "the first schema in the reader's union that matches"; Java
    # (and kcodec) prefers the writer's own type before promotions, so x
    # goes to double (first promotion; no int branch) and s to string (exact).
    rows = kcodec_read(w, r, values).values.to_pylist()
    assert rows == [{"x": {"member0": None, "member1": 3.0, "member2": None},
                     "s": {"member0": None, "member1": "a"},
                     "f": 1.5}]
    # The peers disagree here: fastavro takes the first branch it can promote
    # to (s as bytes), Apache avro's Python reader picks long for x. kcodec
    # follows Java's ResolvingGrammarGenerator.bestBranch: the writer's own
    # type first, then the first promotion in the reader's order.
    datum = write_fastavro(w, values[0])
    assert read_fastavro(w, datum, r, named=False) == {"x": 3.0, "s": b"a", "f": 1.5}
    assert read_apache(w, datum, r)["s"] == "a"


def test_union_to_union_with_reordered_branches():
    w = rec(("u", ["null", "int", "string", {"type": "array", "items": "long"}]))
    r = rec(("u", [{"type": "array", "items": "long"}, "string", "null", "long"]))
    values = [{"u": None}, {"u": 1}, {"u": "s"}, {"u": [1, 2]}]
    rows = check(w, r, values)
    assert rows == [{"u": None},
                    {"u": {"member0": None, "member1": None, "member2": 1}},
                    {"u": {"member0": None, "member1": "s", "member2": None}},
                    {"u": {"member0": [1, 2], "member1": None, "member2": None}}]


def test_writer_union_branch_missing_in_reader_union_fails_only_its_datums():
    w = rec(("u", ["int", "string", "boolean"]))
    r = rec(("u", ["string", "long"]))
    values = [{"u": 1}, {"u": True}, {"u": "x"}]
    decoded = kcodec_read(w, r, values, on_error="null")
    assert decoded.values.to_pylist() == [
        {"u": {"member0": None, "member1": 1}}, None, {"u": {"member0": "x", "member1": None}}]
    assert "boolean" in decoded.errors[1].as_py()


def test_nullable_union_resolves_to_nullable_reader():
    w = rec(("a", ["null", "int"]))
    r = rec(("a", ["null", "long"]))
    check(w, r, [{"a": None}, {"a": 5}], expected=[{"a": None}, {"a": 5}])


# ------------------------------------------------------------------ fixed, arrays, maps

def test_fixed_size_mismatch_is_a_schema_error():
    w = rec(("f", {"type": "fixed", "name": "F", "size": 4}))
    r = rec(("f", {"type": "fixed", "name": "F", "size": 5}))
    with pytest.raises(SchemaError):
        kcodec_read(w, r, [{"f": b"abcd"}])


def test_array_and_map_items_resolve():
    w = rec(("a", {"type": "array", "items": "int"}),
            ("m", {"type": "map", "values": rec(("x", "int"), ("gone", "string"), name="V")}),
            ("aa", {"type": "array", "items": {"type": "array", "items": "float"}}))
    r = rec(("a", {"type": "array", "items": "double"}),
            ("m", {"type": "map", "values": rec(("x", "long"), {"name": "y", "type": "string",
                                                                "default": "Y"}, name="V")}),
            ("aa", {"type": "array", "items": {"type": "array", "items": "double"}}))
    values = [{"a": [1, -2], "m": {"k": {"x": 1, "gone": "g"}}, "aa": [[0.5], []]},
              {"a": [], "m": {}, "aa": []}]
    # Apache avro's Python reader does not promote array items
    rows = check(w, r, values, apache=False)
    assert rows[0] == {"a": [1.0, -2.0], "m": [("k", {"x": 1, "y": "Y"})], "aa": [[0.5], []]}


def test_decimal_scale_or_precision_change():
    w = rec(("d", {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}))
    r = rec(("d", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}))
    import decimal
    # the reader's precision bounds the value: 9999.99 does not fit 4 digits
    values = [{"d": decimal.Decimal("12.34")}, {"d": decimal.Decimal("9999.99")}]
    decoded = kcodec_read(w, r, values, on_error="null")
    assert decoded.values.to_pylist() == [{"d": decimal.Decimal("12.34")}, None]
    assert "precision" in decoded.errors[1].as_py()


# ------------------------------------------------------------------ through kcodec.decode

def test_two_writer_ids_one_reader_through_decode(monkeypatch):
    install_schema_source(monkeypatch)
    w1 = rec(("id", "int"), ("name", "string"), name="User")
    w2 = rec(("id", "long"), {"name": "email", "type": ["null", "string"]}, ("name", "string"),
             name="User")
    reader = rec(("name", "string"), ("id", "double"),
                 {"name": "email", "type": ["null", "string"], "default": None},
                 {"name": "age", "type": "int", "default": -1}, name="User")
    records, expected = [], []
    for i in range(12):
        writer, value, schema_id = ((w1, {"id": i, "name": f"u{i}"}, 1) if i % 2 else
                                    (w2, {"id": i << 33, "email": None if i % 4 else f"{i}@x",
                                          "name": f"v{i}"}, 2))
        datum = write_fastavro(writer, value)
        records.append(kcodec.Record(value=frame(schema_id, datum)))
        expected.append(normalize(reader, read_fastavro(writer, datum, reader)))
        assert expected[-1] == normalize(reader, read_apache(writer, datum, reader))
    table = kcodec.decode(kcodec.encode(records), value_format="avro", schemas={1: w1, 2: w2},
                          value_schema=reader)
    assert table.column("value").type == arrow_type(reader)
    assert_rows(table.column("value").to_pylist(), expected)
    assert table.column("valueSchemaId").to_pylist() == [2, 1] * 6
    # without value_schema the reader is id 2 (the highest): w1's datums
    # resolve to it, but its email has no default
    with pytest.raises(SchemaError, match="email"):
        kcodec.decode(kcodec.encode(records), value_format="avro", schemas={1: w1, 2: w2})
    w2["fields"][1]["default"] = None
    latest = kcodec.decode(kcodec.encode(records), value_format="avro", schemas={1: w1, 2: w2})
    assert latest.column("value").type == arrow_type(w2)
    assert latest.column("value").to_pylist()[:2] == [
        {"id": 0, "email": "0@x", "name": "v0"}, {"id": 1, "email": None, "name": "u1"}]


def test_unresolvable_writer_is_a_schema_error_naming_its_id(monkeypatch):
    install_schema_source(monkeypatch)
    w1 = rec(("id", "string"))
    reader = rec(("id", "long"))
    records = [kcodec.Record(value=frame(9, write_fastavro(w1, {"id": "x"})))]
    with pytest.raises(SchemaError) as caught:
        kcodec.decode(kcodec.encode(records), value_format="avro", schemas={9: w1},
                      value_schema=reader)
    assert caught.value.schema_id == 9
    assert not isinstance(caught.value, KafkaFormatError)
