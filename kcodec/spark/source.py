"""The "kafka-log" Python Data Source: Kafka partition directories read as
spark.read.format("kafka") would read the topic from a broker."""
from pyspark.sql.datasource import DataSource, DataSourceReader

from .filters import push_filters, pushdown_planning
from .options import load_paths, parse_bool, parse_options, schema_options
from .plan import plan
from .read import spark_batches
from .schema import kafka_schema


class KafkaLogDataSource(DataSource):
    """The ``"kafka-log"`` Python Data Source:
    ``spark.read.format("kafka-log").option(...).load(paths)``.

    Reads Kafka partition directories as ``spark.read.format("kafka")``
    would read the topic from a broker: the same columns and types. Options
    are those of :func:`parse_options`. Register it with
    :func:`kcodec.spark.register`.
    """

    @classmethod
    def name(cls):
        """The format name, ``"kafka-log"``."""
        return "kafka-log"

    def schema(self):
        """Spark's Kafka source schema (:func:`kafka_schema`), with headers
        when ``includeHeaders`` is true, and ``key`` / ``value`` decoded
        (their reader schema's type, then ``valueSchemaId`` and, with
        ``onValueError=null``, ``valueError``) when ``keyFormat`` /
        ``valueFormat`` ask (:func:`kcodec.spark.values.log_schema`)."""
        # Only includeHeaders and the typed-value options shape the schema;
        # the other options are checked by the batch or the stream reader,
        # whose rules differ.
        given = {str(k).lower(): v for k, v in dict(self.options).items()}
        base = kafka_schema(parse_bool("includeHeaders", given.get("includeheaders", "false")))
        options = schema_options(given)
        if not options.typed:
            return base
        from .values import log_schema
        return log_schema(base, options, load_paths(self.options))

    def reader(self, schema):
        """The reader Spark plans and runs the read with.

        Args:
            schema: The schema Spark resolved.
        """
        options = parse_options(self.options)
        # Only Spark's pushdown planner may be handed a reader with
        # pushFilters: its other planner refuses one while
        # spark.sql.python.filterPushdown.enabled is false.
        pushing = options.filter_pushdown and pushdown_planning()
        reader = KafkaLogPushdownReader if pushing else KafkaLogReader
        return reader(load_paths(self.options), options, schema)

    def streamReader(self, schema):
        """The reader of ``spark.readStream.format("kafka-log")``: the
        :class:`~kcodec.spark.stream.KafkaLogStreamReader` of the options.

        Args:
            schema: The schema Spark resolved.
        """
        from .stream import KafkaLogStreamReader
        return KafkaLogStreamReader(load_paths(self.options), self.options, schema)


class KafkaLogReader(DataSourceReader):
    """The batch reader of the ``"kafka-log"`` source: a split per segment
    (or piece of one), decoded by :func:`read_split`.

    Args:
        paths: The paths given to ``load()``.
        options: The :class:`ReadOptions` of the read.
        schema: The schema Spark resolved.
        pushdown: The :class:`~kcodec.spark.filters.Pushdown` of filters
            pushed down, or None.
    """

    def __init__(self, paths, options, schema, pushdown=None):
        self.paths, self.options, self.schema = paths, options, schema
        self.pushdown = pushdown
        self.readers = None
        if options.typed:
            from .values import schema_readers
            self.readers = schema_readers(options, schema, paths)

    def partitions(self):
        """The read's splits (:func:`plan`), narrowed by the filters pushed
        down."""
        splits, _ = plan(self.paths, self.options, self.pushdown)
        return splits

    def read(self, split):
        """The Arrow record batches of one split.

        Args:
            split: A :class:`Split` of :meth:`partitions`.
        """
        return spark_batches(split, self.options, self.schema, self.readers)


class KafkaLogPushdownReader(KafkaLogReader):
    """The reader Spark's filter pushdown planner gets: a
    :class:`KafkaLogReader` that takes filters on topic, partition, offset
    and timestamp (see :mod:`kcodec.spark.filters`)."""

    def pushFilters(self, filters):
        """Keep what the filters let the read skip.

        Args:
            filters: The filters Spark pushes down (their AND).

        Returns:
            list: Those Spark must still evaluate (all but the exact topic,
            partition and offset ones).
        """
        self.pushdown, remaining = push_filters(filters)
        return remaining
