"""What running a bolt task over a micro-batch produced (:class:`ExecResult`), and what a
run tells of each call into user code (:class:`CallWatch`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from squall.core.bolt_api.metrics import MetricsDelta
from squall.core.reliability.records import AckerBatch, AckerRecord
from squall.core.wire.tuple_batch import TupleBatch


@dataclass
class ExecResult:
    outputs: list[tuple[str, int, TupleBatch]] = field(default_factory=list)
    records: list[AckerRecord] = field(default_factory=list)
    #: plain acks, as their roots and values (a record object each would cost per tuple)
    ack_roots: list[int] = field(default_factory=list)
    ack_values: list[int] = field(default_factory=list)
    #: the acker records of the micro-batch, XOR-coalesced per root
    acks: AckerBatch = field(default_factory=AckerBatch.empty)
    errors: list[str] = field(default_factory=list)
    #: why roots were failed (what the bolt raised on them), for their dead letters
    reasons: dict[int, str] = field(default_factory=dict)
    #: said once per task: e.g. state kept in attributes (per-process scratch)
    warnings: list[str] = field(default_factory=list)
    executed: int = 0
    emitted: int = 0
    acked: int = 0
    failed: int = 0
    #: source messages failed because a call on them killed or hung the process
    culprits: int = 0
    #: processes of its own the run took (a micro-batch run in parts to find culprits)
    sandboxes: int = 0
    #: what the bolt's own metrics did (squall/core/bolt_api/metrics.py)
    user: MetricsDelta = field(default_factory=MetricsDelta)


#: What a run counts (a bolt's report of a micro-batch sums the same).
COUNTS = ("executed", "emitted", "acked", "failed", "culprits", "sandboxes")


def add_counts(into: Any, res: ExecResult) -> None:
    """``res``'s :data:`COUNTS` added to ``into`` (another result, or a report)."""
    for k in COUNTS:
        setattr(into, k, getattr(into, k) + getattr(res, k))


ALL_INPUTS = -1


class CallWatch(Protocol):
    """Told of each call into user code: what a sandbox needs to name the input a process
    died or hung on (services/bolts/sandbox.py)."""

    def enter(self, index: int) -> None:
        """A call on input tuple ``index`` (in the order of the batches' rows) begins, or on
        all of them (:data:`ALL_INPUTS`, a batch bolt's one call)."""

    def leave(self) -> None:
        """The call returned or raised."""


def merged(results: Sequence[ExecResult]) -> ExecResult:
    """Several runs' results as one (the runs of a micro-batch's parts): outputs, records
    and errors in turn, counts summed, acks coalesced again."""
    out = ExecResult()
    for r in results:
        out.outputs += r.outputs
        out.records += r.records
        out.ack_roots += r.ack_roots
        out.ack_values += r.ack_values
        out.errors += r.errors
        out.reasons.update(r.reasons)
        out.warnings += [w for w in r.warnings if w not in out.warnings]
        out.user.add(r.user)
        add_counts(out, r)
    out.acks = AckerBatch.concat([r.acks for r in results]).coalesced()
    return out
