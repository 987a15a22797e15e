"""The errors a process reports, kept for Storm UI's ``lastError`` and ``componentErrors``.

Storm's executors report exceptions (``collector.reportError``); Nimbus keeps the last
few per component and the UI shows the last one with its time, host and port. Here each
process keeps its last :data:`KEEP` per component in memory and serves them as JSON
beside its metrics (``/errors``); the API reads them with its scrapes and adds the host and
port it scraped. A process that restarts starts with none, as its counters do.

Pure: times are passed in (milliseconds). Parsing what a process served is strict: a
malformed document is an error naming what is wrong, never a crash of the reader.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from squall.core.control.client_properties import scrub
from squall.core.errors import WireFormatError

#: Errors kept per component (Storm's UI shows the last 10 as well).
KEEP = 10
#: An error's text is cut to this many characters (a stack trace can be long).
MAX_CHARS = 2000


@dataclass(frozen=True)
class ErrorReport:
    component: str
    error: str
    time_ms: int
    task: int = -1

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "error": self.error, "time_ms": self.time_ms,
                "task": self.task}


class ErrorReports:
    """A process's last errors per component (thread-safe: the HTTP server reads them)."""

    def __init__(self, keep: int = KEEP, secrets: list[str] | None = None) -> None:
        self._keep = keep
        self._secrets = secrets or []  # Kafka client secrets, never shown
        self._by_component: dict[str, deque[ErrorReport]] = {}
        self._lock = threading.Lock()

    def report(self, component: str, error: str, time_ms: int, task: int = -1) -> None:
        rep = ErrorReport(component, scrub(error, self._secrets)[:MAX_CHARS], time_ms, task)
        with self._lock:
            self._by_component.setdefault(component, deque(maxlen=self._keep)).append(rep)

    def all(self) -> list[ErrorReport]:
        """Every kept error, oldest first."""
        with self._lock:
            out = [r for d in self._by_component.values() for r in d]
        return sorted(out, key=lambda r: r.time_ms)

    def to_json(self) -> bytes:
        return json.dumps({"errors": [r.to_dict() for r in self.all()]}).encode()


def parse_reports(raw: bytes) -> list[ErrorReport]:
    """What a process served at ``/errors``; :class:`WireFormatError` naming the fault."""
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise WireFormatError(f"an error report is not JSON ({e}): {raw[:80]!r}") from None
    items = doc.get("errors") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise WireFormatError(f"an error report has no 'errors' list: {raw[:80]!r}")
    out = []
    for i, d in enumerate(items):
        if not isinstance(d, dict):
            raise WireFormatError(f"error report {i} is not an object: {d!r:.80}")
        comp, err, t, task = d.get("component"), d.get("error"), d.get("time_ms"), \
            d.get("task", -1)
        if not isinstance(comp, str) or not isinstance(err, str) \
                or not isinstance(t, int) or isinstance(t, bool) \
                or not isinstance(task, int) or isinstance(task, bool):
            raise WireFormatError(f"error report {i} needs component and error (strings), "
                                  f"time_ms and task (integers): {d!r:.120}")
        out.append(ErrorReport(comp, err[:MAX_CHARS], t, task))
    return out
