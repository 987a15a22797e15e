"""Which micro-batch each task of a query last finished: a re-run is not run again.

Spark runs a micro-batch again after a crash between the tasks' end and its
commit log, with the same batch id and offsets. Its outputs and acks are then
already in Kafka; sending the acks again would undo them (XOR), and every tree
of the batch would wait for its timeout, holding the spouts' commit points the
whole time. So a task that has flushed its outputs and acks records the batch id
here; a run of a batch id at or below it is skipped whole (its state changes
were logged with it). Only a crash during the produce phase itself leaves acks
half sent: those trees time out once and are replayed once.

One small file per head task, next to the query's checkpoint (shared storage,
like the checkpoint), replaced atomically.
"""

from __future__ import annotations

import os
from pathlib import Path


def last_done(directory: str, task: int) -> int:
    """The highest batch id ``task`` finished (-1: none)."""
    try:
        return int((Path(directory) / f"task-{task}").read_text())
    except (OSError, ValueError):
        return -1


def mark_done(directory: str, task: int, batch_id: int) -> None:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".task-{task}.{os.getpid()}"
    tmp.write_text(str(batch_id))
    os.replace(tmp, d / f"task-{task}")
