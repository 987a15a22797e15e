"""The bolts driver's watch over its queries: one that stopped, told by what its Python
worker raised; one whose micro-batch does not end, noticed on the wall clock and acted on.

Trees time out on the bolts' processed time, so a micro-batch that never ends would stop
every timeout with it, silently. A call into a bolt that does not return is the guardian's
(services/bolts/guardian.py: its worker is killed at the bolt deadline); this watches the
rest, from the driver: a micro-batch held by anything else (a database that does not answer,
Spark itself) is shown as its running time (``squall_bolt_batch_running_seconds``, which an
alert watches) and, past :func:`limit_s`, the job stops with that as its error, to be started
again by its worker (a crash loop, shown with the error, if it does not pass).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRACEBACK = "Traceback (most recent call last):"
#: An exception's own line in a Python traceback: ``module.Name: message``, unindented.
_RAISED = re.compile(r"^[A-Za-z_][\w.]*: .*$", re.MULTILINE)


def python_error(text: str) -> str:
    """What a query's failure says in a line: the exception its Python worker raised (the
    line after the traceback's frames), else its first line."""
    at = text.rfind(_TRACEBACK)
    if at >= 0:
        m = _RAISED.search(text, at + len(_TRACEBACK))
        if m:
            return m.group(0)
    return text.strip().splitlines()[0] if text.strip() else "(no message)"


def limit_s(deadline_s: float) -> float:
    """How long a micro-batch may run: ten bolt deadlines (a batch whose records kill or
    hang the bolt runs in parts, and may spend several deadlines finding them), at least
    five minutes."""
    return max(10 * deadline_s, 300.0)


@dataclass
class StallWatch:
    """One query's running micro-batch, as the driver's loop sees it every half second."""

    #: the last micro-batch that ended (its id), and since when the next one has been running
    ended: int | None = None
    since_s: float | None = None

    def observe(self, now_s: float, running: bool, last_ended: int | None) -> float:
        """How long the current micro-batch has run (0: none runs)."""
        if not running or last_ended != self.ended or self.since_s is None:
            self.ended = last_ended
            self.since_s = now_s if running else None
            return 0.0
        return now_s - self.since_s
