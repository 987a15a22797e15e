"""Who may talk to a bolts job's Spark cluster, and in what: Spark's own authentication
(``spark.authenticate``, a secret the master, the workers and every application share) and
RPC encryption (``spark.network.crypto.enabled``, AES keyed from that secret).

On a Spark cluster a bolts job's driver sends its executors the Kafka client properties
(SASL passwords included, ``spark.executorEnv``) and they send back the tuples' outcomes:
without authentication anyone who reaches the master may run code on its workers, and
without encryption the passwords cross the network in clear. So on a cluster both are on
unless the operator says otherwise: the secret is ``SQUALL_SPARK_SECRET`` (the same value
as the cluster's daemons are given, as ``_SPARK_AUTH_SECRET``, docs/security.md); a cluster
without one is refused, naming the variable, unless ``SQUALL_SPARK_INSECURE=true``. A local
master (``local[...]``) has nothing on the network and needs neither. Pure: the
environment is passed in."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from squall.core.errors import ConfigError

SECRET_ENV = "SQUALL_SPARK_SECRET"
INSECURE_ENV = "SQUALL_SPARK_INSECURE"
#: Where a master and a worker read the secret from (Spark's SecurityManager), and where a
#: worker hands it to the executors it starts: not a flag, which the process list shows.
SPARK_SECRET_ENV = "_SPARK_AUTH_SECRET"
MIN_SECRET = 32
#: The settings of every party: the master's, the workers', and each application's.
CONF = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
_LOCAL = re.compile(r"local(\[[^\]]*\])?")


#: And the master's REST submission server off: it takes a driver to run from anyone who
#: reaches its port, with no regard for the secret.
DAEMON_CONF = {**CONF, "spark.master.rest.enabled": "false"}


def daemon_options() -> str:
    """The JVM flags a master's and a worker's ``SPARK_MASTER_OPTS`` / ``SPARK_WORKER_OPTS``
    need (the secret goes in their environment, as :data:`SPARK_SECRET_ENV`)."""
    return " ".join(f"-D{k}={v}" for k, v in DAEMON_CONF.items())


def local(master: str) -> bool:
    return _LOCAL.fullmatch(master.strip()) is not None


@dataclass(frozen=True)
class SparkSecurity:
    secret: str | None = field(default=None, repr=False)
    insecure: bool = False

    def session(self, master: str) -> dict[str, str]:
        """The Spark settings a driver of ``master`` starts with (the secret among them: a
        driver takes it from its settings only, which Spark's UI shows redacted); a cluster
        without a secret, and not said insecure, is a :class:`ConfigError`."""
        if local(master) or (self.secret is None and self.insecure):
            return {}
        if self.secret is None:
            raise ConfigError(
                f"the Spark cluster {master} needs {SECRET_ENV}: the secret its master and "
                f"workers share (spark.authenticate, with RPC encryption; docs/security.md), "
                f"or {INSECURE_ENV}=true to run without, the Kafka credentials then crossing "
                "the network in clear")
        return {**CONF, "spark.authenticate.secret": self.secret}


def security_from(env: Mapping[str, str]) -> SparkSecurity:
    """:class:`SparkSecurity` from the environment; a :class:`ConfigError` naming the
    variable (never the value) for a secret too short or an unreadable flag."""
    secret = env.get(SECRET_ENV) or None
    if secret is not None and len(secret) < MIN_SECRET:
        raise ConfigError(f"{SECRET_ENV} must be {MIN_SECRET} characters at least")
    said = env.get(INSECURE_ENV, "").strip().lower()
    if said not in ("", "true", "false", "1", "0"):
        raise ConfigError(f"{INSECURE_ENV} must be true or false, not {said!r}")
    return SparkSecurity(secret, said in ("true", "1"))
