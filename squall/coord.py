"""ZooKeeper (kazoo) state of the control plane, under one root.

``/squall/topologies/<id>``   the submitted spec and its lifecycle (JSON); node versions
                              make concurrent edits safe: the loser gets ConflictError
``/squall/workers/<id>``      ephemeral: a live worker, its kind, capacity and endpoints
``/squall/assignments/<id>``  what a worker runs (written by the leader)
``/squall/kafka-reach/<id>``  ephemeral: a worker's Kafka probes, one write each that Kafka
                              acknowledged (its version counts them)
``/squall/election``          the API replicas' leader election (kazoo Election)

A topology's id is its name: names are unique among the running topologies,
as in Storm, and a killed topology's name is free again once it is removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import NoAuthError

from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.teardown import Teardown, prunable
from squall.core.control.zookeeper_access import AUTH, ZooKeeperAccess, others_who_may_write
from squall.core.errors import ConflictError, CoordinationError, NotFoundError, TopologyError

log = logging.getLogger("squall.coord")
T = TypeVar("T")
ROOT = "/squall"
TOPOLOGIES = f"{ROOT}/topologies"
#: Below ZooKeeper's default jute.maxbuffer (1 MiB), with room for the record's growth.
MAX_RECORD_BYTES = 768 * 1024
WORKERS = f"{ROOT}/workers"
ASSIGNMENTS = f"{ROOT}/assignments"
KAFKA_REACH = f"{ROOT}/kafka-reach"
ELECTION = f"{ROOT}/election"
#: ``names/<name>`` holds the id of the live topology submitted under that name.
NAMES = f"{ROOT}/names"
#: Sequential nodes: each submission's counter (its id's middle part).
SUBMISSIONS = f"{ROOT}/submissions"
#: ``teardowns/<id>``: a killed topology's teardown (squall/core/control/teardown.py).
TEARDOWNS = f"{ROOT}/teardowns"
#: Done teardowns kept for ``squall kill --follow`` and GET /teardowns to read.
KEEP_TEARDOWNS = 100


def _servers(hosts: str) -> tuple[list[str], str]:
    """A connect string's servers, and its chroot ("/path", or "")."""
    servers, slash, chroot = hosts.partition("/")
    names = [h.strip() for h in servers.split(",") if h.strip()]
    if not names:
        raise CoordinationError(f"no ZooKeeper server in the connect string {hosts!r}")
    return names, slash + chroot


def server_order(hosts: str, start: int) -> str:
    """``hosts`` (a connect string, with an optional chroot) rotated to begin at server
    ``start`` (modulo their number). The client tries its servers in this fixed cycle: the
    server tried after one that failed is always another one."""
    names, chroot = _servers(hosts)
    k = start % len(names)
    return ",".join(names[k:] + names[:k]) + chroot


def _handler(connect_timeout_s: float) -> Any:
    """kazoo's threading handler with each TCP connect bounded by ``connect_timeout_s``.
    kazoo bounds it by the whole session timeout (python-zk/kazoo#517, #756): one connect to
    a server that drops packets outlives the session, which a reconnect was to keep."""
    from kazoo.handlers.threading import SequentialThreadingHandler

    class BoundedConnects(SequentialThreadingHandler):  # type: ignore[misc]
        def create_connection(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["timeout"] = min(float(kwargs.get("timeout") or connect_timeout_s),
                                    connect_timeout_s)
            return super().create_connection(*args, **kwargs)

    return BoundedConnects()


def connect(hosts: str, timeout_s: float = 15.0, session_timeout_s: float = 10.0,
            listener: Callable[[Any], None] | None = None,
            first_server: int | None = None, access: ZooKeeperAccess | None = None) -> Any:
    """A started kazoo client (retrying reconnects for ever); CoordinationError if unreachable.

    A session outlives the loss of its server, as ZooKeeper's own client makes it: a lost
    server shows after 2/3 of the session timeout, and the reconnect has the last third.
    So each TCP connect gets a share of the session timeout (timeout / servers, the Java
    client's rule), and the servers are tried in a fixed cycle from a random start (load
    spread over the ensemble; never the lost server twice in a row). ``first_server``: the
    start of that cycle instead (an index into ``hosts``). ``access``: the identity, ACLs
    and TLS of squall/core/control/zookeeper_access.py; Squall's fixed nodes get its ACL."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    n = len(_servers(hosts)[0])
    start = secrets.randbelow(n) if first_server is None else first_server
    access = access or ZooKeeperAccess()
    zk = KazooClient(hosts=server_order(hosts, start), timeout=session_timeout_s,
                     randomize_hosts=False, handler=_handler(session_timeout_s / n),
                     connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2.0},
                     **_client_security(access))
    if listener is not None:
        zk.add_listener(listener)
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError:
        zk.stop()
        zk.close()
        raise CoordinationError(f"ZooKeeper at {hosts} did not answer within {timeout_s}s"
                                ) from None
    try:
        for path in FIXED:
            zk.ensure_path(path)
        _protect(zk, access)
        zk.get(ROOT)
    except NoAuthError:
        zk.stop()
        zk.close()
        raise CoordinationError(
            f"ZooKeeper at {hosts} refuses this process Squall's tree ({ROOT}): it is "
            f"protected; give the process the identity it was made with ({AUTH}, "
            "docs/security.md)") from None
    return zk


#: The nodes every Squall process makes sure of; their ACL is Squall's own.
FIXED = (ROOT, TOPOLOGIES, WORKERS, ASSIGNMENTS, KAFKA_REACH, ELECTION, NAMES, SUBMISSIONS,
         TEARDOWNS)


def kazoo_acl(access: ZooKeeperAccess) -> list[Any]:
    from kazoo.security import ACL, Id

    return [ACL(perms, Id(scheme, ident)) for perms, scheme, ident in access.acl()]


def _client_security(access: ZooKeeperAccess) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if access.identity is not None:
        kw["auth_data"] = [("digest", c) for c in access.credentials()]
        kw["default_acl"] = kazoo_acl(access)
    if access.tls is not None:
        kw |= {"use_ssl": True, "verify_certs": True, "check_hostname": True,
               "ca": access.tls.ca,
               "certfile": access.tls.cert, "keyfile": access.tls.key}
    return kw


def _protect(zk: Any, access: ZooKeeperAccess) -> None:
    """Squall's fixed nodes carry its ACL (made open before the identity was set, they are
    closed now). Their children are not changed: a node someone else made stays theirs, and
    a worker refuses an assignment from it (:func:`assignment_writers`)."""
    if access.identity is None:
        return
    want = sorted(access.acl())
    for path in FIXED:
        if sorted(acl_tuples(zk.get_acls(path)[0])) != want:
            zk.set_acls(path, kazoo_acl(access))
    if access.previous is not None:
        _rotate(zk, ROOT, access, access.previous.digest_id())


def _rotate(zk: Any, path: str, access: ZooKeeperAccess, old: str) -> None:
    """Every node under ``path`` that the rotated identity ``old`` may change gets the
    current ACL (the old identity's ADMIN right allows it)."""
    from kazoo.exceptions import NoNodeError

    with contextlib.suppress(NoNodeError):
        if any(scheme == "digest" and ident == old
               for _, scheme, ident in acl_tuples(zk.get_acls(path)[0])):
            zk.set_acls(path, kazoo_acl(access))
        for child in zk.get_children(path):
            _rotate(zk, f"{path}/{child}", access, old)


def acl_tuples(acls: list[Any]) -> list[tuple[int, str, str]]:
    return [(int(a.perms), str(a.id.scheme), str(a.id.id)) for a in acls]


def assignment_writers(zk: Any, worker_id: str, access: ZooKeeperAccess) -> list[str]:
    """Who besides Squall's identity may change ``worker_id``'s assignment node (empty
    without an identity configured, or when no one may)."""
    if access.identity is None:
        return []
    acls, _ = _zk_call("read an assignment's ACL",
                       lambda: zk.get_acls(f"{ASSIGNMENTS}/{worker_id}"))
    return others_who_may_write(acl_tuples(acls), access)


def _zk_call(what: str, fn: Callable[[], Any]) -> Any:
    from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

    try:
        return fn()
    except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as e:
        raise CoordinationError(f"ZooKeeper unavailable while trying to {what}: "
                                f"{type(e).__name__}") from None
    except NoAuthError:
        raise CoordinationError(f"ZooKeeper refused to {what}: this process is not "
                                f"authorized ({AUTH}, docs/security.md)") from None


class TopologyStore:
    def __init__(self, zk: Any) -> None:
        self.zk = zk

    def next_counter(self) -> int:
        """A number no submission of this cluster had before (a ZooKeeper sequence)."""
        path = _zk_call("count", lambda: self.zk.create(f"{SUBMISSIONS}/s-", b"",
                                                         sequence=True))
        with contextlib.suppress(Exception):  # the parent keeps counting without it
            self.zk.delete(path)
        return int(str(path).rsplit("-", 1)[1])

    def create(self, rec: TopologyRecord) -> TopologyRecord:
        """Store a new topology and claim its name, both or neither: one live topology per
        name (Storm's rule), while its id is unique for the cluster's life."""
        from kazoo.exceptions import NodeExistsError

        raw = rec.to_json()
        if len(raw) > MAX_RECORD_BYTES:  # ZooKeeper would drop the session, not refuse it
            raise TopologyError(f"topology {rec.id!r} is {len(raw):,} bytes stored; at most "
                                f"{MAX_RECORD_BYTES:,} fit a ZooKeeper node")

        def both() -> list[Any]:
            t = self.zk.transaction()
            t.create(f"{NAMES}/{rec.display_name}", rec.id.encode())
            t.create(f"{TOPOLOGIES}/{rec.id}", raw)
            return list(t.commit())

        results = _zk_call("submit", both)
        if any(isinstance(r, NodeExistsError) for r in results):
            live = self.live_id(rec.display_name)
            raise ConflictError(
                f"a topology named {rec.display_name!r} is already submitted"
                + (f" (id {live}); kill it, and submit again once its kill wait is over"
                   if live else f" (id {rec.id})")) from None
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise CoordinationError(f"ZooKeeper refused the submission of {rec.id!r}: "
                                    f"{type(failed[0]).__name__}")
        return dataclasses.replace(rec, version=0)

    def live_id(self, name: str) -> str | None:
        """The id of the live topology submitted as ``name``, if there is one."""
        from kazoo.exceptions import NoNodeError

        if "/" in name or name in ("", ".", ".."):
            return None
        try:
            raw, _ = _zk_call("read", lambda: self.zk.get(f"{NAMES}/{name}"))
        except NoNodeError:
            return None
        return bytes(raw).decode() or None

    def get(self, topology_id: str) -> TopologyRecord:
        from kazoo.exceptions import NoNodeError

        if "/" in topology_id or topology_id in ("", ".", ".."):
            raise NotFoundError(f"no topology {topology_id!r}")
        try:
            raw, stat = _zk_call("read", lambda: self.zk.get(f"{TOPOLOGIES}/{topology_id}"))
        except NoNodeError:
            raise NotFoundError(f"no topology {topology_id!r}") from None
        return TopologyRecord.from_json(raw, stat.version)

    def exists(self, topology_id: str) -> bool:
        if "/" in topology_id or topology_id in ("", ".", ".."):
            return False
        return _zk_call("read", lambda: self.zk.exists(f"{TOPOLOGIES}/{topology_id}")) \
            is not None

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
        return dataclasses.replace(rec, version=stat.version)

    def delete(self, topology_id: str) -> None:
        """Remove the topology and free its name (if the name is still its own)."""
        from kazoo.exceptions import NoNodeError

        try:
            rec = self.get(topology_id)
        except NotFoundError:
            return
        with contextlib.suppress(NoNodeError):
            _zk_call("remove", lambda: self.zk.delete(f"{TOPOLOGIES}/{topology_id}"))
        if self.live_id(rec.display_name) == topology_id:
            with contextlib.suppress(NoNodeError):
                _zk_call("free the name", lambda: self.zk.delete(
                    f"{NAMES}/{rec.display_name}"))


def _children(zk: Any, parent: str, what: str, parse: Callable[[bytes], T]) -> list[T]:
    """The parsed nodes under ``parent``, by name; a malformed one is logged and skipped,
    one removed meanwhile is skipped."""
    from kazoo.exceptions import NoNodeError

    out = []
    for name in sorted(_zk_call(f"list {what}s", lambda: zk.get_children(parent))):
        try:
            raw, _ = zk.get(f"{parent}/{name}")
            out.append(parse(raw))
        except NoNodeError:
            continue
        except (ValueError, KeyError) as e:
            log.warning("ignoring malformed %s node %s: %s", what, name, e)
    return out


def list_workers(zk: Any) -> list[WorkerInfo]:
    return _children(zk, WORKERS, "worker", WorkerInfo.from_json)


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


def write_assignment(zk: Any, worker_id: str, a: WorkerAssignment | None,
                     access: ZooKeeperAccess | None = None) -> None:
    """Write (or delete, for None) a worker's assignment. With an identity, a node that
    others may change (made before the identity was set, or by someone else) is replaced
    by one of Squall's own, in one transaction, or its worker would refuse it."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    path = f"{ASSIGNMENTS}/{worker_id}"
    if a is None:
        with contextlib.suppress(NoNodeError):
            zk.delete(path)
        return
    if access is not None and access.identity is not None:
        with contextlib.suppress(NoNodeError):
            if assignment_writers(zk, worker_id, access):
                t = zk.transaction()
                t.delete(path)
                t.create(path, a.to_json(), acl=kazoo_acl(access))
                t.commit()
                return
    try:
        zk.set(path, a.to_json())
    except NoNodeError:
        try:
            zk.create(path, a.to_json())
        except NodeExistsError:
            zk.set(path, a.to_json())


def write_teardown(zk: Any, t: Teardown) -> None:
    from kazoo.exceptions import NodeExistsError, NoNodeError

    path = f"{TEARDOWNS}/{t.id}"
    try:
        _zk_call("write a teardown", lambda: zk.set(path, t.to_json()))
    except NoNodeError:
        with contextlib.suppress(NodeExistsError):
            _zk_call("write a teardown", lambda: zk.create(path, t.to_json()))


def read_teardowns(zk: Any, prune: bool = False) -> list[Teardown]:
    """Every teardown, oldest first; ``prune``: the oldest done ones beyond KEEP_TEARDOWNS
    deleted, but for the newest of each state that stays."""
    from kazoo.exceptions import NoNodeError

    out = _children(zk, TEARDOWNS, "teardown", Teardown.from_json)
    out.sort(key=lambda t: t.since_ms)
    for old in prunable(out, KEEP_TEARDOWNS) if prune else ():
        with contextlib.suppress(NoNodeError):
            zk.delete(f"{TEARDOWNS}/{old.id}")
        out.remove(old)
    return out


def teardown_of(zk: Any, topology_id: str) -> Teardown | None:
    from kazoo.exceptions import NoNodeError

    if "/" in topology_id or topology_id in ("", ".", ".."):
        return None
    try:
        raw, _ = _zk_call("read a teardown", lambda: zk.get(f"{TEARDOWNS}/{topology_id}"))
    except NoNodeError:
        return None
    return Teardown.from_json(raw)
