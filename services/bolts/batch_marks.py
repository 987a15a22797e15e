"""Which micro-batch each task of a query last finished: a re-run is not run again.

Spark runs a micro-batch again after a crash between the tasks' end and its
commit log, with the same batch id and offsets. Its outputs and acks are then
already in Kafka; sending the acks again would undo them (XOR), and every tree
of the batch would wait for its timeout, holding the spouts' commit points the
whole time. So a task that has flushed its outputs and acks records the batch id
here; a run of a batch id at or below it is skipped whole (its state changes
were logged with it).

A crash during the produce phase itself leaves acks half sent: the re-run's
acks would leave those trees wrong until their message timeout. So a task also
records the batch it starts producing; a run of that same batch, not finished,
runs again and then fails the roots of its input, so that the spouts replay
those trees at once instead of a timeout later (a replay is exact: tuples carry
their source message).

One small file per head task, next to the query's checkpoint (shared storage,
like the checkpoint), replaced atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The marks' directory, beside (inside) a query's checkpoint.
DIRECTORY = "squall-batches"


def beside(checkpoint: Path) -> str:
    """The marks' directory of the query checkpointed at ``checkpoint``."""
    return str(checkpoint / DIRECTORY)


def last_done(directory: str, task: int) -> int:
    """The highest batch id ``task`` finished (-1: none)."""
    return _read(Path(directory) / f"task-{task}")


def mark_done(directory: str, task: int, batch_id: int) -> None:
    _write(Path(directory), f"task-{task}", batch_id)


def last_producing(directory: str, task: int) -> int:
    """The last batch id ``task`` started producing (-1: none)."""
    return _read(Path(directory) / f"producing-{task}")


def _read(path: Path) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return -1


def mark_producing(directory: str, task: int, batch_id: int) -> None:
    _write(Path(directory), f"producing-{task}", batch_id)


def _write(d: Path, name: str, batch_id: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{name}.{os.getpid()}"
    tmp.write_text(str(batch_id))
    os.replace(tmp, d / name)
