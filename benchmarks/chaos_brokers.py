"""The chaos suite's broker faults (``python -m benchmarks.chaos --broker-faults``), on three
Apache Kafka brokers whose topics are replicated three times with ``min.insync.replicas``
2: the broker leading most of the topology's partitions killed with SIGKILL; every broker
restarted in turn (a rolling restart, each waited for until it is back in every ISR); the
leading broker frozen with SIGSTOP for 30 s, then woken.

Each fault's row in the ``faults`` list: ``recovery_s``, seconds from the fault until
everything fed before it is committed (None: not within the timeout; the rolling restart's
includes its three restarts); ``longest_stall_s``, the longest one source partition's
commits stood still while the topology was behind, during it; the broker it struck.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks.chaos_load import Commits, wait
from squall.dev.stack import EmbeddedStack, StackInfo
from squall.kafka_clients import KafkaClients

#: How long the frozen broker stays frozen.
FREEZE_S = 30.0
#: The faults, in the order they strike.
BROKER_FAULTS = ("broker-kill", "broker-rolling", "broker-freeze")


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def leader_of_most(kafka: KafkaClients, topics: Iterable[str]) -> int:
    """The broker id that leads most partitions of ``topics``."""
    md = kafka.metadata(10)
    wanted = set(topics)
    led = Counter(p.leader for name, t in md.topics.items()
                  if name in wanted or any(name.startswith(w) for w in wanted if w.endswith("."))
                  for p in t.partitions.values() if p.leader >= 0)
    return int(led.most_common(1)[0][0])


def fully_replicated(kafka: KafkaClients) -> bool:
    """Every partition of the cluster has its every replica in sync."""
    md = kafka.metadata(10)
    return len(md.brokers) == 3 and all(
        len(p.isrs) == len(p.replicas) and p.leader >= 0
        for t in md.topics.values() for p in t.partitions.values())


def process_of(info: StackInfo, broker_id: int) -> Any:
    return next(p for p in info.processes if p.name == f"kafka-{broker_id}")


class BrokerFaults:
    def __init__(self, stack: EmbeddedStack, info: StackInfo, commits: Commits,
                 topics: list[str], timeout_s: float) -> None:
        self.stack, self.info, self.commits = stack, info, commits
        self.kafka = info.clients()
        self.topics, self.timeout_s = topics, timeout_s

    def _measured(self, name: str, strike: Callable[[], str],
                  after: Callable[[], None] = lambda: None) -> dict[str, Any]:
        """Strike, wait until what was fed before is committed, then ``after`` (the
        victim's restart); the fault's row."""
        # Struck while the pipeline keeps up (not while it starts or still recovers from
        # the fault before), so that its stall is this fault's.
        ready = self.commits.fed()
        wait(lambda: self.commits.value >= ready, self.timeout_s)
        t0, fed_before = time.monotonic(), self.commits.fed()
        before = self.commits.max_partition_stall_s
        self.commits.max_partition_stall_s = 0.0  # this fault's own longest stall
        victim = strike()
        ok = wait(lambda: self.commits.value >= fed_before, self.timeout_s)
        recovery = round(time.monotonic() - t0, 1) if ok else None
        after()
        row = {"fault": name, "broker": victim, "recovery_s": recovery}
        if not wait(lambda: fully_replicated(self.kafka), self.timeout_s):
            row["replicas_back"] = False
        row["longest_stall_s"] = round(self.commits.max_partition_stall_s, 1)
        self.commits.max_partition_stall_s = max(before, self.commits.max_partition_stall_s)
        say(f"  {name} ({victim}): committed through after {recovery} s, longest stall of a "
            f"partition {row['longest_stall_s']} s")
        return row

    def kill(self) -> dict[str, Any]:
        victim = process_of(self.info, leader_of_most(self.kafka, self.topics))

        def strike() -> str:
            os.kill(victim.pid, signal.SIGKILL)
            return str(victim.name)
        # Back once the others took over: it rejoins as a follower.
        return self._measured("broker-kill", strike, lambda: self.stack.restart(victim.name))

    def rolling(self) -> dict[str, Any]:
        def strike() -> str:
            for i in (1, 2, 3):
                say(f"  rolling: restarting kafka-{i}")
                self.stack.restart(f"kafka-{i}")
                if not wait(lambda: fully_replicated(self.kafka), self.timeout_s):
                    say(f"  kafka-{i} did not rejoin every ISR in {self.timeout_s:.0f} s")
            return "kafka-1,kafka-2,kafka-3"
        return self._measured("broker-rolling", strike)

    def freeze(self) -> dict[str, Any]:
        victim = process_of(self.info, leader_of_most(self.kafka, self.topics))
        woken = threading.Timer(FREEZE_S, os.killpg, (victim.pid, signal.SIGCONT))

        def strike() -> str:
            os.killpg(victim.pid, signal.SIGSTOP)
            woken.start()  # the commits are watched while it is frozen
            return str(victim.name)
        return self._measured("broker-freeze", strike, woken.join)

    def run(self, name: str) -> dict[str, Any]:
        return {"broker-kill": self.kill, "broker-rolling": self.rolling,
                "broker-freeze": self.freeze}[name]()
