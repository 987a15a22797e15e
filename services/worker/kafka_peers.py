"""What the workers tell each other of their Kafka probes, through ZooKeeper: each one's
acknowledged rounds, counted by the version of its ephemeral node under
``/squall/kafka-reach`` (squall/coord.py), set once per acknowledged round. A worker whose
own probe goes unacknowledged while a peer's rounds keep being acknowledged is cut off from
Kafka alone (squall/core/control/fencing.py, :func:`others_acknowledged`), not watching a
broker's failover.

A worker reads a few peers, not all: the ones after it in the sorted list of ids, so that
the reads stay a handful per round however large the cluster. Every call is bounded in
time and says nothing on failure: a worker cut off from ZooKeeper too has the ZooKeeper
fence for that."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from squall.coord import KAFKA_REACH

log = logging.getLogger("squall.worker")

#: Peers read per round.
SAMPLE = 3
#: How long one ZooKeeper call may take.
CALL_S = 1.0


class KafkaPeers:
    """``zk()``: the worker's ZooKeeper client (None before it connects)."""

    def __init__(self, zk: Callable[[], Any], worker_id: str) -> None:
        self.zk, self.worker_id = zk, worker_id
        self.path = f"{KAFKA_REACH}/{worker_id}"

    def acknowledged(self) -> None:
        """Count one acknowledged round (the node made on first use and after a new session)."""
        from kazoo.exceptions import NoNodeError

        zk = self.zk()
        if zk is None or not zk.connected:
            return
        try:
            try:
                zk.set_async(self.path, b"").get(timeout=CALL_S)
            except NoNodeError:
                zk.create_async(self.path, b"", ephemeral=True).get(timeout=CALL_S)
        except Exception as e:  # counted next round; a peer waits its full grace meanwhile
            log.debug("could not count a Kafka round in %s: %s", self.path, e)

    def sample(self) -> dict[str, tuple[int, int]]:
        """Up to :data:`SAMPLE` peers' ``(incarnation, acknowledged rounds)``: the node's
        creation (its ``czxid``) and its version."""
        zk = self.zk()
        if zk is None or not zk.connected:
            return {}
        out: dict[str, tuple[int, int]] = {}
        try:
            ids = sorted(zk.get_children_async(KAFKA_REACH).get(timeout=CALL_S))
            after = [w for w in ids if w > self.worker_id] + [w for w in ids if w < self.worker_id]
            for peer in after[:SAMPLE]:
                try:
                    _, stat = zk.get_async(f"{KAFKA_REACH}/{peer}").get(timeout=CALL_S)
                except Exception as e:  # gone meanwhile, or slow: that peer says nothing
                    log.debug("could not read %s's Kafka rounds: %s", peer, e)
                    continue
                out[peer] = (int(stat.czxid), int(stat.version))
        except Exception as e:
            log.debug("could not read the peers' Kafka rounds: %s", e)
        return out
