"""Filters Spark pushes down to the "kafka-log" source, turned into work not
done: partitions not opened, offsets not read, batches not decompressed.

- ``topic`` and ``partition`` (=, <, <=, >, >=, IN) choose partition
  directories before their logs are opened; exact.
- ``offset`` (=, <, <=, >, >=) narrows each partition's [start, end); exact.
  ``IS NOT NULL`` on these three holds for every row.
  ``offset IN (...)`` narrows it to min..max and is left to Spark as well.
- ``timestamp`` lower bounds (>, >=, =, the least of an IN) start each
  partition where its ``.timeindex`` says the bound is first reached, and
  skip the batches whose header's max timestamp is below it. Every record
  before that offset, and every record of such a batch, is older than the
  bound, so no row that passes is lost; the filter stays with Spark, which
  drops what is left. Upper bounds are not used: CreateTime timestamps are
  the producers' clocks, not in offset order, and a batch header gives its
  largest timestamp but not its smallest, so no offset or batch is known to
  lie wholly after an upper bound without decoding it.

Every other filter is left to Spark.
"""
import datetime
import operator
import sys
from dataclasses import dataclass

from pyspark.sql.datasource import (
    EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan, LessThanOrEqual,
)

# The module of the Python worker that plans a read with filter pushdown
# (spark.sql.python.filterPushdown.enabled true, and filters to push).
PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
MICROSECOND = datetime.timedelta(microseconds=1)
MICROS_PER_MILLI = 1000


def _is_in(value, values):
    return value in values


COMPARISONS = {
    EqualTo: operator.eq, GreaterThan: operator.gt, GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt, LessThanOrEqual: operator.le, In: _is_in,
}
# Columns a partition directory names: (column, the Python type of its values).
PARTITION_COLUMNS = {("topic",): str, ("partition",): int}
OFFSET = ("offset",)
TIMESTAMP = ("timestamp",)
# Every row has these; a record without a timestamp (magic 0) has none.
NEVER_NULL = (*PARTITION_COLUMNS, OFFSET)


@dataclass(frozen=True)
class Pushdown:
    """What the pushed filters let a read skip (see the module docstring).

    Attributes:
        partition_tests (tuple): ``(column, comparison, value)`` of each
            topic or partition filter, ``column`` ``"topic"`` or
            ``"partition"``.
        start_offset (int | None): No row below this offset passes.
        end_offset (int | None): No row at or past this offset passes.
        min_timestamp (int | None): No row older than this (ms) passes.
    """
    partition_tests: tuple = ()
    start_offset: int = None
    end_offset: int = None
    min_timestamp: int = None

    def wants(self, topic, partition):
        """Whether the topic and partition filters let this partition's rows
        pass."""
        fields = {"topic": topic, "partition": partition}
        return all(test(fields[column], value) for column, test, value in self.partition_tests)

    def offsets(self, start, end):
        """``[start, end)`` narrowed to the offset filters' bounds (empty as
        ``(start, start)``)."""
        if self.start_offset is not None:
            start = max(start, self.start_offset)
        if self.end_offset is not None:
            end = min(end, self.end_offset)
        return start, max(start, end)


def push_filters(filters):
    """Split Spark's pushed filters into what a read uses and what Spark
    must still evaluate.

    Args:
        filters: The ``pyspark.sql.datasource.Filter`` objects of
            ``DataSourceReader.pushFilters`` (their AND).

    Returns:
        tuple: The :class:`Pushdown` of the filters, and the list of those
        (the same objects) Spark must still evaluate: all but the exact
        topic, partition and offset ones.
    """
    tests, start, end, floor, remaining = [], None, None, None, []
    for f in filters:
        if isinstance(f, IsNotNull) and f.attribute in NEVER_NULL:
            continue
        compare = COMPARISONS.get(type(f))
        values = _values(f) if compare is not None else None
        if values is None:
            remaining.append(f)
        elif f.attribute in PARTITION_COLUMNS and all(
                _is(v, PARTITION_COLUMNS[f.attribute]) for v in values):
            tests.append((f.attribute[0], compare, _operand(f)))
        elif f.attribute == OFFSET and all(_is(v, int) for v in values):
            low, high = _offset_range(f, values)
            start = _tighter(max, start, low)
            end = _tighter(min, end, high)
            if isinstance(f, In):
                remaining.append(f)
        elif f.attribute == TIMESTAMP and all(_is(v, datetime.datetime) for v in values):
            bound = _timestamp_floor(f, values)
            # Below 0 a Kafka timestamp is a marker (-1: none), not a time.
            if bound is not None and bound >= 0:
                floor = _tighter(max, floor, bound)
            remaining.append(f)
        else:
            remaining.append(f)
    return Pushdown(tuple(tests), start, end, floor), remaining


def pushdown_planning():
    """Whether Spark's filter pushdown planner is what asks for the reader:
    Spark calls ``DataSource.reader`` from that worker only when
    ``spark.sql.python.filterPushdown.enabled`` is true, and refuses, in
    its other planner, a reader that implements ``pushFilters`` when the
    conf is false; the source itself never sees the conf."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__spec__")
        names = {frame.f_globals.get("__name__"), getattr(module, "name", None)}
        if PUSHDOWN_PLANNER in names:
            return True
        frame = frame.f_back
    return False


def _tighter(pick, bound, other):
    """`pick` of two bounds, either None where there is none."""
    return bound if other is None else other if bound is None else pick(bound, other)


def _is(value, kind):
    if kind is datetime.datetime:
        return isinstance(value, datetime.datetime) and value.tzinfo is not None
    return isinstance(value, kind) and not isinstance(value, bool)


def _values(f):
    """The filter's values as a non-empty list (an IN's, its NULLs left out:
    they match nothing), or None when there is no usable one."""
    values = f.value if isinstance(f, In) else [f.value]
    if not isinstance(values, (list, tuple)):
        return None
    values = [v for v in values if v is not None]
    return values or None


def _operand(f):
    return frozenset(_values(f)) if isinstance(f, In) else f.value


def _offset_range(f, values):
    """[low, high) of the offsets that can pass; None where unbounded."""
    if isinstance(f, (EqualTo, In)):
        return min(values), max(values) + 1
    bounds = {GreaterThan: (f.value + 1, None), GreaterThanOrEqual: (f.value, None),
              LessThan: (None, f.value), LessThanOrEqual: (None, f.value + 1)}
    return bounds[type(f)]


def _timestamp_floor(f, values):
    """The smallest Kafka timestamp (ms) a row passing the filter can have,
    or None for an upper bound. Spark's timestamps are microseconds, Kafka's
    milliseconds: the floor of the bound in ms lets through a superset."""
    if not isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, In)):
        return None
    micros = (min(values) - EPOCH) // MICROSECOND
    return micros // MICROS_PER_MILLI
