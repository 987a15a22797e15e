"""One active bolts job per topology, and a warm standby that takes over in seconds.

Every bolts job takes an exclusive lock (``flock``) on its topology's
checkpoint directory before it starts its queries: two jobs never run the same
checkpoints. A second copy started beside it (the worker runs one, see
``--bolts-standby``) starts its Spark session, warms its Python workers (they
import the bolts and Squall's modules), then waits on the lock; when the active
job dies, the kernel releases its lock and the standby starts the queries at
once. A restarted Spark driver needed ~22 s here to run again (JVM, session,
cold Python workers); the standby skips all of that.
"""

from __future__ import annotations

import fcntl
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from squall.core.errors import ConfigError

log = logging.getLogger("squall.bolts.standby")


def take_lock(path: Path, stop: threading.Event, alive: Callable[[], bool] = lambda: True,
              every_s: float = 0.05) -> TextIO | None:
    """Hold ``path`` exclusively (blocking, until ``stop``); None if stopped first.

    The lock lasts as long as the returned file is open: the process's life.
    ``alive`` is asked every second while waiting: a standby whose Spark driver
    died must exit (and be restarted), not take over without one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")  # noqa: SIM115 - held open: it is the lock
    waited = False
    checked = time.monotonic()
    while not stop.is_set():
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not waited:
                log.info("standby: another job holds %s; waiting to take over", path)
                waited = True
            if time.monotonic() - checked >= 1.0:
                checked = time.monotonic()
                if not alive():
                    f.close()
                    raise ConfigError("the standby's Spark driver is gone; exiting to be "
                                      "restarted") from None
            stop.wait(every_s)
            continue
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        if waited:
            log.info("taking over: the lock on %s is ours", path)
        return f
    f.close()
    return None


def warm_up(spark: Any, modules: Sequence[str]) -> None:
    """Start Spark's Python workers and import what the bolt tasks will (one task per core)."""
    mods = tuple(sorted({"services.bolts.sink", "squall.core.executor", *modules}))

    def imports(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for m in mods:
            importlib.import_module(m)
        yield from batches

    # Two Python stages per task, as a micro-batch has (the edge reader, then the bolts):
    # two workers per core are started and kept (Spark reuses them).
    cores = max(1, spark.sparkContext.defaultParallelism)
    (spark.range(0, cores, numPartitions=cores).mapInArrow(imports, "id long")
     .mapInArrow(imports, "id long").collect())


def driver_alive(spark: Any) -> bool:
    """The Spark driver (the JVM behind py4j) still answers."""
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # py4j: the JVM is gone
        return False
