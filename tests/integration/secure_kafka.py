"""A secured Apache Kafka node of its own (squall/dev/broker.py, ``Security``): TLS with client
certificates, SASL SCRAM-SHA-512 and PLAIN over TLS, SCRAM over plaintext, and the
StandardAuthorizer, with a CA this module makes. Its admin (the super user) creates SCRAM
users and grants ACLs; a client is given the environment of one principal."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.dev import broker
from squall.dev.probes import find_java, kafka_round_trip, wait_until
from squall.kafka_clients import KafkaClients, load_properties
from squall.processes import HOST, die_with_parent, free_port, stop_pid


@dataclass
class SecureKafka:
    node: broker.Node
    home: Path
    ca: Any  # trustme.CA
    admin_password: str
    plain_users: dict[str, str] = field(default_factory=dict)

    def bootstrap(self, listener: str) -> str:
        return self.node.address_of(listener)

    def scram_env(self, user: str, password: str, listener: str = "SASL_SSL") -> dict[str, str]:
        """The environment that puts a Squall process on ``listener`` as ``user``."""
        env = {"SQUALL_KAFKA_SECURITY_PROTOCOL": listener,
               "SQUALL_KAFKA_SASL_MECHANISM": broker.SCRAM,
               "SQUALL_KAFKA_SASL_USERNAME": user, "SQUALL_KAFKA_SASL_PASSWORD": password}
        if listener == "SASL_SSL":
            env["SQUALL_KAFKA_SSL_CA_LOCATION"] = str(self.home / "ca.pem")
        return env

    def plain_env(self, user: str) -> dict[str, str]:
        return {"SQUALL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "SQUALL_KAFKA_SASL_MECHANISM": "PLAIN", "SQUALL_KAFKA_SASL_USERNAME": user,
                "SQUALL_KAFKA_SASL_PASSWORD": self.plain_users[user],
                "SQUALL_KAFKA_SSL_CA_LOCATION": str(self.home / "ca.pem")}

    def tls_env(self, common_name: str) -> dict[str, str]:
        """TLS with a client certificate issued to ``common_name`` (principal
        ``User:<common_name>``). It names a host too: Java refuses a certificate whose
        alternative names are empty."""
        cert = self.ca.issue_cert(f"{common_name}.clients.invalid", common_name=common_name)
        key, chain = self.home / f"{common_name}.key", self.home / f"{common_name}.pem"
        cert.private_key_pem.write_to_path(str(key))
        chain.write_bytes(b"".join(c.bytes() for c in cert.cert_chain_pems))
        return {"SQUALL_KAFKA_SECURITY_PROTOCOL": "SSL",
                "SQUALL_KAFKA_SSL_CA_LOCATION": str(self.home / "ca.pem"),
                "SQUALL_KAFKA_SSL_CERTIFICATE_LOCATION": str(chain),
                "SQUALL_KAFKA_SSL_KEY_LOCATION": str(key)}

    def clients(self, env: Mapping[str, str]) -> KafkaClients:
        listener = env.get("SQUALL_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
        return KafkaClients(self.bootstrap(listener), load_properties(env))

    def admin_env(self) -> dict[str, str]:
        return {"SQUALL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "SQUALL_KAFKA_SASL_MECHANISM": "PLAIN", "SQUALL_KAFKA_SASL_USERNAME": "admin",
                "SQUALL_KAFKA_SASL_PASSWORD": self.admin_password,
                "SQUALL_KAFKA_SSL_CA_LOCATION": str(self.home / "ca.pem")}

    def admin(self) -> Any:
        return self.clients(self.admin_env()).admin()

    def add_scram_user(self, user: str) -> str:
        """A new SCRAM-SHA-512 user; its password."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        password = secrets.token_urlsafe(18)
        up = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
        admin = self.admin()
        for fut in admin.alter_user_scram_credentials([up]).values():
            fut.result(30)
        return password

    def grant(self, bindings: Iterable[Any]) -> None:
        admin = self.admin()
        for fut in admin.create_acls(list(bindings), request_timeout=30).values():
            fut.result(30)

    def revoke(self, filters: Iterable[Any]) -> None:
        admin = self.admin()
        for fut in admin.delete_acls(list(filters), request_timeout=30).values():
            fut.result(30)


def _keystore(ca: Any, path: Path) -> None:
    """The node's key in PKCS #8 (as Kafka's PEM keystore wants it) and its chain."""
    from cryptography.hazmat.primitives import serialization

    cert = ca.issue_cert(HOST, "localhost")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    path.touch(mode=0o600)
    path.write_bytes(pkcs8 + b"".join(c.bytes() for c in cert.cert_chain_pems))


@contextlib.contextmanager
def secure_kafka(home: Path, plain_users: Iterable[str] = ()) -> Iterator[SecureKafka]:
    import trustme

    home.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(home / "ca.pem"))
    _keystore(ca, home / "keystore.pem")
    users = {u: secrets.token_urlsafe(12) for u in plain_users}
    sec = broker.Security(home / "keystore.pem", home / "ca.pem", secrets.token_urlsafe(18),
                          tuple(users.items()))
    names = [*broker.SECURED_LISTENERS, broker.INTERNAL]
    node = broker.Node(1, HOST, tuple((n, free_port()) for n in names), free_port())
    java, libs = find_java(), broker.find_libs()
    config = broker.write_node(home, node, [node], sec)
    broker.format_storage(java, libs, [config], broker.cluster_id())
    kafka = SecureKafka(node, home, ca, sec.admin_password, users)
    with open(home / "kafka.log", "wb") as log:
        proc = subprocess.Popen(broker.server_argv(java, libs, config, 512), cwd=home,
                                stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=die_with_parent)
    try:
        wait_until(lambda: kafka_round_trip(kafka.clients(kafka.admin_env())), 90,
                   f"a secured Kafka on {kafka.bootstrap('SASL_SSL')}",
                   lambda: proc.poll() is None, home / "kafka.log")
        yield kafka
    finally:
        stop_pid(proc.pid)
