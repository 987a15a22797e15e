"""The worker's lease (squall/core/control/lease.py) as a file its task processes read.

The worker writes the file (a deadline, one line, replaced atomically) and names it to its
children in ``SQUALL_LEASE_FILE``; a task process without it (run on its own, or by a
worker with a single ZooKeeper server, where no fence is armed) needs no lease.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from squall.core.control.lease import NONE, Lease, needs_read
from squall.core.errors import ConfigError

log = logging.getLogger("squall.lease")

#: The variable naming the lease file to a worker's task processes.
LEASE_FILE_ENV = "SQUALL_LEASE_FILE"


def write(path: Path, lease: Lease) -> None:
    """Replace the lease file (readers see the old deadline or the new one, never a part)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(lease.encode())
    os.replace(tmp, path)


class LeaseCheck:
    """A task process's view of its worker's lease: reads the file only once the deadline it
    knows has passed."""

    def __init__(self, path: Path, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.path = path
        self.clock = clock
        self._known = NONE
        self._held = False  # a hold is logged once, when it starts

    def holds(self) -> bool:
        now = self.clock()
        if needs_read(self._known, now):
            try:
                self._known = self._known.renewed(Lease.decode(self.path.read_bytes())
                                                  .deadline_ns)
            except (OSError, ConfigError) as e:
                log.warning("cannot read the worker's lease %s (%s): holding", self.path, e)
        ok = self._known.holds(now)
        if ok and self._held:
            log.warning("the worker's lease holds again: going on")
        elif not ok and not self._held:
            log.error("the worker's lease ran out (%s): committing, emitting and running "
                      "nothing until it is renewed (a task that moved meanwhile is killed "
                      "by the worker)", self.path)
        self._held = not ok
        return ok

    def wait(self, stop: threading.Event, every_s: float = 0.05) -> bool:
        """Until the lease holds (True) or ``stop`` (False)."""
        while not self.holds():
            if stop.wait(every_s):
                return False
        return True


class NoLease:
    """What a task process run without a worker's lease checks: nothing."""

    def holds(self) -> bool:
        return True

    def wait(self, stop: threading.Event, every_s: float = 0.05) -> bool:
        return not stop.is_set()


def from_environment(env: Mapping[str, str] = os.environ) -> LeaseCheck | NoLease:
    return check(env.get(LEASE_FILE_ENV, ""))


def check(path: str) -> LeaseCheck | NoLease:
    """The check of the lease file ``path`` ("": none)."""
    return LeaseCheck(Path(path)) if path else NoLease()
