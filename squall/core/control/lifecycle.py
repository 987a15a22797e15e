"""The topology lifecycle: Nimbus's state machine, pure, with time passed in.

| from | event | to |
|---|---|---|
| ACTIVE | deactivate | INACTIVE |
| INACTIVE | activate | ACTIVE |
| ACTIVE / INACTIVE | rebalance(wait) | REBALANCING, back to the previous state after the wait |
| any but KILLED | kill(wait) | KILLED, removed after the wait (and its state, if asked) |

Spouts emit only while ACTIVE, so kill and rebalance let in-flight trees drain
during their wait. Repeating the current state's own event (activate an active
topology) is a no-op, as in Storm; killing a killed topology restarts its wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from squall.core.errors import ConflictError, TopologyError


class Status(StrEnum):
    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"
    REBALANCING = "REBALANCING"
    KILLED = "KILLED"


@dataclass(frozen=True)
class Lifecycle:
    """Where a topology is in its life; ``deadline_ms`` ends a rebalance or kill wait."""

    status: Status = Status.ACTIVE
    previous: Status | None = None  # the state a rebalance returns to
    deadline_ms: int | None = None
    # A rebalance's new parallelism (component -> tasks), applied when its wait ends.
    parallelism: dict[str, int] = field(default_factory=dict)
    # A kill's: its teardown deletes the topology's state and dead letters too.
    purge_state: bool = False

    # ----- queries -------------------------------------------------------

    @property
    def spouts_emit(self) -> bool:
        return self.status is Status.ACTIVE

    def due(self, now_ms: int) -> bool:
        return self.deadline_ms is not None and now_ms >= self.deadline_ms

    # ----- events --------------------------------------------------------

    def activate(self) -> Lifecycle:
        if self.status in (Status.ACTIVE, Status.INACTIVE):
            return replace(self, status=Status.ACTIVE)
        raise ConflictError(f"cannot activate a {self.status} topology")

    def deactivate(self) -> Lifecycle:
        if self.status in (Status.ACTIVE, Status.INACTIVE):
            return replace(self, status=Status.INACTIVE)
        raise ConflictError(f"cannot deactivate a {self.status} topology")

    def rebalance(self, now_ms: int, wait_s: float,
                  parallelism: dict[str, int] | None = None) -> Lifecycle:
        if self.status not in (Status.ACTIVE, Status.INACTIVE):
            raise ConflictError(f"cannot rebalance a {self.status} topology")
        _check_wait(wait_s)
        for name, n in (parallelism or {}).items():
            if not 1 <= n <= 1024:
                raise TopologyError(f"rebalance: parallelism of {name!r} must be 1..1024, "
                                    f"got {n}")
        return Lifecycle(Status.REBALANCING, self.status, now_ms + int(wait_s * 1000),
                         dict(parallelism or {}))

    def kill(self, now_ms: int, wait_s: float, purge_state: bool = False) -> Lifecycle:
        _check_wait(wait_s)
        return Lifecycle(Status.KILLED, None, now_ms + int(wait_s * 1000),
                         purge_state=purge_state)

    def finish_rebalance(self) -> Lifecycle:
        """The wait is over: back to the state the rebalance started from."""
        if self.status is not Status.REBALANCING:
            raise ConflictError(f"no rebalance in progress ({self.status})")
        return Lifecycle(self.previous or Status.ACTIVE)

    # ----- persistence ---------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"status": str(self.status), "previous": self.previous and str(self.previous),
                "deadline_ms": self.deadline_ms, "parallelism": dict(self.parallelism),
                "purge_state": self.purge_state}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Lifecycle:
        prev = d.get("previous")
        return cls(Status(d["status"]), Status(prev) if prev else None, d.get("deadline_ms"),
                   dict(d.get("parallelism") or {}), bool(d.get("purge_state", False)))


def _check_wait(wait_s: float) -> None:
    if not 0 <= wait_s <= 86_400:
        raise TopologyError(f"wait time must be 0..86400 seconds, got {wait_s}")


def apply(state: Lifecycle, event: str, now_ms: int, wait_s: float = 0.0,
          parallelism: dict[str, int] | None = None, purge_state: bool = False) -> Lifecycle:
    """Apply a named event (the REST verbs): activate, deactivate, rebalance, kill."""
    if event == "activate":
        return state.activate()
    if event == "deactivate":
        return state.deactivate()
    if event == "rebalance":
        return state.rebalance(now_ms, wait_s, parallelism)
    if event == "kill":
        return state.kill(now_ms, wait_s, purge_state)
    raise TopologyError(f"unknown topology operation {event!r}")
