"""A worker's log route: chunks from an offset or the end, whole lines from the end, and
names that cannot leave the log folder."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from services.worker.logs import CHUNK, log_route


def ask(tmp: Path, rest: str) -> tuple[int, dict[str, object]]:
    status, body = log_route(tmp)(rest)
    return status, json.loads(body)


def test_reading_on_from_next_gets_every_byte_once(tmp_path: Path) -> None:
    text = "".join(f"line {i}\n" for i in range(20_000))  # past one chunk
    (tmp_path / "wc.spout.0.log").write_text(text)
    got, at = "", 0
    while True:
        status, body = ask(tmp_path, f"wc.spout.0/{at}")
        assert status == 200 and body["size"] == len(text)
        if body["next"] == at:
            break
        assert len(str(body["text"])) <= CHUNK
        got += str(body["text"])
        at = int(str(body["next"]))
    assert got == text


@given(st.integers(1, 500))
def test_the_tail_starts_at_a_line(tail: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        text = "".join(f"{i:04d} some output\n" for i in range(100))
        (Path(d) / "p.log").write_text(text)
        status, body = ask(Path(d), f"p/-{tail}")
        assert status == 200
        shown = str(body["text"])
        assert text.endswith(shown) and len(shown) <= tail
        assert int(str(body["offset"])) + len(shown) == len(text)
        if tail > 17:  # longer than a line: whole lines only
            assert shown and text[int(str(body["offset"])) - 1] == "\n"


def test_bad_names_and_offsets_are_400_and_missing_logs_404(tmp_path: Path) -> None:
    (tmp_path / "p.log").write_text("x\n")
    assert ask(tmp_path, "../etc/passwd/0")[0] == 400
    assert ask(tmp_path, "..hidden/0")[0] == 400
    assert ask(tmp_path, "p/abc")[0] == 400
    status, body = ask(tmp_path, "q/0")
    assert status == 404 and "'q'" in str(body["error"])
