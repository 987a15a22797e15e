"""Topology control over ZooKeeper: the API's writes, reads, and the leader's rounds.

Every write is a compare-and-set on the topology node's version, so two edits
racing (here or on another replica) cannot both win: the loser gets a
ConflictError (HTTP 409). Writes are refused while the ZooKeeper session is
not CONNECTED (SUSPENDED or LOST: HTTP 503); the workers keep running.
One replica is the leader (kazoo Election); it alone assigns tasks and ends
the waits of kills and rebalances.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from services.api.settings import ApiSettings
from squall import __version__
from squall.coord import (
    ELECTION,
    TOPOLOGIES,
    WORKERS,
    TopologyStore,
    list_workers,
    read_assignments,
    read_teardowns,
    write_assignment,
    write_teardown,
)
from squall.coord import connect as zk_connect
from squall.core.control.assignment import Unit
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo, topology_id
from squall.core.control.kept_state import carried_offsets, check_compatible, kept_teardown
from squall.core.control.lifecycle import Lifecycle, Status, apply
from squall.core.control.scheduler import plan, with_parallelism
from squall.core.control.teardown import Teardown, owned, still_running
from squall.core.errors import (
    ConflictError,
    CoordinationError,
    KafkaUnavailable,
    NotLeader,
    SquallError,
    TopologyError,
)
from squall.core.reliability.clock import Clock
from squall.core.topology.checks import MAX_NAME
from squall.core.topology.code_policy import check_code
from squall.core.topology.model import TopologySpec
from squall.core.topology.spec_secrets import check_no_secrets
from squall.core.topology.topics import spout_group
from squall.kafka import commit_group_offsets, group_offsets
from squall.kafka_clients import quiet_logger
from squall.wallclock import SystemClock

log = logging.getLogger("squall.api")



@dataclasses.dataclass(frozen=True)
class Contender:
    """An API replica in the leader election: its node holds ``url started_ms version``
    (a bare URL from an older replica reads as one with the rest unknown)."""

    url: str
    started_ms: int | None = None
    version: str | None = None

    def identity(self) -> str:
        return f"{self.url} {self.started_ms} {self.version}"

    @classmethod
    def parse(cls, identity: str) -> Contender:
        url, *rest = identity.split() or [""]  # an empty node names no one
        started = int(rest[0]) if rest and rest[0].isascii() and rest[0].isdigit() else None
        return cls(url, started, rest[1] if len(rest) > 1 else None)

class Control:
    def __init__(self, settings: ApiSettings, clock: Clock | None = None) -> None:
        self.s = settings
        self.clock = clock or SystemClock()
        self.started_ms = self.clock.now_ms()
        self.state = "CONNECTED"
        self.leading = threading.Event()
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.zk = zk_connect(settings.zookeeper, session_timeout_s=settings.session_timeout_s,
                             listener=self._on_state, access=settings.zookeeper_access)
        self.store = TopologyStore(self.zk)
        self.rounds = 0
        self.unassigned: tuple[Unit, ...] = ()  # the leader's last round: units with no worker
        self._teardowns: threading.Thread | None = None
        self._thread = threading.Thread(target=self._elect, name="squall-leader", daemon=True)

    # ----- connection and leadership ----------------------------------------

    def _on_state(self, state: Any) -> None:
        self.state = str(state)
        if self.state != "CONNECTED":
            log.warning("ZooKeeper session %s: writes refused until it is back", self.state)
            if self.state == "LOST":
                self.leading.clear()
        else:
            log.info("ZooKeeper session CONNECTED")
        self.wake.set()

    def start(self) -> None:
        self._thread.start()
        self.zk.ChildrenWatch(WORKERS, lambda _c: self.wake.set())
        self.zk.ChildrenWatch(TOPOLOGIES, lambda _c: self.wake.set())

    def close(self) -> None:
        self.stopping.set()
        self.wake.set()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception as e:  # shutting down anyway
            log.warning("closing ZooKeeper: %s", e)

    def _elect(self) -> None:
        while not self.stopping.is_set():
            try:
                election = self.zk.Election(ELECTION, identifier=Contender(
                    self.s.url, self.started_ms, __version__).identity())
                election.run(self._lead)
            except Exception as e:  # the session dropped mid-election: try again
                if not self.stopping.is_set():
                    log.warning("leader election interrupted (%s); rejoining", e)
                    self.stopping.wait(1.0)

    def _lead(self) -> None:
        log.info("this replica (%s) is the leader", self.s.url)
        self.leading.set()
        try:
            while not self.stopping.is_set() and self.state != "LOST":
                if self.state == "CONNECTED":
                    try:
                        self.round()
                    except SquallError as e:
                        log.warning("leader round: %s", e)
                    except Exception:
                        log.exception("leader round failed; next round in a moment")
                self.wake.wait(self.s.leader_interval_s)
                self.wake.clear()
        finally:
            self.leading.clear()
            log.info("leadership given up")

    def leader_url(self) -> str | None:
        try:
            contenders = self.zk.Election(ELECTION).contenders()
        except Exception:
            return None
        return (Contender.parse(str(contenders[0])).url or None) if contenders else None

    def require_writable(self) -> None:
        if self.state != "CONNECTED":
            raise CoordinationError(f"ZooKeeper session is {self.state}; writes are refused "
                                    "until it reconnects (reads may be stale)")
        if not self.leading.is_set():
            raise NotLeader(self.leader_url())

    # ----- the leader's round --------------------------------------------------

    def round(self) -> None:
        records = self.store.list()
        current = read_assignments(self.zk)
        workers = list_workers(self.zk)
        now = self.clock.now_ms()
        p = plan(records, workers, current, now)
        for rec in p.updates:
            try:
                self.store.update(rec)
                log.info("topology %s is now %s", rec.id, rec.lifecycle.status)
            except ConflictError:
                self.wake.set()  # edited meanwhile: next round
        by_id = {r.id: r for r in records}
        for tid in p.removals:
            # queued first: a leader that dies between the two redoes both
            rec = by_id[tid]
            write_teardown(self.zk, Teardown(tid, rec.display_name, now,
                                             purge_state=rec.lifecycle.purge_state,
                                             spec=rec.spec))
            self.store.delete(tid)
            log.info("topology %s removed (kill wait over); its teardown is queued", tid)
        for wid, a in p.assignments.items():
            if current.get(wid) != a:
                write_assignment(self.zk, wid, a, self.s.zookeeper_access)
        for wid in set(current) - set(p.assignments):
            write_assignment(self.zk, wid, None)
        if p.unassigned != self.unassigned and p.unassigned:
            log.warning("%d tasks have no worker with room: %s", len(p.unassigned),
                        ", ".join(u.key for u in p.unassigned[:10]))
        self.unassigned = p.unassigned
        if self._teardowns is None or not self._teardowns.is_alive():
            # its own thread: a broker that is slow to answer holds up no assignment
            self._teardowns = threading.Thread(
                target=self._tear_down, args=(workers, list(p.assignments.values()), now),
                name="squall-teardown", daemon=True)
            self._teardowns.start()
        self.rounds += 1

    def _tear_down(self, workers: list[WorkerInfo], assignments: list[WorkerAssignment],
                   now: int) -> None:
        """Remove what a killed topology's id owns in Kafka, once none of its processes
        runs (squall/core/control/teardown.py); one per round, tried again until it succeeds."""
        try:
            for t in read_teardowns(self.zk, prune=True):
                if t.done_ms is not None or still_running(t.id, workers, assignments):
                    continue
                try:
                    done = self._remove_from_kafka(t, now)
                except SquallError as e:
                    write_teardown(self.zk, dataclasses.replace(t, error=str(e)))
                    log.warning("teardown of %s: %s; trying again", t.id, e)
                    return
                write_teardown(self.zk, done)
                log.info("teardown of %s", done.summary())
                return
        except SquallError as e:  # ZooKeeper unavailable: the next round tries again
            log.warning("teardowns: %s", e)

    def _remove_from_kafka(self, t: Teardown, now: int) -> Teardown:
        kafka = self.s.clients
        admin = kafka.admin({"logger": quiet_logger("teardown")})
        topics = list(kafka.metadata(15).topics)
        # Where the spouts got to, before their groups go: a resubmission that keeps the
        # state starts there (squall/core/control/kept_state.py).
        offsets = {} if t.purge_state or t.spec is None else {
            s.name: group_offsets(kafka, spout_group(t.id, s.name), s.topics)
            for s in t.spec.spouts}
        try:
            groups = [g.group_id for g in admin.list_consumer_groups(
                request_timeout=15).result(timeout=20).valid]
        except Exception as e:
            raise KafkaUnavailable(f"cannot list the consumer groups on {kafka.bootstrap}: "
                                   f"{e}") from None
        remove, drop, kept = owned(t.id, topics, groups, t.purge_state)
        failed: list[str] = []
        futures: dict[str, Any] = {}
        if remove:
            futures |= admin.delete_topics(remove, operation_timeout=30)
        if drop:
            futures |= admin.delete_consumer_groups(drop, request_timeout=30)
        for key, fut in futures.items():
            try:
                fut.result(timeout=40)
            except Exception as e:
                failed.append(f"{key}: {e}")
        if failed:
            raise KafkaUnavailable(f"could not delete {'; '.join(failed[:5])}")
        return dataclasses.replace(t, done_ms=now, topics=tuple(remove), groups=tuple(drop),
                                   kept=tuple(kept), error="", offsets=offsets)

    # ----- operations (the leader's) -----------------------------------------

    def submit(self, spec: TopologySpec, activate: bool = True,
               keep_state: str | None = None) -> TopologyRecord:
        """Store ``spec`` under a new id (Storm's ``name-counter-timestamp``); its processes
        get the spec named by the id, so all they make is this submission's own.
        ``keep_state``: a killed submission (an id, or a name: its newest; "": this name's)
        whose state this one keeps, and whose spouts' offsets it starts from."""
        self.require_writable()
        if spec.state_of is not None:
            raise TopologyError("state_of is set by the API when a submission keeps a state "
                                "(POST /topologies?keep_state=...), not in a spec")
        if len(spec.name) > MAX_NAME["topology"]:
            raise TopologyError(f"topology name {spec.name[:20]!r}... is {len(spec.name)} "
                                f"characters; at most {MAX_NAME['topology']}")
        check_code(spec.validate(), self.s.allowed_modules)
        check_no_secrets(spec.to_dict())
        live = self.store.live_id(spec.name)
        if live is not None:
            raise ConflictError(f"a topology named {spec.name!r} is already submitted (id "
                                f"{live}); kill it, and submit again once its kill wait is "
                                "over")
        status = Status.ACTIVE if activate else Status.INACTIVE
        now = self.clock.now_ms()
        tid = topology_id(spec.name, self.store.next_counter(), now)
        run = dataclasses.replace(spec, name=tid)
        if keep_state is not None:
            run = self._keep(run, keep_state or spec.name)
        rec = self.store.create(TopologyRecord(tid, run.validate(), Lifecycle(status), now,
                                               name=spec.name))
        self.wake.set()
        return rec

    def _keep(self, spec: TopologySpec, ref: str) -> TopologySpec:
        """``spec`` keeping the state of the killed submission ``ref``, checked; its spouts'
        groups committed where the killed one's had got to."""
        in_use = {r.spec.state_id: r.id for r in self.store.list()}
        t = kept_teardown(ref, read_teardowns(self.zk), in_use)
        assert t.spec is not None
        check_compatible(t.spec, spec)
        for spout, at in carried_offsets(t.offsets, spec).items():
            commit_group_offsets(self.s.clients, spout_group(spec.name, spout), at)
        log.info("%s keeps the state of %s (%s)", spec.name, t.id, t.state_id)
        return dataclasses.replace(spec, state_of=t.state_id)

    def resolve(self, ref: str) -> str:
        """The id ``ref`` names: an id, or the name of a live topology (as Storm's CLI
        takes names)."""
        if self.store.exists(ref):
            return ref
        return self.store.live_id(ref) or ref

    def operate(self, topology_id: str, event: str, wait_s: float | None = None,
                parallelism: dict[str, int] | None = None,
                expected_version: int | None = None,
                purge_state: bool = False) -> TopologyRecord:
        """activate / deactivate / rebalance / kill; ``wait_s`` None = the message timeout."""
        self.require_writable()
        rec = self.store.get(topology_id)
        if expected_version is not None and expected_version != rec.version:
            raise ConflictError(f"topology {topology_id!r} is at version {rec.version}, not "
                                f"{expected_version}; read it again and retry")
        now = self.clock.now_ms()
        wait = rec.spec.message_timeout_s if wait_s is None else wait_s
        if event == "rebalance" and parallelism:
            with_parallelism(rec.spec, parallelism)  # refuse now what could not be applied
        lc = apply(rec.lifecycle, event, now, wait, parallelism, purge_state)
        out = self.store.update(dataclasses.replace(rec, lifecycle=lc))
        self.wake.set()
        return out

    # ----- reads -------------------------------------------------------------

    def workers(self) -> list[WorkerInfo]:
        return list_workers(self.zk)

    def assignments(self) -> dict[str, Any]:
        return read_assignments(self.zk)
