"""What the spout keeps of a pending source message gives back all a replay and a dead
letter need, and is the bare value when that is all the message had."""

from __future__ import annotations

import tracemalloc

from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from services.spout import kept

_bytes = st.none() | st.binary(max_size=64)
_headers = st.none() | st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)),
                                 min_size=1, max_size=3)


@given(_bytes, _bytes, _headers)
def test_a_kept_message_gives_back_its_value_key_and_headers(
        value: bytes | None, key: bytes | None,
        headers: list[tuple[str, str | bytes | None]] | None,
) -> None:
    msg = Message(topic="sentences", partition=1, offset=7, value=value, key=key,
                  headers=headers)
    k = kept.keep(msg)
    assert kept.value(k) == value
    assert kept.parts(k) == (value, key, headers or [])
    if key is None and headers is None:
        assert k is value  # the message's own bytes object, not a copy


def test_a_bare_message_costs_its_value_only() -> None:
    values = [b"the quick brown fox jumps over the lazy dog %06d" % i for i in range(20_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        msgs = [Message(topic="sentences-wc", partition=0, offset=i, value=v)
                for i, v in enumerate(values)]
        held = [kept.keep(m) for m in msgs]
        del msgs  # the tree's message is let go: only what was kept remains
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert [kept.value(k) for k in held] == values
    # Only the list of references stays (8 bytes each); the messages' ~140 bytes apiece go.
    assert after - before < 12 * len(values), after - before
