"""The checkpoint folder as a store the bolts job can lose for a while.

A bolts job writes its queries' offset and commit logs and its tasks' batch marks
(services/bolts/batch_marks.py) under the checkpoint folder, on a cluster a folder every host
shares. When the folder refuses writes (remounted read-only, its permissions taken, full),
a query's micro-batch fails, with Spark's task retries, before it commits: nothing is
corrupted (each log entry is written to a temporary file and renamed) and nothing is
acknowledged that was not processed. The job keeps its Spark session: it says which folder
refuses writes and why, waits until a probe write succeeds, and starts its queries again
from their checkpoints, which replay the failed micro-batch (docs/operations.md,
"The shared checkpoint folder")."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

from squall.core.errors import BoltFault

#: How a refused write reads, from Python (OSError's strerror) and from Spark's Java I/O.
REFUSALS = ("Read-only file system", "Permission denied", "No space left on device",
            "Disk quota exceeded", "AccessDeniedException")


class CheckpointsUnwritable(BoltFault):
    """The checkpoint folder refuses writes: the job's queries stopped, to start again
    once it takes them."""


def refusal(folder: Path) -> str | None:
    """Why ``folder`` refuses a write now (a probe file made and removed), or None."""
    probe = folder / f".squall-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return f"{e.strerror or e} ({folder})"
    return None


def refused_write(error: str) -> bool:
    """Whether a stopped query's ``error`` is a write the store refused."""
    return any(r in error for r in REFUSALS)


def wait_writable(folder: Path, stop: threading.Event, every_s: float = 1.0) -> float | None:
    """Seconds waited until ``folder`` takes a write; None if ``stop`` came first."""
    t0 = time.monotonic()
    while refusal(folder) is not None:
        if stop.wait(every_s):
            return None
    return time.monotonic() - t0
