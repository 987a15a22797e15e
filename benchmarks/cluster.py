"""The exact word count on a three-host Squall cluster (benchmarks/cluster_hosts.py), fed
at a steady rate, with a host failing while it runs.

Each fault runs on a cluster of its own, brought up for it: ``kill`` kills every process
of h3 at once (a power loss), ``cut`` takes h3 off the network for ``--cut-s`` seconds and
then heals it (h1, the broker's host, is never failed); ``restart`` restarts h3's workers
one at a time, as a rolling upgrade does (SIGTERM, then started again once it exited; the
next once it is registered again), and its ``recovery_s`` is the longest the committed
offsets stood still during the roll. The fault strikes once a third of
the sentences were fed; the feed goes on, then the pipeline drains and is checked from
Kafka and the Trident state in PostgreSQL.

Prints, last, one JSON object: ``faults``, per fault its ``fault``, ``recovery_s`` (from the
fault until every unit the host ran runs on another host and the source offsets are
committed again), ``lost`` (source messages neither committed nor dead-lettered),
``healthy_dead_lettered``, ``counts_delta`` (the sum over words of |counted - fed|),
``reassigned_tasks`` (the units that moved) and ``double_runs`` (units seen running on two
hosts at once, from the hosts' process tables). Needs root (network namespaces).
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.chaos import read_topic
from benchmarks.chaos_load import Commits, Feeder, wait
from benchmarks.cluster_hosts import (
    WORKER_PORTS,
    HostCluster,
    doubles,
    host_cluster,
    say,
    units_running,
)
from squall.core.topology.topics import dlq_topic
from squall.demo import SOURCE, SOURCE_PARTITIONS, Progress, demo_topology, state_counts
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients

#: The host that fails: it runs workers of every kind, not the broker.
FAILED = "h3"


class Watch(threading.Thread):
    """Samples what runs on each host twice a second: the units seen on two hosts at once."""

    def __init__(self, cl: HostCluster) -> None:
        super().__init__(daemon=True, name="watch")
        self.cl = cl
        #: each unit seen on two hosts at once, and when first (monotonic seconds)
        self.doubled: dict[tuple[str, str], float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                for u in doubles(units_running(self.cl.hosts)):
                    self.doubled.setdefault(u, time.monotonic())
            except Exception as e:  # a process table read while the host is being killed
                say(f"watch: {e}")


def run_fault(fault: str, home: Path, sentences: int, rate: float, cut_s: float
              ) -> dict[str, Any]:
    with host_cluster(home) as cl:
        ensure_topics(KafkaClients(cl.bootstrap), {SOURCE: SOURCE_PARTITIONS})
        spec = demo_topology(cl.bootstrap, exact=True)
        tid = str(cl.client().submit(spec.to_json())["id"])
        say(f"{fault}: submitted {tid}; waiting for its bolt queries")
        if not wait(lambda: all(b["running"] for b in cl.client().storm_topology(tid)["bolts"]),
                    300):
            raise SystemExit("the bolt queries did not start in 300 s")
        prog = Progress(KafkaClients(cl.bootstrap), cl.client(), tid)
        feeder = Feeder(cl.bootstrap, sentences, rate, False, None)
        watch = Watch(cl)
        watch.start()
        feeder.start()
        wait(lambda: feeder.fed >= sentences // 3, 600)
        host = cl.hosts.host(FAILED)
        before = units_running(cl.hosts)[FAILED]
        say(f"{fault}: {FAILED} runs {sorted(before)}; striking at {feeder.fed} fed")
        t0 = time.monotonic()
        recovery: float | None
        if fault == "restart":
            recovery = _roll(cl, prog, feeder)
            say(f"restart: every worker of {FAILED} restarted in {time.monotonic() - t0:.0f} s;"
                f" the commits stood still {recovery} s at most")
        else:
            if fault == "kill":
                cl.hosts.kill(host)
            else:
                cl.hosts.cut(host)
            recovery = _recovery(cl, prog, before, t0)
            say(f"{fault}: recovered in {recovery} s")
        if fault == "cut":
            wait(lambda: False, max(0.0, cut_s - (time.monotonic() - t0)))
            cl.hosts.heal(host)
            say(f"{fault}: {FAILED} healed after {time.monotonic() - t0:.0f} s")
        feeder.done.wait()
        say(f"{fault}: fed {feeder.fed}; waiting for every one to be committed")
        wait(lambda: prog.committed() >= feeder.fed, 300)
        time.sleep(2)  # a last sample of what runs where
        watch.stop.set()
        committed = prog.committed()
        letters = read_topic(cl.bootstrap, dlq_topic(tid), 1)
        counted = state_counts(cl.state_url, tid)
        return {"fault": fault, "recovery_s": recovery, "fed": feeder.fed,
                "committed": committed, "lost": max(0, feeder.fed - committed - len(letters)),
                "healthy_dead_lettered": len(letters),
                "counts_delta": sum(abs(counted[w] - feeder.words[w])
                                    for w in set(counted) | set(feeder.words)),
                "reassigned_tasks": len(before), "double_runs": len(watch.doubled),
                # each with the seconds from the fault until it was first seen
                "doubled": sorted([*u, round(at - t0, 1)] for u, at in watch.doubled.items())}


def _registered(cl: HostCluster, wid: str) -> bool:
    return any(w["id"] == wid for w in cl.client().workers())


def _roll(cl: HostCluster, prog: Progress, feeder: Feeder) -> float:
    """A rolling restart of h3's workers, one at a time, each once the one before is
    registered again; the longest the committed offsets stood still meanwhile (seconds)."""
    commits = Commits(prog, lambda: feeder.fed)
    commits.start()
    try:
        for kind in WORKER_PORTS:
            cl.restart(FAILED, f"worker-{kind}")
            wid = f"{kind}-{FAILED}"
            if not wait(functools.partial(_registered, cl, wid), 120):
                raise SystemExit(f"{wid} did not register again in 120 s")
            say(f"restart: {wid} back")
        # what moved back to h3 is running and acking again
        base = prog.committed()
        wait(lambda: prog.committed() > base, 120)
    finally:
        commits.stop.set()
    return round(commits.max_stall_s, 1)


def _recovery(cl: HostCluster, prog: Progress, lost: set[tuple[str, str]], t0: float,
              timeout_s: float = 180.0) -> float | None:
    """Seconds from ``t0`` until every unit in ``lost`` runs on a surviving host and the
    committed source offsets moved after that; None if not within ``timeout_s``."""
    def moved_elsewhere() -> bool:
        running = units_running(cl.hosts)
        elsewhere = set().union(*(u for h, u in running.items() if h != FAILED))
        return lost <= elsewhere

    if not wait(moved_elsewhere, timeout_s):
        return None
    base = prog.committed()
    if not wait(lambda: prog.committed() > base, timeout_s):
        return None
    return round(time.monotonic() - t0, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", default="kill,cut",
                    help="kill, cut, restart (comma-separated: each in turn)")
    ap.add_argument("--sentences", type=int, default=30_000)
    ap.add_argument("--rate", type=float, default=500, help="sentences per second")
    ap.add_argument("--cut-s", type=float, default=60.0, help="how long h3 is cut off")
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args(argv)
    home = a.workdir or Path(tempfile.mkdtemp(prefix="squall-cluster-"))
    faults = [f for f in a.faults.split(",") if f]
    if not set(faults) <= {"kill", "cut", "restart"}:
        ap.error(f"--faults: kill, cut and restart only (got {a.faults!r})")
    results = [run_fault(f, home / f, a.sentences, a.rate, a.cut_s) for f in faults]
    print(json.dumps({"hosts": 3, "sentences": a.sentences, "rate": a.rate,
                      "faults": results}))
    ok = all(r["lost"] == 0 and r["counts_delta"] == 0 and r["healthy_dead_lettered"] == 0
             and r["recovery_s"] is not None and r["recovery_s"] <= 30
             and r["double_runs"] == 0 for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
