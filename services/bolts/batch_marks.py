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

And a task records the batch it starts, with how many times it started it: a batch
started before and not finished died with its process (a crash, the guardian's kill at
the bolt deadline, the driver's JVM), maybe because of a record, and runs in sandboxes
(services/bolts/isolation.py). Spark's own attempt count says so after a Python worker
died; this says it after the whole job restarted too.

When the guardian kills a worker whose head bolt did not return (services/bolts/guardian.py),
it leaves the input of that call and the deadline for the next attempt (``hung-<task>-<batch>``):
that input fails at once, without a sandbox waiting the deadline again for it.

One small file per head task and mark, next to the query's checkpoint (shared storage,
like the checkpoint), replaced atomically.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: The marks' directory, beside (inside) a query's checkpoint.
DIRECTORY = "squall-batches"


@dataclass
class Attempt:
    """A task's run of a micro-batch, as its marks record it: whether an earlier run
    finished it (skip it) or began producing it (fail its roots after this run)."""

    directory: str
    task: int
    batch_id: int
    finished: bool
    resent: bool
    #: how many times the batch was started before without finishing (after :meth:`start`)
    again: int = 0

    def start(self) -> int:
        self.again = mark_started(self.directory, self.task, self.batch_id)
        return self.again

    @property
    def verdict(self) -> str:
        """Where the guardian names the input of a call that does not return."""
        return hung_path(self.directory, self.task, self.batch_id)

    def hung(self) -> tuple[int, float] | None:
        """What the guardian named on the last attempt (:func:`hung`)."""
        return hung(self.directory, self.task, self.batch_id)

    def producing(self) -> None:
        mark_producing(self.directory, self.task, self.batch_id)

    def done(self) -> None:
        mark_done(self.directory, self.task, self.batch_id)


def begin(directory: str, task: int, batch_id: int) -> Attempt:
    """``task``'s run of ``batch_id``, as the marks in ``directory`` know it."""
    finished = last_done(directory, task) >= batch_id
    return Attempt(directory, task, batch_id, finished,
                   not finished and last_producing(directory, task) == batch_id)


def beside(checkpoint: Path) -> str:
    """The marks' directory of the query checkpointed at ``checkpoint``."""
    return str(checkpoint / DIRECTORY)


def last_done(directory: str, task: int) -> int:
    """The highest batch id ``task`` finished (-1: none)."""
    return _read(Path(directory) / f"task-{task}")


def mark_done(directory: str, task: int, batch_id: int) -> None:
    _write(Path(directory), f"task-{task}", batch_id)
    (Path(directory) / f"hung-{task}-{batch_id}").unlink(missing_ok=True)


def hung_path(directory: str, task: int, batch_id: int) -> str:
    """Where the guardian leaves the input of ``task``'s call that did not return."""
    return str(Path(directory) / f"hung-{task}-{batch_id}")


def hung(directory: str, task: int, batch_id: int) -> tuple[int, float] | None:
    """The input (its index in the task's input; -1: a call on all of them) of the call that
    did not return on the batch's last attempt, and the deadline it outran; None: none."""
    try:
        index, deadline = Path(hung_path(directory, task, batch_id)).read_text().split()
        return int(index), float(deadline)
    except (OSError, ValueError):
        return None


def last_producing(directory: str, task: int) -> int:
    """The last batch id ``task`` started producing (-1: none)."""
    return _read(Path(directory) / f"producing-{task}")


def _read(path: Path) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return -1


def mark_started(directory: str, task: int, batch_id: int) -> int:
    """Note that ``task`` starts ``batch_id``; how many times it started it before without
    finishing it (0: the first time)."""
    d = Path(directory)
    try:
        got, before = (int(x) for x in (d / f"started-{task}").read_text().split())
    except (OSError, ValueError):
        got, before = -1, 0
    again = before + 1 if got == batch_id and last_done(directory, task) < batch_id else 0
    _write(d, f"started-{task}", batch_id, again)
    return again


def mark_producing(directory: str, task: int, batch_id: int) -> None:
    _write(Path(directory), f"producing-{task}", batch_id)


def _write(d: Path, name: str, *values: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{name}.{os.getpid()}"
    tmp.write_text(" ".join(map(str, values)))
    os.replace(tmp, d / name)
