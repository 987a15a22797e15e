"""Keep the garbage collection that Spark runs after every Python task cheap.

A reused PySpark worker calls ``gc.collect()`` after each task
(``pyspark/daemon.py``). A full collection walks every object the worker
holds: pandas, pyarrow, confluent-kafka and the bolt tasks come to ~80,000
objects, 30-100 ms per task, several tasks per micro-batch, measured as the
largest single cost of a small micro-batch. Objects that live as long as the
worker (modules, bolt instances, consumers) are moved out of the collector's
sight with ``gc.freeze()`` once they exist; later collections walk only what
the last task left behind. Frozen objects are still freed by reference
counting; only a reference cycle among them would be kept, which is why
freezing happens when long-lived state was created, not after every task.
"""

from __future__ import annotations

import gc

_pending = [True]  # a fresh worker: its modules are not frozen yet


def grew() -> None:
    """Long-lived state was created (a bolt task, a consumer): freeze at the next settle."""
    _pending[0] = True


def settle() -> None:
    """At the end of a task: collect once and freeze what survives, if anything new lives."""
    if _pending[0]:
        gc.collect()
        gc.freeze()
        _pending[0] = False
