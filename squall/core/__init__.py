"""The pure core: Storm's reliability model and the topology, with no I/O.

Nothing here imports Kafka, ZooKeeper, Spark, FastAPI, Prometheus, a database or
the wall clock (time is passed in): the contract in pyproject.toml is checked in CI.
"""
