"""The worker's side of its tasks' lease (squall/core/control/lease.py): a round trip to
ZooKeeper every ``every_s``, and the lease file renewed from the time each was sent.

The session timeout is the one the worker asks for: an ensemble that grants less
(``maxSessionTimeout`` below it) would end sessions before the leases (docs/operations.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from squall import lease as lease_file
from squall.core.control.lease import NONE, deadline

log = logging.getLogger("squall.worker")


class LeaseRenewal(threading.Thread):
    def __init__(self, path: Path, zk: Callable[[], Any], session_timeout_s: float,
                 znode: str, clock: Callable[[], int] = time.monotonic_ns) -> None:
        super().__init__(daemon=True, name="lease")
        self.path, self.zk, self.znode, self.clock = path, zk, znode, clock
        self.timeout_ms = int(session_timeout_s * 1000)
        self.every_s = session_timeout_s / 6
        self.stop = threading.Event()
        self.lease = NONE
        self._failing = False
        self._write = threading.Lock()  # the worker's loop renews too, on registering

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.renew()

    def renew(self) -> bool:
        """One round trip; whether it renewed the lease."""
        zk = self.zk()
        if zk is None or not zk.connected:
            return False
        sent = self.clock()
        try:
            zk.exists(self.znode)
        except Exception as e:  # the connection went meanwhile: the next round tries again
            if not self._failing:
                log.warning("lease not renewed: ZooKeeper did not answer (%s)", e)
            self._failing = True
            return False
        self._failing = False
        if self.zk() is not zk:  # the session changed meanwhile: its answer says nothing
            return False
        with self._write:
            self.lease = self.lease.renewed(deadline(sent, self.timeout_ms))
            try:
                lease_file.write(self.path, self.lease)
            except OSError as e:  # the tasks hold until a write succeeds
                log.error("cannot write the tasks' lease %s: %s", self.path, e)
                return False
        return True
