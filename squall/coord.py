"""ZooKeeper (kazoo) state of the control plane, under one root.

``/squall/topologies/<id>``   the submitted spec and its lifecycle (JSON); node versions
                              make concurrent edits safe: the loser gets ConflictError
``/squall/workers/<id>``      ephemeral: a live worker, its kind, capacity and endpoints
``/squall/assignments/<id>``  what a worker runs (written by the leader)
``/squall/election``          the API replicas' leader election (kazoo Election)

A topology's id is its name: names are unique among the running topologies,
as in Storm, and a killed topology's name is free again once it is removed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from squall.core.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.errors import ConflictError, CoordinationError, NotFoundError, TopologyError

log = logging.getLogger("squall.coord")
ROOT = "/squall"
TOPOLOGIES = f"{ROOT}/topologies"
#: Below ZooKeeper's default jute.maxbuffer (1 MiB), with room for the record's growth.
MAX_RECORD_BYTES = 768 * 1024
WORKERS = f"{ROOT}/workers"
ASSIGNMENTS = f"{ROOT}/assignments"
ELECTION = f"{ROOT}/election"


def connect(hosts: str, timeout_s: float = 15.0, session_timeout_s: float = 10.0,
            listener: Callable[[Any], None] | None = None) -> Any:
    """A started kazoo client (retrying reconnects for ever); CoordinationError if unreachable."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    zk = KazooClient(hosts=hosts, timeout=session_timeout_s,
                     connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2.0})
    if listener is not None:
        zk.add_listener(listener)
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError:
        zk.stop()
        zk.close()
        raise CoordinationError(f"ZooKeeper at {hosts} did not answer within {timeout_s}s"
                                ) from None
    for path in (TOPOLOGIES, WORKERS, ASSIGNMENTS, ELECTION):
        zk.ensure_path(path)
    return zk


def _zk_call(what: str, fn: Callable[[], Any]) -> Any:
    from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

    try:
        return fn()
    except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as e:
        raise CoordinationError(f"ZooKeeper unavailable while trying to {what}: "
                                f"{type(e).__name__}") from None


class TopologyStore:
    def __init__(self, zk: Any) -> None:
        self.zk = zk

    def create(self, rec: TopologyRecord) -> TopologyRecord:
        from kazoo.exceptions import NodeExistsError

        raw = rec.to_json()
        if len(raw) > MAX_RECORD_BYTES:  # ZooKeeper would drop the session, not refuse it
            raise TopologyError(f"topology {rec.id!r} is {len(raw):,} bytes stored; at most "
                                f"{MAX_RECORD_BYTES:,} fit a ZooKeeper node")
        try:
            _zk_call("submit", lambda: self.zk.create(f"{TOPOLOGIES}/{rec.id}", raw))
        except NodeExistsError:
            raise ConflictError(f"a topology named {rec.id!r} is already submitted "
                                "(kill it first, or choose another name)") from None
        return TopologyRecord(rec.id, rec.spec, rec.lifecycle, rec.submitted_ms, 0)

    def get(self, topology_id: str) -> TopologyRecord:
        from kazoo.exceptions import NoNodeError

        if "/" in topology_id or topology_id in ("", ".", ".."):
            raise NotFoundError(f"no topology {topology_id!r}")
        try:
            raw, stat = _zk_call("read", lambda: self.zk.get(f"{TOPOLOGIES}/{topology_id}"))
        except NoNodeError:
            raise NotFoundError(f"no topology {topology_id!r}") from None
        return TopologyRecord.from_json(raw, stat.version)

    def list(self) -> list[TopologyRecord]:
        out = []
        for name in sorted(_zk_call("list", lambda: self.zk.get_children(TOPOLOGIES))):
            try:
                out.append(self.get(name))
            except NotFoundError:
                continue  # removed between the listing and the read
        return out

    def update(self, rec: TopologyRecord) -> TopologyRecord:
        """Write ``rec`` if the node is still at ``rec.version``; else ConflictError."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        try:
            stat = _zk_call("update", lambda: self.zk.set(
                f"{TOPOLOGIES}/{rec.id}", rec.to_json(), version=rec.version))
        except BadVersionError:
            raise ConflictError(f"topology {rec.id!r} was changed concurrently (version "
                                f"{rec.version} is stale); read it again and retry") from None
        except NoNodeError:
            raise NotFoundError(f"no topology {rec.id!r}") from None
        return TopologyRecord(rec.id, rec.spec, rec.lifecycle, rec.submitted_ms, stat.version)

    def delete(self, topology_id: str) -> None:
        from kazoo.exceptions import NoNodeError

        with contextlib.suppress(NoNodeError):
            _zk_call("remove", lambda: self.zk.delete(f"{TOPOLOGIES}/{topology_id}"))


def list_workers(zk: Any) -> list[WorkerInfo]:
    from kazoo.exceptions import NoNodeError

    out = []
    for name in sorted(_zk_call("list workers", lambda: zk.get_children(WORKERS))):
        try:
            raw, _ = zk.get(f"{WORKERS}/{name}")
            out.append(WorkerInfo.from_json(raw))
        except NoNodeError:
            continue
        except (ValueError, KeyError) as e:
            log.warning("ignoring malformed worker node %s: %s", name, e)
    return out


def read_assignments(zk: Any) -> dict[str, WorkerAssignment]:
    from kazoo.exceptions import NoNodeError

    out = {}
    for name in _zk_call("list assignments", lambda: zk.get_children(ASSIGNMENTS)):
        try:
            raw, _ = zk.get(f"{ASSIGNMENTS}/{name}")
        except NoNodeError:
            continue
        out[name] = WorkerAssignment.from_json(raw)
    return out


def write_assignment(zk: Any, worker_id: str, a: WorkerAssignment | None) -> None:
    from kazoo.exceptions import NodeExistsError, NoNodeError

    path = f"{ASSIGNMENTS}/{worker_id}"
    if a is None:
        with contextlib.suppress(NoNodeError):
            zk.delete(path)
        return
    try:
        zk.set(path, a.to_json())
    except NoNodeError:
        try:
            zk.create(path, a.to_json())
        except NodeExistsError:
            zk.set(path, a.to_json())
