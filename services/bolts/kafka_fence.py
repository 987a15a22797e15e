"""A bolt task on an executor whose host is cut off from Kafka gives its Spark task up, so
that the task runs on another executor.

A task waits on Kafka when its range read brings nothing (services/bolts/edges.py) or its
flush is not confirmed. Waiting is right while Kafka is slow or a broker is failing over,
and wrong on a host that can no longer reach the brokers: the read would wait until the cut
heals, and Spark would retry the task where it failed. So a waiting task probes whether its
process can get a write acknowledged (squall/kafka_reach.py, the test a worker's Kafka
fence uses); once none has been for the grace, the task fails with :data:`MARKER` in its
error, and the driver removes its executor from the application
(services/bolts/runtime/java/ExecutorFence.java). The grace outlasts a broker's failover
(about 15 s, services/worker/kafka_watch.py), so a broker's death gives nothing up.

Only in a cluster the driver fences (it sets :data:`GRACE_ENV` for its executors): in local
mode there is no other executor to move to, and a task waits as long as it takes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from squall.core.control.fencing import Fence
from squall.core.errors import KafkaUnavailable
from squall.kafka_clients import from_environment
from squall.kafka_reach import Reach

#: What a task's error says for the driver to act on (ExecutorFence.MARKER).
MARKER = "squall: executor cut off from Kafka"
#: The executors' grace in seconds, set by the driver (services/bolts/runtime/session.py).
GRACE_ENV = "SQUALL_EXECUTOR_KAFKA_FENCE_S"
#: How often a waiting task probes, and how long a probe waits for its acknowledgement.
PROBE_EVERY_S, PROBE_TIMEOUT_S = 2.0, 3.0


class KafkaCutOff(KafkaUnavailable):
    """This executor's host has not reached Kafka for the grace: its task moves."""


class ExecutorFence:
    """One process's view of whether it reaches Kafka, probed only while a task waits.

    :meth:`waiting` from a read or flush that is waiting; :meth:`answered` when Kafka
    brought data or confirmed a write."""

    def __init__(self, probe: Callable[[], bool], grace_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._probe, self._clock = probe, clock
        self.grace_s = grace_s
        self._fence = Fence(int(grace_s * 1000))
        self._probed_at: float | None = None

    def answered(self) -> None:
        self._fence.connected()

    def waiting(self, what: str) -> None:
        """Probe if due; raise :class:`KafkaCutOff` once no write was acknowledged for the
        grace. ``what``: what the task waits for, for the error."""
        now = self._clock()
        if self._probed_at is None or now - self._probed_at >= PROBE_EVERY_S:
            self._probed_at = now
            if self._probe():
                self._fence.connected()
            else:  # unacknowledged since the write was sent
                self._fence.disconnected(int(now * 1000))
        if self._fence.due(int(self._clock() * 1000)):
            self._fence.connected()  # the next task counts its own grace
            raise KafkaCutOff(f"{MARKER}: no write acknowledged for {self.grace_s:g} s while "
                              f"waiting for {what}; the task moves to another executor")


_FENCES: dict[str, ExecutorFence | None] = {}


def executor_fence(bootstrap: str) -> ExecutorFence | None:
    """This Python worker's fence for ``bootstrap``, if the driver asked for one."""
    if bootstrap not in _FENCES:
        grace = os.environ.get(GRACE_ENV, "")
        probe = Reach(from_environment(bootstrap), PROBE_TIMEOUT_S).probe
        _FENCES[bootstrap] = ExecutorFence(probe, float(grace)) if grace else None
    return _FENCES[bootstrap]
