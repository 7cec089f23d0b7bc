"""The typed-values workload (issue 48) and the operations timed on it, for
test_bench_values.py and, with interleaved repeats, for a results file:

    python benchmarks/value_workloads.py [--records 100000] [--repeats 7] [--json FILE]

The workload: N deterministic "order" records of a realistic Avro schema of
12 fields (strings, longs, an int, a double, a boolean, an enum, a
timestamp-millis, a nested record, an array of strings, a nullable union),
each written with fastavro's ``schemaless_writer`` and framed in the
Confluent wire format (magic byte 0, the 4-byte big-endian schema id, the
datum); one record's bytes are checked to equal confluent-kafka's
``AvroSerializer`` output. The same records also as plain JSON values (one
object per value, the timestamp as RFC 3339 text), and as a Kafka record set
(kcodec.encode) for the end-to-end decode.

Every implementation produces the same Arrow struct column (kcodec's type for
the schema, as Spark's ``from_avro`` types it), checked once, untimed, by
:func:`check_same`. Nothing here asserts a speed.
"""
import argparse
import datetime
import io
import json
import random
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import kcodec
from kcodec import bench
from kcodec.bench import require

N_RECORDS = 100_000          # per workload, when timing
SMOKE_RECORDS = 2_000        # when only checking (--benchmark-disable, as CI runs them)
SEED = 48
TOPIC = "orders"
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
UTC = datetime.timezone.utc

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "com.example.shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer_id", "type": "long"},
        {"name": "sequence", "type": "long"},
        {"name": "sku", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "unit_price", "type": "double"},
        {"name": "gift", "type": "boolean"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": [
            "PENDING", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]}},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "shipping", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "street", "type": "string"},
            {"name": "city", "type": "string"},
            {"name": "postcode", "type": "string"},
            {"name": "country", "type": "string"}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
SCHEMA_TEXT = json.dumps(SCHEMA)

_STREETS = ["Main St", "High Street", "Rue de la Paix", "Hauptstrasse", "Calle Mayor",
            "Market Square", "Station Road", "Church Lane"]
_CITIES = [("Berlin", "DE"), ("Paris", "FR"), ("London", "GB"), ("Madrid", "ES"),
           ("Amsterdam", "NL"), ("Boston", "US"), ("Toronto", "CA"), ("Lyon", "FR")]
_TAGS = ["express", "fragile", "bulk", "priority", "eco", "gift-wrap", "b2b", "return"]
_STATUS = SCHEMA["fields"][7]["type"]["symbols"]


def make_orders(n, seed=SEED):
    """n order dicts (as fastavro and confluent-kafka give them back: the
    timestamp a UTC datetime, the enum its symbol), the same on every call."""
    rng = random.Random(seed)
    out = []
    ms = BASE_MS
    for i in range(n):
        ms += rng.randrange(0, 50)
        city, country = rng.choice(_CITIES)
        out.append({
            "order_id": f"ord-{rng.randrange(16 ** 12):012x}",
            "customer_id": rng.randrange(1, 5_000_000),
            "sequence": i,
            "sku": f"SKU-{rng.randrange(100_000):05d}-{rng.choice('ABCDEFGH')}",
            "quantity": rng.randint(1, 12),
            "unit_price": round(rng.uniform(0.5, 500.0), 2),
            "gift": rng.random() < 0.1,
            "status": rng.choice(_STATUS),
            "created_at": datetime.datetime.fromtimestamp(ms / 1000, UTC),
            "shipping": {"street": f"{rng.randrange(1, 300)} {rng.choice(_STREETS)}",
                         "city": city, "postcode": f"{rng.randrange(100000):05d}",
                         "country": country},
            "tags": rng.sample(_TAGS, rng.randint(0, 3)),
            "coupon": f"SAVE{rng.randrange(5, 50)}" if rng.random() < 0.3 else None,
        })
    return out


def to_json_text(order):
    """An order as a JSON value: the timestamp as RFC 3339 text with ms, in UTC."""
    out = dict(order)
    out["created_at"] = order["created_at"].strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return json.dumps(out, separators=(",", ":"))


# ----------------------------------------------------------------- workload

class DictSource:
    """A schema source over {id: Avro JSON text} for decode_avro (the shape
    kcodec.values.registry's sources have), used only while that module is
    not there."""
    class _Found:
        schema_type = "AVRO"

        def __init__(self, text):
            self.text = text

    def __init__(self, schemas):
        self._schemas = schemas

    def schema(self, schema_id):
        if schema_id not in self._schemas:
            raise LookupError(f"unknown schema id {schema_id}")
        return self._Found(self._schemas[schema_id])


def has_registry():
    try:
        import kcodec.values.registry  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class ValueWorkload:
    orders: list                    # the dicts written
    schema_id: int                  # as the (mock) registry gave it
    registry: object                # confluent-kafka's MockSchemaRegistryClient, schema cached
    values: list                    # Confluent-framed Avro values (bytes)
    column: pa.Array                # the same, as a binary Arrow column
    json_values: list               # plain JSON values (bytes)
    json_column: pa.Array
    json_lines: bytes               # the JSON values joined by newlines
    record_set: bytes               # kcodec.encode of (key, Avro value, ts, no headers)
    arrow_type: pa.DataType         # the struct type every implementation produces

    @property
    def count(self):
        return len(self.values)

    @property
    def schemas(self):
        return {self.schema_id: SCHEMA_TEXT}


@lru_cache(maxsize=None)
def get_workload(n=N_RECORDS):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from fastavro import parse_schema, schemaless_writer
    from kcodec.values.avro import arrow_type

    registry = SchemaRegistryClient.new_client({"url": "mock://bench"})   # in memory
    schema_id = registry.register_schema(f"{TOPIC}-value", Schema(SCHEMA_TEXT, "AVRO"))
    orders = make_orders(n)
    parsed = parse_schema(SCHEMA)
    header = b"\x00" + schema_id.to_bytes(4, "big")
    values = []
    for order in orders:
        out = io.BytesIO()
        out.write(header)
        schemaless_writer(out, parsed, order)
        values.append(out.getvalue())
    require(values[0] == confluent_serialize(registry, orders[0]),
            "the framed fastavro bytes differ from confluent-kafka's AvroSerializer's")
    json_values = [to_json_text(o).encode() for o in orders]
    base = orders[0]["created_at"]
    rows = [(o["order_id"].encode(), v, BASE_MS + (o["created_at"] - base) // datetime.timedelta(
        milliseconds=1), []) for o, v in zip(orders, values)]
    return ValueWorkload(
        orders=orders, schema_id=schema_id, registry=registry, values=values,
        column=pa.array(values, pa.binary()), json_values=json_values,
        json_column=pa.array(json_values, pa.binary()), json_lines=b"\n".join(json_values),
        record_set=kcodec.encode(rows), arrow_type=arrow_type(SCHEMA_TEXT))


def confluent_serialize(registry, order):
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    serializer = AvroSerializer(registry, SCHEMA_TEXT, conf={"auto.register.schemas": False,
                                                             "use.latest.version": False})
    return serializer(order, SerializationContext(TOPIC, MessageField.VALUE))


# -------------------------------------------------------- the timed operations
#
# Each returns the Arrow struct column (or, for the loops without Arrow, the
# list of dicts); check_same compares the columns once, untimed.

def kcodec_avro(wl):
    """kcodec's compiled decoder on the binary column: decode_column (through
    kcodec.values.registry's source for {id: schema}) when that is there, else
    decode_avro with an equivalent in-memory source."""
    if has_registry():
        from kcodec.values import decode_column
        schemas = wl.schemas
        column = wl.column
        return lambda: decode_column(column, format="avro", schemas=schemas).values
    from kcodec.values.avro import decode_avro
    source, column = DictSource(wl.schemas), wl.column
    return lambda: decode_avro(column, framed=True, source=source).values


def confluent_dicts(wl):
    """confluent-kafka's AvroDeserializer, called per value (schema cached)."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    deserializer = AvroDeserializer(wl.registry)
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    values = wl.values
    return lambda: [deserializer(v, ctx) for v in values]


def confluent_arrow(wl):
    """... plus pa.array(dicts, type): the path Python users write today."""
    dicts, kind = confluent_dicts(wl), wl.arrow_type
    return lambda: pa.array(dicts(), kind)


def confluent_from_pylist(wl):
    """... plus pyarrow.Table.from_pylist(dicts, schema), as a struct column."""
    dicts, schema = confluent_dicts(wl), pa.schema(list(wl.arrow_type))
    return lambda: pa.Table.from_pylist(dicts(), schema).to_struct_array()


def fastavro_dicts(wl):
    """fastavro's schemaless_reader per datum, the 5-byte header skipped."""
    from fastavro import parse_schema, schemaless_reader
    parsed, values = parse_schema(SCHEMA), wl.values
    BytesIO = io.BytesIO

    def loop():
        out = []
        for v in values:
            fo = BytesIO(v)
            fo.seek(5)
            out.append(schemaless_reader(fo, parsed, None))
        return out
    return loop


def fastavro_arrow(wl):
    dicts, kind = fastavro_dicts(wl), wl.arrow_type
    return lambda: pa.array(dicts(), kind)


def kcodec_json(wl):
    from kcodec.values import decode_column
    column, kind = wl.json_column, wl.arrow_type
    return lambda: decode_column(column, format="json", reader_schema=kind).values


def _text_type(kind):
    """`kind` with its timestamp fields as strings (what json.loads gives)."""
    return pa.struct([pa.field(f.name, pa.string(), f.nullable)
                      if pa.types.is_timestamp(f.type) else f for f in kind])


def json_loads_arrow(wl):
    """json.loads per value + pa.array(dicts, type) with the timestamp field
    as text, then that field cast to the timestamp type (vectorized)."""
    values, kind = wl.json_values, wl.arrow_type
    text_type = _text_type(kind)
    loads = json.loads

    def run():
        column = pa.array([loads(v) for v in values], text_type)
        return _typed(column, kind)
    return run


def json_loads_from_pylist(wl):
    """json.loads per value + pyarrow.Table.from_pylist, timestamp cast after."""
    values, kind = wl.json_values, wl.arrow_type
    schema = pa.schema(list(_text_type(kind)))
    loads = json.loads

    def run():
        column = pa.Table.from_pylist([loads(v) for v in values], schema).to_struct_array()
        return _typed(column, kind)
    return run


def _typed(column, kind):
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    children = [pc.cast(column.field(i), f.type) if pa.types.is_timestamp(f.type)
                else column.field(i) for i, f in enumerate(kind)]
    return pa.StructArray.from_arrays(children, fields=list(kind))


def pyarrow_read_json(wl):
    """pyarrow.json.read_json alone, on the values already joined by newlines
    (the join is not timed), with the explicit schema."""
    import pyarrow.json as pj
    lines, kind = wl.json_lines, wl.arrow_type
    parse = pj.ParseOptions(explicit_schema=pa.schema(list(kind)),
                            unexpected_field_behavior="ignore")
    return lambda: pj.read_json(pa.BufferReader(lines), parse_options=parse).to_struct_array()


def kcodec_decode_raw(wl):
    data = wl.record_set
    return lambda: kcodec.decode(data)


def kcodec_decode_avro(wl):
    data, schemas = wl.record_set, wl.schemas
    return lambda: kcodec.decode(data, value_format="avro", schemas=schemas)


# ------------------------------------------------------------- correctness

def _nullable(kind):
    """`kind` with every field (nested ones too) nullable."""
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _nullable(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(pa.field(kind.value_field.name, _nullable(kind.value_type)))
    return kind


def normalized(column):
    """A struct column as one array (chunks combined), every field nullable:
    pyarrow's JSON reader and Table.to_struct_array drop the not-null flags
    that kcodec keeps from the schema, which say nothing about the values."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.cast(_nullable(column.type))


def check_same(expected, got, what):
    """`got` (a peer's column) equals `expected` (kcodec's), value for value,
    and has its type but for the fields' not-null flags."""
    expected, got = normalized(expected), normalized(got)
    require(got.type == expected.type, f"{what}: type {got.type}, not {expected.type}")
    require(len(got) == len(expected), f"{what}: {len(got)} rows, not {len(expected)}")
    if not got.equals(expected):
        for i, (a, b) in enumerate(zip(expected.to_pylist(), got.to_pylist())):
            require(a == b, f"{what}: row {i} differs: {b!r} != {a!r}")
        require(False, f"{what}: the columns differ (not in any row's Python value)")


def check_dicts(orders, dicts, what):
    require(dicts == orders, f"{what}: the dicts differ from the orders written")


# ------------------------------------------------------ interleaved report

GROUPS = {
    # group -> (records handled, {implementation: builder}); the first is the subject
    "avro values to Arrow": {
        "kcodec decode_column": kcodec_avro,
        "confluent AvroDeserializer + pa.array": confluent_arrow,
        "confluent AvroDeserializer + from_pylist": confluent_from_pylist,
        "confluent AvroDeserializer, no Arrow": confluent_dicts,
        "fastavro schemaless_reader + pa.array": fastavro_arrow,
        "fastavro schemaless_reader, no Arrow": fastavro_dicts,
    },
    "json values to Arrow": {
        "kcodec decode_column": kcodec_json,
        "json.loads + pa.array": json_loads_arrow,
        "json.loads + from_pylist": json_loads_from_pylist,
        "pyarrow.json.read_json alone": pyarrow_read_json,
    },
    "record set to Arrow": {
        "kcodec.decode(value_format=avro)": kcodec_decode_avro,
        "kcodec.decode (raw values)": kcodec_decode_raw,
    },
}
GOALS = {("avro values to Arrow", "confluent AvroDeserializer + pa.array"): 20.0,
         ("avro values to Arrow", "confluent AvroDeserializer + from_pylist"): 20.0,
         ("avro values to Arrow", "fastavro schemaless_reader + pa.array"): 10.0,
         ("avro values to Arrow", "fastavro schemaless_reader, no Arrow"): 10.0}


def check_group(wl, group):
    impls = {name: build(wl) for name, build in GROUPS[group].items()}
    subject, *peers = impls
    expected = impls[subject]()
    if group != "record set to Arrow":
        require(normalized(expected).type == _nullable(wl.arrow_type), f"{group}: kcodec's type")
        require(len(expected) == wl.count and expected.null_count == 0, f"{group}: kcodec's rows")
    if group == "record set to Arrow":
        raw = impls[peers[0]]()
        require(expected.num_rows == raw.num_rows == wl.count, "record set: row counts")
        check_same(kcodec_avro(wl)(), expected.column("value"), "kcodec.decode(avro) value")
        require(expected.column("offset").equals(raw.column("offset")), "record set: offsets")
        return impls
    for name in peers:
        got = impls[name]()
        if isinstance(got, list):
            check_dicts(wl.orders, got, name)
        else:
            check_same(expected, got, name)
    return impls


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=N_RECORDS)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--json", metavar="PATH", help="also write the figures (with samples) here")
    args = ap.parse_args(argv)
    wl = get_workload(args.records)
    rows = {}
    for group in GROUPS:
        if group == "record set to Arrow" and not has_registry():
            print(f"{group}: skipped, kcodec.values.registry is not there yet", file=sys.stderr)
            continue
        impls = check_group(wl, group)
        print(f"{group} ...", file=sys.stderr, flush=True)
        timings = bench.compare(impls, args.repeats, args.min_time)
        subject = next(iter(impls))
        kc = timings[subject].median
        rows[group] = {name: {"median_s": t.median, "ns_per_record": t.median / wl.count * 1e9,
                              "records_per_s": wl.count / t.median, "samples_s": t.samples,
                              "calls_per_sample": t.number,
                              "ratio_peer_over_kcodec": t.median / kc}
                       for name, t in timings.items()}
    lines = markdown(rows, wl, args)
    print("\n".join(lines))
    if args.json:
        env = bench.environment()
        for dist in ("fastavro", "confluent_kafka"):
            env[dist] = getattr(__import__(dist), "__version__", None)
        Path(args.json).write_text(json.dumps({
            "environment": env, "records": wl.count, "repeats": args.repeats,
            "min_time_s": args.min_time, "avro_value_bytes_mean": sum(map(len, wl.values)) / wl.count,
            "json_value_bytes_mean": sum(map(len, wl.json_values)) / wl.count,
            "schema": SCHEMA, "groups": rows,
            "goals": [{"group": g, "peer": p, "goal": x,
                       "ratio": rows[g][p]["ratio_peer_over_kcodec"],
                       "met": rows[g][p]["ratio_peer_over_kcodec"] >= x}
                      for (g, p), x in GOALS.items()],
            "markdown": "\n".join(lines)}, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)


def markdown(rows, wl, args):
    lines = [f"{wl.count:,} records; median of {args.repeats} interleaved repeats of "
             f">= {args.min_time} s; ratio = peer median / kcodec median (the group's first row)."]
    for group, impls in rows.items():
        lines += ["", f"| {group} | ns/record | records/s | ratio (peer/kcodec) | goal |",
                  "|---|---:|---:|---:|---|"]
        for name, r in impls.items():
            goal = GOALS.get((group, name))
            verdict = "" if goal is None else (
                f">= {goal:g}x: {'met' if r['ratio_peer_over_kcodec'] >= goal else 'MISSED'}")
            lines.append(f"| {name} | {r['ns_per_record']:,.0f} | {r['records_per_s']:,.0f} "
                         f"| {r['ratio_peer_over_kcodec']:.2f}x | {verdict} |")
    return lines


if __name__ == "__main__":
    main()
