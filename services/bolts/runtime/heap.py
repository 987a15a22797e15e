"""Keep the garbage collection that Spark runs after every Python task cheap.

A reused PySpark worker calls ``gc.collect()`` after each task
(``pyspark/daemon.py``). A full collection walks every object the worker
holds (pandas, pyarrow, confluent-kafka and the bolt tasks: tens of thousands
of objects), several times per micro-batch: the largest single cost of a small
micro-batch. Objects that live as long as the
worker (modules, bolt instances, consumers) are moved out of the collector's
sight with ``gc.freeze()`` once they exist; later collections walk only what
the last task left behind. Frozen objects are still freed by reference
counting; only a reference cycle among them would be kept, which is why
freezing happens when long-lived state was created, not after every task.

Between those collections, the collector's own young-generation runs are made rarer
(:func:`tune`): a micro-batch allocates tens of thousands of short-lived objects, and with
Python's default threshold (700) each batch ran dozens of collections that walked a
stateful task's cache again and again (30 % of a persistent aggregate's time).

Memory is kept and touched once (:data:`WORKER_ENV`, :func:`pretouch`): a worker that
hands freed memory back to the system takes a page fault for every page its next task
touches again, and on virtual machines a fault on a page the kernel must find anew is
dear when two tasks fault at once: a task's page faults can cost more system time than its
own work.
"""

from __future__ import annotations

import gc

_pending = [True]  # a fresh worker: its modules are not frozen yet
#: Young collections every 50,000 allocations; the older generations as Python's default.
THRESHOLDS = (50_000, 10, 10)
#: The Python workers' environment (Spark's ``spark.executorEnv.*``): Arrow allocates
#: through the C library's malloc, not mimalloc, which hands freed pages back to the system
#: within milliseconds; malloc keeps what it freed (trim threshold 1 GiB) and serves blocks
#: up to 32 MiB (its largest) from its heap, not from mappings unmapped on free.
WORKER_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system",
              "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
              "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
#: What a warm worker touches once, so that its first large micro-batch takes no faults.
PRETOUCH_BYTES = 64 << 20
_PAGE = 4096
_BLOCK = 4 << 20


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


def pretouch(nbytes: int = PRETOUCH_BYTES) -> None:
    """Touch ``nbytes`` of heap once and free it (kept, with :data:`WORKER_ENV`): the later
    tasks' allocations find those pages mapped, as a JVM's heap is with ``AlwaysPreTouch``.
    In blocks under malloc's mapping threshold, so that they come from its heap."""
    blocks = [bytearray(_BLOCK) for _ in range(max(1, nbytes // _BLOCK))]
    for b in blocks:
        b[::_PAGE] = b"\1" * len(range(0, _BLOCK, _PAGE))
    del blocks
