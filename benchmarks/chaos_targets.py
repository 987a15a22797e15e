"""Where the chaos suite aims: this run's processes (and only its own), the Spark driver
that holds the topology's lock, and the moment one of its tasks is producing."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from squall.demo import (
    NAME,
)
from squall.processes import child_pids

#: process kills, in turn: (fault, what its command line contains)
KILLS = (("spout", "-m services.spout"), ("acker", "-m services.acker"),
         ("bolts-driver", "org.apache.spark.deploy.SparkSubmit"), ("api", "-m services.api"))

def checkpoints(workdir: Path) -> Path:
    """The checkpoints of the run's one submission (its id is ``wordcount-N-seconds``)."""
    found = sorted((workdir / "checkpoints").glob(f"{NAME}-*"))
    return found[-1] if found else workdir / "checkpoints" / NAME


def active_driver(workdir: Path) -> list[int]:
    """The Spark driver JVM of the bolts job that holds the lock of the topology's bolts
    (not the warm standby's): the lock file, in the bolts worker's ``locks/``, names the
    job's process, the JVM is its child. The demo's one bolts worker runs them all in one
    job: one lock."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        found = sorted((workdir / "worker-bolts" / "locks").glob(f"{NAME}-*"))
        (lock,) = found[-1].glob("job.*.lock")
        job = int(lock.read_text().split()[0])
        return child_pids(job, KILLS[2][1])
    return []


def task_marks(workdir: Path) -> list[tuple[str, int]]:
    """The bolts job's tasks that have marked a batch (their marks directory, task)."""
    from services.bolts.batch_marks import DIRECTORY

    return [(str(marks), int(f.name.removeprefix("producing-")))
            for marks in checkpoints(workdir).glob(f"*/{DIRECTORY}")
            for f in marks.glob("producing-*")]


def producing_now(tasks: list[tuple[str, int]]) -> bool:
    """Whether one of ``tasks`` is between its first produce and its flush's end: it has
    marked a batch it is producing that is not marked done (services/bolts/batch_marks.py).
    A driver killed then leaves acks half sent: the hardest moment for its recovery."""
    from services.bolts.batch_marks import last_done, last_producing

    return any(last_producing(d, t) > last_done(d, t) for d, t in tasks)


def resent_batches(workdir: Path) -> int:
    """Micro-batches run again after a crash while they were producing (their roots
    failed at once): from the bolts jobs' logs."""
    return sum(log.read_text(errors="replace").count("while it was producing")
               for log in (workdir / "worker-bolts" / "logs").glob("*.log"))


def pids(pattern: str) -> list[int]:
    """This run's processes (descendants of this one) whose command line contains
    ``pattern``: another Squall on the machine (a benchmark, a second run) is not ours to
    kill, and a kill of its spout once passed for this run's."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if pattern in cmd and _descends(int(d.name), os.getpid()):
                out.append(int(d.name))
    return sorted(out)


def _descends(pid: int, root: int) -> bool:
    """Whether ``root`` is among ``pid``'s ancestors (from /proc's parent links)."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])  # after the command's parentheses
        if pid == root:
            return True
    return False


def await_producing(workdir: Path, timeout_s: float) -> bool:
    """Wait, looking every half millisecond, until a task of the bolts job produces."""
    deadline = time.monotonic() + timeout_s
    tasks = task_marks(workdir)
    while not producing_now(tasks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
        if not tasks:  # no batch produced yet
            tasks = task_marks(workdir)
    return True


def catch_producing(workdir: Path, caught: list[bool]) -> None:
    caught.append(await_producing(workdir, 10))
