"""The pure core, by concept: Storm's reliability model (``reliability``), wire formats
(``wire``), the topology (``topology``), Trident State (``trident``), the bolt API
(``bolt_api``), the control plane (``control``) and each service's state machine
(``tasks``), in that order of layers, each importing only those below it.

Nothing here imports Kafka, ZooKeeper, Spark, FastAPI, Prometheus, a database or
the wall clock (time is passed in): the contracts in pyproject.toml are checked in CI.
"""
