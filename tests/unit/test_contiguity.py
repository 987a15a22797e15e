"""A gap in a partition's offsets is fetched again before it is moved past
(squall/core/reliability/contiguity.py), against a simulated broker that shows some batches late."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.reliability.contiguity import Contiguity

STEP_MS = 100  # one fetch


def fetch(pos: int, n: int, now: int, late: dict[int, int], missing: set[int],
          size: int, mute: bool) -> list[int]:
    """What a broker answers from ``pos``: up to ``size`` records in order, skipping the
    missing ones and those not yet visible (``late``: offset -> visible from); ``mute``:
    nothing at all from a missing offset the reader was sent back to (Tansu, at times)."""
    if mute and pos in missing:
        return []
    return [o for o in range(pos, n) if o not in missing and late.get(o, 0) <= now][:size]


def drive(n: int, late: dict[int, int], missing: set[int], hold_ms: int, size: int,
          mute: bool = False) -> tuple[list[int], list[tuple[int, int]], int]:
    gaps = Contiguity[str](hold_ms)
    gaps.expect("p", 0)
    # A gap with nothing after it is not known for one: the read ends at the last record.
    end = max((o for o in range(n) if o not in missing), default=-1) + 1
    pos, now, rewound = 0, 0, False
    taken: list[int] = []
    accepted: list[tuple[int, int]] = []
    for _ in range(10_000):
        if (gaps.next_offset("p") or 0) >= end:
            break
        got = fetch(pos, n, now, late, missing, size, mute and rewound)
        a = gaps.admit("p", got, now)
        taken += got[a.start:a.stop]
        accepted += a.accepted
        rewound = a.rewind_to is not None or (rewound and not got)  # mute until it moves
        if a.rewind_to is not None:
            pos = a.rewind_to
        elif got:
            pos = got[-1] + 1
        for first, present in gaps.overdue(now).values():
            accepted.append((first, present))
            pos, rewound = present, False
        now += STEP_MS
    return taken, accepted, now


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 60), data=st.data(), size=st.integers(1, 10), mute=st.booleans())
def test_late_records_are_waited_for_and_missing_ones_moved_past(
        n: int, data: st.DataObject, size: int, mute: bool) -> None:
    hold = 1_000
    missing = data.draw(st.sets(st.integers(0, n - 1), max_size=n // 3))
    # A late batch shows within the hold (Tansu's: milliseconds).
    # (Not with a broker that answers nothing from a gap: the reader then moves to the
    # first record it saw after it, past any that showed late in between.)
    late = {} if mute else data.draw(st.dictionaries(
        st.integers(0, n - 1), st.integers(0, 9 * STEP_MS), max_size=n // 2))
    taken, accepted, _ = drive(n, late, missing, hold, size, mute)
    present = [o for o in range(n) if o not in missing]
    assert taken == present  # every record once, in order, none skipped
    gone = {o for a, b in accepted for o in range(a, b)}
    # What was moved past is exactly what never existed (before the last record).
    assert gone == {o for o in missing if o < (present[-1] if present else -1)}


@given(n=st.integers(2, 40), data=st.data())
def test_hold_zero_moves_past_at_once_as_kafka_does(n: int, data: st.DataObject) -> None:
    missing = data.draw(st.sets(st.integers(1, n - 1), max_size=n // 2))
    taken, _, ms = drive(n, {}, missing, 0, 100)
    assert taken == [o for o in range(n) if o not in missing]
    assert ms <= STEP_MS  # one fetch: nothing fetched again


def test_a_gap_not_yet_held_long_enough_sends_the_reader_back() -> None:
    g = Contiguity[str](500)
    g.expect("p", 10)
    a = g.admit("p", [10, 11, 14, 15], now_ms=0)
    assert (a.start, a.stop, a.rewind_to, a.accepted) == (0, 2, 12, ())
    a = g.admit("p", [14, 15], now_ms=499)  # still missing, not yet 500 ms
    assert (a.start, a.stop, a.rewind_to) == (0, 0, 12)
    a = g.admit("p", [14, 15], now_ms=500)
    assert (a.start, a.stop, a.rewind_to, a.accepted) == (0, 2, None, ((12, 14),))
    assert g.next_offset("p") == 16


def test_records_fetched_again_after_a_rewind_are_not_taken_twice() -> None:
    g = Contiguity[str](500)
    g.expect("p", 0)
    g.admit("p", [0, 1, 2], now_ms=0)
    a = g.admit("p", [1, 2, 3], now_ms=1)
    assert (a.start, a.stop) == (2, 3) and g.next_offset("p") == 4


def test_an_unknown_start_is_the_first_record_fetched() -> None:
    g = Contiguity[str](500)
    g.expect("p", -2)  # OFFSET_END: the first fetched record is where the reader starts
    a = g.admit("p", [40, 41], now_ms=0)
    assert (a.start, a.stop, a.rewind_to) == (0, 2, None)


def test_a_gap_fetched_as_nothing_at_all_is_moved_past_after_the_hold() -> None:
    g = Contiguity[str](500)
    g.expect("p", 0)
    assert g.admit("p", [0, 3], now_ms=0).rewind_to == 1
    assert g.overdue(499) == {}  # fetching again from 1 brings nothing; not yet
    assert g.overdue(500) == {"p": (1, 3)} and g.next_offset("p") == 3
    assert g.admit("p", [3, 4], now_ms=501).stop == 2


def test_a_position_past_the_next_offset_with_no_record_is_taken_after_the_hold() -> None:
    g = Contiguity[str](500)
    g.expect("p", 10)
    assert not g.passed("p", 13, now_ms=0)  # 10..12 without a record: markers, or late
    assert not g.passed("p", 13, now_ms=499) and g.next_offset("p") == 10
    assert g.passed("p", 13, now_ms=500) and g.next_offset("p") == 13
    assert not g.passed("p", 13, now_ms=501)  # nothing past the next offset
