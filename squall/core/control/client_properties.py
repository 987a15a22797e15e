"""Kafka client properties: what a user gives every Kafka client Squall makes.

Two sources, in librdkafka's property names (``security.protocol``, ``ssl.ca.location``,
``sasl.mechanism``...):

- a properties file (``SQUALL_KAFKA_PROPERTIES``: its path), ``name=value`` lines as Kafka's
  ``client.properties``; ``#`` and ``!`` start comments;
- environment variables ``SQUALL_KAFKA_<NAME>``: the name upper-cased, ``.`` written ``_``
  and ``_`` written ``__`` (the Confluent images' convention):
  ``SQUALL_KAFKA_SASL_PASSWORD`` is ``sasl.password``.

A name may start with a role, ``consumer.``, ``producer.`` or ``admin.`` (Kafka Connect's
prefixes; ``SQUALL_KAFKA_CONSUMER_...`` in the environment): it applies to that kind of
client only. The more specific wins: a role's property over a common one; between the
same name in both sources, the environment's.

Squall sets some properties itself because its guarantees rest on them (which group
commits, when offsets are committed, where a spout starts, acks): a user's value for one
of them is refused with the setting to use instead. Every other property overrides
Squall's own tuning.

Two more kinds of name configure the topics Squall creates for a topology (acker, edges,
results, dead letters), as Kafka Streams' do: ``replication.factor`` (default, or ``-1``:
the brokers' ``default.replication.factor``) and ``topic.<config>``
(``topic.min.insync.replicas``; default: one less than a replication factor given here, at
least 1, else the brokers' own ``min.insync.replicas``).

Secret values (passwords, keys, tokens) never appear in a repr, a log line or an error:
:meth:`ClientProperties.redacted` and :func:`scrub` replace them. Pure: the file's text and
the environment are passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from squall.core.errors import ConfigError

Role = Literal["consumer", "producer", "admin"]
ROLES: tuple[Role, ...] = ("consumer", "producer", "admin")
ENV_PREFIX = "SQUALL_KAFKA_"
#: The environment variable naming the properties file.
FILE_ENV = "SQUALL_KAFKA_PROPERTIES"
REDACTED = "[redacted]"

#: Properties Squall sets itself, and what to use instead of a user's value.
OWNED: Mapping[str, str] = {
    "bootstrap.servers": "--bootstrap-servers or SQUALL_BOOTSTRAP_SERVERS (per service)",
    "group.id": "the topology: groups are named for it",
    "enable.auto.commit": "nothing: a spout commits exactly what was acked",
    "enable.auto.offset.store": "nothing: a spout commits exactly what was acked",
    "auto.offset.reset": "the spout's start setting (start: earliest, latest, group:<id>)",
    "enable.partition.eof": "nothing: readers rely on Squall's own setting",
    "transactional.id": "nothing: Squall's guarantees do not use Kafka transactions",
    "acks": "nothing: producers wait for every in-sync replica (acks=all)",
}

#: A property whose value is a secret.
_SECRET = re.compile(r"password|secret|token|ssl\.key\.pem|ssl_key|oauthbearer\.config"
                     r"|jaas", re.IGNORECASE)
_NAME = re.compile(r"^[a-z][a-z0-9_.-]*[a-z0-9]$")


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


def _split_role(name: str) -> tuple[Role | None, str]:
    for role in ROLES:
        if name.startswith(role + "."):
            return role, name[len(role) + 1:]
    return None, name


@dataclass(frozen=True)
class ClientProperties:
    """The user's properties, common and per role, each with where it came from."""

    common: Mapping[str, str] = field(default_factory=dict)
    roles: Mapping[Role, Mapping[str, str]] = field(default_factory=dict)
    #: ``name -> where it was set`` (a file and line, or an environment variable).
    origins: Mapping[str, str] = field(default_factory=dict)
    #: The replication factor of the topics Squall creates (None: the brokers'
    #: ``default.replication.factor``, which a cluster short of brokers refuses rather than
    #: creating fewer replicas than it was configured for).
    replication_factor: int | None = None
    #: Configs of the topics Squall creates (``min.insync.replicas``...).
    topic_configs: Mapping[str, str] = field(default_factory=dict)

    def topic_config(self) -> dict[str, str]:
        """The configs of a topic Squall creates."""
        if self.replication_factor is None:  # the brokers' min.insync.replicas goes with it
            return dict(self.topic_configs)
        return {"min.insync.replicas": str(max(1, self.replication_factor - 1)),
                **self.topic_configs}

    def for_role(self, role: Role) -> dict[str, str]:
        """The properties a client of ``role`` gets (a role's own over the common ones)."""
        return {**self.common, **self.roles.get(role, {})}

    def apply(self, role: Role, squall: Mapping[str, object]) -> dict[str, object]:
        """Squall's configuration for one client with the user's properties over it (none
        of them is one Squall owns: :func:`parse` refused those)."""
        return {**squall, **self.for_role(role)}

    def secrets(self) -> list[str]:
        """Every secret value, for :func:`scrub`."""
        every = [self.common, *self.roles.values()]
        return sorted({v for props in every for k, v in props.items()
                       if is_secret(k) and v}, key=len, reverse=True)

    def redacted(self) -> dict[str, str]:
        """Every property by its full name (``consumer.fetch.wait.max.ms``), secrets hidden."""
        out = {k: REDACTED if is_secret(k) else v for k, v in self.common.items()}
        out.update({f"topic.{k}": v for k, v in self.topic_configs.items()})
        if self.replication_factor is not None:
            out["replication.factor"] = str(self.replication_factor)
        for role, props in self.roles.items():
            out.update({f"{role}.{k}": REDACTED if is_secret(k) else v
                        for k, v in props.items()})
        return dict(sorted(out.items()))

    def __repr__(self) -> str:
        return f"ClientProperties({self.redacted()!r})"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self.common or any(self.roles.values()) or self.topic_configs
                    or self.replication_factor is not None)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value in it replaced."""
    for s in secrets:
        if len(s) >= 3:  # a one- or two-character "secret" would mangle every text
            text = text.replace(s, REDACTED)
    return text


def parse_file(text: str, where: str) -> dict[str, tuple[str, str]]:
    """A properties file's ``{name: (value, "file:line")}``. Kafka's ``.properties``
    subset: ``name=value`` or ``name: value``, comments, blank lines, a trailing ``\\``
    continuing a line."""
    out: dict[str, tuple[str, str]] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].strip()
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + lines[i].strip()
        i += 1
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if m is None:
            # the line is not quoted: it may hold a secret
            raise ConfigError(f"{where}:{start + 1}: expected name=value")
        out[m.group(1)] = (m.group(2), f"{where}:{start + 1}")
    return out


def env_name(name: str) -> str:
    """The environment variable for a property: ``ssl.ca.location`` is
    ``SQUALL_KAFKA_SSL_CA_LOCATION``."""
    return ENV_PREFIX + name.replace("_", "__").replace(".", "_").upper()


def parse_env(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``{name: (value, variable)}`` from the ``SQUALL_KAFKA_*`` variables (not the file's
    path, nor ``SQUALL_KAFKA_PORT``-like settings of the dev stack: see :data:`NOT_PROPS`)."""
    out: dict[str, tuple[str, str]] = {}
    for var, value in environ.items():
        if not var.startswith(ENV_PREFIX) or var in NOT_PROPS:
            continue
        raw = var[len(ENV_PREFIX):].lower()
        name = "_".join(part.replace("_", ".") for part in raw.split("__"))
        out[name] = (value, var)
    return out


#: ``SQUALL_KAFKA_`` variables that are not client properties.
NOT_PROPS = frozenset({FILE_ENV, "SQUALL_KAFKA_PORT"})


def parse(file_entries: Mapping[str, tuple[str, str]],
          env_entries: Mapping[str, tuple[str, str]]) -> ClientProperties:
    """Merge the file's entries and the environment's (the environment wins) into
    properties, refusing names Squall owns and names that cannot be properties."""
    merged = {**file_entries, **env_entries}
    common: dict[str, str] = {}
    roles: dict[Role, dict[str, str]] = {}
    origins: dict[str, str] = {}
    replication: int | None = None
    topic_configs: dict[str, str] = {}
    for full, (value, where) in sorted(merged.items()):
        origins[full] = where
        if full == "replication.factor":
            replication = None if value.strip() == "-1" else _positive(value, full, where)
            continue
        if full.startswith("topic."):
            topic_configs[full.removeprefix("topic.")] = value
            continue
        role, name = _split_role(full)
        if not _NAME.match(name):
            raise ConfigError(f"{where}: {full!r} is not a Kafka client property name")
        if name in OWNED:
            raise ConfigError(f"{where}: {full!r} is set by Squall; use {OWNED[name]}")
        (common if role is None else roles.setdefault(role, {}))[name] = value
    if "min.insync.replicas" in topic_configs and replication is not None:
        insync = _positive(topic_configs["min.insync.replicas"], "topic.min.insync.replicas",
                           origins["topic.min.insync.replicas"])
        if insync > replication:
            raise ConfigError(f"{origins['topic.min.insync.replicas']}: "
                              f"topic.min.insync.replicas={insync} is more than "
                              f"replication.factor={replication}: no write could succeed")
    return ClientProperties(common, {r: dict(p) for r, p in roles.items()}, origins,
                            replication, topic_configs)


def _positive(value: str, name: str, where: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{where}: {name} must be a whole number of at least 1, got "
                          f"{value!r}")
    return n


#: What to check when the brokers cannot be reached, by what librdkafka reported.
_HINTS: tuple[tuple[str, str], ...] = (
    ("certificate verify failed", "set ssl.ca.location (SQUALL_KAFKA_SSL_CA_LOCATION) to the "
     "certificate of the CA that signed the brokers' certificates"),
    ("_SSL", "check security.protocol and the ssl.* properties"),
    ("_AUTHENTICATION", "check sasl.mechanism, sasl.username and sasl.password"),
)


def explain_unreachable(bootstrap: str, protocol: str, reported: list[tuple[str, str]],
                        failure: str) -> str:
    """Why no broker of ``bootstrap`` answered, and which setting to check. ``reported``:
    librdkafka's errors as ``(name, text)``, most telling first; ``protocol``: the clients'
    ``security.protocol``."""
    telling = next((r for r in reported if r[0] in ("_SSL", "_AUTHENTICATION")),
                   reported[0] if reported else ("", failure))
    hint = next((h for key, h in _HINTS if key in telling[1] or key == telling[0]), None)
    if hint is None:
        hint = (f"check the address, and security.protocol (now {protocol}) if the brokers "
                "require TLS or SASL")
    return f"cannot reach Kafka at {bootstrap}: {telling[1]}; {hint}"
