"""stream-incident toolkit: Kafka Streams and NiFi state/checkpoint incident analysis on Spark."""

__version__ = "0.1.0"
