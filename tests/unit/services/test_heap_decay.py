"""services.heap_decay: free heap pages that malloc keeps go back to the system; a service
started by ``run_service`` does it on its own."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import pytest

from services import heap_decay

# A process whose malloc keeps 64 MiB it freed (no automatic trimming; 256 KiB blocks from
# its heap), which then trims once by hand or waits for the decay thread to.
_KEPT = """
import sys, threading, time
from services import heap_decay

def rss_mib():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

blocks = [bytearray(256 << 10) for _ in range(256)]
for b in blocks:
    b[::4096] = b"\\1" * len(range(0, len(b), 4096))
top = bytearray(4096)  # a live block above the freed ones: the heap's top cannot shrink
peak = rss_mib()
del blocks
kept = rss_mib()
if sys.argv[1] == "once":
    heap_decay.trimmer()()
    print(peak, kept, rss_mib())
else:
    stop = threading.Event()
    heap_decay.start(stop, interval_s=0.05)
    deadline = time.monotonic() + 60
    while rss_mib() > kept - 48 and time.monotonic() < deadline:
        stop.wait(0.05)  # the thread's effect is awaited, not assumed after a sleep
    stop.set()
    print(peak, kept, rss_mib())
"""
_KEEPING_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}


def _rss(mode: str) -> tuple[float, float, float]:
    env = {**os.environ, **_KEEPING_MALLOC}
    out = subprocess.run([sys.executable, "-c", _KEPT, mode], check=True, text=True,
                         capture_output=True, env=env, timeout=120).stdout.split()
    peak, kept, after = (float(x) for x in out)
    return peak, kept, after


def test_a_trim_returns_the_free_pages_malloc_kept() -> None:
    peak, kept, after = _rss("once")
    assert kept > peak - 8  # freed, but still resident: what the soak's acker showed
    assert after < kept - 48  # most of the 64 MiB back to the system


def test_the_decay_thread_trims_on_its_own() -> None:
    _, kept, after = _rss("thread")
    assert after < kept - 48


def test_no_malloc_trim_means_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(name: str | None) -> ctypes.CDLL:
        raise OSError(f"cannot load {name}")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert heap_decay.trimmer() is None
    assert heap_decay.start(threading.Event()) is None
