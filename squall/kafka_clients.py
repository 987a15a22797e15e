"""Every Kafka client Squall makes, made here: the brokers, Squall's own settings for the
client, and the user's properties over them (squall/core/control/client_properties.py says which
properties, from where, and which Squall keeps for itself).

A service loads the properties once, with its settings (``settings.kafka``); a Spark Python
worker, which has no settings of its own, loads them from the environment it inherits from
the bolts service (:func:`worker_properties`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.core.control.client_properties import (
    ENV_PREFIX,
    FILE_ENV,
    NOT_PROPS,
    ClientProperties,
    Role,
    explain_unreachable,
    parse,
    parse_env,
    parse_file,
    scrub,
)
from squall.core.errors import ConfigError, KafkaUnavailable


def load_properties(environ: Mapping[str, str]) -> ClientProperties:
    """The properties named by ``environ``: its ``SQUALL_KAFKA_PROPERTIES`` file, then its
    ``SQUALL_KAFKA_*`` variables over it."""
    path = environ.get(FILE_ENV, "")
    entries: dict[str, tuple[str, str]] = {}
    if path:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ConfigError(f"{FILE_ENV}={path}: cannot read the Kafka client properties "
                              f"file ({e.strerror or e})") from None
        entries = parse_file(text, path)
    return parse(entries, parse_env(environ))


@functools.cache
def worker_properties() -> ClientProperties:
    """The properties of this process's environment, loaded once (a Spark Python worker's)."""
    return load_properties(os.environ)


def property_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that carry the properties, to pass on to processes started elsewhere
    (Spark executors on other hosts)."""
    return {k: v for k, v in environ.items()
            if k.startswith(ENV_PREFIX) and (k == FILE_ENV or k not in NOT_PROPS)}


#: How long a request may go unanswered before librdkafka gives up on its connection and
#: sends it again, to whichever broker then leads (its default: 60 s). A broker that froze
#: keeps its connections open: Kafka fences it after its session timeout (9 s, 2 more if it
#: was the active controller) and moves its partitions, and every request already sent to
#: it would still wait out the default, holding a spout's commits for as long. 6 s: the
#: second try comes after the fencing (at 10 s the second would still find the frozen
#: leader, and the third come at 20). Squall's producers are idempotent, so a request sent
#: again writes nothing twice.
SOCKET_TIMEOUT_MS = 6_000


@dataclass(frozen=True)
class KafkaClients:
    """Makes the clients of one cluster: ``bootstrap`` and the user's properties."""

    bootstrap: str
    properties: ClientProperties = field(default_factory=ClientProperties)

    def conf(self, role: Role, squall: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A client's configuration: Squall's ``squall`` with the user's properties over it."""
        return {"bootstrap.servers": self.bootstrap,
                **self.properties.apply(role, {"socket.timeout.ms": SOCKET_TIMEOUT_MS,
                                               **(squall or {})})}

    def consumer(self, squall: Mapping[str, Any]) -> Any:
        from confluent_kafka import Consumer

        return Consumer(self.conf("consumer", squall))

    def producer(self, squall: Mapping[str, Any] | None = None) -> Any:
        from confluent_kafka import Producer

        return Producer(self.conf("producer", squall))

    def metadata(self, timeout_s: float, topic: str | None = None) -> Any:
        """The cluster's metadata (of ``topic`` only, if given). A cluster that does not
        answer is an error saying why and which setting to check, from what librdkafka
        reported while trying."""
        from confluent_kafka import KafkaException

        reported: list[Any] = []
        admin = self.admin({"error_cb": reported.append, "logger": quiet_logger("connect")})
        try:
            return admin.list_topics(topic, timeout=timeout_s)
        except KafkaException as e:
            admin.poll(0)  # serves the error callbacks
            protocol = self.properties.for_role("admin").get("security.protocol", "PLAINTEXT")
            why = explain_unreachable(self.bootstrap, protocol,
                                      [(r.name(), r.str()) for r in reported], str(e))
            raise KafkaUnavailable(scrub(why, self.properties.secrets())) from None

    def admin(self, squall: Mapping[str, Any] | None = None) -> Any:
        from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined,unused-ignore]

        return AdminClient(self.conf("admin", squall))


def quiet_logger(name: str) -> logging.Logger:
    """A logger that swallows librdkafka chatter (e.g. refused connections while probing)."""
    log = logging.getLogger(f"squall.quiet.{name}")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def from_environment(bootstrap: str) -> KafkaClients:
    """The clients of code that has no settings of its own (a Spark Python worker, the
    bolts' data source): the properties of the process's environment."""
    return KafkaClients(bootstrap, worker_properties())


class Scrubbing(logging.Filter):
    """Replaces secret values in every log record that passes (a library that prints its
    configuration, an exception that quotes one)."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            text = record.getMessage()
            clean = scrub(text, self.secrets)
            if clean != text:
                record.msg, record.args = clean, None
        return True
