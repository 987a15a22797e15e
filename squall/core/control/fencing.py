"""When a worker cut off from a service its tasks need stops them: before ZooKeeper can
give them to another worker, so that no task runs on two hosts at once.

ZooKeeper ends a session its servers have not heard from for the session timeout, and the
leader then moves the worker's tasks. The client notices a lost connection after about two
thirds of that timeout (no answer to its pings) and may win it back within the same
session, from another server of the ensemble. So a worker waits ``grace_ms`` after its
connection is lost (long enough to move to another server), then pauses its task processes,
before its session can end, and starts nothing until it is connected again: back in the same
session it resumes them; once its session ended it kills them. It ended when ZooKeeper says
so on reconnecting, or at the latest one session timeout after the loss was noticed (the
servers last heard from it before that): a paused process still holds what it held (the
bolts job's lock on its checkpoints), and the worker given its tasks must not wait for the
cut to heal. The same rule, with a grace of its own, tells a worker cut off from Kafka when
to give its tasks up (services/worker/kafka_watch.py). That grace outlasts a broker's
failover, which holds every worker's writes at once; a worker that sees other workers' writes
acknowledged while its own are not (:func:`others_acknowledged`) knows the cut is its own,
and gives its tasks up after a shorter one. Pure: the worker tells it what it saw and when
(:class:`WorkerFences`).

Without a grace (``None``) the tasks run on while ZooKeeper is away: the choice for a single
ZooKeeper server, whose restart would otherwise stop every task of the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from squall.core.errors import ConfigError


@dataclass
class Fence:
    #: how long a lost connection is waited out before the tasks stop (None: never)
    grace_ms: int | None = None
    #: when the connection was lost (None: connected)
    lost_at_ms: int | None = None
    #: the tasks were stopped for this disconnection
    fenced: bool = False
    #: how long after the loss the session has surely ended (None: when told so)
    session_ms: int | None = None
    #: the session was taken as ended for this disconnection
    timed_out: bool = False

    def disconnected(self, now_ms: int) -> None:
        if self.lost_at_ms is None:
            self.lost_at_ms = now_ms

    def connected(self) -> None:
        self.lost_at_ms, self.fenced, self.timed_out = None, False, False

    def expired(self, now_ms: int) -> bool:
        """Whether the session has surely ended by now, once per disconnection."""
        return (self.session_ms is not None and self.lost_at_ms is not None
                and not self.timed_out and now_ms - self.lost_at_ms >= self.session_ms)

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


#: Rounds of a peer's probe that must be acknowledged after this worker's unacknowledged
#: one was sent: the second of them was sent after the first was acknowledged, so after
#: this worker's writes were (a round finished just after them may have been sent before).
PEER_ROUNDS = 2


def others_acknowledged(before: Mapping[str, tuple[int, int]],
                        after: Mapping[str, tuple[int, int]]) -> bool:
    """Whether some other worker got :data:`PEER_ROUNDS` probes acknowledged between two
    readings of their counts (``worker -> (incarnation, acknowledged rounds)``, the first
    taken before this worker sent its own unacknowledged probe). A worker seen in one
    reading only, or under another incarnation (it restarted), says nothing."""
    for worker, (incarnation, rounds) in after.items():
        seen = before.get(worker)
        if seen is not None and seen[0] == incarnation and rounds - seen[1] >= PEER_ROUNDS:
            return True
    return False


class Kill(Enum):
    """Why a worker kills its task processes."""

    SESSION_ENDED = "its ZooKeeper session ended"
    SESSION_TIMED_OUT = "cut off from ZooKeeper for a whole session timeout (its session " \
        "has ended)"
    KAFKA = "cut off from Kafka"


@dataclass(frozen=True)
class Decision:
    """What a worker does with its task processes now."""

    pause: bool = False
    #: back in the same session: the paused ones go on
    resume: bool = False
    kill: Kill | None = None
    #: leave the cluster (cut off from Kafka), so that the leader moves the units
    withdraw: bool = False
    #: whether task processes may be started now
    may_start: bool = True
    #: how long the connection this is about has been lost (ms)
    lost_for_ms: int = 0
    #: withdrawn while other workers' writes to Kafka were acknowledged
    alone: bool = False


class WorkerFences:
    """A worker's ZooKeeper fence and Kafka fence together: what it saw, in, what to do with
    its tasks, out (:meth:`decide`, each round of its loop).

    Rules, besides each fence's own: a pause is for ZooKeeper alone (a worker cut off from
    Kafka, or whose session ended, kills instead); a resume follows a reconnection in the
    same session, never a session that ended; ZooKeeper's fence is spent by a pause or a
    kill for ZooKeeper's sake, not by one for Kafka's (a later cut must still pause). Kafka's
    fence is due after ``kafka_alone_ms`` instead of its grace while the last probe's word was
    that others' writes were acknowledged and this worker's were not."""

    def __init__(self, zk_grace_ms: int | None, kafka_grace_ms: int | None,
                 session_ms: int | None = None, kafka_alone_ms: int | None = None) -> None:
        self.zk = Fence(zk_grace_ms, session_ms=None if zk_grace_ms is None else session_ms)
        self.kafka = Fence(kafka_grace_ms)
        self.kafka_alone_ms = kafka_alone_ms
        self._alone = False
        self.paused = False
        self._ended = False
        self._resume = False

    def zookeeper(self, state: str, now_ms: int) -> None:
        """kazoo's connection state: ``CONNECTED``, ``SUSPENDED`` or ``LOST``."""
        if state == "LOST":
            self._ended = True
        if state == "CONNECTED":
            self._resume = self.paused
            self.zk.connected()
        else:
            self.zk.disconnected(now_ms)

    def ending(self) -> bool:
        """Whether a session's end was seen that :meth:`decide` has not acted on yet."""
        return self._ended

    def kafka_reachable(self, reachable: bool, sent_ms: int, others: bool = False) -> None:
        """A probe's outcome: ``sent_ms`` is when its writes were sent, so that a cut's
        grace runs from the first write left unacknowledged; ``others``: other workers' writes
        were acknowledged meanwhile (:func:`others_acknowledged`)."""
        self._alone = others and not reachable
        if reachable:
            self.kafka.connected()
        else:
            self.kafka.disconnected(sent_ms)

    def _kafka_due(self, now_ms: int) -> tuple[bool, bool]:
        """Whether Kafka's fence is due, and whether for the cut being this worker's alone."""
        k = self.kafka
        if k.due(now_ms):
            return True, self._alone
        alone = (self._alone and self.kafka_alone_ms is not None and k.grace_ms is not None
                 and k.lost_at_ms is not None and not k.fenced
                 and now_ms - k.lost_at_ms >= self.kafka_alone_ms)
        return alone, alone

    def decide(self, now_ms: int) -> Decision:
        timed_out = self.zk.expired(now_ms)
        ended, self._ended = self._ended or timed_out, False
        resume, self._resume = self._resume and not ended, False
        kafka_due, alone = self._kafka_due(now_ms)
        may_start = self.zk.may_start() and self.kafka.may_start()
        if self.zk.due(now_ms) and not ended and not kafka_due:
            self.zk.stopped()
            self.paused = True
            return Decision(pause=True, may_start=False,
                            lost_for_ms=_since(self.zk.lost_at_ms, now_ms))
        if resume:
            self.paused = False
        if not (ended or kafka_due):
            return Decision(resume=resume, may_start=may_start)
        self.paused = False
        if kafka_due:
            self.kafka.stopped()
        if ended:
            self.zk.stopped()
        if timed_out:
            self.zk.timed_out = True
        kill = Kill.KAFKA if kafka_due else \
            Kill.SESSION_TIMED_OUT if timed_out else Kill.SESSION_ENDED
        lost_at = self.kafka.lost_at_ms if kafka_due else self.zk.lost_at_ms
        return Decision(resume=resume, kill=kill, withdraw=kafka_due, may_start=may_start,
                        lost_for_ms=_since(lost_at, now_ms), alone=alone and kafka_due)


def _since(at_ms: int | None, now_ms: int) -> int:
    return 0 if at_ms is None else now_ms - at_ms
