"""Spark finds Python Data Sources in top-level modules named pyspark_*:
this one makes format("kafka-log") available without kcodec.spark.register."""
from kcodec.spark.source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
