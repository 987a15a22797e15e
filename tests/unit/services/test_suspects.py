"""A query's recent culprits (services/bolts/suspects.py): kept across workers in a file,
matched against a micro-batch's tuples by their source message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from services.bolts import suspects as mod
from services.bolts.suspects import Suspects
from squall.core.wire.tuple_batch import TupleBatch


def batch(origins: list[tuple[str, int] | None]) -> TupleBatch:
    return TupleBatch.from_columns({"x": pa.array(range(len(origins)))},
                                   [{i + 1: 7} for i in range(len(origins))],
                                   origins=origins)


def test_rows_of_suspect_source_messages_are_flagged_in_any_worker(tmp_path: Path) -> None:
    one, other = Suspects(str(tmp_path)), Suspects(str(tmp_path))
    b1 = batch([("src:0", 5), ("src:1", 5), None, ("src:0", 6)])
    b2 = batch([("src:1", 9)])
    assert not one.rows([b1, b2]).any()  # no file yet
    one.add([("src:0", 5), ("src:1", 9)])
    assert other.rows([b1, b2]).tolist() == [True, False, False, False, True]
    assert other.rows([batch([("src:0", 6)])]).tolist() == [False]


def test_the_newest_are_kept_and_a_file_that_cannot_be_read_holds_no_suspects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Suspects(str(tmp_path))
    monkeypatch.setattr(mod, "KEPT", 3)
    s.add([("a:0", i) for i in range(5)])
    assert json.loads((tmp_path / mod.FILE).read_text()) == [["a:0", 2], ["a:0", 3], ["a:0", 4]]
    (tmp_path / mod.FILE).write_text("{not json")
    assert not Suspects(str(tmp_path)).rows([batch([("a:0", 4)])]).any()
    assert np.array_equal(s.rows([]), np.zeros(0, bool))
