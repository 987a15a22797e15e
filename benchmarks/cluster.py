"""The exact word count on a three-host Squall cluster (benchmarks/cluster_hosts.py), fed
at a steady rate, with a host failing while it runs.

A fault is ``KIND:HOST`` (``kill:h1``); each runs on a cluster of its own, brought up for
it. ``kill`` kills every process of the host at once (a power loss: on h1 a broker, the
leading Spark master, the API leader, a ZooKeeper server and a worker of each kind);
``cut`` takes the host off the network for ``--cut-s`` seconds and then heals it (the
state database's host, h3, takes the database with it: a kill starts it again after
``STATE_BACK_S``, as the host's reboot would, and both faults' ``recovery_s`` run from its
return, ``moved_s`` from the fault until the host's units ran elsewhere);
``cut-zk`` cuts it off ZooKeeper alone for as long (its clients of the other servers and
its own server's quorum: it still reaches every broker), ``cut-kafka`` off Kafka alone
(it still reaches the ensemble);
``freeze`` stops (SIGSTOP) the host's spout worker and bolts worker with every process
under them for ``--freeze-s`` seconds, longer than the ZooKeeper session, then wakes them
(SIGCONT: the task processes, and the workers 3 s later): the woken tasks must commit, emit
and run nothing for the tasks that moved (``zombies_held`` counts the task logs that say they held);
``pg-down`` (no host) shuts the state database down for ``--cut-s`` seconds and starts it
again, and ``ro-checkpoints`` (no host) makes the shared checkpoint folder read-only for
every process for ``--ro-s`` seconds: their ``recovery_s`` runs from the return;
``restart`` restarts the host's workers one at a time, as a rolling upgrade does (SIGTERM,
then started again once it exited; the next once it is registered again), and its
``recovery_s`` is the longest the committed offsets stood still during the roll. The fault
strikes once a third of the sentences were fed; the feed goes on, then the pipeline drains
and is checked from Kafka and the Trident state in PostgreSQL.

Prints, last, one JSON object: ``faults``, per fault its ``fault``, ``recovery_s`` (from the
fault until every unit the host ran runs on another host and the source offsets are
committed again), ``lost`` (source messages neither committed nor dead-lettered),
``healthy_dead_lettered``, ``counts_delta`` (the sum over words of |counted - fed|),
``reassigned_tasks`` (the units that moved), ``double_runs`` (units seen running on two
hosts at once, from the hosts' process tables) and ``offset_regressions`` (times a
committed source offset was seen below what it had been). Needs root (network
namespaces).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.chaos import read_topic
from benchmarks.chaos_load import Commits, Feeder, wait
from benchmarks.cluster_hosts import (
    KAFKA_CONTROLLER_PORT,
    KAFKA_PORT,
    MASTER_HOSTS,
    STATE_HOST,
    WORKER_HOSTS,
    WORKER_PORTS,
    HostCluster,
    doubles,
    host_cluster,
    say,
    tree,
    units_running,
)
from squall.core.topology.topics import dlq_topic
from squall.demo import SOURCE, SOURCE_PARTITIONS, Progress, demo_topology, state_counts
from squall.dev.ensemble import PORT as ZK_PORT
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients

#: Every fault, in the order ``--faults all`` runs them.
KINDS = ("kill", "cut", "cut-zk", "cut-kafka", "freeze", "restart", "pg-down",
         "ro-checkpoints")
#: The faults of no host.
HOSTLESS = ("pg-down", "ro-checkpoints")
#: How long the state database stays dead with its killed host before it starts again.
STATE_BACK_S = 30.0
ALL = (*(f"{k}:{h}" for k in ("kill", "cut") for h in WORKER_HOSTS), "cut-zk:h3",
       "cut-kafka:h3", "freeze:h2", "restart:h3", "pg-down",
       "ro-checkpoints")
#: The workers a freeze stops, with everything they started.
FROZEN = ("worker-spout", "worker-bolts")
#: How long a freeze's woken task processes run before their workers wake.
ZOMBIE_S = 3.0
#: What a task process logs when its worker's lease ran out (squall/lease.py, BatchSink).
HELD = ("the worker's lease ran out", "squall: the worker's lease")
#: The TCP ports a partial partition drops: ZooKeeper's (clients, quorum, election),
#: Kafka's (clients, controllers).
CUT_PORTS = {"cut-zk": (ZK_PORT, 2888, 3888), "cut-kafka": (KAFKA_PORT, KAFKA_CONTROLLER_PORT)}


def bound_s(fault: str) -> float:
    """How soon acks must flow again after ``fault``: 30 s, or 60 s where it takes the
    leading Spark master, whose standby's take-over alone is 20 s (docs/operations.md)."""
    return 60.0 if fault in (f"{k}:{MASTER_HOSTS[0]}" for k in ("kill", "cut")) else 30.0


def parse_faults(text: str) -> list[tuple[str, str]]:
    """``kill:h1,cut:h3`` (or ``all``) as (kind, host) pairs; a clear error otherwise."""
    out: list[tuple[str, str]] = []
    for f in (ALL if text == "all" else [f for f in text.split(",") if f]):
        kind, _, host = f.partition(":")
        if kind in HOSTLESS and not host:
            out.append((kind, host))
            continue
        if kind not in KINDS or kind in HOSTLESS or host not in WORKER_HOSTS:
            raise ValueError(f"fault {f!r}: KIND:HOST, KIND one of {', '.join(KINDS)} and HOST "
                             f"one of {', '.join(WORKER_HOSTS)} ({', '.join(HOSTLESS)} alone)")
        out.append((kind, host))
    return out


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


def run_fault(fault: str, home: Path, sentences: int, rate: float, cut_s: float,
              freeze_s: float = 20.0, ro_s: float = 30.0) -> dict[str, Any]:
    (kind, failed), = parse_faults(fault)
    with host_cluster(home) as cl:
        ensure_topics(KafkaClients(cl.bootstrap), {SOURCE: SOURCE_PARTITIONS})
        # an acker task on every host: each host runs some of the topology
        spec = demo_topology(cl.bootstrap, exact=True, ackers=len(WORKER_HOSTS))
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
        commits = Commits(prog, lambda: feeder.fed)
        commits.start()
        wait(lambda: feeder.fed >= sentences // 3, 600)
        if kind == "pg-down":
            return _state_down(cl, fault, prog, feeder, watch, commits, cut_s, tid)
        if kind == "ro-checkpoints":
            return _checkpoints_read_only(cl, fault, prog, feeder, watch, commits, ro_s, tid)
        host = cl.hosts.host(failed)
        before = units_running(cl.hosts)[failed]
        say(f"{fault}: {failed} runs {sorted(before)}; striking at {feeder.fed} fed")
        t0 = time.monotonic()
        recovery: float | None = None
        moved: float | None = None
        takes_state = failed == STATE_HOST and kind in ("kill", "cut")
        if kind == "restart":
            recovery = _roll(cl, failed, prog, commits)
            say(f"{fault}: every worker of {failed} restarted in {time.monotonic() - t0:.0f} s;"
                f" the commits stood still {recovery} s at most")
        else:
            if kind == "kill":
                cl.hosts.kill(host)
            elif kind == "cut":
                cl.hosts.cut(host)
            elif kind == "freeze":
                frozen = [p for n in FROZEN for p in tree(cl.hosts, host, cl.procs[failed][n].pid)]
                _signal(frozen, signal.SIGSTOP)
                before -= units_running(cl.hosts)[failed]  # what the frozen ones ran
                say(f"{fault}: froze {len(frozen)} processes running {sorted(before)}")
            else:
                cl.hosts.cut_ports(host, CUT_PORTS[kind])
            if takes_state:  # nothing stateful commits before the database is back
                moved = _moved(cl, failed, before, t0)
                say(f"{fault}: its units ran elsewhere after {moved} s")
                if kind == "kill":
                    wait(lambda: False, max(0.0, STATE_BACK_S - (time.monotonic() - t0)))
                    cl.state.start()
                    say(f"{fault}: the state database is back")
                    recovery = _since_return(fault, prog)
            else:
                recovery = _recovery(cl, failed, prog, before, t0)
                say(f"{fault}: recovered in {recovery} s")
        if kind == "freeze":
            wait(lambda: False, max(0.0, freeze_s - (time.monotonic() - t0)))
            # The tasks first, their workers ZOMBIE_S later: the woken tasks alone, with
            # nothing but their lease between them and the tasks that moved.
            roots = [cl.procs[failed][n].pid for n in FROZEN]
            _signal([p for p in frozen[::-1] if p not in roots], signal.SIGCONT)
            wait(lambda: False, ZOMBIE_S)
            _signal(roots, signal.SIGCONT)
            say(f"{fault}: woke them after {time.monotonic() - t0:.0f} s")
        if kind.startswith("cut"):
            wait(lambda: False, max(0.0, cut_s - (time.monotonic() - t0)))
            if kind == "cut":
                cl.hosts.heal(host)
            else:
                cl.hosts.heal_ports(host)
            say(f"{fault}: {failed} healed after {time.monotonic() - t0:.0f} s")
            if takes_state:
                recovery = _since_return(fault, prog)
        extra = {"moved_s": moved} if takes_state else {}
        return {**_outcome(cl, fault, prog, feeder, watch, commits, tid, t0), **extra,
                "recovery_s": recovery, "reassigned_tasks": len(before),
                "zombies_held": _held(host.disk) if kind == "freeze" else None}


def _outcome(cl: HostCluster, fault: str, prog: Progress, feeder: Feeder, watch: Watch,
             commits: Commits, tid: str, t0: float) -> dict[str, Any]:
    """Once the feed ended and drained: what was lost, counted, run twice."""
    feeder.done.wait()
    say(f"{fault}: fed {feeder.fed}; waiting for every one to be committed")
    wait(lambda: prog.committed() >= feeder.fed, 300)
    time.sleep(2)  # a last sample of what runs where
    watch.stop.set()
    commits.stop.set()
    committed = prog.committed()
    letters = read_topic(cl.bootstrap, dlq_topic(tid), 1)
    counted = state_counts(cl.state_url, tid)
    return {"fault": fault, "fed": feeder.fed,
            "committed": committed, "lost": max(0, feeder.fed - committed - len(letters)),
            "healthy_dead_lettered": len(letters),
            "counts_delta": sum(abs(counted[w] - feeder.words[w])
                                for w in set(counted) | set(feeder.words)),
            "double_runs": len(watch.doubled), "offset_regressions": commits.regressions,
            # each with the seconds from the fault until it was first seen
            "doubled": sorted([*u, round(at - t0, 1)] for u, at in watch.doubled.items())}


def _checkpoints_read_only(cl: HostCluster, fault: str, prog: Progress, feeder: Feeder,
                           watch: Watch, commits: Commits, ro_s: float, tid: str
                           ) -> dict[str, Any]:
    """The shared checkpoint folder read-only for every process for ``ro_s``, then writable
    again; ``recovery_s`` from then until the committed offsets move."""
    t0 = time.monotonic()
    pids = [p.pid for procs in cl.procs.values() for p in procs.values() if p.poll() is None]
    for pid in pids:
        cl.hosts.shared_writable(pid, False)
    say(f"{fault}: the shared folder is read-only for {len(pids)} processes")
    wait(lambda: False, ro_s)
    for pid in pids:
        with contextlib.suppress(Exception):  # one that exited meanwhile
            cl.hosts.shared_writable(pid, True)
    say(f"{fault}: writable again after {time.monotonic() - t0:.0f} s")
    recovery = _since_return(fault, prog)
    return {**_outcome(cl, fault, prog, feeder, watch, commits, tid, t0),
            "recovery_s": recovery, "reassigned_tasks": 0, "zombies_held": None}


def _since_return(fault: str, prog: Progress) -> float | None:
    """Seconds from now (what failed is back) until the committed offsets move."""
    back, base = time.monotonic(), prog.committed()
    moved = wait(lambda: prog.committed() > base, 180)
    recovery = round(time.monotonic() - back, 1) if moved else None
    say(f"{fault}: committing again {recovery} s after its return")
    return recovery


class StateAlarm(threading.Thread):
    """Reads the bolts jobs' ``squall_bolt_state_database_up`` every second: the longest it
    stood at 0, as the SquallStateDatabaseDown alert sees it."""

    def __init__(self, cl: HostCluster) -> None:
        super().__init__(daemon=True, name="state-alarm")
        self.cl = cl
        self.stop = threading.Event()
        self.longest_s = 0.0

    def run(self) -> None:
        down_since: float | None = None
        while not self.stop.wait(1.0):
            try:
                urls = {e["url"] for w in self.cl.client().workers() for e in w["running"]
                        if e["kind"] == "bolts"}
                values = [_gauge(u, "squall_bolt_state_database_up") for u in sorted(urls)]
            except Exception as e:  # an API replica or a job between two lives
                say(f"state alarm: {e}")
                continue
            now = time.monotonic()
            if 0.0 in values:
                down_since = now if down_since is None else down_since
                self.longest_s = max(self.longest_s, now - down_since)
            else:
                down_since = None


def _gauge(url: str, name: str) -> float | None:
    with urllib.request.urlopen(url, timeout=2) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


def _state_down(cl: HostCluster, fault: str, prog: Progress, feeder: Feeder, watch: Watch,
                commits: Commits, down_s: float, tid: str) -> dict[str, Any]:
    """The state database shut down for ``down_s``, then started again; ``recovery_s`` from
    its return until the committed offsets move, ``alarm_s`` how long the bolts jobs said
    it was down (the alert fires past its 30 s)."""
    t0 = time.monotonic()
    alarm = StateAlarm(cl)
    alarm.start()
    cl.state.stop()
    say(f"{fault}: the state database is down")
    wait(lambda: False, down_s)
    alarm.stop.set()
    cl.state.start()
    say(f"{fault}: the state database is back after {time.monotonic() - t0:.0f} s")
    recovery = _since_return(fault, prog)
    return {**_outcome(cl, fault, prog, feeder, watch, commits, tid, t0),
            "recovery_s": recovery, "reassigned_tasks": 0, "zombies_held": None,
            "alarm_s": round(alarm.longest_s, 1)}


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _held(disk: Path) -> int:
    """The frozen workers' task logs that say a woken process held for its lease."""
    logs = [p for n in FROZEN for p in (disk / n / "logs").glob("*.log")]
    return sum(any(h in p.read_text(errors="replace") for h in HELD) for p in logs)


def _registered(cl: HostCluster, wid: str) -> bool:
    return any(w["id"] == wid for w in cl.client().workers())


def _roll(cl: HostCluster, failed: str, prog: Progress, commits: Commits) -> float:
    """A rolling restart of ``failed``'s workers, one at a time, each once the one before
    is registered again; the longest the committed offsets stood still meanwhile
    (seconds, since the run began: a roll that stalls nothing adds nothing)."""
    for kind in WORKER_PORTS:
        cl.restart(failed, f"worker-{kind}")
        wid = f"{kind}-{failed}"
        if not wait(functools.partial(_registered, cl, wid), 120):
            raise SystemExit(f"{wid} did not register again in 120 s")
        say(f"restart: {wid} back")
    # what moved back to the host is running and acking again
    base = prog.committed()
    wait(lambda: prog.committed() > base, 120)
    return round(commits.max_stall_s, 1)


def _moved(cl: HostCluster, failed: str, lost: set[tuple[str, str]], t0: float,
           timeout_s: float = 180.0) -> float | None:
    """Seconds from ``t0`` until every unit in ``lost`` runs on a surviving host; None if
    not within ``timeout_s``."""
    def moved_elsewhere() -> bool:
        running = units_running(cl.hosts)
        elsewhere = set().union(*(u for h, u in running.items() if h != failed))
        return lost <= elsewhere

    return round(time.monotonic() - t0, 1) if wait(moved_elsewhere, timeout_s) else None


def _recovery(cl: HostCluster, failed: str, prog: Progress, lost: set[tuple[str, str]],
              t0: float, timeout_s: float = 180.0) -> float | None:
    """Seconds from ``t0`` until every unit in ``lost`` runs on a surviving host and the
    committed source offsets moved after that; None if not within ``timeout_s``."""
    moved = _moved(cl, failed, lost, t0, timeout_s)
    say(f"{failed}'s units ran elsewhere after {moved} s")
    if moved is None:
        return None
    base = prog.committed()
    if not wait(lambda: prog.committed() > base, timeout_s):
        return None
    return round(time.monotonic() - t0, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", default="kill:h1,cut-zk:h3,cut:h3",
                    help=f"KIND:HOST, comma-separated, each in turn, or all ({','.join(ALL)})")
    ap.add_argument("--sentences", type=int, default=30_000)
    ap.add_argument("--rate", type=float, default=500, help="sentences per second")
    ap.add_argument("--cut-s", type=float, default=60.0, help="how long a host is cut off")
    ap.add_argument("--ro-s", type=float, default=30.0,
                    help="how long the shared checkpoint folder is read-only")
    ap.add_argument("--freeze-s", type=float, default=20.0,
                    help="how long a frozen worker stays stopped (over the session timeout)")
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args(argv)
    try:
        faults = parse_faults(a.faults)
    except ValueError as e:
        ap.error(f"--faults: {e}")
    home = a.workdir or Path(tempfile.mkdtemp(prefix="squall-cluster-"))
    results = []
    for k, h in faults:
        results.append(run_fault(f"{k}:{h}" if h else k, home / (f"{k}-{h}" if h else k),
                                 a.sentences, a.rate, a.cut_s, a.freeze_s, a.ro_s))
        say(f"result {json.dumps(results[-1])}")  # a run cut short keeps them
    print(json.dumps({"hosts": 3, "sentences": a.sentences, "rate": a.rate,
                      "faults": results}))
    ok = all(r["lost"] == 0 and r["counts_delta"] == 0 and r["healthy_dead_lettered"] == 0
             and r["recovery_s"] is not None and r["recovery_s"] <= bound_s(r["fault"])
             and r["double_runs"] == 0 and r["offset_regressions"] == 0
             and r.get("alarm_s", 30) >= 30 for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
