"""The bolts' watermark (squall/core/reliability/progress.py) against a model that keeps
every observation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.reliability.progress import Processed, TimeoutClock

QUERIES = {"q1": ["a:0", "a:1"], "q2": ["b:0"]}
KEYS = ["a:0", "a:1", "b:0"]


def model(seen: list[tuple[int, dict[str, int]]], done: dict[str, dict[str, int]]) -> int | None:
    if set(done) != set(QUERIES):
        return None
    covered = []
    for q, keys in QUERIES.items():
        ts = [t for t, ends in seen if all(ends.get(k, 0) <= done[q].get(k, 0) for k in keys)]
        if not ts:
            return None
        covered.append(max(ts))
    return min(covered)


steps = st.lists(st.one_of(
    st.tuples(st.just("observe"), st.integers(0, 50), st.lists(st.integers(0, 5), min_size=3,
                                                               max_size=3)),
    st.tuples(st.just("processed"), st.sampled_from(sorted(QUERIES)),
              st.lists(st.integers(0, 8), min_size=3, max_size=3))), max_size=40)


@settings(deadline=None)
@given(steps)
def test_the_watermark_is_the_latest_time_every_query_had_processed_what_was_there(
        script: list[tuple[str, object, list[int]]]) -> None:
    p = Processed(QUERIES)
    seen: list[tuple[int, dict[str, int]]] = []
    done: dict[str, dict[str, int]] = {}
    now, ends = 0, dict.fromkeys(KEYS, 0)
    for kind, arg, nums in script:
        if kind == "observe":
            assert isinstance(arg, int)
            now += arg
            ends = {k: ends[k] + n for k, n in zip(KEYS, nums, strict=True)}  # ends only grow
            p.observe(now, ends)
            seen.append((now, dict(ends)))
        else:
            assert isinstance(arg, str)
            mine = done.setdefault(arg, {})
            for k, n in zip(KEYS, nums, strict=True):
                if k in QUERIES[arg]:
                    mine[k] = max(mine.get(k, 0), ends[k] - n)  # some way behind the end
            p.processed(arg, {k: v for k, v in mine.items()})
        assert p.watermark() == model(seen, done)


def test_a_stopped_job_holds_the_watermark_and_catching_up_moves_it() -> None:
    p = Processed({"q": ["e:0"]})
    p.observe(1_000, {"e:0": 10})
    p.processed("q", {"e:0": 10})
    assert p.watermark() == 1_000
    p.observe(2_000, {"e:0": 50})  # written while the job was down
    p.observe(60_000, {"e:0": 50})
    assert p.watermark() == 1_000  # nothing processed: the clock stands
    p.processed("q", {"e:0": 30})
    assert p.watermark() == 1_000
    p.processed("q", {"e:0": 50})
    assert p.watermark() == 60_000


def test_the_timeout_clock_is_never_ahead_of_its_own() -> None:
    c = TimeoutClock()
    assert c.now(5) is None
    c.mark("j", 10)
    assert c.now(5) == 5 and c.now(50) == 10
    assert TimeoutClock(gated=False).now(7) == 7
