"""The project's exceptions: one root, one subclass per kind of trouble.

Messages name the offending value so a user can act on them without a traceback.
"""

from __future__ import annotations


class SquallError(Exception):
    """Root of every error Squall raises on purpose."""


class ConfigError(SquallError):
    """A setting is missing or out of range."""


class UsageError(SquallError, ValueError):
    """A call against an API's contract: a tuple with the wrong number of values, an anchor
    to a tuple already acked, a clock moved back, no ackers. (Also a ``ValueError``, as
    Python's own would be.)"""


class FieldError(SquallError, KeyError):
    """A tuple has no field of that name (also a ``KeyError``, as a mapping's would be)."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


class WireFormatError(SquallError):
    """A payload on an internal topic cannot be decoded.

    Callers catch this one type, dead-letter the record and go on: a malformed
    payload must never take a process down.
    """


class LedgerError(SquallError):
    """A record cannot be applied to the acker ledger (e.g. a spout task out of range)."""


class OffsetError(SquallError):
    """An offset-manager call that contradicts its state (e.g. acking an unknown offset)."""


class TopologyError(SquallError):
    """An invalid topology spec; the message names the component or field."""


class StackError(SquallError):
    """The embedded development stack could not start or stop."""


class PortTaken(StackError):
    """A child exited at start-up because another process bound its port first."""


class NotFoundError(SquallError):
    """A topology, component or worker that does not exist."""


class ConflictError(SquallError):
    """A request that contradicts the current state: an illegal lifecycle transition,
    a name already in use, or an edit that lost a race (stale ZooKeeper node version)."""


class StateConflict(ConflictError):
    """A resubmission cannot keep the state it asked for (squall/core/control/kept_state.py)."""


class NotAuthorized(SquallError):
    """Kafka refused an operation to this process's principal: the message names the
    operation and the resource, and where to read which ACLs a topology needs."""


class CoordinationError(SquallError):
    """ZooKeeper cannot be reached (or the session is suspended): nothing was changed."""


class StateError(SquallError):
    """A bolt task's state cannot be saved or read back (the message names the key or the
    log and byte)."""


class StateUnavailable(StateError):
    """The state database does not answer (down, restarting, unreachable): waited for, not
    a failure of the batch's records."""


class BoltFault(SquallError):
    """A bolt task cannot run, and not because of a record: its ``prepare`` raised, killed or
    hung its process, or the framework around the bolt failed. Never dead-letters a record:
    the job stops and is restarted (a crash loop, with this as its last error)."""


class SchemeError(SquallError):
    """A source message the scheme cannot decode (it is dead-lettered, never dropped)."""


class KafkaUnavailable(SquallError):
    """The broker did not answer, or refused an admin request."""


class ProcessUnavailable(SquallError):
    """A process asked on a caller's behalf (a worker serving a log) did not answer, or
    cannot serve what was asked."""


class EndpointRefused(ProcessUnavailable):
    """A URL a worker registered that Squall will not fetch on a caller's behalf: not http
    or https, not on the host the worker registered as, a redirect, or an answer over the
    size cap (squall/core/control/endpoints.py)."""


class ApiError(SquallError):
    """The API answered with an error (its status and detail are in the message), or could
    not be reached (status 0, not shown)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail if status == 0 else f"HTTP {status}: {detail}")
        self.status = status


class NotLeader(SquallError):
    """This replica is not the leader; ``leader`` is the URL of the one that is (if known)."""

    def __init__(self, leader: str | None, detail: str | None = None) -> None:
        super().__init__(detail or f"not the leader; the leader is {leader or 'not elected yet'}")
        self.leader = leader
