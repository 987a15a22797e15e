"""The worker's spare bolts process (services/bolts/spare.py): started while the worker runs
no bolts job, it starts Spark at once, and the next job is handed to it (its flags in a
handoff file) instead of starting a process and a Spark session of its own."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from squall.handoff import hand_off
from squall.supervision import Command, Supervisor

log = logging.getLogger("squall.worker")

#: The spare's name among the children (no placement's key: those have dots).
SPARE = "spare"


class Spare:
    def __init__(self, sup: Supervisor, folder: Path, bootstrap: str, master: str,
                 env: Mapping[str, str]) -> None:
        self.sup, self.folder = sup, folder
        self.bootstrap, self.master, self.env = bootstrap, master, dict(env)
        self._started = 0  # each spare has a handoff file of its own

    def _handoff_file(self) -> Path:
        return self.folder / f"handoff-{self._started}.json"

    def start(self) -> None:
        """A bolts process that starts Spark now, for the next job."""
        self._started += 1
        path = self._handoff_file()
        path.unlink(missing_ok=True)  # an earlier run's
        self.sup.start(SPARE, Command("services.bolts.spare", (
            "--handoff-file", str(path), "--bootstrap-servers", self.bootstrap,
            "--master", self.master), env=self.env))

    def take(self, key: str, cmd: Command) -> bool:
        """Hand the bolts job ``cmd`` to the spare, if one runs; supervised as ``key``."""
        spare = self.sup.children.get(SPARE)
        if spare is None or not spare.alive():
            return False
        try:
            hand_off(self._handoff_file(), cmd.args)
        except OSError as e:  # the job starts as its own process instead
            log.warning("could not hand %s to the spare (%s); starting it anew", key, e)
            return False
        self.sup.adopt(SPARE, key, cmd)
        return True
