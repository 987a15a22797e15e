"""Bolt code in processes of its own (services/bolts/sandbox.py) and the deadline's watcher
(services/bolts/guardian.py): real forks, real kills, what each end is judged to be."""

from __future__ import annotations

import faulthandler
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from examples.faults import CountOrDie, SplitOrDieArrow
from services.bolts.isolation import run_isolated
from services.bolts.sandbox import Completed, Died, Fault, Outcome, Sandbox
from squall.core.bolt_api.bolt import TaskContext
from squall.core.reliability.records import RecordKind
from squall.core.tasks.exec_result import ALL_INPUTS, CallWatch
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.tuple_batch import TupleBatch
from squall.wallclock import SystemClock

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
    import glob, os, sys, tempfile, time
    from services.bolts.guardian import guard
    g = guard()
    # Shared by its descriptor, not left as a file: a job killed whole leaves nothing behind.
    print("files:", glob.glob(os.path.join(tempfile.gettempdir(), f"squall-guard-{os.getpid()}-*")))
    with g.executing("bolt 'b' task 0, micro-batch 7", 0.6, sys.argv[2]) as calls:
        for i in range(15):  # 1.5 s of calls, each well within the deadline
            calls.enter(i); calls.leave(); time.sleep(0.1)
        print("progressing: alive", flush=True)
        if sys.argv[1] == "hang":
            calls.enter(15)
            time.sleep(30)
    print("done", flush=True)
""")


@pytest.mark.parametrize("fate", ["return", "hang"])
def test_the_guardian_kills_a_worker_whose_call_outran_the_deadline_and_no_other(
        fate: str, tmp_path: Path) -> None:
    verdict = tmp_path / "hung-0-7"
    p = subprocess.run([sys.executable, "-c", WORKER, fate, str(verdict)], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert "progressing: alive" in p.stdout, p.stderr
    assert "files: []" in p.stdout
    if fate == "return":
        assert p.returncode == 0 and "done" in p.stdout, p.stderr
    else:
        assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
        assert "bolt 'b' task 0, micro-batch 7: the bolt did not return within 0.6 s" in \
            p.stderr
        assert verdict.read_text() == "15 0.6"  # the input of the call, for the next attempt
    if fate == "return":
        assert not verdict.exists()


def sentences_batch(texts: list[str], seed: int = 3) -> tuple[TupleBatch, list[int]]:
    """Spout tuples: one root each, as the split bolt's input."""
    rng = random.Random(seed)
    roots = [rng.getrandbits(63) + 1 for _ in texts]
    ids = np.asarray([rng.getrandbits(63) + 1 for _ in texts], np.uint64)
    return TupleBatch.single_anchored({"sentence": pa.array(texts)},
                                      np.asarray(roots, np.uint64), ids), roots


def executor(bolt: type, edges: list[Edge]) -> BoltExecutor:
    return BoltExecutor(bolt(), TaskContext("t", "b", 0, 1), edges, clock=SystemClock())


@pytest.mark.parametrize(("kind", "reason"), [
    ("crash", "killed the bolt's Python process (exit 17)"),
    ("hang", "did not return within 0.5 s")])
def test_a_batch_call_over_2000_rows_with_one_poison_row_completes_the_other_1999(
        kind: str, reason: str) -> None:
    texts = [f"the lazy dog {i}" for i in range(2000)]
    texts[1234] = f"{kind} 1234 here"
    batch, roots = sentences_batch(texts)
    edges = [Edge("count", "t.edge", 2, Grouping.SHUFFLE)]
    res = run_isolated(executor(SplitOrDieArrow, edges), lambda: executor(SplitOrDieArrow, edges),
                       [batch], 0.5, lambda: 0)
    assert (res.acked, res.failed, res.executed) == (1999, 1, 2000)
    assert res.emitted == 1999 * 4  # every other sentence's words, once each
    fails = res.acks.of_kind(RecordKind.FAIL)
    assert fails.roots.tolist() == [roots[1234]]
    assert res.reasons[roots[1234]].startswith(f"{reason} (in bolt 'b' task 0")
    acked = set(res.acks.of_kind(RecordKind.ACK).roots.tolist())
    assert acked == set(roots) - {roots[1234]}


def test_a_stateful_bolts_parts_leave_its_state_as_one_run_without_the_culprit_would() -> None:
    words = [f"w{i % 13}" for i in range(300)]
    words[77] = "segv"
    rng = random.Random(5)
    anchors = [{rng.getrandbits(63) + 1: rng.getrandbits(63) + 1} for _ in words]
    batch = TupleBatch.from_columns({"word": words}, anchors)
    ex = executor(CountOrDie, [])
    assert ex.state is not None
    ex.state.put("w0", 100)  # what the task had counted before
    ex.state.changes()
    res = run_isolated(ex, lambda: executor(CountOrDie, []), [batch], 2.0, lambda: 0)
    assert (res.acked, res.failed) == (299, 1)
    want = Counter(w for w in words if w != "segv")
    want["w0"] += 100
    assert ex.state.snapshot() == dict(want)
    assert ex.state.changes() == {w: n for w, n in want.items()}  # to be saved by the task


def test_a_child_that_cannot_hand_its_result_back_is_no_records_doing() -> None:
    got = one(lambda watch: lambda: None)  # a function: pickle refuses it
    assert isinstance(got, Fault) and "could not hand its result back (it ended with exit 70)" in \
        got.reason
