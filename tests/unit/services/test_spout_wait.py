"""How long the spout's loop waits for source records: a burst's last trees settling make
the loop commit next without waiting (the commit is what ends a burst for its users),
unless the last commit failed."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from services.spout.metrics import SpoutMetrics
from services.spout.service import (
    SOURCE_WAIT_IN_FLIGHT_S,
    SOURCE_WAIT_S,
    SpoutService,
    TaskIO,
)
from services.spout.settings import parse_args
from squall.core.reliability.records import Outcome, Result, Results
from squall.core.reliability.retry import RetrySchedule
from squall.core.tasks.spout_task import SpoutConfig, SpoutTask
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.scheme import TextScheme

WORDCOUNT = Path("examples/wordcount.yaml")
EDGE = Edge("split", "squall.wordcount.edge.sentences.default.split", 2, Grouping.SHUFFLE)


def _service() -> tuple[SpoutService, SpoutTask]:
    s = parse_args(["--topology-file", str(WORDCOUNT), "--component", "sentences",
                    "--tasks", "0", "--num-tasks", "1"])
    svc = SpoutService(s, SpoutMetrics(CollectorRegistry(), s.topology, s.component))
    task = SpoutTask(SpoutConfig(task=0, component="sentences", scheme=TextScheme(),
                                 edges=(EDGE,), num_ackers=2, timeout_ms=30_000,
                                 retry=RetrySchedule(100, 2, 1000, 2)), [0], salt=7)
    svc.io[0] = TaskIO(task, [("sentences", 0)], 0)
    return svc, task


def _ack_all(task: SpoutTask, now: int) -> None:
    task.on_results(Results.from_results(
        [Result(r, 0, Outcome.ACKED) for r in task.pending_roots()]), now)


def test_idle_in_flight_and_settled() -> None:
    svc, task = _service()
    assert svc._source_wait() == SOURCE_WAIT_S  # idle: nothing to commit either
    task.on_records(0, [0, 1, 2], [b"a b", b"c", b"d e f"], ["m0", "m1", "m2"], 0)
    assert svc._source_wait() == SOURCE_WAIT_IN_FLIGHT_S
    _ack_all(task, 10)
    assert task.commits() == {0: 3}
    assert svc._source_wait() == 0.0  # the burst settled: commit first, no wait
    task.committed(0, 3)
    assert svc._source_wait() == SOURCE_WAIT_S


def test_after_a_failed_commit_the_loop_waits_again() -> None:
    svc, task = _service()
    task.on_records(0, [0], [b"a"], ["m0"], 0)
    _ack_all(task, 10)
    svc._commit_failed = True  # as _commit leaves it when Kafka refused the commit
    assert svc._source_wait() == SOURCE_WAIT_S  # retried at the interval, not every step
    assert not svc._caught_up()
