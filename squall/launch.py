"""A topology's processes: their flags, starting, supervising and stopping them.

Used by ``squall run`` (:mod:`squall.local_cluster`) and, for the flags, by the worker.
Stops in order: spouts first (they drain their trees in flight), then the bolts, then the
ackers.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from squall.core.restarts import Restarts
from squall.core.topology import SpoutSpec, TopologySpec
from squall.kafka import ensure_topics
from squall.processes import die_with_parent, free_port


@dataclass
class Child:
    name: str
    module: str
    args: list[str]
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int
    started_ms: int
    policy: Restarts = field(default_factory=Restarts)

    def alive(self) -> bool:
        return self.proc.poll() is None


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _start(name: str, module: str, args: list[str], logdir: Path) -> Child:
    port = free_port()
    log = logdir / f"{name}.log"
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen([sys.executable, "-m", module, *args, "--metrics-port", str(port)],
                            stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    out.close()
    return Child(name, module, args, proc, log, port, _now_ms())


def supervise(children: list[Child], logdir: Path) -> list[str]:
    """Restart children that exited, with backoff (squall/core/restarts.py); what happened, said."""
    said = []
    now = _now_ms()
    for i, c in enumerate(children):
        if c.alive():
            c.policy.running(now, c.started_ms)
            continue
        if not c.policy.waiting:
            due = c.policy.exited(now, c.started_ms)
            said.append(f"{c.name} exited with {c.proc.returncode}; restarting in "
                        f"{(due - now) / 1000:.0f} s ({c.policy.in_a_row} exits in a row"
                        f"{', a crash loop' if c.policy.crash_looping else ''}; see {c.log})")
        if c.policy.due(now):
            c.policy.restarted()
            fresh = _start(c.name, c.module, c.args, logdir)
            fresh.policy = c.policy
            children[i] = fresh
    return said


def acker_args(spec: TopologySpec, tasks: Sequence[int], bootstrap: str) -> list[str]:
    """Flags of ``python -m services.acker`` for ``tasks`` of ``spec``'s ackers."""
    return ["--topology", spec.name, "--tasks", ",".join(map(str, tasks)),
            "--num-ackers", str(spec.ackers), "--bootstrap-servers", bootstrap,
            "--message-timeout-s", str(spec.message_timeout_s)]


def bolts_args(topology_file: Path, components: Sequence[str], bootstrap: str,
               checkpoint_dir: Path, master: str) -> list[str]:
    """Flags of ``python -m services.bolts`` (empty ``components``: every bolt)."""
    args = ["--topology-file", str(topology_file), "--bootstrap-servers", bootstrap,
            "--checkpoint-dir", str(checkpoint_dir), "--master", master]
    return args + (["--components", ",".join(components)] if components else [])


def spout_args(spec: TopologySpec, name: str, tasks: Sequence[int], bootstrap: str,
               parallelism: int | None = None) -> list[str]:
    """Flags of ``python -m services.spout`` for ``tasks`` of spout ``name``."""
    from squall.core.grouping import edge_flag

    s = spec.component(name)
    assert isinstance(s, SpoutSpec)
    edges = [a for e in spec.edges_from(s.name) for a in ("--edge", edge_flag(e))]
    args = ["--topology", spec.name, "--component", s.name, "--topics", ",".join(s.topics),
            "--tasks", ",".join(map(str, tasks)),
            "--num-tasks", str(parallelism or s.parallelism), "--num-ackers", str(spec.ackers),
            "--scheme", s.scheme, "--guarantee", spec.guarantee,
            "--message-timeout-s", str(spec.message_timeout_s),
            "--max-retries", str(spec.retry.max_retries if spec.retry.max_retries is not None
                                 else 1_000_000),
            "--retry-initial-ms", str(spec.retry.initial_delay_ms),
            "--retry-max-ms", str(spec.retry.max_delay_ms),
            "--bootstrap-servers", bootstrap, *edges]
    if s.fields:
        args += ["--fields", ",".join(s.fields)]
    if spec.max_spout_pending:
        args += ["--max-spout-pending", str(spec.max_spout_pending)]
    return args


def start_topology(spec: TopologySpec, topology_file: Path, bootstrap: str, workdir: Path,
                   master: str = "local[*]") -> list[Child]:
    """Acker, spouts and bolts of ``spec`` as child processes (not waiting for them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for s in spec.spouts:
        ensure_topics(bootstrap, {t: s.parallelism for t in s.topics}, 30)
    children = []
    if spec.ackers:
        children.append(_start("acker", "services.acker",
                               acker_args(spec, range(spec.ackers), bootstrap), workdir))
    if spec.bolts:
        children.append(_start("bolts", "services.bolts", bolts_args(
            topology_file, (), bootstrap, workdir / "checkpoints", master), workdir))
    for s in spec.spouts:
        children.append(_start(f"spout-{s.name}", "services.spout",
                               spout_args(spec, s.name, range(s.parallelism), bootstrap),
                               workdir))
    return children


def stop_topology(children: list[Child], timeout_s: float = 30) -> None:
    """Spouts first (they drain), then bolts, then ackers."""
    order = sorted(children, key=lambda c: (0 if c.name.startswith("spout") else
                                            1 if c.name == "bolts" else 2))
    for c in order:
        if c.alive():
            c.proc.send_signal(signal.SIGTERM)
            try:
                c.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait(10)


def spout_acked(children: list[Child]) -> float:
    total = 0.0
    for c in children:
        if not c.name.startswith("spout"):
            continue
        with contextlib.suppress(OSError):
            body = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics",
                                          timeout=2).read().decode()
            total += sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                         if line.startswith("squall_spout_acked_total{"))
    return total
