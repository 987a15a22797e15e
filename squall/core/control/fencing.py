"""When a worker cut off from a service its tasks need stops them: before ZooKeeper can
give them to another worker, so that no task runs on two hosts at once.

ZooKeeper ends a session its servers have not heard from for the session timeout, and the
leader then moves the worker's tasks. The client notices a lost connection after about two
thirds of that timeout (no answer to its pings) and may win it back within the same
session, from another server of the ensemble. So a worker waits ``grace_ms`` after its
connection is lost (long enough to move to another server), then pauses its task processes,
before its session can end, and starts nothing until it is connected again: back in the same
session it resumes them, its session ended it kills them. The same rule, with a grace of its
own, tells a worker cut off from Kafka when to give its tasks up
(services/worker/kafka_watch.py). Pure: the worker tells it what it saw and when.

Without a grace (``None``) the tasks run on while ZooKeeper is away: the choice for a single
ZooKeeper server, whose restart would otherwise stop every task of the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from squall.core.errors import ConfigError


@dataclass
class Fence:
    #: how long a lost connection is waited out before the tasks stop (None: never)
    grace_ms: int | None = None
    #: when the connection was lost (None: connected)
    lost_at_ms: int | None = None
    #: the tasks were stopped for this disconnection
    fenced: bool = False

    def disconnected(self, now_ms: int) -> None:
        if self.lost_at_ms is None:
            self.lost_at_ms = now_ms

    def connected(self) -> None:
        self.lost_at_ms, self.fenced = None, False

    def due(self, now_ms: int) -> bool:
        """Whether the tasks must be stopped now."""
        return (self.grace_ms is not None and self.lost_at_ms is not None and not self.fenced
                and now_ms - self.lost_at_ms >= self.grace_ms)

    def stopped(self) -> None:
        self.fenced = True

    def may_start(self) -> bool:
        """Whether task processes may be started (or restarted) now."""
        return self.grace_ms is None or self.lost_at_ms is None


def check_grace(grace_s: float | None, session_timeout_s: float) -> None:
    """A grace that leaves no time to stop the tasks before the session can end is refused:
    the connection is noticed lost after about two thirds of the session timeout."""
    if grace_s is not None and grace_s >= session_timeout_s / 3:
        raise ConfigError(
            f"fence_after_s {grace_s} must be under a third of the ZooKeeper session timeout "
            f"({session_timeout_s} s): the lost connection is noticed after about two thirds "
            "of it, and the tasks must stop before the session can end")
