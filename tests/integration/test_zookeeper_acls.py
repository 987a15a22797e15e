"""Squall's tree in ZooKeeper is its own (docs/security.md, "ZooKeeper"), on the real server:
every Squall process of the suite runs as one digest identity (tests/integration/conftest.py).
A client without it, or with a wrong password, can neither read the tree, nor write an
assignment, nor change the API replicas' election data (the URL followers forward writes to);
a Squall process without it is refused with the variable named; a worker refuses an
assignment from a node others may change, and the leader replaces such a node with one of its
own; a password rotation moves every node to the new identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError

from squall.coord import (
    ASSIGNMENTS,
    ELECTION,
    ROOT,
    TOPOLOGIES,
    WORKERS,
    connect,
    write_assignment,
)
from squall.core.control.assignment import Kind, Placement
from squall.core.control.cluster import WorkerAssignment
from squall.core.control.zookeeper_access import ALL, Identity, ZooKeeperAccess
from squall.core.errors import CoordinationError
from tests.integration.cluster import ZK_AUTH, ApiProcess, namespace, zk_client
from tests.integration.helpers import ServiceProcess, wait_for

pytestmark = pytest.mark.integration

MINE = (ALL, "digest", Identity(*ZK_AUTH.split(":", 1)).digest_id())


def acls(zk: object, path: str) -> list[tuple[int, str, str]]:
    got, _ = zk.get_acls(path)  # type: ignore[attr-defined]
    return [(a.perms, a.id.scheme, a.id.id) for a in got]


def test_outsiders_cannot_read_assign_or_take_the_election_and_squall_needs_the_identity(
        zookeeper: str, bootstrap: str, tmp_path: Path) -> None:
    ns = namespace(zookeeper)
    api = ApiProcess(ns, bootstrap, tmp_path / "api.log").start()
    squall, anon = zk_client(ns), zk_client(ns, identity=None)
    wrong = zk_client(ns, identity=f"squall:{'x' * 32}")
    try:
        (vote,) = squall.get_children(ELECTION)
        for path in (ROOT, TOPOLOGIES, WORKERS, ASSIGNMENTS, ELECTION, f"{ELECTION}/{vote}"):
            assert acls(squall, path) == [MINE], path
        for outsider in (anon, wrong):
            with pytest.raises(NoAuthError):
                outsider.set(f"{ELECTION}/{vote}", b"http://attacker.example:8080")
            with pytest.raises(NoAuthError):
                outsider.create(f"{ELECTION}/n_", b"http://attacker.example:8080",
                                ephemeral=True, sequence=True)
            with pytest.raises(NoAuthError):
                outsider.create(f"{ASSIGNMENTS}/some-worker", WorkerAssignment().to_json())
            with pytest.raises(NoAuthError):
                outsider.get_children(TOPOLOGIES)
        assert squall.get(f"{ELECTION}/{vote}")[0].decode().split()[0] == api.url
        with pytest.raises(CoordinationError, match="SQUALL_ZOOKEEPER_AUTH"):
            connect(ns, timeout_s=10)
    finally:
        for c in (squall, anon, wrong):
            c.stop()
            c.close()
        api.stop()


def test_a_worker_refuses_an_assignment_others_may_change_until_the_leader_rewrites_it(
        zookeeper: str, bootstrap: str, tmp_path: Path) -> None:
    ns, wid = namespace(zookeeper), "acker-forged"
    anon = zk_client(ns, identity=None)
    squall = zk_client(ns)
    # Written before Squall protected its tree (or by anyone while it was open).
    forged = f"{ASSIGNMENTS}/{wid}"
    anon.create(forged, WorkerAssignment().to_json(), makepath=True)
    worker = ServiceProcess("services.worker", [
        "--kind", "acker", "--worker-id", wid, "--zookeeper", ns,
        "--bootstrap-servers", bootstrap, "--workdir", str(tmp_path / "w")],
        tmp_path / "worker.log").start()
    procs = f"squall_worker_processes{{kind=acker,worker={wid}}}"
    api = None
    try:
        wait_for(lambda: squall.exists(f"{WORKERS}/{wid}") is not None, 60, "the worker")
        session = json.loads(squall.get(f"{WORKERS}/{wid}")[0])["session"]
        # The strongest forger: the worker's own session, an acker task of a topology.
        spec = {"name": "evil", "ackers": 1, "spouts": [{"name": "s", "topics": ["t"]}]}
        anon.set(forged, WorkerAssignment(
            (Placement("evil", Kind.ACKER, "__acker", (0,)),), {"evil": spec}, {"evil": True},
            session).to_json())
        wait_for(lambda: worker.log_tail(200).count("world:anyone") >= 2, 30,
                 "the forged assignment refused", explain=lambda: worker.log_tail(40))
        assert worker.metrics().get(procs) == 0
        api = ApiProcess(ns, bootstrap, tmp_path / "api.log").start()
        wait_for(lambda: acls(squall, forged) == [MINE], 30,
                 "the leader to replace the node with one of Squall's own")
        with pytest.raises(NoAuthError):
            anon.set(forged, b"{}")
        assert worker.alive()
    finally:
        for c in (squall, anon):
            c.stop()
            c.close()
        worker.stop()
        if api is not None:
            api.stop()


def test_a_password_rotation_moves_every_node_to_the_new_identity(zookeeper: str) -> None:
    ns = namespace(zookeeper)
    old = ZooKeeperAccess(Identity("squall", "old-password-0123456789"))
    new = ZooKeeperAccess(Identity("squall", "new-password-0123456789"))
    first = connect(ns, timeout_s=10, access=old)
    first.create(f"{TOPOLOGIES}/t1", b"{}")
    write_assignment(first, "w1", WorkerAssignment(), old)
    first.stop()
    first.close()
    # Every process restarted with both: the first to connect moves the tree.
    both = connect(ns, timeout_s=10, access=ZooKeeperAccess(new.identity, previous=old.identity))
    both.stop()
    both.close()
    want = [(ALL, "digest", new.identity.digest_id())]  # type: ignore[union-attr]
    only_new = connect(ns, timeout_s=10, access=new)
    only_old = zk_client(ns, identity=old.identity.credential())  # type: ignore[union-attr]
    try:
        for path in (ROOT, f"{TOPOLOGIES}/t1", f"{ASSIGNMENTS}/w1"):
            assert acls(only_new, path) == want, path
        assert only_new.get(f"{TOPOLOGIES}/t1")[0] == b"{}"
        with pytest.raises(NoAuthError):
            only_old.set(f"{TOPOLOGIES}/t1", b'{"forged": true}')
    finally:
        for c in (only_new, only_old):
            c.stop()
            c.close()
