"""A query's first micro-batches with data have their tasks' times logged, and no more."""

from __future__ import annotations

import logging

import pytest

from services.bolts.report import BatchReport
from services.bolts.tasks_sink import FIRST_BATCHES_LOGGED, FirstBatches


def test_the_first_batches_with_data_are_logged_and_no_more(
        caplog: pytest.LogCaptureFixture) -> None:
    first = FirstBatches("split")
    report = [BatchReport(task=1, component="split", seconds=0.0123)]
    with caplog.at_level(logging.INFO, logger="squall.bolts"):
        first.note(0, 0, report)  # no data: not counted
        for batch_id in range(1, FIRST_BATCHES_LOGGED + 3):
            first.note(batch_id, 10, report)
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == FIRST_BATCHES_LOGGED
    assert logged[0] == ("micro-batch 1 of split: 10 tuples; its tasks' seconds: "
                         "[('split', 1, 0.012)]")
