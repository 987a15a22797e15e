"""A topology's processes: their flags, starting, supervising and stopping them.

Used by ``squall run`` (:mod:`squall.local_cluster`) and, for the flags, by the worker.
Stops the spouts first, one by one (they drain their trees in flight through the bolts
and ackers), then the bolts and ackers together.
"""

from __future__ import annotations

import contextlib
import os
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from squall.core.topology.model import TopologySpec
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients, load_properties
from squall.supervision import Command, Supervisor


def acker_args(topology_file: Path, tasks: Sequence[int], bootstrap: str) -> list[str]:
    """Flags of ``python -m services.acker`` for ``tasks`` of the topology's ackers (the
    rest comes from the topology file)."""
    return ["--topology-file", str(topology_file), "--tasks", ",".join(map(str, tasks)),
            "--bootstrap-servers", bootstrap]


def bolts_args(topology_file: Path, components: Sequence[str], bootstrap: str,
               checkpoint_dir: Path, master: str, lock_dir: Path | None = None) -> list[str]:
    """Flags of ``python -m services.bolts`` (empty ``components``: every bolt)."""
    args = ["--topology-file", str(topology_file), "--bootstrap-servers", bootstrap,
            "--checkpoint-dir", str(checkpoint_dir), "--master", master]
    args += ["--lock-dir", str(lock_dir)] if lock_dir is not None else []
    return args + (["--components", ",".join(components)] if components else [])


def spout_args(topology_file: Path, name: str, tasks: Sequence[int], num_tasks: int,
               bootstrap: str) -> list[str]:
    """Flags of ``python -m services.spout`` for ``tasks`` of spout ``name`` (the rest comes
    from the topology file, as for the bolts)."""
    return ["--topology-file", str(topology_file), "--component", name,
            "--tasks", ",".join(map(str, tasks)), "--num-tasks", str(num_tasks),
            "--bootstrap-servers", bootstrap]


def start_topology(spec: TopologySpec, topology_file: Path, bootstrap: str, workdir: Path,
                   master: str = "local[*]") -> Supervisor:
    """Acker, spouts and bolts of ``spec`` as supervised child processes (not waiting for
    them); stop them with :func:`stop_topology`."""
    kafka = KafkaClients(bootstrap, load_properties(os.environ))
    for s in spec.spouts:
        ensure_topics(kafka, {t: s.parallelism for t in s.topics}, 30)
    sup = Supervisor(workdir)
    if spec.ackers:
        sup.start("acker", Command("services.acker",
                                   tuple(acker_args(topology_file, range(spec.ackers), bootstrap))))
    if spec.bolts:
        sup.start("bolts", Command("services.bolts", tuple(bolts_args(
            topology_file, (), bootstrap, workdir / "checkpoints", master)), ready=True))
    for s in spec.spouts:
        sup.start(f"spout-{s.name}", Command("services.spout", tuple(spout_args(
            topology_file, s.name, range(s.parallelism), s.parallelism, bootstrap))))
    return sup


def stop_topology(sup: Supervisor, timeout_s: float = 30) -> None:
    """Spouts first (they drain through the bolts and ackers), then bolts and ackers
    together."""
    sup.stop([n for n in sup.children if n.startswith("spout-")], timeout_s)


def spout_acked(sup: Supervisor) -> float:
    """Source messages fully processed, summed over the spouts' /metrics."""
    total = 0.0
    for c in list(sup.children.values()):
        if not c.name.startswith("spout-"):
            continue
        with contextlib.suppress(OSError):
            body = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics",
                                          timeout=2).read().decode()
            total += sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                         if line.startswith("squall_spout_acked_total{"))
    return total
