"""ZooKeeper sessions through the loss of the ensemble's leader: Squall's client
(squall/coord.py) against kazoo's defaults, alternated round by round.

Each round brings up a ZooKeeper ensemble of three on three hosts of this machine
(squall/dev/hosts.py), opens ``--clients`` sessions of one kind spread over its servers,
then drops every packet to and from the leader's host's ZooKeeper ports (a partition: no
reset tells a client) and waits until each session is connected again or has ended.
Every client is cut off: those of the lost server, and those of the others while these
elect a new leader, when the lost server is all they have not tried.

Last line: one JSON object: per kind the sessions ``kept`` and ``lost`` in each round,
their totals, and the median seconds from the cut until a kept session was connected
again. Needs root (network namespaces) and nftables.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from squall.coord import connect as squall_connect
from squall.dev.ensemble import PORT, Ensemble
from squall.dev.hosts import Hosts
from squall.dev.probes import wait_until, zookeeper_session

KINDS = ("kazoo", "squall")
SESSION_S = 6.0


class Session:
    """One client, its states as it saw them, and when it was connected again."""

    def __init__(self, kind: str, connect: str, server: int) -> None:
        self.states: list[str] = []
        self.back_at: float | None = None
        self.cut_at = 0.0
        self.zk = self._open(kind, connect, server)

    def _open(self, kind: str, connect: str, server: int) -> Any:
        from kazoo.client import KazooClient

        if kind == "squall":
            return squall_connect(connect, session_timeout_s=SESSION_S, listener=self._seen,
                                  first_server=server)
        zk = KazooClient(hosts=connect, timeout=SESSION_S)  # a server of its own choice
        zk.add_listener(self._seen)
        zk.start(timeout=30)
        return zk

    def _seen(self, state: Any) -> None:
        self.states.append(str(state))
        if str(state) == "CONNECTED" and self.back_at is None and self.cut_at:
            self.back_at = time.monotonic()

    def settled(self) -> bool:
        return "LOST" in self.states or self.back_at is not None

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def one_round(ensemble: Ensemble, kind: str, clients: int) -> dict[str, Any]:
    hosts, connect = ensemble.hosts, ensemble.connect
    # every server back in the quorum after the last round's heal, one of them leading
    for h in hosts.hosts:
        wait_until(functools.partial(zookeeper_session, f"{h.address}:{PORT}"), 120,
                   f"{h.name}'s ZooKeeper server")
    wait_until(lambda: ensemble.leader() is not None, 120, "a leader of the ensemble")
    lead = ensemble.leader()
    assert lead is not None
    sessions = [Session(kind, connect, i) for i in range(clients)]
    try:
        cut_at = time.monotonic()
        for s in sessions:
            s.cut_at = cut_at
        hosts.cut_ports(lead, [PORT, 2888, 3888])
        deadline = time.monotonic() + 60
        while not all(s.settled() for s in sessions) and time.monotonic() < deadline:
            time.sleep(0.1)
        lost = sum("LOST" in s.states for s in sessions)
        back = [s.back_at - cut_at for s in sessions
                if s.back_at is not None and "LOST" not in s.states]
        return {"kept": clients - lost, "lost": lost, "back_s": back}
    finally:
        hosts.heal_ports(lead)
        closers = [threading.Thread(target=s.close) for s in sessions]
        for t in closers:
            t.start()
        for t in closers:
            t.join()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each kind, alternated")
    ap.add_argument("--clients", type=int, default=12, help="sessions a round")
    a = ap.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="squall-zk-failover-"))
    out: dict[str, dict[str, Any]] = {k: {"kept": [], "lost": [], "back_s": []} for k in KINDS}
    with Hosts(home / "hosts", 3, tag="sqzkf") as hosts:
        ensemble = Ensemble(hosts, list(hosts.hosts))
        ensemble.start()
        for r in range(a.rounds):
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                got = one_round(ensemble, kind, a.clients)
                print(f"round {r} {kind}: kept {got['kept']}, lost {got['lost']}", flush=True)
                for k in ("kept", "lost"):
                    out[kind][k].append(got[k])
                out[kind]["back_s"] += got["back_s"]
    summary = {kind: {"kept": v["kept"], "lost": v["lost"], "kept_total": sum(v["kept"]),
                      "lost_total": sum(v["lost"]),
                      "back_s_median": round(statistics.median(v["back_s"]), 2)
                      if v["back_s"] else None}
               for kind, v in out.items()}
    print(json.dumps({"clients": a.clients, "rounds": a.rounds, "session_s": SESSION_S,
                      **summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
