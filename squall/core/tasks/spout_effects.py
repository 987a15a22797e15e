"""What a spout task's steps ask the service to do (pure): records to emit
(:class:`Emission`), results settled (:class:`Settled`), messages to dead-letter
(:class:`Undeliverable`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from squall.core.reliability.records import AckerBatch
from squall.core.tasks.spout_emitter import Routed

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Undeliverable:
    """A message to dead-letter, then confirm with
    :meth:`squall.core.tasks.spout_task.SpoutTask.dead_lettered`."""

    source: int
    offset: int
    payload: Any
    reason: str
    attempts: int


@dataclass
class Emission:
    """What the service must produce for one batch of records."""

    tuples: Routed = field(default_factory=list)
    inits: AckerBatch = field(default_factory=AckerBatch.empty)
    letters: list[Undeliverable] = field(default_factory=list)
    emitted: int = 0
    replayed: int = 0
    recovered: int = 0


@dataclass
class Settled:
    """What a batch of results (or the backstop) decided."""

    acked: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    latencies_ms: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    letters: list[Undeliverable] = field(default_factory=list)
    stale: int = 0
