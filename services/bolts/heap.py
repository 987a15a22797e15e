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

Between those collections, the collector's own young-generation runs are made rarer
(:func:`tune`): a micro-batch allocates tens of thousands of short-lived objects, and with
Python's default threshold (700) each batch ran dozens of collections that walked a
stateful task's cache again and again (30 % of a persistent aggregate's time).
"""

from __future__ import annotations

import gc

_pending = [True]  # a fresh worker: its modules are not frozen yet
#: Young collections every 50,000 allocations; the older generations as Python's default.
THRESHOLDS = (50_000, 10, 10)


def tune() -> None:
    """Make the collector's automatic runs rare (see above); idempotent."""
    gc.set_threshold(*THRESHOLDS)


def grew() -> None:
    """Long-lived state was created (a bolt task, a consumer): freeze at the next settle."""
    _pending[0] = True


def settle() -> None:
    """At the end of a task: collect once and freeze what survives, if anything new lives."""
    if _pending[0]:
        tune()
        gc.collect()
        gc.freeze()
        _pending[0] = False
