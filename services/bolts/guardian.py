"""The bolt deadline on Spark's Python workers: a watcher process kills a worker whose bolt
has been in one call past it.

A worker notes, in a small memory map it shares with the watcher, that its bolt is running
a micro-batch (which task, since when) and notes each call into the bolt there; a process
of its own (started with the worker's first bolt task, ``python -m
services.bolts.guardian``) reads it every tenth of a second and kills the worker once no
call has begun for the deadline: a call has not returned. A large micro-batch whose calls
keep returning is never killed. A watcher outside the worker sees a worker that holds the
interpreter's lock for ever (a loop in C, a lock taken with it held) as well as one that
sleeps. Spark then runs the task again, and its second attempt runs the micro-batch in
parts in sandboxes (services/bolts/isolation.py), where the call that hangs is named. The
watcher ends with its worker.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the watcher's own process imports nothing heavier than the stdlib
    from squall.core.tasks.exec_result import CallWatch

#: ``phase, since_ns, deadline_ns``, then the running task's name and where to write a
#: verdict (UTF-8, NUL-padded); then the count of calls on all inputs and the input of the
#: last call.
_FIELDS = struct.Struct("<qqq")
_LABEL = 240
_VERDICT = _FIELDS.size + _LABEL
_PATH = 1024
_CALLS = _VERDICT + _PATH
_SIZE = _CALLS + 16
IDLE, EXECUTING = 0, 1
#: How often the watcher looks.
TICK_S = 0.1


class Guard:
    """The worker's side: one per process, its watcher started with it."""

    def __init__(self) -> None:
        # Unlinked at once, shared by its descriptor: nothing is left behind in the temp
        # directory however the worker and its watcher end (a job killed whole, say).
        fd, path = tempfile.mkstemp(prefix=f"squall-guard-{os.getpid()}-")
        os.unlink(path)
        try:
            os.ftruncate(fd, _SIZE)
            self.memory = mmap.mmap(fd, _SIZE)
            self.calls = Calls(memoryview(self.memory)[_CALLS:].cast("q"))
            self.watcher = subprocess.Popen(
                [sys.executable, "-m", "services.bolts.guardian", "--pid", str(os.getpid()),
                 "--journal-fd", str(fd)], stdin=subprocess.DEVNULL, pass_fds=(fd,))
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def executing(self, label: str, deadline_s: float, verdict: str = ""
                  ) -> Iterator[CallWatch]:
        """The body runs bolt code under the deadline; it gives the watch it yields to the
        executor, which tells it of each call. ``verdict``: where the watcher writes the
        input of the call that did not return, and the deadline, if it kills the worker."""
        path = verdict.encode()
        if len(path) > _PATH:
            path = b""  # a verdict is a shortcut: without one, the sandboxes find the input
        self.memory[_FIELDS.size:_VERDICT] = label.encode()[:_LABEL].ljust(_LABEL, b"\0")
        self.memory[_VERDICT:_CALLS] = path.ljust(_PATH, b"\0")
        _FIELDS.pack_into(self.memory, 0, EXECUTING, time.monotonic_ns(), int(deadline_s * 1e9))
        try:
            yield self.calls
        finally:
            _FIELDS.pack_into(self.memory, 0, IDLE, 0, 0)


class Calls:
    """Notes the input of each call into the bolt, and counts the calls on all inputs (a
    :class:`~squall.core.tasks.executor.CallWatch`)."""

    __slots__ = ("count",)

    def __init__(self, count: memoryview) -> None:
        self.count = count

    def enter(self, index: int) -> None:
        # A per-tuple run's inputs count up, so a new index is a new call; only the calls
        # on all inputs (a window's, a batch bolt's) need the count (one store a call).
        if index < 0:
            self.count[0] += 1
        self.count[1] = index

    def leave(self) -> None:
        pass


_GUARDS: dict[int, Guard] = {}


def guard() -> Guard:
    """This process's guard (a forked child gets its own: the pid tells them apart)."""
    g = _GUARDS.get(os.getpid())
    if g is None:
        g = _GUARDS[os.getpid()] = Guard()
    return g


def watch(pid: int, journal_fd: int) -> int:
    """Until ``pid`` is gone: kill it once its bolt runs past its deadline."""
    memory = mmap.mmap(journal_fd, _SIZE)
    os.close(journal_fd)
    calls, moved = (-1, -1), 0
    try:
        while _alive(pid):
            phase, since, deadline = _FIELDS.unpack_from(memory, 0)
            now = time.monotonic_ns()
            count, index = struct.unpack_from("<qq", memory, _CALLS)
            if (count, index) != calls:  # a call began since the last look: the bolt moves
                calls, moved = (count, index), now
            if phase == EXECUTING and now - max(since, moved) > deadline:
                label = bytes(memory[_FIELDS.size:_VERDICT]).rstrip(b"\0").decode(
                    errors="replace")
                _verdict(bytes(memory[_VERDICT:_CALLS]).rstrip(b"\0").decode(errors="replace"),
                         index, deadline / 1e9)
                print(f"squall guardian: {label}: the bolt did not return within "
                      f"{deadline / 1e9:g} s; its Python worker {pid} is killed (Spark runs "
                      "the micro-batch again, in parts, to find the record)",
                      file=sys.stderr, flush=True)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                return 0
            time.sleep(TICK_S)
        return 0
    finally:
        memory.close()


def _verdict(path: str, index: int, deadline_s: float) -> None:
    """The input whose call did not return (-1: a call on all of them), for the task's next
    attempt (services/bolts/batch_marks.py); written whole, or not at all."""
    if not path:
        return
    with contextlib.suppress(OSError):
        tmp = f"{path}.{os.getpid()}"
        Path(tmp).write_text(f"{index} {deadline_s!r}")
        os.replace(tmp, path)


def _alive(pid: int) -> bool:
    """Whether the worker (this watcher's parent) lives: once it died, even as a zombie not
    reaped yet, the watcher has another parent."""
    return os.getppid() == pid


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m services.bolts.guardian",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--pid", type=int, required=True, help="the Python worker to watch")
    p.add_argument("--journal-fd", type=int, required=True,
                   help="the open descriptor of the memory the worker shares with it")
    a = p.parse_args(argv)
    return watch(a.pid, a.journal_fd)


if __name__ == "__main__":
    sys.exit(main())
