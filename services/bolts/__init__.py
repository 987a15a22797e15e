"""Bolts as Spark Structured Streaming jobs."""
