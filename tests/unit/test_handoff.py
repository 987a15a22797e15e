"""The handoff file: a spare bolts process gets its job's flags whole, or a clear error."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import ConfigError
from squall.handoff import hand_off, wait_for_handoff


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text()))
def test_the_flags_handed_off_are_the_flags_read(args: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spare" / "handoff-1.json"
        hand_off(path, args)
        assert wait_for_handoff(path, threading.Event()) == args
        assert [p.name for p in path.parent.iterdir()] == [path.name]  # nothing left aside


def test_waiting_ends_when_stopped(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert wait_for_handoff(tmp_path / "never.json", stop) is None


def test_a_file_written_while_waiting_is_read(tmp_path: Path) -> None:
    path = tmp_path / "handoff.json"
    got: list[list[str] | None] = []
    t = threading.Thread(target=lambda: got.append(wait_for_handoff(path, threading.Event())))
    t.start()
    hand_off(path, ["--topology-file", "t.json"])
    t.join(10)
    assert got == [["--topology-file", "t.json"]]


@pytest.mark.parametrize("text", ["{not json", '{"a": 1}', '["ok", 2]'])
def test_a_malformed_handoff_is_an_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "handoff.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"handoff\.json"):
        wait_for_handoff(path, threading.Event())
