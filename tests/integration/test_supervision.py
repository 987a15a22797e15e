"""The one supervisor (worker, ``squall run``, demo) with real child processes."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from squall.core.control.restarts import Restarts
from squall.supervision import Command, Exit, Supervisor

# Real programs: one that fails at once (a bad flag), one that runs until stopped.
CRASHES = Command("json.tool", ("--no-such-flag",), metrics=False)
RUNS = Command("http.server", ("--bind", "127.0.0.1", "0"), metrics=False)


def _until(cond: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_an_exiting_child_is_restarted_with_backoff_and_named_a_crash_loop(
        tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    sup.start("crasher", CRASHES, Restarts(base_delay_ms=50, max_delay_ms=200,
                                           crash_loop_after=3))
    sup.start("server", RUNS)
    exits: list[Exit] = []
    restarted: list[str] = []

    def looping() -> bool:
        r = sup.check()
        exits.extend(r.exits)
        restarted.extend(r.restarted)
        return sup.children["crasher"].policy.crash_looping

    try:
        _until(looping)
        assert {e.name for e in exits} == {"crasher"}
        assert all(e.returncode == 2 for e in exits)
        assert [e.in_a_row for e in exits[:3]] == [1, 2, 3]
        # Backoff: the first restart at once, then base x 2 ** (exits in a row - 1).
        assert [e.restart_in_s for e in exits[:3]] == [0.0, 0.1, 0.2]
        assert exits[2].crash_looping and "a crash loop" in str(exits[2])
        assert restarted.count("crasher") >= 2
        assert "usage" in (tmp_path / "crasher.log").read_text()  # its output is kept
        assert sup.children["server"].alive()
    finally:
        server = sup.children["server"]
        sup.stop(["server", "crasher"], timeout_s=30)
    assert sup.children == {}
    assert server.proc.returncode == -signal.SIGTERM  # asked to stop, not killed


def test_an_adopted_child_keeps_running_and_is_restarted_with_its_new_command(
        tmp_path: Path) -> None:
    """A spare taken over by a job: the same process, under the job's name; when it exits
    the job's command starts, not the spare's."""
    sup = Supervisor(tmp_path)
    spare = sup.start("spare", RUNS, Restarts(base_delay_ms=50, max_delay_ms=200))
    try:
        adopted = sup.adopt("spare", "job", CRASHES)
        assert adopted is spare and set(sup.children) == {"job"} and adopted.alive()
        assert sup.check().exits == []  # still the spare's process, running
        adopted.proc.send_signal(signal.SIGTERM)
        restarted: list[str] = []

        def restarts() -> bool:
            restarted.extend(sup.check().restarted)
            return bool(restarted)

        _until(restarts)
        assert restarted == ["job"]
        assert sup.children["job"].proc.pid != spare.proc.pid
        assert sup.children["job"].command == CRASHES
        _until(lambda: "usage" in (tmp_path / "job.log").read_text(errors="replace")
               if (tmp_path / "job.log").exists() else False)
    finally:
        sup.stop(timeout_s=30)


# A child that, asked to stop, notes it and exits once every child it names was asked too
# (or after 20 s): it exits at once only if those were signalled alongside it.
STOPPER = '''
import pathlib, signal, sys, time
name, log, others = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3:]
def note(line):
    with log.open("a") as f:
        f.write(line + "\\n")
def term(*_):
    note(f"term {name}")
    deadline = time.monotonic() + 20
    while not all(f"term {o}" in log.read_text() for o in others):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    note(f"exit {name} saw_others={all(f'term {o}' in log.read_text() for o in others)}")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
note(f"ready {name}")
while True:
    signal.pause()
'''


def test_stop_drains_the_named_children_in_turn_then_stops_the_rest_at_once(
        tmp_path: Path) -> None:
    """The spout first, alone (its trees drain through the rest); then bolts and acker
    together: each of those two waits for the other's stop signal before it exits."""
    (tmp_path / "stopper.py").write_text(STOPPER)
    log = tmp_path / "stops.log"
    env = {"PYTHONPATH": str(tmp_path)}
    sup = Supervisor(tmp_path / "logs")
    for name, others in (("spout", ()), ("bolts", ("acker",)), ("acker", ("bolts",))):
        sup.start(name, Command("stopper", (name, str(log), *others), env, metrics=False))
    _until(lambda: log.exists() and log.read_text().count("ready") == 3)
    sup.stop(["spout"], timeout_s=30)
    lines = log.read_text().splitlines()
    assert sup.children == {}
    assert lines.index("exit spout saw_others=True") < min(
        lines.index("term bolts"), lines.index("term acker")), lines
    # One by one, the first of the two would have waited its 20 s for the other's signal.
    assert "exit bolts saw_others=True" in lines and "exit acker saw_others=True" in lines


def test_echo_copies_each_childs_output_to_stdout_after_its_name_and_keeps_the_log(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    sup = Supervisor(tmp_path, echo=True)
    child = sup.start("crasher", CRASHES)
    _until(lambda: not child.alive() and "usage" in child.log.read_text())
    seen: list[str] = []

    def echoed() -> bool:
        seen.append(capfd.readouterr().out)
        return "crasher | usage" in "".join(seen)

    _until(echoed, 30)
    assert "--no-such-flag" in child.log.read_text()


def test_a_run_counts_towards_health_only_once_its_child_says_it_is_ready(
        tmp_path: Path) -> None:
    """A child whose command says it will say when it is ready (a bolts job: its start takes
    a JVM and Spark): a run that never got ready is not healthy however long it ran, so
    its exits are a crash loop; a run that got ready and ran the healthy time after is
    healthy. The same slow run from a command that does not say is healthy."""
    slow = ("-n", "1", "-r", "1", "-s", "import time", "time.sleep(0.6)")
    ready_then_works = ("-n", "1", "-r", "1", "-s", "import os, pathlib, time",
                        "pathlib.Path(os.environ['SQUALL_READY_FILE']).touch(); time.sleep(2)")
    commands = {"never-ready": Command("timeit", slow, metrics=False, ready=True),
                "ready": Command("timeit", ready_then_works, metrics=False, ready=True),
                "unsaid": Command("timeit", slow, metrics=False)}
    sup = Supervisor(tmp_path)
    for name, cmd in commands.items():
        sup.start(name, cmd, Restarts(base_delay_ms=50, max_delay_ms=200, healthy_ms=300))
    exits: dict[str, list[int]] = {name: [] for name in commands}

    def three_each() -> bool:
        for e in sup.check().exits:
            exits[e.name].append(e.in_a_row)
        return all(len(v) >= 3 for v in exits.values())

    try:
        _until(three_each, 120)
    finally:
        sup.stop(timeout_s=30)
    assert exits["never-ready"][:3] == [1, 2, 3], exits
    assert exits["ready"][:3] == [1, 1, 1], exits
    assert exits["unsaid"][:3] == [1, 1, 1], exits
