"""The "kafka-log" Python Data Source: Kafka partition directories read as
spark.read.format("kafka") would read the topic from a broker."""
from pyspark.sql.datasource import DataSource, DataSourceReader

from .options import load_paths, parse_options
from .plan import Split, plan
from .read import read_split
from .schema import arrow_schema, kafka_schema, to_spark_arrow


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
        when ``includeHeaders`` is true."""
        return kafka_schema(parse_options(self.options).include_headers)

    def reader(self, schema):
        """The reader Spark plans and runs the read with.

        Args:
            schema: The schema Spark resolved.
        """
        return KafkaLogReader(load_paths(self.options), parse_options(self.options), schema)


class KafkaLogReader(DataSourceReader):
    def __init__(self, paths, options, schema):
        self.paths, self.options, self.schema = paths, options, schema

    def partitions(self):
        splits, _ = plan(self.paths, self.options)
        return splits

    def read(self, split):
        if not isinstance(split, Split):    # Spark's stand-in when nothing is to be read
            return
        target = arrow_schema(self.schema)
        for table in read_split(split, self.options):
            if table.num_rows:
                yield from to_spark_arrow(table, target).to_batches()
