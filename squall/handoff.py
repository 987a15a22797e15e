"""A job handed to a process that waits for it: the job's flags in a file.

The worker starts a spare bolts process ahead of any job (``services/bolts/spare.py``)
and later hands it the flags of the job it is to run. The file is written whole or not
at all (written aside, then renamed), so the waiting process never reads half of it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from squall.core.errors import ConfigError


def hand_off(path: Path, args: Sequence[str]) -> None:
    """Give the process waiting on ``path`` its job: ``args``, its flags."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(list(args)))
    os.replace(tmp, path)


def wait_for_handoff(path: Path, stop: threading.Event, every_s: float = 0.05
                     ) -> list[str] | None:
    """The flags handed over in ``path``, once they are there; None if stopped first."""
    while not stop.is_set():
        try:
            text = path.read_text()
        except FileNotFoundError:
            stop.wait(every_s)
            continue
        try:
            args = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"handoff file {path} is not JSON: {e}") from None
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"handoff file {path} holds {text[:200]!r}, not a list of flags")
        return args
    return None
