"""Squall: Apache Storm's guaranteed message processing, on Kafka and Spark."""

__version__ = "0.1.0"
