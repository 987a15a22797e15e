"""A bolts job's Python workers and query planning warmed before its first micro-batch:
the workers import the bolts and Squall's modules and open their Kafka clients, and a
query is planned once, so the first micro-batch pays none of it. The active job, its
standby, a spare and the class archive's training driver all warm the same way."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from services.bolts.runtime import heap

log = logging.getLogger("squall.bolts")


def warm_up(spark: Any, modules: Sequence[str], bootstrap: str = "") -> None:
    """Start Spark's Python workers (one per core: a micro-batch's tasks run in one Python
    stage, and Spark keeps the workers) and in each import what the bolt tasks will, open
    their Kafka clients (``bootstrap``) and touch their heap (:func:`heap.pretouch`), which
    the first micro-batch would otherwise wait for."""
    mods = tuple(sorted({"services.bolts.tasks", "squall.core.tasks.executor", *modules}))

    def imports(part: Iterable[int]) -> Iterator[int]:
        for m in mods:
            importlib.import_module(m)
        if bootstrap:
            from services.bolts import clients

            clients.producer(bootstrap)
            clients.edge_consumer(bootstrap)
        heap.pretouch()
        yield from part

    # As the micro-batches run their tasks: an RDD job (services/bolts/job.py).
    sc = spark.sparkContext
    cores = max(1, sc.defaultParallelism)
    sc.parallelize(range(cores), cores).mapPartitions(imports).collect()


def warm_planning(spark: Any, checkpoint: Path | None = None) -> None:
    """Do once what a job's first queries would pay for on a new session: Spark's SQL
    state and a Python data source registered and its schema asked for (a planner
    process): ~2 s here. With ``checkpoint``, a streaming query is also run there for a
    micro-batch. A spare does the first while it waits for a job (services/bolts/spare.py);
    the class archive's training driver both, to archive those classes
    (services/bolts/cds.py)."""
    from services.bolts.runtime.session import register_for_query
    from services.bolts.source import EdgeSource

    fmt = register_for_query(spark, EdgeSource, "squall-warm-up")
    (spark.readStream.format(fmt).option("bootstrap", "127.0.0.1:9").option("topics", "t")
     .option("tasks", "0").load().writeStream.foreachBatch(lambda _df, _batch: None))
    if checkpoint is None:
        return
    q = (spark.readStream.format("rate").load().writeStream
         .foreachBatch(lambda _df, _batch: None)
         .option("checkpointLocation", str(checkpoint)).start())
    q.processAllAvailable()
    q.stop()
