"""The replays log: a letter's replay is done once its done record is in, whatever came
before or after it; records survive their encoding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.errors import WireFormatError
from squall.core.reliability.letter_replays import Replay, Replays, replay_key

records = st.builds(Replay, st.integers(0, 5), st.just("t"), st.integers(0, 3),
                    st.integers(0, 100), st.one_of(st.none(), st.integers(0, 100)),
                    st.integers(0, 10**13))


@given(st.lists(records, max_size=30))
def test_a_done_record_is_final_whatever_comes_after(log: list[Replay]) -> None:
    got = Replays(log)
    for letter in {r.letter for r in log}:
        mine = [r for r in log if r.letter == letter]
        first_done = next((r for r in mine if r.done), None)
        assert got.done(letter) == first_done
        if first_done is None:
            assert got.unsure(letter) == mine[-1]
        else:
            assert got.unsure(letter) is None


@given(records)
def test_a_record_survives_its_encoding(r: Replay) -> None:
    assert Replay.decode(r.encode()) == r


@pytest.mark.parametrize("raw", [b"", b"{}", b'{"letter": "x"}', b"[1]"])
def test_a_bad_record_says_so(raw: bytes) -> None:
    with pytest.raises(WireFormatError, match="replays log"):
        Replay.decode(raw)


def test_the_header_names_the_topology_and_the_letter() -> None:
    assert replay_key("wc-1-1700000000", 12) == "wc-1-1700000000:12"
