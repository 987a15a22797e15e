"""Child processes, one helper for each job: a free port, whether a pid lives, its
children, dying with the parent, stopping a process group.

Shared by the dev stack and the supervisor (:mod:`squall.supervision`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import time
from pathlib import Path

from squall.core.errors import StackError

HOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


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
