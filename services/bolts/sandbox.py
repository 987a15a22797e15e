"""Bolt code run in processes of its own, with a deadline on each call into it.

A child is forked from the Python worker for each part of a micro-batch under suspicion
(services/bolts/isolation.py). It writes, in memory shared with the worker, which input the
bolt is being called on and since when (a :class:`~squall.core.tasks.executor.CallWatch`); the
worker reaps it, or kills it once a call has run past the deadline. The child's result comes
back through a file, pickled; the child touches no Kafka client or database connection of
the worker's (it builds its own bolt) and leaves through ``os._exit``, so nothing of the
worker's (buffers, sockets, ``atexit``) runs twice.

What a child's end says:
- it returned: :class:`Completed`;
- it died or hung in a call on the bolt (or in the framework between calls): :class:`Died`,
  with the input being called (None: a call on all of them, or between calls) and why;
- it died, hung or raised while the bolt was being built (``prepare``) or outside any call:
  :class:`Fault`, not a record's doing.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from squall.core.tasks.exec_result import ALL_INPUTS, CallWatch
from squall.processes import die_with_parent

#: What a child is doing, as its journal says.
PREPARING, CALLING, BETWEEN, RETURNING = 1, 2, 3, 4
#: How often the worker looks at its children.
POLL_S = 0.002


@dataclass(frozen=True)
class Completed:
    value: Any


@dataclass(frozen=True)
class Died:
    #: the unit of the input being called (None: all of them, or between calls)
    unit: int | None
    reason: str


@dataclass(frozen=True)
class Fault:
    reason: str


Outcome = Completed | Died | Fault


class _Watch:
    """The child's side of the journal: ``[phase, unit, since_ns]``."""

    __slots__ = ("j", "units")

    def __init__(self, journal: memoryview, units: Sequence[int]) -> None:
        self.j, self.units = journal, units

    def enter(self, index: int) -> None:
        j = self.j
        j[1] = self.units[index] if index != ALL_INPUTS else -1
        j[2] = time.monotonic_ns()
        j[0] = CALLING

    def leave(self) -> None:
        self.j[2] = time.monotonic_ns()
        self.j[0] = BETWEEN


@dataclass
class _Child:
    pid: int
    key: int
    journal: memoryview
    memory: mmap.mmap
    path: str


class Sandbox:
    """Children of this process running bolt code; ``deadline_s`` bounds each call (and the
    building of the bolt). ``what`` names the bolt task in reasons."""

    def __init__(self, deadline_s: float, what: str) -> None:
        self.deadline_ns = int(deadline_s * 1e9)
        self.deadline_s = deadline_s
        self.what = what
        self._children: dict[int, _Child] = {}

    def start(self, key: int, work: Callable[[CallWatch], Any], units: Sequence[int]) -> None:
        """Fork a child running ``work(watch)``; ``units[i]``: the unit of input ``i``."""
        memory = mmap.mmap(-1, 24)  # shared with the child: MAP_SHARED | MAP_ANONYMOUS
        journal = memoryview(memory).cast("q")
        journal[0], journal[1], journal[2] = PREPARING, -1, time.monotonic_ns()
        fd, path = tempfile.mkstemp(prefix="squall-sandbox-")
        os.close(fd)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its end is what the tests look at
            _child(journal, path, work, units)
        self._children[pid] = _Child(pid, key, journal, memory, path)

    def wait(self) -> list[tuple[int, Outcome]]:
        """Block until at least one child ended; each ended child's key and outcome."""
        while self._children:
            ended = []
            now = time.monotonic_ns()
            for c in list(self._children.values()):
                try:
                    pid, status = os.waitpid(c.pid, os.WNOHANG)
                except ChildProcessError:  # reaped by someone else: judge by its result
                    pid, status = c.pid, None
                if pid == c.pid:
                    ended.append((c.key, self._ended(c, status)))
                elif now - c.journal[2] > self.deadline_ns:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(c.pid, signal.SIGKILL)
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(c.pid, 0)
                    ended.append((c.key, self._judged(
                        c, f"did not return within {self.deadline_s:g} s")))
            if ended:
                return ended
            time.sleep(POLL_S)
        return []

    def close(self) -> None:
        """Kill every child still running."""
        for c in list(self._children.values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(c.pid, 0)
            self._forget(c)

    def _ended(self, c: _Child, status: int | None) -> Outcome:
        try:
            with open(c.path, "rb") as f:
                raw = f.read()
            got = pickle.loads(raw) if raw else None
        except (OSError, pickle.UnpicklingError, EOFError) as e:
            got = None
            if status == 0:
                self._forget(c)
                return Fault(f"{self.what}: its result could not be read back: {e}")
        code = None if status is None else os.waitstatus_to_exitcode(status)
        if got is not None and code in (0, None):
            self._forget(c)
            ok, value = got
            return Completed(value) if ok else Fault(f"{self.what}: {value}")
        if got is not None:  # raised past the bolt in a call (SystemExit and the like)
            return self._judged(c, f"raised {got[1]}")
        if c.journal[0] == RETURNING and code is not None:
            self._forget(c)
            return Fault(f"{self.what}: a sandbox could not hand its result back (it ended "
                         f"with {_status(code)})")
        return self._judged(c, _killed(code))

    def _judged(self, c: _Child, reason: str) -> Outcome:
        phase, unit = c.journal[0], c.journal[1]
        self._forget(c)
        if phase == CALLING:
            return Died(None if unit < 0 else unit, reason)
        if phase == BETWEEN:
            return Died(None, reason)
        if phase == RETURNING:
            return Fault(f"{self.what}: a sandbox handing its result back {reason}")
        return Fault(f"{self.what}: the bolt's prepare {reason}")

    def _forget(self, c: _Child) -> None:
        self._children.pop(c.pid, None)
        with contextlib.suppress(OSError):
            os.unlink(c.path)
        c.journal.release()
        c.memory.close()


def _killed(code: int | None) -> str:
    if code is None:
        return "ended the bolt's Python process (its status is unknown)"
    return f"killed the bolt's Python process ({_status(code)})"


def _status(code: int) -> str:
    """An exit status as a reader knows it: ``exit 17``, ``SIGSEGV``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-code).name
        return f"signal {-code}"
    return f"exit {code}"


def _child(journal: memoryview, path: str, work: Callable[[CallWatch], Any],
           units: Sequence[int]) -> None:  # pragma: no cover - runs in the child
    code = 0
    try:
        die_with_parent()
        try:
            payload: tuple[bool, Any] = (True, work(_Watch(journal, units)))
        except BaseException as e:  # every end is reported to the worker
            if journal[0] == CALLING:  # out of the bolt, past the executor: a record's doing
                payload, code = (False, f"{type(e).__name__}: {e}"), 3
            else:
                payload = (False, "".join(traceback.format_exception(e)).strip()[-2000:])
        if journal[0] != CALLING:
            journal[2], journal[0] = time.monotonic_ns(), RETURNING
        with open(path, "wb") as f:
            pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # the result could not be written (the phase says so)
        code = 70
    finally:
        os._exit(code)
