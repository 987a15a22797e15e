"""The API over TLS: two replicas serving HTTPS with a certificate of a CA of the test's
own; a client that checks it gets answers, plain HTTP and a client that does not trust the
CA get none, and a write sent to the follower reaches the leader over HTTPS, checked against
``--tls-ca``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.cluster import ApiProcess, namespace
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration


def _spec(name: str) -> dict[str, Any]:
    return {"name": name, "ackers": 1,
            "spouts": [{"name": "s", "topics": [f"src-{name}"]}],
            "bolts": [{"name": "b", "class": "examples.wordcount:SplitSentenceBatch",
                       "outputs": {"default": ["word"]}, "inputs": [{"component": "s"}]}]}


def test_replicas_serve_https_and_forward_writes_over_it(zookeeper: str, bootstrap: str,
                                                         tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    for c in cert.cert_chain_pems[1:]:
        c.write_to_path(str(tmp_path / "cert.pem"), append=True)
    tls = ("--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"),
           "--tls-ca", str(tmp_path / "ca.pem"))
    ns = namespace(zookeeper)
    a = ApiProcess(ns, bootstrap, tmp_path / "a.log", *tls, ca=tmp_path / "ca.pem").start()
    try:
        wait_for(a.leads, 30, "the first replica to lead")
        b = ApiProcess(ns, bootstrap, tmp_path / "b.log", *tls, ca=tmp_path / "ca.pem").start()
        try:
            assert a.url.startswith("https://")
            with pytest.raises(httpx.HTTPError):  # the port speaks TLS only
                httpx.get(f"http://127.0.0.1:{a.port}/healthz", timeout=5)
            with pytest.raises(httpx.HTTPError, match="CERTIFICATE_VERIFY_FAILED"):
                httpx.get(f"{a.url}/healthz", timeout=5)  # a CA it was not told of
            with b.client() as follower:
                r = follower.post("/topologies", json=_spec("tlsfwd"))
                assert r.status_code == 201, r.text
                assert r.headers["x-squall-leader"] == a.url
            with a.client() as leader:
                assert leader.get("/topologies/tlsfwd").json()["name"] == "tlsfwd"
        finally:
            b.stop()
    finally:
        a.stop()


def test_a_certificate_without_its_key_is_refused_at_start(zookeeper: str, bootstrap: str,
                                                           tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("")
    api = ApiProcess(namespace(zookeeper), bootstrap, tmp_path / "api.log", "--tls-cert",
                     str(tmp_path / "cert.pem"))
    with pytest.raises(AssertionError):
        api.start()
    assert "tls_cert and tls_key go together" in (tmp_path / "api.log").read_text()
