"""The checkpoint folder's refusals as a bolts job tells them apart (services/bolts/
checkpoint_store.py): a write the store refused, from Python's batch marks or Spark's Java,
and a probe that says why a folder refuses writes now."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from services.bolts.checkpoint_store import refusal, refused_write, wait_writable

PYTHON = ("OSError: [Errno 30] Read-only file system: '/srv/squall/shared/checkpoints/wc/"
          "count/squall-batches/.task-0.1223'")
SPARK = ("java.nio.file.AccessDeniedException: /srv/squall/shared/checkpoints/wc/count/"
         "offsets/.12.tmp")
FULL = "java.io.IOException: No space left on device"


@pytest.mark.parametrize("error", [PYTHON, SPARK, FULL])
def test_a_refused_write_is_told_from_its_text(error: str) -> None:
    assert refused_write(error)


@pytest.mark.parametrize("error", [
    "ValueError: could not parse 'x' as an int",
    "org.apache.kafka.common.errors.TimeoutException: Topic t not present",
])
def test_other_failures_are_not_taken_for_refusals(error: str) -> None:
    assert not refused_write(error)


def test_a_writable_folder_takes_the_probe_and_keeps_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints" / "wc"
    assert refusal(folder) is None
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_a_folder_that_cannot_take_a_write_says_why_and_where(tmp_path: Path) -> None:
    blocker = tmp_path / "checkpoints"
    blocker.write_text("a file where the folder should be")
    why = refusal(blocker / "wc")
    assert why is not None and str(blocker / "wc") in why


def test_waiting_on_a_refusing_folder_ends_when_stopped(tmp_path: Path) -> None:
    blocker = tmp_path / "checkpoints"
    blocker.write_text("")
    stop = threading.Event()
    stop.set()
    assert wait_writable(blocker / "wc", stop, every_s=0.01) is None


def test_waiting_ends_once_the_folder_takes_writes(tmp_path: Path) -> None:
    blocker = tmp_path / "checkpoints"
    blocker.write_text("")
    probes = 0
    stop = threading.Event()

    class Healing(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            nonlocal probes
            probes += 1
            if probes == 3:  # the store comes back on the third look
                blocker.unlink()
            return stop.is_set()

    waited = wait_writable(blocker / "wc", Healing(), every_s=0.0)
    assert waited is not None and probes == 3
    assert (blocker / "wc").is_dir()
