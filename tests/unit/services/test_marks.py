"""What the bolts job reads to know how far its queries got (services/bolts/marks.py)."""

from __future__ import annotations

import json
from pathlib import Path

from services.bolts.batch_marks import (
    last_done,
    last_producing,
    mark_done,
    mark_producing,
    mark_started,
)
from services.bolts.marks import committed_offsets, end_offsets


def test_the_last_committed_batch_of_a_checkpoint(tmp_path: Path) -> None:
    assert committed_offsets(tmp_path) is None  # a fresh checkpoint
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, end in ((4, 10), (5, 20), (6, 30)):  # 6 was planned, not committed
        (tmp_path / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchTimestampMs": 1}) + "\n" + json.dumps({"e:0": end}))
    for batch in (4, 5):
        (tmp_path / "commits" / str(batch)).write_text("v1\n{}")
    assert committed_offsets(tmp_path) == {"e:0": 20}


def test_a_progress_report_names_the_end_offsets_as_json_or_text() -> None:
    assert end_offsets(None) is None
    assert end_offsets({"sources": []}) is None
    assert end_offsets({"sources": [{"endOffset": {"e:0": 5}}]}) == {"e:0": 5}
    assert end_offsets({"sources": [{"endOffset": '{"e:1": 7}'}]}) == {"e:1": 7}
    assert end_offsets({"sources": [{"endOffset": "not json"}]}) is None


def test_batch_marks_remember_the_highest_batch_per_task(tmp_path: Path) -> None:
    d = str(tmp_path / "marks")
    assert last_done(d, 0) == -1
    mark_done(d, 0, 7)
    mark_done(d, 1, 3)
    assert (last_done(d, 0), last_done(d, 1)) == (7, 3)
    mark_done(d, 0, 8)
    assert last_done(d, 0) == 8


def test_the_batch_a_task_started_producing_is_kept_apart_from_the_done_one(
        tmp_path: Path) -> None:
    d = str(tmp_path / "marks")
    assert last_producing(d, 0) == -1
    mark_producing(d, 0, 5)
    assert (last_producing(d, 0), last_done(d, 0)) == (5, -1)
    mark_done(d, 0, 5)
    mark_producing(d, 0, 6)
    assert (last_producing(d, 0), last_done(d, 0), last_producing(d, 1)) == (6, 5, -1)


def test_a_batch_started_again_before_it_finished_is_counted(tmp_path: Path) -> None:
    d = str(tmp_path)
    assert mark_started(d, 0, 7) == 0
    assert mark_started(d, 0, 7) == 1  # its process died: started again
    assert mark_started(d, 0, 7) == 2
    assert mark_started(d, 1, 7) == 0  # another task's own count
    mark_done(d, 0, 7)
    assert mark_started(d, 0, 7) == 0  # Spark runs a finished batch again: not a death
    assert mark_started(d, 0, 8) == 0


def test_the_guardians_verdict_is_read_by_the_batchs_next_attempt_and_gone_once_done(
        tmp_path: Path) -> None:
    from services.bolts.batch_marks import hung, hung_path

    d = str(tmp_path)
    assert hung(d, 0, 7) is None
    Path(hung_path(d, 0, 7)).write_text("42 3.0")
    assert hung(d, 0, 7) == (42, 3.0)
    assert hung(d, 0, 8) is None and hung(d, 1, 7) is None  # another batch's, task's
    mark_done(d, 0, 7)
    assert hung(d, 0, 7) is None
