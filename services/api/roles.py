"""Who may call what: a token per role, each role allowed what the ones below it are.

- ``reader`` (``SQUALL_API_READER_TOKEN``): the reads, when reads need a token
  (``reads_need_token``): specs, statistics, dead letters' payloads, task logs, traces;
- ``operator`` (``SQUALL_API_OPERATOR_TOKEN``): activate, deactivate, rebalance, kill and
  replay dead letters as well;
- ``admin`` (``SQUALL_API_TOKEN``): submit as well, which runs the topology's code on the
  workers.

A token is compared with every role's in constant time (no early exit on the first match,
no length leak beyond what ``compare_digest`` gives), so the time of a refusal says nothing
of which role's token came close. Every token is 32 characters at least and differs from
the others (services/api/settings.py)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from enum import IntEnum


class Role(IntEnum):
    READER = 1
    OPERATOR = 2
    ADMIN = 3

    def __str__(self) -> str:
        return self.name.lower()


#: The least length of a role's token: 192 bits of a random URL-safe secret.
MIN_TOKEN = 32


def role_of(tokens: Mapping[Role, str], given: str) -> Role | None:
    """The role whose token ``given`` is (None: no role's)."""
    found: Role | None = None
    sent = given.encode()
    for role, token in sorted(tokens.items()):
        if hmac.compare_digest(sent, token.encode()):
            found = role
    return found
