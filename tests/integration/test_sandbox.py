"""Bolt code in processes of its own (services/bolts/sandbox.py) and the deadline's watcher
(services/bolts/guardian.py): real forks, real kills, what each end is judged to be."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from services.bolts.sandbox import Completed, Died, Fault, Outcome, Sandbox
from squall.core.executor import ALL_INPUTS, CallWatch

pytestmark = pytest.mark.integration


def one(work: Any, deadline_s: float = 2.0, units: list[int] | None = None) -> Outcome:
    box = Sandbox(deadline_s, "bolt 'b' task 0")
    box.start(0, work, units or [10, 11, 12])
    try:
        ((key, outcome),) = box.wait()
    finally:
        box.close()
    assert key == 0
    return outcome


def calls_then(fate: Any) -> Any:
    """Work that calls the bolt on inputs 0 and 1 and meets ``fate`` in the call on 2."""
    def work(watch: CallWatch) -> Any:
        for i in (0, 1):
            watch.enter(i)
            watch.leave()
        watch.enter(2)
        fate()
        watch.leave()
        return {"done": True}

    return work


def test_a_child_that_returns_hands_back_its_result() -> None:
    assert one(calls_then(lambda: None)) == Completed({"done": True})


@pytest.mark.parametrize(("fate", "reason"), [
    (lambda: os._exit(17), "killed the bolt's Python process (exit 17)"),
    (lambda: os.kill(os.getpid(), signal.SIGSEGV), "killed the bolt's Python process (SIGSEGV)"),
    (lambda: threading.Event().wait(), "did not return within 0.5 s"),
    (lambda: sys.exit(3), "raised SystemExit: 3"),
])
def test_a_child_that_dies_or_hangs_in_a_call_names_the_input_being_called(
        fate: Any, reason: str) -> None:
    t0 = time.monotonic()
    was = faulthandler.is_enabled()
    faulthandler.disable()  # pytest's, inherited: the segfault's dump is not news here
    try:
        assert one(calls_then(fate), 0.5) == Died(12, reason)
    finally:
        if was:
            faulthandler.enable()
    assert time.monotonic() - t0 < 5


def test_a_death_in_a_call_on_every_input_names_none_of_them() -> None:
    def work(watch: CallWatch) -> None:
        watch.enter(ALL_INPUTS)
        os._exit(9)

    assert one(work) == Died(None, "killed the bolt's Python process (exit 9)")


def test_a_death_building_the_bolt_or_an_error_outside_any_call_is_no_records_doing() -> None:
    got = one(lambda watch: os._exit(4))  # prepare
    assert isinstance(got, Fault) and "prepare killed the bolt's Python process (exit 4)" in \
        got.reason

    def raises(watch: CallWatch) -> None:
        raise RuntimeError("the framework broke")

    got = one(raises)
    assert isinstance(got, Fault) and "RuntimeError: the framework broke" in got.reason


def test_children_run_at_once_and_each_is_judged_alone() -> None:
    box = Sandbox(1.0, "b")
    box.start(1, calls_then(lambda: time.sleep(0.3)), [0, 1, 2])
    box.start(2, calls_then(lambda: threading.Event().wait()), [0, 1, 2])
    box.start(3, calls_then(lambda: os._exit(1)), [0, 1, 2])
    got: dict[int, Outcome] = {}
    t0 = time.monotonic()
    while len(got) < 3:
        got.update(box.wait())
    assert time.monotonic() - t0 < 3  # the hang's deadline, not the sum of them
    assert got == {1: Completed({"done": True}), 2: Died(2, "did not return within 1 s"),
                   3: Died(2, "killed the bolt's Python process (exit 1)")}


WORKER = textwrap.dedent("""
    import sys, time
    from services.bolts.guardian import guard
    with guard().executing("bolt 'b' task 0, micro-batch 7", 0.6) as calls:
        for _ in range(15):  # 1.5 s of calls, each well within the deadline
            calls.enter(0); calls.leave(); time.sleep(0.1)
        print("progressing: alive", flush=True)
        if sys.argv[1] == "hang":
            time.sleep(30)
    print("done", flush=True)
""")


@pytest.mark.parametrize("fate", ["return", "hang"])
def test_the_guardian_kills_a_worker_whose_call_outran_the_deadline_and_no_other(
        fate: str) -> None:
    p = subprocess.run([sys.executable, "-c", WORKER, fate], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert "progressing: alive" in p.stdout, p.stderr
    if fate == "return":
        assert p.returncode == 0 and "done" in p.stdout, p.stderr
    else:
        assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
        assert "bolt 'b' task 0, micro-batch 7: the bolt did not return within 0.6 s" in \
            p.stderr
