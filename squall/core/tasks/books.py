"""What the runs that are not emit by emit (squall/core/tasks/column_runs.py,
squall/core/tasks/window_runs.py) see of their executor
(:class:`~squall.core.tasks.executor.BoltExecutor`): its plans and ids, where a micro-batch's
results are kept, and its emit, ack and fail."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from squall.core.bolt_api.bolt import TaskContext
from squall.core.reliability.clock import Clock
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.tuples import Tuple
from squall.core.tasks.emits import StreamPlan
from squall.core.tasks.exec_result import ExecResult


class Books(Protocol):
    """A bolt task's executor, as a run keeps its books through it."""

    @property
    def result(self) -> ExecResult: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def context(self) -> TaskContext: ...

    @property
    def outputs(self) -> Mapping[str, tuple[str, ...]]: ...

    @property
    def plans(self) -> Mapping[str, StreamPlan]: ...

    @property
    def batch_ids(self) -> IdBatcher: ...

    def emit(self, stream: str, values: Sequence[Any], anchors: list[Tuple],
             direct: int | None) -> None: ...

    def ack(self, t: Tuple) -> None: ...

    def fail(self, t: Tuple) -> None: ...

    def children_so_far(self, t: Tuple) -> None: ...

    def reset_timeout(self, t: Tuple) -> None: ...

    def failed_by(self, error: BaseException | str, roots: Iterable[int]) -> None: ...
