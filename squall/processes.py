"""Child processes, one helper for each job: a free port, whether a pid lives, its
children, dying with the parent, stopping a process group.

Shared by the dev stack and the supervisor (:mod:`squall.supervision`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import time
from pathlib import Path

from squall.core.errors import StackError

HOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


#: Ports handed out lie below the kernel's ephemeral range (where outbound connections
#: take theirs), from this one up.
LISTEN_PORTS_FROM = 20000


def free_port() -> int:
    """A port nothing listens on, for a child to bind soon. Taken below the ephemeral range:
    a port the kernel picked there could go to an outbound connection (a Kafka client's)
    before the child binds it; probed on every address, as the child may bind any."""
    top = ephemeral_ports()[0]
    if top - LISTEN_PORTS_FROM < 1000:  # a host that made its ephemeral range start low
        return _probe(0)
    for _ in range(100):
        port = random.randrange(LISTEN_PORTS_FROM, top)
        with contextlib.suppress(OSError):
            return _probe(port)
    return _probe(0)


def _probe(port: int) -> int:
    with socket.socket() as s:
        s.bind(("", port))
        return int(s.getsockname()[1])


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")
                    ) -> tuple[int, int]:
    """The kernel's range for ports it picks itself (Linux's default where unreadable)."""
    try:
        lo, hi = path.read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0): reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def child_pids(pid: int, contains: str = "") -> list[int]:
    """This machine's processes whose parent is ``pid`` (and whose command line contains
    ``contains``), from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) != pid:
                continue
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if contains in cmd:
                out.append(int(d.name))
    return sorted(out)


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGKILL when its parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_pid(pid: int, timeout_s: float = 10.0, first: signal.Signals = signal.SIGTERM) -> None:
    """``first`` (SIGTERM) to the process group, then SIGKILL; return once it is gone."""
    for sig, wait in ((first, timeout_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)
    raise StackError(f"process {pid} did not exit after SIGKILL")
