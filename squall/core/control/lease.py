"""How long a worker's task processes may act on what ZooKeeper gave it: a lease that the
worker renews after each round trip to ZooKeeper and its tasks check before they commit
offsets, emit tuples or run a micro-batch (so before any state write).

ZooKeeper ends a session that its servers have not heard from for the session timeout, and
only then can the leader give the session's tasks to another worker. An answer to a request
sent at ``t`` proves the servers heard from the session at ``t`` or later: nobody else can be
given its tasks before ``t + timeout``. The lease ends ``margin_ms`` before that. A process
that froze (SIGSTOP, a paused VM, a stalled disk) wakes with its lease run out and does
nothing until its worker renews it, or kills it because the session ended: the zombie
cannot commit, emit or write for a task that moved.

Rules:
- a renewal's deadline is the request's send time plus the session timeout minus the margin;
- a renewal never moves the deadline back (an answer that came late says less);
- the lease holds while ``now < deadline``; a lease never written holds nothing;
- a check may keep the deadline it last read while it lies ahead (deadlines only grow), and
  reads the lease again once it passed.

Times are nanoseconds of one clock that every process of a host shares and that runs on
while a process is stopped (``CLOCK_MONOTONIC``: Python's ``time.monotonic_ns``, Java's
``System.nanoTime``). What stays open is a freeze between a check and the act it allows
(a few microseconds of code); the writes themselves are fenced again where the store can:
the Trident state's txids and the bolts' checkpoint log (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from squall.core.errors import ConfigError

#: The part of the session timeout a lease gives up, so that a task stops before the session
#: can end even when the renewal's answer was slow.
MARGIN_FRACTION = 3


def deadline(sent_ns: int, session_timeout_ms: int, margin_ms: int | None = None) -> int:
    """The deadline a renewal gives: ``sent_ns`` is when its request went out."""
    if session_timeout_ms <= 0:
        raise ConfigError(f"session timeout {session_timeout_ms} ms: must be positive")
    margin = session_timeout_ms // MARGIN_FRACTION if margin_ms is None else margin_ms
    if not 0 <= margin < session_timeout_ms:
        raise ConfigError(f"lease margin {margin} ms must be under the session timeout "
                          f"({session_timeout_ms} ms)")
    return sent_ns + (session_timeout_ms - margin) * 1_000_000


@dataclass(frozen=True)
class Lease:
    """A lease as written: the deadline, nanoseconds of the host's monotonic clock."""

    deadline_ns: int

    def holds(self, now_ns: int) -> bool:
        return now_ns < self.deadline_ns

    def renewed(self, deadline_ns: int) -> Lease:
        """This lease after a renewal (never shortened)."""
        return Lease(max(self.deadline_ns, deadline_ns))

    def encode(self) -> bytes:
        return f"{self.deadline_ns}\n".encode()

    @classmethod
    def decode(cls, raw: bytes) -> Lease:
        # Exactly what encode writes: digits, then a newline (or not, if cut short).
        digits = raw.removesuffix(b"\n")
        if not (digits and all(48 <= c <= 57 for c in digits)):
            text = raw.decode("ascii", "replace")
            raise ConfigError(f"lease {text[:40]!r}: a deadline in nanoseconds is needed")
        return cls(int(digits))


#: What a check knows before it first read the lease.
NONE = Lease(0)


def needs_read(known: Lease, now_ns: int) -> bool:
    """Whether a check must read the lease again (the deadline it knows has passed)."""
    return not known.holds(now_ns)
