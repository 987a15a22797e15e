"""Squall's processes reach ZooKeeper over TLS (``SQUALL_ZOOKEEPER_TLS_*``), on a real server
with a secure client port that asks for client certificates: a Squall client with the CA, its
certificate and the identity works; one without a certificate, or with another CA, gets no
session."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.coord import ROOT, connect
from squall.core.control.zookeeper_access import Identity, Tls, ZooKeeperAccess
from squall.core.errors import CoordinationError
from squall.dev import zookeeper
from squall.dev.probes import find_java, pyspark_jars, wait_until
from squall.processes import HOST, die_with_parent, free_port, stop_pid
from tests.integration.secure_kafka import _keystore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, object]]:
    """A ZooKeeper server with a TLS port (and its plain one for the readiness probe):
    ``host:port`` of the TLS port, the folder of its files, the CA (trustme)."""
    import trustme

    home = tmp_path_factory.mktemp("zk-tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(home / "ca.pem"))
    _keystore(ca, home / "keystore.pem")
    client = ca.issue_cert("squall-client")
    client.cert_chain_pems[0].write_to_path(str(home / "client.pem"))
    client.private_key_pem.write_to_path(str(home / "client.key"))
    plain, secure = free_port(), free_port()
    cfg = zookeeper.write_config(home, plain, HOST, tls=zookeeper.ServerTls(
        secure, home / "keystore.pem", home / "ca.pem"))
    with open(home / "zookeeper.log", "ab") as out:
        proc = subprocess.Popen(zookeeper.server_argv(find_java(None), pyspark_jars(), cfg),
                                cwd=home, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=die_with_parent)
    try:
        wait_until(lambda: _answers(f"{HOST}:{plain}"), 60, "ZooKeeper",
                   alive=lambda: proc.poll() is None, log=home / "zookeeper.log")
        yield f"{HOST}:{secure}", home, ca
    finally:
        stop_pid(proc.pid, timeout_s=20)


def _answers(hosts: str) -> bool:
    try:
        connect(hosts, timeout_s=2).stop()
        return True
    except CoordinationError:
        return False


def test_squall_reaches_zookeeper_over_tls_and_a_client_without_the_certificate_does_not(
        secure_zk: tuple[str, Path, object]) -> None:
    import trustme

    hosts, home, _ = secure_zk
    ident = Identity("squall", "tls-password-0123456789")
    tls = Tls(str(home / "ca.pem"), str(home / "client.pem"), str(home / "client.key"))
    zk = connect(hosts, timeout_s=20, access=ZooKeeperAccess(ident, tls=tls))
    try:
        zk.create(f"{ROOT}/over-tls", b"yes")
        assert zk.get(f"{ROOT}/over-tls")[0] == b"yes"
    finally:
        zk.stop()
        zk.close()
    no_cert = Tls(str(home / "ca.pem"))
    with pytest.raises(CoordinationError, match="did not answer"):
        connect(hosts, timeout_s=5, access=ZooKeeperAccess(ident, tls=no_cert))
    other = trustme.CA()
    other.cert_pem.write_to_path(str(home / "other-ca.pem"))
    with pytest.raises(CoordinationError, match="did not answer"):
        connect(hosts, timeout_s=5, access=ZooKeeperAccess(ident, tls=Tls(
            str(home / "other-ca.pem"), str(home / "client.pem"), str(home / "client.key"))))
