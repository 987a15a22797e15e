"""Hosts on one machine, for the tests and the cluster benchmark: each a network namespace
joined to the others by a bridge, with an address of its own and a disk of its own.

A host's processes run in its namespace (``ip netns exec``) and in a mount namespace of
their own, where the host's data folder is mounted at :data:`DISK` and the shared folder,
if any (what NFS would be between real hosts), at :data:`SHARED`. So a file one host writes
on its disk cannot be read on another by accident: every host sees its own under the same
path. Everything else of the machine (the code, the virtualenv, the caches) is seen by all.

Faults are a host's: :meth:`Hosts.kill` kills every process in its namespace at once (a
power loss), :meth:`Hosts.cut` takes its link off the bridge (a partition) until
:meth:`Hosts.heal`, and :meth:`Hosts.cut_ports` drops only the TCP traffic between the host
and the others on some ports (a partial partition: ZooKeeper's, say, while Kafka's flows)
until :meth:`Hosts.heal_ports`. Needs root and iproute2 (``ip``) and util-linux
(``unshare``); a partial partition also nftables (``nft``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from squall.core.errors import StackError

#: The nftables table of a host's partial partition.
_CUT = "squall_cut"
#: Where a host's processes see its own disk, and the shared folder.
DISK = Path("/srv/squall/host")
SHARED = Path("/srv/squall/shared")


@dataclass(frozen=True)
class Host:
    name: str
    #: its network namespace
    netns: str
    address: str
    #: its data folder on the machine (seen by its processes at :data:`DISK`)
    disk: Path
    #: the bridge's end of its link
    link: str


@dataclass
class Hosts:
    """``count`` hosts ``h1``.. under ``home`` (their disks, ``home/shared``), named apart
    from other sets by ``tag`` (a few letters: interface names are short)."""

    home: Path
    count: int = 3
    tag: str = "sq"
    hosts: list[Host] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 1 <= self.count <= 9 or not self.tag.isalnum() or len(self.tag) > 6:
            raise StackError(f"hosts: 1 to 9 hosts and a tag of up to 6 letters or digits "
                             f"(got {self.count}, {self.tag!r})")
        # A /24 of 10.77.0.0/16 per tag, so that two sets can run side by side.
        self.subnet = f"10.77.{zlib.crc32(self.tag.encode()) % 250 + 1}"
        self.bridge = f"{self.tag}br"

    @property
    def shared(self) -> Path:
        return self.home / "shared"

    def __enter__(self) -> Hosts:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> list[Host]:
        for tool in ("ip", "unshare"):
            if shutil.which(tool) is None:
                raise StackError(f"hosts: {tool!r} is not on PATH (iproute2, util-linux)")
        if os.geteuid() != 0:
            raise StackError("hosts: network namespaces need root")
        self.down()  # what a run that died left
        for d in (DISK, SHARED):
            d.mkdir(parents=True, exist_ok=True)
        self.shared.mkdir(parents=True, exist_ok=True)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(1, self.count + 1):
            h = Host(f"h{i}", f"{self.tag}-h{i}", f"{self.subnet}.{10 + i}",
                     self.home / f"h{i}", f"{self.tag}h{i}")
            h.disk.mkdir(parents=True, exist_ok=True)
            _ip("netns", "add", h.netns)
            _ip("link", "add", h.link, "type", "veth", "peer", "name", f"{h.link}n")
            _ip("link", "set", h.link, "master", self.bridge, "up")
            _ip("link", "set", f"{h.link}n", "netns", h.netns)
            _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", f"{h.link}n")
            _ip("-n", h.netns, "link", "set", f"{h.link}n", "up")
            _ip("-n", h.netns, "link", "set", "lo", "up")
            self.hosts.append(h)
        return self.hosts

    def down(self) -> None:
        """Kill every host's processes and remove the namespaces and the bridge."""
        names = set(netns_names())
        for i in range(1, 10):
            ns = f"{self.tag}-h{i}"
            if ns in names:
                self._kill_netns(ns)
                _ip("netns", "del", ns, check=False)
            _ip("link", "del", f"{self.tag}h{i}", check=False)
        _ip("link", "del", self.bridge, check=False)
        self.hosts = []

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise StackError(f"no host {name!r} (hosts: {', '.join(h.name for h in self.hosts)})")

    def command(self, host: Host, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on ``host``: in its network namespace, its disk mounted."""
        mounts = (f"mount --bind {shlex.quote(str(host.disk))} {DISK} && "
                  f"mount --bind {shlex.quote(str(self.shared))} {SHARED} && exec \"$@\"")
        return ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--propagation",
                "private", "sh", "-c", mounts, "--", *argv]

    def start(self, host: Host, argv: Sequence[str], log: Path,
              env: Mapping[str, str] | None = None, cwd: Path | None = None
              ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on ``host``, its output in ``log`` (a file of the machine's)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:  # the child keeps its own descriptor
            return subprocess.Popen(self.command(host, argv), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, cwd=cwd,
                                    start_new_session=True)

    def run(self, host: Host, argv: Sequence[str], timeout_s: float = 60.0
            ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on ``host`` to its end; its output."""
        return subprocess.run(self.command(host, argv), capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    def pids(self, host: Host) -> list[int]:
        got = _ip("netns", "pids", host.netns, check=False)
        return [int(p) for p in got.split()]

    def kill(self, host: Host) -> int:
        """Every process of ``host`` killed at once, as a power loss does; how many."""
        return self._kill_netns(host.netns)

    def cut(self, host: Host) -> None:
        """Take ``host`` off the network: nothing reaches it and it reaches nothing."""
        _ip("link", "set", host.link, "down")

    def heal(self, host: Host) -> None:
        _ip("link", "set", host.link, "up")

    def cut_ports(self, host: Host, ports: Sequence[int]) -> None:
        """Drop every TCP segment between ``host`` and the other hosts (or the machine)
        from or to ``ports``, both ways: its clients of those ports elsewhere and its own
        servers on them are cut off; what its processes say to each other stays."""
        if shutil.which("nft") is None:
            raise StackError("hosts: a partial partition needs nftables ('nft' is not on "
                             "PATH: apt-get install nftables)")
        if not ports or not all(isinstance(p, int) and 0 < p < 65536 for p in ports):
            raise StackError(f"hosts: ports to cut are TCP ports (got {list(ports)!r})")
        ps = ", ".join(str(p) for p in ports)
        rules = (f"table inet {_CUT} {{\n"
                 f"  chain in {{ type filter hook input priority 0; iifname \"lo\" accept;"
                 f" tcp sport {{ {ps} }} drop; tcp dport {{ {ps} }} drop; }}\n"
                 f"  chain out {{ type filter hook output priority 0; oifname \"lo\" accept;"
                 f" tcp dport {{ {ps} }} drop; tcp sport {{ {ps} }} drop; }}\n}}\n")
        self.heal_ports(host)
        res = subprocess.run(["ip", "netns", "exec", host.netns, "nft", "-f", "-"],
                             input=rules, capture_output=True, text=True, timeout=30,
                             check=False)
        if res.returncode != 0:
            raise StackError(f"hosts: cutting {host.name} off ports {ps}: "
                             f"{res.stderr.strip() or res.returncode}")

    def heal_ports(self, host: Host) -> None:
        """Undo :meth:`cut_ports` (nothing if nothing is cut)."""
        if shutil.which("nft") is not None:
            subprocess.run(["ip", "netns", "exec", host.netns, "nft", "delete", "table",
                            "inet", _CUT], capture_output=True, timeout=30, check=False)

    def shared_writable(self, pid: int, writable: bool) -> None:
        """Make the shared folder read-only (or writable again) for the process ``pid`` and
        what it starts: a shared store that stops taking writes. Each process
        :meth:`start` ran has a mount namespace of its own, where the folder is a bind
        mount; root's processes would write through a permission bit, not through this."""
        res = subprocess.run(["nsenter", f"--mount=/proc/{pid}/ns/mnt", "mount", "-o",
                              f"remount,bind,{'rw' if writable else 'ro'}", str(SHARED)],
                             capture_output=True, text=True, timeout=30, check=False)
        if res.returncode != 0:
            raise StackError(f"hosts: making {SHARED} {'writable' if writable else 'read-only'}"
                             f" for process {pid}: {res.stderr.strip() or res.returncode}")

    def _kill_netns(self, netns: str) -> int:
        killed = 0
        for _ in range(20):  # a process may fork while the others are being killed
            got = _ip("netns", "pids", netns, check=False).split()
            if not got:
                break
            for p in got:
                try:
                    os.kill(int(p), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        return killed


def netns_names() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list", check=False).splitlines()
            if line.strip()]


def _ip(*args: str, check: bool = True) -> str:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                         check=False)
    if check and res.returncode != 0:
        raise StackError(f"ip {' '.join(args)}: {res.stderr.strip() or res.returncode}")
    return res.stdout
