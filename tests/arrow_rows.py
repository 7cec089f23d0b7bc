"""Rows of a decode() table and of read_records, in one comparable form."""
import pyarrow as pa

import kcodec

TS_TYPES = {"NoTimestampType": -1, "CreateTime": 0, "LogAppendTime": 1}


def rows_of_table(table):
    # Timestamps as int64: any int64 is a valid Kafka timestamp, not every one a datetime.
    cols = {name: table.column(name).cast(pa.int64()).to_pylist() if name == "timestamp"
            else table.column(name).to_pylist() for name in table.column_names}
    cols["headers"] = [None if h is None else tuple((x["key"], x["value"]) for x in h)
                       for h in cols["headers"]]
    return [dict(zip(cols, row)) for row in zip(*cols.values())]


def rows_of_records(data, **options):
    rows = []
    for record in kcodec.read_records(data, **options):
        row = {"key": record.key, "value": record.value, "offset": record.offset,
               "timestamp": None if record.magic == 0 else record.timestamp,
               "timestampType": TS_TYPES[record.timestamp_type],
               "headers": record.headers or None}
        rows.append(row)
    return rows
