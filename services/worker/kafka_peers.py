"""What the workers tell each other of their Kafka probes, through ZooKeeper: each one's
acknowledged rounds, counted by the version of its ephemeral node under
``/squall/kafka-reach`` (squall/coord.py), set once per acknowledged round. A worker whose
own probe goes unacknowledged while a peer's rounds keep being acknowledged is cut off from
Kafka alone (squall/core/control/fencing.py, :func:`others_acknowledged`), not watching a
broker's failover.

A worker reads peers only while its own writes go unacknowledged, and a few of them, not
all, so that the reads stay a handful however large the cluster. Every call is bounded in
time and says nothing on failure: a worker cut off from ZooKeeper too has the ZooKeeper
fence for that."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection
from typing import Any

from squall.coord import KAFKA_REACH

log = logging.getLogger("squall.worker")

#: Peers read while in doubt.
SAMPLE = 8
_pick = random.SystemRandom()
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

    def sample(self, among: Collection[str] | None = None) -> dict[str, tuple[int, int]]:
        """Peers' ``(incarnation, acknowledged rounds)``: the node's creation (its ``czxid``)
        and its version. Those ``among`` the given ids, else up to :data:`SAMPLE` others
        chosen at random (at random, not by id: ids often begin with their host's name,
        and a cut host's own peers are cut too)."""
        zk = self.zk()
        if zk is None or not zk.connected:
            return {}
        out: dict[str, tuple[int, int]] = {}
        try:
            if among is None:
                ids = [w for w in zk.get_children_async(KAFKA_REACH).get(timeout=CALL_S)
                       if w != self.worker_id]
                among = _pick.sample(ids, min(SAMPLE, len(ids)))
            for peer in among:
                try:
                    _, stat = zk.get_async(f"{KAFKA_REACH}/{peer}").get(timeout=CALL_S)
                except Exception as e:  # gone meanwhile, or slow: that peer says nothing
                    log.debug("could not read %s's Kafka rounds: %s", peer, e)
                    continue
                out[peer] = (int(stat.czxid), int(stat.version))
        except Exception as e:
            log.debug("could not read the peers' Kafka rounds: %s", e)
        return out
