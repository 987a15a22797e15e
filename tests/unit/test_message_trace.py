"""Where is my message: an offset's whereabouts in its spout's table, the loop answering
the HTTP port's questions, and the sentence each state reads as."""

from __future__ import annotations

import threading
from typing import Any

from services.loop_queries import LoopQueries, json_route
from squall.core.reliability.offsets import OffsetManager, Retry, Whereabouts
from squall.core.reliability.retry import RetrySchedule
from squall.message_trace import summary


def test_an_offset_is_where_its_table_says() -> None:
    om = OffsetManager(10, RetrySchedule(initial_delay_ms=1000, max_retries=2))
    om.emitted_new([10, 11, 12], now_ms=500)
    assert om.whereabouts(9) == Whereabouts("committed")
    assert om.whereabouts(11) == Whereabouts("pending", 0, 500)
    assert om.whereabouts(13) == Whereabouts("unread")
    got = om.failed(11, now_ms=700)
    assert isinstance(got, Retry)
    assert om.whereabouts(11) == Whereabouts("failed", 1, None, 1700)
    om.acked(10)
    assert om.whereabouts(10).state == "done"  # complete, the commit to come
    om.committed(11)
    assert om.whereabouts(10) == Whereabouts("committed")


def test_the_loop_answers_between_its_steps_and_a_question_times_out() -> None:
    q = LoopQueries()
    state = {"n": 0}
    route = json_route(q, lambda parts: {"n": state["n"], "asked": parts} if parts[0] != "none"
                       else None)
    out: list[tuple[int, bytes]] = []
    asker = threading.Thread(target=lambda: out.append(route("/a/b")))
    asker.start()
    while asker.is_alive():  # the loop
        state["n"] += 1
        q.answer()
        asker.join(0.01)
    assert out[0][0] == 200 and b'"asked": ["a", "b"]' in out[0][1]
    missing: list[tuple[int, bytes]] = []
    t = threading.Thread(target=lambda: missing.append(route("none")))
    t.start()
    while t.is_alive():
        q.answer()
        t.join(0.01)
    assert missing[0][0] == 404
    assert LoopQueries().ask(lambda: 1, wait_s=0.05) == (False, None)  # nobody answers


def base(state: str, **kw: Any) -> dict[str, Any]:
    return {"topology": "t", "topic": "in", "partition": 0, "offset": 7, "state": state,
            "committed_offset": 3, "dead_letter": None, "where": None, "tree": None, **kw}


def test_each_state_reads_as_a_sentence() -> None:
    w = {"task": 1, "failures": 1, "since_ms": 0, "retry_ms": 60_000,
         "last_failure": "failed: bolt 'split' raised ValueError: no"}
    assert summary(base("committed")) == \
        "in[0]@7 is done: its tree completed and the spout committed up to 3"
    pending = summary(base("pending", where=w, tree={"open": True, "acker_task": 0}))
    assert pending.startswith("in[0]@7 is pending in attempt 2 since 1970-01-01 00:00:00.000")
    assert "open in acker task 0" in pending and "raised ValueError: no" in pending
    assert "will time out" in summary(base("pending", where=w, tree={"open": False}))
    assert "attempt 2 is due at 1970-01-01 00:01:00.000 UTC" in summary(base("failed", where=w))
    letter = {"attempts": 4, "reason": "timeout after 4 attempts", "dlq_offset": 12}
    assert summary(base("dead_lettered", dead_letter=letter)) == (
        "in[0]@7 was dead-lettered after 4 attempts: timeout after 4 attempts "
        "(dead letter 12)")
    assert "no such message" in summary(base("not_in_topic"))
    assert "(not running?)" in summary(base("unknown"))
