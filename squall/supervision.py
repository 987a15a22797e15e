"""Child processes kept running: the one supervisor of the worker, ``squall run`` and the demo.

Each child runs ``python -m <module> <args>`` with its output in a log file and dies with
its parent. One that exits is restarted with backoff, and a crash loop is named as such
(the policy: :mod:`squall.core.control.restarts`). Stopping sends SIGTERM (spouts drain and
commit), waits, and kills what is left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from squall.core.control.restarts import Restarts
from squall.processes import die_with_parent, free_port

log = logging.getLogger("squall.supervision")
#: Where a child leaves the error it exits with (``services.common.run_service`` writes it):
#: what a crash loop is shown with.
EXIT_FILE_ENV = "SQUALL_EXIT_FILE"
#: Where a child that says when it is ready (:attr:`Command.ready`) marks it
#: (``services.common.mark_ready``).
READY_FILE_ENV = "SQUALL_READY_FILE"


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _echo(name: str, proc: subprocess.Popen[bytes], logf: Path) -> None:
    """Copy a child's output, line by line, to its log file and to stdout until it ends."""
    assert proc.stdout is not None
    prefix = f"{name} | ".encode()
    with open(logf, "ab") as out:
        for line in proc.stdout:
            out.write(line)
            out.flush()
            sys.stdout.buffer.write(prefix + line)
            sys.stdout.buffer.flush()


@dataclass(frozen=True)
class Command:
    """What a child runs: ``python -m module *args`` (``--metrics-port`` added when
    ``metrics``), with ``env`` on top of this process's environment."""

    module: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    metrics: bool = True
    #: The child says when it is ready: its run counts towards being healthy from then, not
    #: from its start (a bolts job's start takes a JVM and Spark, a minute or more on a
    #: loaded host), and a run that never got ready is never healthy.
    ready: bool = False


@dataclass
class Child:
    name: str
    command: Command
    log: Path
    proc: subprocess.Popen[bytes]
    started_ms: int
    metrics_port: int | None
    policy: Restarts = field(default_factory=Restarts)
    #: the error the child last exited with, as it said ("" if it said none)
    last_error: str = ""
    #: when it was first seen ready (its start, if its command does not say)
    ready_ms: int | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP its process group (its own: it and what it started, Spark's JVM and its
        Python workers): nothing of it runs until :meth:`resume`."""
        self.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal_group(signal.SIGCONT)

    def signal_group(self, sig: signal.Signals) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    @property
    def exit_file(self) -> Path:
        return self.log.with_suffix(".exit")

    @property
    def ready_file(self) -> Path:
        return self.log.with_suffix(".ready")

    def look_for_ready(self, now_ms: int) -> None:
        """Note the time its ready file is first seen."""
        if self.ready_ms is None and self.ready_file.exists():
            self.ready_ms = now_ms

    def counts_from(self, now_ms: int) -> int:
        """When this run began to count towards being healthy: when it was ready;
        ``now_ms`` while it is not (the run so far counts for nothing)."""
        return now_ms if self.ready_ms is None else self.ready_ms


@dataclass(frozen=True)
class Exit:
    """A child found exited, and when it will be restarted."""

    name: str
    returncode: int | None
    ran_s: float
    restart_in_s: float
    in_a_row: int
    crash_looping: bool
    log: Path
    error: str = ""

    def __str__(self) -> str:
        said = f": {self.error.splitlines()[-1]}" if self.error else ""
        return (f"{self.name} exited with {self.returncode} after {self.ran_s:.1f} s{said}; "
                f"restarting in {self.restart_in_s:.1f} s ({self.in_a_row} exits in a row"
                f"{', a crash loop' if self.crash_looping else ''}; see {self.log})")


@dataclass
class Round:
    """What one :meth:`Supervisor.check` found and did."""

    exits: list[Exit] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)


class Supervisor:
    def __init__(self, logdir: Path, clock: Callable[[], int] = monotonic_ms,
                 echo: bool = False, restarts: Callable[[], Restarts] = Restarts,
                 metrics_host: str = "127.0.0.1") -> None:
        """``echo``: each child's output also goes to this process's stdout, each line
        after the child's name (a container's log shows every process); ``restarts``: the
        restart policy of a child started without one of its own; ``metrics_host``: the
        address a child's telemetry port listens on (``--metrics-host``)."""
        self.logdir = logdir
        self.metrics_host = metrics_host
        self.clock = clock
        self.echo = echo
        self.restarts = restarts
        self.children: dict[str, Child] = {}
        self._lock = threading.RLock()

    def start(self, name: str, command: Command, policy: Restarts | None = None) -> Child:
        """Start ``name`` (replacing a child of that name, which must be gone)."""
        self.logdir.mkdir(parents=True, exist_ok=True)
        logf = self.logdir / f"{name}.log"
        port = free_port() if command.metrics else None
        argv = [sys.executable, "-m", command.module, *command.args]
        if port is not None:
            argv += ["--metrics-port", str(port), "--metrics-host", self.metrics_host]
        exit_file, ready_file = logf.with_suffix(".exit"), logf.with_suffix(".ready")
        exit_file.unlink(missing_ok=True)
        ready_file.unlink(missing_ok=True)
        with open(logf, "ab") as out:  # the child has its own copy of the descriptor
            # A process group of its own, so that a fence pauses all of it (Child.pause).
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE if self.echo else out,
                                    stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                                    start_new_session=True,
                                    env={**os.environ, **command.env,
                                         EXIT_FILE_ENV: str(exit_file),
                                         READY_FILE_ENV: str(ready_file)})
        if self.echo:
            threading.Thread(target=_echo, args=(name, proc, logf), daemon=True,
                             name=f"echo-{name}").start()
        log.info("started %s (pid %d, log %s)", name, proc.pid, logf)
        now = self.clock()
        child = Child(name, command, logf, proc, now, port, policy or self.restarts(),
                      self.children[name].last_error if name in self.children else "",
                      None if command.ready else now)
        with self._lock:
            self.children[name] = child
        return child

    def check(self) -> Round:
        """Note children that exited; restart those whose backoff is over."""
        out = Round()
        with self._lock:
            for name, c in list(self.children.items()):
                now = self.clock()
                c.look_for_ready(now)
                if c.alive():
                    c.policy.running(now, c.counts_from(now))
                    continue
                if not c.policy.waiting:
                    due = c.policy.exited(now, c.counts_from(now))
                    try:
                        c.last_error = c.exit_file.read_text().strip()
                    except OSError:
                        c.last_error = ""
                    out.exits.append(Exit(name, c.proc.returncode, (now - c.started_ms) / 1000,
                                          (due - now) / 1000, c.policy.in_a_row,
                                          c.policy.crash_looping, c.log, c.last_error))
                if c.policy.due(now):
                    c.policy.restarted()
                    self.start(name, c.command, c.policy)
                    out.restarted.append(name)
        return out

    def adopt(self, name: str, new_name: str, command: Command) -> Child:
        """Supervise child ``name`` as ``new_name`` from now on, restarted with ``command``
        (a spare process given its work: it runs it already, and a restart must too). Its
        log stays where it is; a restart logs to ``new_name``'s."""
        with self._lock:
            c = self.children.pop(name)
            c.name, c.command, c.started_ms = new_name, command, self.clock()
            # ready as its new command says (the spare's process marks it as the job's)
            c.ready_ms = None if command.ready else c.started_ms
            self.children[new_name] = c
        log.info("%s (pid %d, log %s) now runs %s", name, c.proc.pid, c.log, new_name)
        return c

    def remove(self, names: Sequence[str]) -> list[Child]:
        """No longer supervise these (to stop them, maybe on another thread)."""
        with self._lock:
            return [self.children.pop(n) for n in names if n in self.children]

    def stop(self, order: Sequence[str] | None = None, timeout_s: float = 30.0,
             one_by_one: bool = True) -> None:
        """Stop every child: those in ``order`` first, in that order, one by one, each
        after the one before it exited (spouts drain their trees through the bolts and
        ackers still running), then all the others at once (nothing waits on them any
        more: stopping them in turn only added their stop times, ~1.5 s in the demo).
        ``one_by_one=False``: every child signalled at once."""
        with self._lock:
            first = self.remove([n for n in (order or ()) if n in self.children])
            rest = self.remove(list(self.children))
        if one_by_one:
            stop_children(first, timeout_s)
            stop_children(rest, timeout_s, one_by_one=False)
        else:
            stop_children(first + rest, timeout_s, one_by_one=False)

    def watch(self, stop: threading.Event, say: Callable[[str], None],
              interval_s: float = 0.5) -> threading.Thread:
        """Check on a thread until ``stop``, telling each exit."""
        def loop() -> None:
            while not stop.wait(interval_s):
                for e in self.check().exits:
                    say(str(e))

        t = threading.Thread(target=loop, daemon=True, name="supervisor")
        t.start()
        return t


def stop_children(children: Sequence[Child], timeout_s: float, one_by_one: bool = True
                  ) -> None:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL."""
    def wait(c: Child) -> None:
        try:
            c.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in %ss; killing it", c.name, timeout_s)
            c.proc.kill()
            c.proc.wait(10)
        log.info("stopped %s (exit %s)", c.name, c.proc.returncode)

    for c in children:
        if c.alive():
            c.proc.send_signal(signal.SIGTERM)
            if one_by_one:
                wait(c)
    if not one_by_one:
        for c in children:
            wait(c)


def kill_children(children: Sequence[Child]) -> None:
    """SIGKILL at once, each with its process group (what it started), then wait for
    them: nothing of theirs may run a moment longer."""
    for c in children:
        if c.alive():
            c.signal_group(signal.SIGKILL)
            c.proc.kill()
    for c in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(10)
        log.warning("killed %s (exit %s)", c.name, c.proc.returncode)
