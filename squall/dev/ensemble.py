"""A ZooKeeper ensemble, one server per host (squall/dev/hosts.py): what the cluster
benchmark's Squall coordinates through. Each server keeps its data on its host's disk and
listens at its host's address; the ensemble answers while a majority of them runs."""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from squall.dev import zookeeper
from squall.dev.hosts import DISK, Host, Hosts
from squall.dev.probes import find_java, pyspark_jars, tail, wait_until, zookeeper_session

PORT = 2181


@dataclass
class Ensemble:
    hosts: Hosts
    members: list[Host]
    start_timeout_s: float = 120.0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def connect(self) -> str:
        """The connect string: every member."""
        return ",".join(f"{h.address}:{PORT}" for h in self.members)

    def start(self) -> str:
        for h in self.members:
            self.start_member(h)
        wait_until(lambda: zookeeper_session(self.connect), self.start_timeout_s,
                   f"a ZooKeeper ensemble at {self.connect}", self._alive, self._log(
                       self.members[0]))
        return self.connect

    def start_member(self, h: Host) -> None:
        """Start (or start again, after its host was killed) ``h``'s server."""
        peers = [m.address for m in self.members]
        config = zookeeper.write_config(h.disk / "zookeeper", PORT, h.address,
                                        DISK / "zookeeper", peers, peers.index(h.address) + 1)
        self.procs[h.name] = self.hosts.start(
            h, zookeeper.server_argv(find_java(), pyspark_jars(), config), self._log(h))

    def leader(self) -> Host | None:
        """The member whose server says it leads the ensemble (four-letter ``srvr``), None
        while none does (an election, or no quorum)."""
        for h in self.members:
            try:
                with socket.create_connection((h.address, PORT), timeout=2) as c:
                    c.sendall(b"srvr")
                    said = b""
                    while chunk := c.recv(4096):  # the server closes once it answered
                        said += chunk
            except OSError:
                continue
            if b"Mode: leader" in said:
                return h
        return None

    def _alive(self) -> bool:
        return all(p.poll() is None for p in self.procs.values())

    def _log(self, h: Host) -> Path:
        return h.disk / "zookeeper" / "zookeeper.log"

    def log_tail(self, h: Host) -> str:
        return tail(self._log(h))
