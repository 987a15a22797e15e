"""A bolt task's report of one micro-batch: what it did and where its time went.

The tasks run in Spark's Python workers, which serve no /metrics: their reports are what
the micro-batch's job collects, handed to the driver's metrics by its sink
(services/bolts/tasks_sink.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from squall.core.bolt_api.metrics import MetricsDelta

#: Where a task's time goes: planning its ranges from the offset log, reading them from Kafka,
#: the bolt, producing, Kafka's confirmation.
PHASES = ("input", "read", "execute", "produce", "flush")
#: Counters summed across tasks.
COUNTS = ("records", "executed", "emitted", "acked", "failed", "bad", "error_count",
          "fetch_retries", "culprits", "sandboxes")
#: How many of the last errors a report keeps (the count keeps them all).
LAST_ERRORS = 5


@dataclass
class BatchReport:
    task: int = -1
    component: str = ""
    #: edge messages read (each a batch of tuples), by the chain's head
    records: int = 0
    executed: int = 0
    emitted: int = 0
    acked: int = 0
    failed: int = 0
    #: undecodable edge messages (dead-lettered)
    bad: int = 0
    #: every exception of bolt code (each failed its input) ...
    error_count: int = 0
    #: edge range reads that brought nothing for a while and were re-positioned
    fetch_retries: int = 0
    #: source messages failed because a call on them killed or hung the process, and the
    #: sandboxes run to find them (docs/poison.md)
    culprits: int = 0
    sandboxes: int = 0
    seconds: float = 0.0
    #: ... and the last few of them, for the log
    errors: list[str] = field(default_factory=list)
    #: where ``seconds`` went, by :data:`PHASES`
    phases: dict[str, float] = field(default_factory=dict)
    #: what the bolt's own metrics did, by task (squall/core/bolt_api/metrics.py)
    user: dict[int, MetricsDelta] = field(default_factory=dict)

    @classmethod
    def merged(cls, component: str, reports: Iterable[BatchReport]) -> BatchReport:
        """One report for a component's tasks: counts, seconds and phases summed."""
        out = cls(component=component)
        for r in reports:
            for k in COUNTS:
                setattr(out, k, getattr(out, k) + getattr(r, k))
            out.seconds += r.seconds
            out.errors = (out.errors + r.errors)[-LAST_ERRORS:]
            for p, v in r.phases.items():
                out.phases[p] = out.phases.get(p, 0.0) + v
            for task, d in r.user.items():
                out.user.setdefault(task, MetricsDelta()).add(d)
        return out
