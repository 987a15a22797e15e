"""What a worker's assignment asks it to run: one process per placement (a topology's
bolts on one worker share one Spark application, with its warm standby), each keyed by
everything that shapes its command line, so that a changed placement or spec restarts it."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from services.worker.settings import WorkerSettings
from squall.core.control.assignment import Kind, Placement
from squall.core.control.cluster import WorkerAssignment
from squall.core.errors import TopologyError
from squall.core.topology.code_policy import check_code
from squall.core.topology.model import TopologySpec
from squall.launch import acker_args, bolts_args, spout_args

log = logging.getLogger("squall.worker")
#: The suffix of a bolts job's warm standby among the children.
STANDBY = ".standby"


@dataclass(frozen=True)
class ProcSpec:
    """One child process to run: identified by everything that shapes its command line."""

    key: str
    topology: str
    kind: Kind
    component: str
    args: tuple[str, ...]
    #: the tasks it runs (a bolts job: task 0 of each of its components)
    tasks: tuple[int, ...] = (0,)


def shares_tasks(a: ProcSpec, b: ProcSpec) -> bool:
    """Whether two processes would run a task in common (a spout's task set changed, a
    bolts job's components): the new one starts once the old one exited."""
    return (a.topology, a.kind) == (b.topology, b.kind) \
        and bool(set(a.component.split(",")) & set(b.component.split(","))) \
        and bool(set(a.tasks) & set(b.tasks))


def desired(a: WorkerAssignment, s: WorkerSettings) -> dict[str, ProcSpec]:
    """The processes an assignment asks for (pure, apart from writing topology files)."""
    out: dict[str, ProcSpec] = {}
    bolts: dict[str, list[str]] = {}
    for p in a.placements:
        raw = a.specs.get(p.topology)
        if raw is None:
            log.error("assignment names topology %r without its spec; skipping", p.topology)
            continue
        spec = TopologySpec.from_dict(raw)
        try:
            check_code(spec, s.allowed_modules)
        except TopologyError as e:
            log.error("topology %r: %s; not run here", p.topology, e)
            continue
        if p.kind is Kind.SPOUT:
            if not a.active.get(p.topology, False):
                continue  # spouts emit only while ACTIVE
            sp = spec.component(p.component)
            args = spout_args(_topology_file(s, p.topology, raw), p.component, p.tasks,
                              sp.parallelism, s.bootstrap_servers)
        elif p.kind is Kind.ACKER:
            args = acker_args(_topology_file(s, p.topology, raw), p.tasks,
                              s.bootstrap_servers)
        else:
            bolts.setdefault(p.topology, []).append(p.component)
            continue
        out.update([_proc(p, args, raw)])
    for topo, comps in bolts.items():
        raw = a.specs[topo]
        args = bolts_args(_topology_file(s, topo, raw), sorted(comps), s.bootstrap_servers,
                          s.checkpoints, s.master, s.workdir / "locks")
        placement = Placement(topo, Kind.BOLTS, ",".join(sorted(comps)), ())
        key, ps = _proc(placement, args, raw)
        out[key] = ps
        if s.standby:  # the same job again: it waits on the job's lock (services/bolts/standby)
            out[key + STANDBY] = replace(ps, key=key + STANDBY,
                                            args=(*ps.args, "--standby"))
    return out


def _topology_file(s: WorkerSettings, topology: str, raw: dict[str, Any]) -> Path:
    """The spec as its processes read it (rewritten only when it changed: a process keyed
    by the spec's digest is restarted when it does)."""
    path = s.workdir / "topologies" / f"{topology}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(raw, sort_keys=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _proc(p: Placement, args: list[str], spec: dict[str, Any]) -> tuple[str, ProcSpec]:
    digest = hashlib.sha1(json.dumps([args, spec], sort_keys=True).encode()).hexdigest()[:10]
    key = f"{p.topology}.{p.kind}.{p.component}.{'-'.join(map(str, p.tasks)) or 'all'}.{digest}"
    return key, ProcSpec(key, p.topology, p.kind, p.component, tuple(args), p.tasks or (0,))
