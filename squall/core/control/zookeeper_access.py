"""Who may use Squall's tree in ZooKeeper, configured in one place for every process: the
environment's ``SQUALL_ZOOKEEPER_*`` variables (docs/security.md, "ZooKeeper").

- ``SQUALL_ZOOKEEPER_AUTH`` (``user:password``): the digest identity every Squall process
  authenticates as. With it, every node Squall creates is writable by that identity alone
  (ZooKeeper's ``digest`` ACL scheme), and a worker runs an assignment only from a node no
  one else may change (:func:`others_who_may_write`).
- ``SQUALL_ZOOKEEPER_PREVIOUS_AUTH`` (``user:password``): while a password is rotated, the
  identity being replaced: a process authenticates as both, and moves every node of the old
  identity to the new one's ACL.
- ``SQUALL_ZOOKEEPER_WORLD_READ`` (``true``/``false``, default false): whether anyone may
  read the tree (specs, assignments, worker endpoints), as monitoring without the secret
  might want.
- ``SQUALL_ZOOKEEPER_TLS_CA``, ``..._TLS_CERT``, ``..._TLS_KEY``: files for TLS to the
  ensemble's secure client port (the CA alone: server authentication; with a certificate
  and key: the client's too). A digest password crosses the network in the clear without
  TLS.

Pure: the caller passes the environment.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from squall.core.errors import ConfigError

PREFIX = "SQUALL_ZOOKEEPER_"
AUTH = f"{PREFIX}AUTH"
PREVIOUS_AUTH = f"{PREFIX}PREVIOUS_AUTH"
WORLD_READ = f"{PREFIX}WORLD_READ"
TLS_CA, TLS_CERT, TLS_KEY = f"{PREFIX}TLS_CA", f"{PREFIX}TLS_CERT", f"{PREFIX}TLS_KEY"
KNOWN = (AUTH, PREVIOUS_AUTH, WORLD_READ, TLS_CA, TLS_CERT, TLS_KEY)

#: ZooKeeper's permission bits.
READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN
#: What changes a node or what lies under it.
CHANGES = WRITE | CREATE | DELETE | ADMIN

_USER = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: A password an attacker cannot guess offline from a sniffed digest in reasonable time.
MIN_PASSWORD = 16


@dataclass(frozen=True)
class Identity:
    user: str
    password: str = field(repr=False)

    def credential(self) -> str:
        """What the client sends (``addauth digest user:password``)."""
        return f"{self.user}:{self.password}"

    def digest_id(self) -> str:
        """The id ZooKeeper's digest scheme stores in ACLs: ``user:base64(sha1(user:pw))``."""
        sha = hashlib.sha1(self.credential().encode()).digest()  # ZooKeeper's own scheme
        return f"{self.user}:{base64.b64encode(sha).decode()}"


@dataclass(frozen=True)
class Tls:
    ca: str
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class ZooKeeperAccess:
    """How a process reaches and protects Squall's tree (the default: open, plain TCP, as
    on a laptop)."""

    identity: Identity | None = None
    world_read: bool = False
    tls: Tls | None = None
    #: the identity a rotation replaces (its nodes move to ``identity``'s ACL)
    previous: Identity | None = None

    def credentials(self) -> list[str]:
        """Every identity the client authenticates as."""
        return [i.credential() for i in (self.identity, self.previous) if i is not None]

    def acl(self) -> list[tuple[int, str, str]]:
        """The ACL of every node Squall creates, ``(perms, scheme, id)``; empty without an
        identity (ZooKeeper's open ACL then)."""
        if self.identity is None:
            return []
        mine = [(ALL, "digest", self.identity.digest_id())]
        return [*mine, (READ, "world", "anyone")] if self.world_read else mine


def access_from(env: Mapping[str, str]) -> ZooKeeperAccess:
    """The access the environment configures; :class:`ConfigError` naming the variable (never
    the password) if malformed."""
    unknown = sorted(k for k in env if k.startswith(PREFIX) and k not in KNOWN)
    if unknown:
        raise ConfigError(f"unknown {', '.join(unknown)}: the ZooKeeper variables are "
                          f"{', '.join(KNOWN)}")
    identity, previous = _identity(env, AUTH), _identity(env, PREVIOUS_AUTH)
    if previous is not None and identity is None:
        raise ConfigError(f"{PREVIOUS_AUTH} needs {AUTH}: the identity it is rotated to")
    if previous is not None and previous == identity:
        raise ConfigError(f"{PREVIOUS_AUTH} is the same as {AUTH}")
    flag = env.get(WORLD_READ, "false").strip().lower()
    if flag not in ("true", "false"):
        raise ConfigError(f"{WORLD_READ} must be true or false, not {flag!r}")
    tls = None
    ca, cert, key = (env.get(k) or None for k in (TLS_CA, TLS_CERT, TLS_KEY))
    if (cert is None) != (key is None):
        raise ConfigError(f"{TLS_CERT} and {TLS_KEY} go together")
    if ca is not None:
        tls = Tls(ca, cert, key)
    elif cert is not None:
        raise ConfigError(f"{TLS_CERT} needs {TLS_CA}: the server is authenticated first")
    return ZooKeeperAccess(identity, flag == "true", tls, previous)


def _identity(env: Mapping[str, str], var: str) -> Identity | None:
    raw = env.get(var, "")
    if not raw:
        return None
    user, colon, password = raw.partition(":")
    if not colon or not _USER.fullmatch(user):
        raise ConfigError(f"{var} must be user:password, the user of letters, digits, "
                          "'.', '_' or '-' (at most 64)")
    if len(password) < MIN_PASSWORD:
        raise ConfigError(f"{var}: the password of {user!r} must be at least "
                          f"{MIN_PASSWORD} characters")
    return Identity(user, password)


def others_who_may_write(acl: Iterable[tuple[int, str, str]], access: ZooKeeperAccess
                         ) -> list[str]:
    """Who besides the access's identity may change a node with ``acl`` (empty: no one, so
    what it holds was written by a holder of the secret)."""
    mine = ("digest", access.identity.digest_id()) if access.identity else None
    return sorted({f"{scheme}:{ident}" for perms, scheme, ident in acl
                   if perms & CHANGES and (scheme, ident) != mine})
