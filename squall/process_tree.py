"""A process and its descendants as /proc shows them: CPU, resident memory, open files, and
the role each plays in a bolts job (its Spark JVM, Spark's Python workers, the driver).

One reader for the bolts job's exported process metrics (services/bolts/process_metrics.py)
and the benchmarks' CPU and memory figures.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    #: user + system CPU, its own and its reaped children's
    cpu_s: float
    rss_bytes: int
    cmdline: str

    @property
    def role(self) -> str:
        """``jvm`` (Spark's), ``python_worker`` (Spark's Python daemon and the workers it
        forks), or ``driver`` (anything else: the bolts job's own Python)."""
        exe = self.cmdline.split(" ", 1)[0]
        if exe.endswith("java"):
            return "jvm"
        return "python_worker" if "pyspark" in self.cmdline else "driver"

    def open_fds(self) -> int | None:
        try:
            return sum(1 for _ in (PROC / str(self.pid) / "fd").iterdir())
        except OSError:  # gone, or not ours to read
            return None


def snapshot(proc: Path = PROC) -> dict[int, Proc]:
    """Every process this machine shows, by pid (those that vanish while read are left out)."""
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    out: dict[int, Proc] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            # The command name (field 2) may hold spaces and parentheses: split after it.
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        out[int(d.name)] = Proc(int(d.name), int(f[1]), sum(int(x) for x in f[11:15]) / tick,
                                int(f[21]) * page, cmd.strip())
    return out


def tree(pid: int, procs: dict[int, Proc] | None = None) -> list[Proc]:
    """``pid`` and its descendants, ``pid`` first (empty if it is gone)."""
    procs = snapshot() if procs is None else procs
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out: list[Proc] = []
    todo = [pid]
    while todo:
        at = todo.pop()
        if at in procs:
            out.append(procs[at])
            todo += children.get(at, [])
    return out


def cpu_s(procs: Iterable[Proc]) -> float:
    return sum(p.cpu_s for p in procs)


def rss_bytes(procs: Iterable[Proc]) -> int:
    return sum(p.rss_bytes for p in procs)
