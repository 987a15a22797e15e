"""The standby's handshake with the active bolts job: a lock file, held and marked."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from services.bolts.runtime.standby import mark_running, take_lock, wait_for_active


def test_a_standby_waits_until_the_lock_holder_says_its_queries_run(tmp_path: Path) -> None:
    path = tmp_path / "job.lock"
    stop = threading.Event()
    assert wait_for_active(path, stop, timeout_s=0.3, every_s=0.05) is False  # nobody yet
    lock = take_lock(path, stop)
    assert lock is not None
    # Holding the lock is not enough: the holder may still be starting its queries.
    assert wait_for_active(path, stop, timeout_s=0.3, every_s=0.05) is False
    mark_running(lock)
    assert path.read_text() == f"{os.getpid()} running\n"
    assert wait_for_active(path, stop, timeout_s=5, every_s=0.05) is True
    lock.close()


def test_a_running_mark_of_a_dead_job_does_not_count(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    path = tmp_path / "job.lock"
    path.write_text(f"{dead} running\n")
    assert wait_for_active(path, threading.Event(), timeout_s=0.3, every_s=0.05) is False


def test_a_stopped_standby_stops_waiting(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert wait_for_active(tmp_path / "job.lock", stop, timeout_s=60) is False
