"""A broker that speaks only TLS: a Tansu of its own, advertising the address of an
stunnel in front of it that holds a certificate signed by a CA this module makes."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from squall.dev.probes import find_tansu, kafka_round_trip, wait_until
from squall.kafka_clients import KafkaClients, load_properties
from squall.processes import HOST, free_port


@dataclass(frozen=True)
class TlsBroker:
    bootstrap: str  # the TLS address, the only one the broker advertises
    ca: Path  # the CA's certificate, for ssl.ca.location

    def clients(self) -> KafkaClients:
        return KafkaClients(self.bootstrap, load_properties(self.env()))

    def env(self) -> dict[str, str]:
        """The environment that puts every Squall client on TLS."""
        return {"SQUALL_KAFKA_SECURITY_PROTOCOL": "SSL",
                "SQUALL_KAFKA_SSL_CA_LOCATION": str(self.ca)}


def stunnel() -> str:
    found = shutil.which("stunnel4") or shutil.which("stunnel")
    if found is None:
        raise RuntimeError("the TLS tests need Debian's stunnel4 (scripts/test.sh installs it)")
    return found


@contextlib.contextmanager
def tls_broker(home: Path) -> Iterator[TlsBroker]:
    import trustme

    home.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert(HOST, "localhost")
    ca.cert_pem.write_to_path(str(home / "ca.pem"))
    cert.private_key_and_cert_chain_pem.write_to_path(str(home / "server.pem"))
    plain, tls = free_port(), free_port()
    (home / "stunnel.conf").write_text(
        f"foreground = yes\npid =\noutput = {home / 'stunnel.log'}\ndebug = 4\n"
        f"[kafka]\naccept = {HOST}:{tls}\nconnect = {HOST}:{plain}\n"
        f"cert = {home / 'server.pem'}\n")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(home / "tansu.log", "wb") as log:
            procs.append(subprocess.Popen(
                [find_tansu(), "broker", "--listener-url", f"tcp://{HOST}:{plain}",
                 "--advertised-listener-url", f"tcp://{HOST}:{tls}",
                 "--storage-engine", "memory://tansu/"],
                cwd=home, stdout=log, stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([stunnel(), str(home / "stunnel.conf")], cwd=home,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        broker = TlsBroker(f"{HOST}:{tls}", home / "ca.pem")
        wait_until(lambda: kafka_round_trip(broker.clients()), 60,
                   f"Kafka over TLS on {broker.bootstrap}",
                   lambda: all(p.poll() is None for p in procs), home / "tansu.log")
        yield broker
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
