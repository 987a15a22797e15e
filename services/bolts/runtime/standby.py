"""One active bolts job per topology, and a warm standby that takes over in seconds.

Every bolts job takes an exclusive lock (``flock``) on its topology's
checkpoint directory before it starts its queries: two jobs never run the same
checkpoints. A second copy started beside it (the worker runs one, see
``--bolts-standby``) starts its Spark session, warms its Python workers (they
import the bolts and Squall's modules), then waits on the lock; when the active
job dies, the kernel releases its lock and the standby starts the queries at
once. A restarted Spark driver needed ~22 s here to run again (JVM, session,
cold Python workers); the standby skips all of that.

A standby starts its Spark session only once the active job's queries run (the
active job writes ``<pid> running`` into the lock file; :func:`wait_for_active`):
two JVMs and their Python workers starting together on a small machine made the
active job's start-up twice as long.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from squall.core.errors import ConfigError

log = logging.getLogger("squall.bolts.standby")


def wait_for_active(path: Path, stop: threading.Event, timeout_s: float = 120.0,
                    every_s: float = 0.2) -> bool:
    """Until the lock file says its holder's queries run (``<pid> running``, the pid alive);
    False if ``timeout_s`` passed first (a job that never comes up: start anyway)."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set() and time.monotonic() < deadline:
        if _running_holder(path):
            return True
        stop.wait(every_s)
    return False


def _running_holder(path: Path) -> bool:
    try:
        pid, _, state = path.read_text().strip().partition(" ")
        if state != "running":
            return False
        os.kill(int(pid), 0)
    except (OSError, ValueError):
        return False
    return True


def mark_running(lock: TextIO) -> None:
    """Tell a waiting standby (:func:`wait_for_active`) that this job's queries run."""
    _write_holder(lock, "running")


def try_lock(path: Path) -> TextIO | None:
    """:func:`take_lock` if the lock is free now; None (at once) if another job holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")  # noqa: SIM115 - held open: it is the lock
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    _write_holder(f)
    return f


def _write_holder(f: TextIO, state: str = "") -> None:
    """The lock file's content: the holder's pid, and its state if any."""
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()} {state}\n" if state else f"{os.getpid()}\n")
    f.flush()


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
        _write_holder(f)
        if waited:
            log.info("taking over: the lock on %s is ours", path)
        return f
    f.close()
    return None


def driver_alive(spark: Any) -> bool:
    """The Spark driver (the JVM behind py4j) still answers."""
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # py4j: the JVM is gone
        return False
