"""Bolts as Spark Structured Streaming jobs (issue #5)."""
