"""The worker: a ZooKeeper registration, an assignment watch, and child processes.

Each placement of the worker's assignment becomes one child process running the
existing service (``services.spout`` / ``services.acker`` / ``services.bolts``;
a topology's bolts on one worker share one Spark application). Spouts run only
while their topology is ACTIVE: deactivating stops them with SIGTERM, which
drains their trees in flight and commits. While ZooKeeper is unreachable the
children keep running as they are (fenced: paused after the grace, killed once the
session has surely ended); on reconnect the worker registers again and takes the
assignment as it then is. Fenced from Kafka, it leaves the cluster
(services/worker/kafka_watch.py). With a fence its children act only under the lease it
renews (services/worker/lease_renewal.py).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from services.loop_queries import Handler
from services.worker.cleanup import clean_killed
from services.worker.kafka_peers import KafkaPeers
from services.worker.kafka_watch import KafkaWatch
from services.worker.lease_renewal import LeaseRenewal
from services.worker.logs import log_route
from services.worker.processes import STANDBY, ProcSpec, desired, shares_tasks
from services.worker.settings import WorkerSettings
from services.worker.spare import SPARE, Spare
from squall import lease as lease_file
from squall.coord import ASSIGNMENTS, WORKERS, assignment_writers, connect
from squall.core.control.assignment import Kind
from squall.core.control.cluster import WorkerAssignment, WorkerInfo
from squall.core.control.fencing import Kill, WorkerFences
from squall.core.control.lease import NONE
from squall.core.control.restarts import Restarts
from squall.core.errors import CoordinationError
from squall.core.reliability.clock import Clock
from squall.lease import LEASE_FILE_ENV
from squall.supervision import Child, Command, Supervisor, kill_children, stop_children
from squall.wallclock import SystemClock

log = logging.getLogger("squall.worker")
_MODULES = {Kind.SPOUT: "services.spout", Kind.ACKER: "services.acker",
            Kind.BOLTS: "services.bolts"}


class WorkerService:
    def __init__(self, settings: WorkerSettings, registry: CollectorRegistry | None = None,
                 clock: Clock | None = None) -> None:
        self.s = settings
        lab = ["worker", "kind"]
        self.m_procs = Gauge("squall_worker_processes", "Task processes running", lab,
                             registry=registry).labels(settings.worker_id, str(settings.kind))
        self.m_restarts = Counter("squall_worker_restarts_total",
                                  "Task processes restarted after exiting", lab,
                                  registry=registry).labels(settings.worker_id,
                                                            str(settings.kind))
        self.m_looping = Gauge("squall_worker_crash_looping",
                               "Task processes in a crash loop (exiting again and again soon "
                               "after each start; still restarted with backoff)", lab,
                               registry=registry).labels(settings.worker_id, str(settings.kind))
        self.m_paused = Gauge("squall_worker_paused_processes", "Task processes paused "
                              "while cut off from ZooKeeper", lab, registry=registry).labels(
            settings.worker_id, str(settings.kind))
        Gauge("squall_worker_zookeeper_connected", "1 while the ZooKeeper session is "
              "connected", lab, registry=registry).labels(
            settings.worker_id, str(settings.kind)).set_function(
            lambda: 1.0 if getattr(getattr(self, "zk", None), "connected", False) else 0.0)
        self.clock = clock or SystemClock()
        self.path = f"{WORKERS}/{settings.worker_id}"
        self.sup = Supervisor(settings.workdir / "logs", self.clock.now_ms,
                              echo=settings.log_stdout,
                              restarts=lambda: Restarts(crash_loop_after=settings.crash_loop_after),
                              metrics_host=settings.metrics_host)
        self.running: dict[str, ProcSpec] = {}  # what each supervised child runs
        self.assignment = WorkerAssignment()  # as last read: run only for self.session
        self.session = ""  # the ZooKeeper session this worker is registered in ("": none)
        self._idle = WorkerAssignment()
        self._planned: WorkerAssignment | None = None
        self._want: dict[str, ProcSpec] = {}
        self.wake = threading.Event()
        self.lost = threading.Event()
        self.zk: Any = None  # the ZooKeeper client, once connected
        # processes being stopped, by pid (a spout drains): published until they exit, so that
        # the leader gives their tasks to another worker only then, and a teardown waits
        self._draining: dict[int, tuple[ProcSpec, Child]] = {}
        self._lock = threading.Lock()
        self.started_ms = self.clock.now_ms()
        self._published: bytes | None = None
        grace, kgrace = settings.fence_after_s, settings.kafka_fence_after_s
        # Cut off from Kafka alone (services/worker/kafka_watch.py), the tasks stop and the
        # worker leaves the cluster, so that the leader gives its units to the others.
        self.fences = WorkerFences(None if grace is None else int(grace * 1000),
                                   None if kgrace is None else int(kgrace * 1000),
                                   int(settings.session_timeout_s * 1000),
                                   int(settings.kafka_fence_alone_s * 1000))
        self._withdrawn = False
        self._registrations = 0
        # With a fence, the tasks' lease (squall/core/control/lease.py), renewed only for the
        # session they were started in (``_owner``).
        self._owner: int | None = None
        self.lease = None if grace is None else LeaseRenewal(
            settings.workdir.resolve() / "lease", self._lease_zk, settings.session_timeout_s,
            self.path)
        self.spare = Spare(self.sup, settings.workdir / "spare", settings.bootstrap_servers,
                           settings.master, self._task_env())

    # ----- ZooKeeper ------------------------------------------------------

    def _state(self, state: Any) -> None:
        log.info("ZooKeeper connection: %s", state)
        with self._lock:
            if state == "LOST":
                # The session ended: the ephemeral node is gone (register again on reconnect)
                # and the leader may have given this worker's units to others. Nothing of the
                # old assignment runs on: the next one is written for the new session.
                self.lost.set()
                self.session = ""
                self._owner = None
            if state == "CONNECTED" and self.session and self.zk is not None:
                # the same session again: nobody else was given its tasks
                self._owner = (self.zk.client_id or (None,))[0]
            self.fences.zookeeper(str(state), self.clock.now_ms())
        self.wake.set()

    def _kafka(self, reachable: bool, sent_ms: int, others: bool) -> None:
        """The Kafka watch's word after each of its rounds (its writes sent at ``sent_ms``:
        unacknowledged since then; ``others``: peers' writes acknowledged meanwhile)."""
        with self._lock:
            self.fences.kafka_reachable(reachable, sent_ms, others)
        self.wake.set()

    def _lease_zk(self) -> Any:
        """The ZooKeeper client, while it is in the session the tasks were started in."""
        zk = self.zk
        cid = getattr(zk, "client_id", None)
        with self._lock:
            return zk if cid is not None and cid[0] == self._owner else None

    def _fence_if_due(self) -> bool:
        """Pause every task process once cut off from ZooKeeper for its fence's grace, and
        resume them if the session held; kill them once it ended, or once cut off from
        Kafka for that fence's grace. Whether task processes may start now
        (squall/core/control/fencing.py)."""
        with self._lock:
            d = self.fences.decide(self.clock.now_ms())
            if d.kill is not None and d.kill is not Kill.KAFKA:
                self._owner = None  # the lease is not renewed for what the session ran
        tasks = [c for k, c in self.sup.children.items() if k != SPARE]
        if d.pause:
            for c in tasks:
                c.pause()
            self.m_paused.set(len(tasks))
            log.error("cut off from ZooKeeper for %.1f s: paused its %d task processes, so "
                      "that none runs beside one the leader may start elsewhere; they go on "
                      "if the session holds, and are killed if it ends",
                      d.lost_for_ms / 1000, len(tasks))
            return False
        if d.resume:
            for c in tasks:
                c.resume()
            self.m_paused.set(0)
            log.warning("connected again in the same session: resumed its %d task processes",
                        len(tasks))
        if d.withdraw:
            self._withdraw()
            log.error("no write acknowledged by Kafka for %.1f s%s: left the cluster, so "
                      "that its units run on workers that reach the brokers; back once Kafka "
                      "acknowledges again", d.lost_for_ms / 1000,
                      ", while other workers' were" if d.alone else "")
        if d.kill is not None:
            gone = self.sup.remove([k for k in self.sup.children if k != SPARE])
            kill_children(gone)
            self.m_paused.set(0)
            self.running.clear()
            self._planned = None
            self.m_procs.set(len(self.sup.children))
            if gone:
                log.error("%s: killed its %d task processes, so that none runs beside the one "
                          "the leader may start elsewhere; they start as assigned once "
                          "connected", d.kill.value, len(gone))
        return d.may_start

    def _info(self) -> WorkerInfo:
        from squall.core.control.assignment import Worker

        eps = tuple({**e, "restarts": c.policy.total, "crashLooping": c.policy.crash_looping,
                     "lastExit": c.last_error[-500:]}
                    for k, c in sorted(self.sup.children.items()) if k in self.running
                    for e in self._endpoints(self.running[k], c))
        with self._lock:
            draining = sorted(self._draining.items())
        eps += tuple({**e, "stopping": True} for _, (ps, c) in draining
                     for e in self._endpoints(ps, c))
        if self.s.metrics_port:  # the worker's own (no topology: not a task process)
            eps += ({"topology": "", "kind": "worker", "component": "",
                     "url": f"http://{self.s.metrics_host}:{self.s.metrics_port}/metrics"},)
        stopping = tuple(sorted({ps.topology for _, (ps, _) in draining}))
        return WorkerInfo(Worker(self.s.worker_id, self.s.kind, self.s.capacity),
                          self.s.metrics_host, os.getpid(), self.started_ms, eps, stopping,
                          self.session)

    def _withdraw(self) -> None:
        """Leave the cluster (delete the ephemeral node) until :meth:`_publish` may
        register again: the leader then moves this worker's units to the others."""
        from kazoo.exceptions import KazooException, NoNodeError

        self._withdrawn, self._published, self.session = True, None, ""
        if self.zk is None:
            return
        try:
            self.zk.delete(self.path)
        except NoNodeError:
            pass
        except KazooException as e:  # the node goes with the session, or the next round
            log.warning("could not leave the cluster yet (%s); retrying", e)
            self._withdrawn = False

    def _publish(self, zk: Any) -> None:
        """Create or refresh this worker's ephemeral node (after a lost session too); none
        while Kafka's fence holds the worker out."""
        from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

        if not zk.connected:
            return
        with self._lock:
            held_out = not self.fences.kafka.may_start() and self.fences.kafka.fenced
            # a session that ended: its tasks are killed before a new one is registered
            ending = self.fences.ending()
        if ending:
            return
        if held_out:
            if not self._withdrawn:
                self._withdraw()
            return
        data = self._info().to_json()
        try:
            if self.lost.is_set() or self._published is None:
                cid = zk.client_id
                if cid is None:  # disconnected meanwhile: the next round registers
                    return
                # A registration of its own: an assignment written for an earlier one (before
                # the worker left the cluster, in the same session) is not run.
                self._registrations += 1
                self.session = f"{cid[0]:x}.{self._registrations}"
                with self._lock:
                    self._owner = cid[0]
                if self.lease is not None:  # the tasks about to start need not wait a round
                    self.lease.renew()
                data = self._info().to_json()
                try:
                    zk.create(self.path, data, ephemeral=True)
                except NodeExistsError:
                    # Ours from a session that has not expired yet, or a stale one: take it.
                    zk.delete(self.path)
                    zk.create(self.path, data, ephemeral=True)
                self.lost.clear()
                self._published, self._withdrawn = data, False
                log.info("registered %s as a %s worker (capacity %d, session %s)",
                         self.s.worker_id, self.s.kind, self.s.capacity, self.session)
            elif data != self._published:
                zk.set(self.path, data)
                self._published = data
        except NoNodeError:
            self.lost.set()
        except KazooException as e:
            log.warning("could not register in ZooKeeper (%s); retrying", e)

    def _on_assignment(self, data: bytes | None, _stat: Any) -> None:
        try:
            others = assignment_writers(self.zk, self.s.worker_id, self.s.zookeeper_access) \
                if data is not None else []
        except CoordinationError as e:
            others = [f"unknown ({e})"]
        if others:
            log.error("the assignment of %s may be changed by %s, not only by Squall's "
                      "ZooKeeper identity: refused, keeping the previous one (docs/security.md)",
                      self.s.worker_id, ", ".join(others))
            self.wake.set()
            return
        try:
            self.assignment = WorkerAssignment.from_json(data)
        except (ValueError, KeyError) as e:
            log.error("malformed assignment for %s (%s); keeping the previous one",
                      self.s.worker_id, e)
        self.wake.set()

    def routes(self) -> dict[str, Handler]:
        """``/logs/<process>/<offset>``: its task processes' logs (services/worker/logs.py)."""
        return {"/logs/": log_route(self.s.workdir / "logs")}

    # ----- children -------------------------------------------------------

    def _endpoints(self, ps: ProcSpec, c: Child) -> list[dict[str, Any]]:
        url = f"http://{self.s.metrics_host}:{c.metrics_port}/metrics"
        return [{"topology": ps.topology, "kind": str(ps.kind), "component": comp, "url": url,
                 "startedMs": c.started_ms, "tasks": list(ps.tasks), "process": c.name}
                for comp in ps.component.split(",")]

    def reconcile(self) -> None:
        # The processes wanted change only with the assignment: work them out (parse the
        # specs, write the bolts' topology files) once per assignment, not every loop.
        a = self.assignment if self.session and self.assignment.session == self.session \
            else self._idle
        if self._planned is not a:
            self._want, self._planned = desired(a, self.s), a
        want = self._want
        gone = self.sup.remove([k for k in self.sup.children if k not in want and k != SPARE])
        topologies = {self.running[c.name].topology for c in gone if c.name in self.running}
        with self._lock:
            for c in gone:
                if c.name in self.running:
                    self._draining[c.proc.pid] = (self.running.pop(c.name), c)
        if gone:  # spouts drain: not in the way of the rest of the round
            threading.Thread(target=self._stop, args=(gone, topologies), daemon=True).start()
        with self._lock:
            draining = [d for d, _ in self._draining.values()]
        for k, ps in want.items():
            if k not in self.sup.children:
                if any(shares_tasks(ps, d) for d in draining):
                    continue  # once the process that ran them exited (it wakes the loop)
                cmd = Command(_MODULES[ps.kind], ps.args, ready=ps.kind is Kind.BOLTS,
                              env=self._task_env())
                if not (ps.kind is Kind.BOLTS and not k.endswith(STANDBY)
                        and self.spare.take(k, cmd)):
                    self.sup.start(k, cmd)
                self.running[k] = ps
        # The spare lives while this worker runs no bolts job (one left now was not alive
        # when the job came: it would only hold memory).
        if any(ps.kind is Kind.BOLTS for ps in want.values()):
            idle = self.sup.remove([SPARE])
            if idle:
                threading.Thread(target=stop_children, args=(idle, self.s.stop_timeout_s),
                                 daemon=True).start()
        elif self.s.spare and SPARE not in self.sup.children:
            self.spare.start()
        done = self.sup.check()
        for e in done.exits:
            log.error("%s", e)
        self.m_restarts.inc(len(done.restarted))
        self.m_procs.set(len(self.sup.children))
        self.m_looping.set(sum(c.policy.crash_looping for c in self.sup.children.values()))

    def _stop(self, gone: list[Child], topologies: set[str]) -> None:
        """Stop ``gone``; then remove what this worker kept of those of ``topologies`` that
        were killed and no longer run here (services/worker/cleanup.py)."""
        stop_children(gone, self.s.stop_timeout_s, False)
        with self._lock:
            for c in gone:
                self._draining.pop(c.proc.pid, None)
        self.wake.set()  # publish that they stopped
        for tid in sorted(topologies):
            if not any(ps.topology == tid for ps in self.running.values()):
                clean_killed(self.s, self.zk, tid)

    def _task_env(self) -> dict[str, str]:
        return {} if self.lease is None else {LEASE_FILE_ENV: str(self.lease.path)}

    # ----- the loop ---------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        if self.s.spare:  # before anything else: its Spark start is the longest of all
            self.spare.start()
        zk = self.zk = connect(self.s.zookeeper, session_timeout_s=self.s.session_timeout_s,
                               listener=self._state, access=self.s.zookeeper_access)
        self.s.workdir.mkdir(parents=True, exist_ok=True)
        if self.lease is not None:
            lease_file.write(self.lease.path, NONE)  # one left by an earlier run holds nothing
            self.lease.start()
        watch = None
        if self.s.kafka_fence_after_s is not None:
            watch = KafkaWatch(self.s.clients, self._kafka, self.clock.now_ms,
                               KafkaPeers(lambda: self.zk, self.s.worker_id))
            watch.start()
        try:
            self._publish(zk)
            zk.DataWatch(f"{ASSIGNMENTS}/{self.s.worker_id}", self._on_assignment)
            while not stop.is_set():
                if self._fence_if_due():
                    self.reconcile()
                self._publish(zk)
                self.wake.wait(0.5)
                self.wake.clear()
        finally:
            if watch is not None:
                watch.stop.set()
            if self.lease is not None:
                self.lease.stop.set()
            for c in self.sup.children.values():  # a paused one could not take its SIGTERM
                c.resume()
            # Spouts first: they drain their in-flight trees through the bolts and ackers.
            order = sorted(self.running, key=lambda k: [Kind.SPOUT, Kind.BOLTS, Kind.ACKER]
                           .index(self.running[k].kind))
            self.sup.stop(order, self.s.stop_timeout_s, one_by_one=False)
            self.running.clear()
            try:
                zk.stop()
                zk.close()
            except Exception as e:  # shutting down anyway
                log.warning("closing ZooKeeper: %s", e)


