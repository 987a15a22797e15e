"""The spout task's pure logic: emission, results, retries, dead letters, caps, recovery."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

from squall.core.reliability.ids import IdBatcher, derive_roots
from squall.core.reliability.records import Outcome, Result, Results
from squall.core.reliability.retry import RetrySchedule
from squall.core.tasks.spout_effects import Emission
from squall.core.tasks.spout_task import SpoutConfig, SpoutTask
from squall.core.topology.grouping import Edge, Grouping
from squall.core.topology.model import Guarantee
from squall.core.wire.scheme import JsonScheme, TextScheme

EDGE = Edge("split", "squall.t.edge.spout.default.split", 2, Grouping.SHUFFLE)
T = 1_000


def cfg(**kw: object) -> SpoutConfig:
    base: dict[str, object] = dict(task=0, component="spout", scheme=TextScheme(), edges=(EDGE,),
                                   num_ackers=1, timeout_ms=T,
                                   retry=RetrySchedule(100, 2, 1000, 2))
    base.update(kw)
    return SpoutConfig(**base)  # type: ignore[arg-type]


def feed(task: SpoutTask, offsets: list[int], now: int, values: list[bytes] | None = None,
         source: int = 0) -> Emission:
    vals = values or [f"msg {o}".encode() for o in offsets]
    return task.on_records(source, offsets, vals, [f"payload {o}" for o in offsets], now)


def results(task: SpoutTask, roots: list[int], outcome: Outcome) -> Results:
    return Results.from_results([Result(r, 0, outcome) for r in roots])


def roots_of(task: SpoutTask) -> list[int]:
    return task.pending_roots()


def test_emit_sends_tuples_and_inits_that_balance() -> None:
    task = SpoutTask(cfg(), [0], salt=7, ids=IdBatcher(seed=1))
    e = feed(task, [0, 1, 2, 3], 0)
    assert e.emitted == 4
    assert len(e.inits) == 4
    # Each init's value is the XOR of the edge ids its tuples carry.
    edge_of: dict[int, int] = {}
    for _topic, _part, batch in e.tuples:
        for anchors in batch.anchors():
            ((root, edge),) = anchors.items()
            edge_of[root] = edge_of.get(root, 0) ^ edge
    assert {int(r): int(v) for r, v in zip(e.inits.roots, e.inits.values, strict=True)} == edge_of
    assert sorted(p for _, p, _ in e.tuples) == [0, 1]  # shuffle spreads over both partitions
    assert task.pending == 4


def test_tuples_carry_their_source_message_including_replays() -> None:
    task = SpoutTask(cfg(), [0, 0], salt=7, ids=IdBatcher(seed=1),
                     sources=["sentences:0", "sentences:3"])
    e = feed(task, [5, 6, 7], 0, source=1)
    got = sorted((t.origin, t["str"]) for _, _, b in e.tuples for t in b.tuples())
    assert got == [(("sentences:3", 5), "msg 5"), (("sentences:3", 6), "msg 6"),
                   (("sentences:3", 7), "msg 7")]
    (root,) = [r for r in task.pending_roots()
               if r in {int(x) for x in derive_roots(7, 1, np.array([6]), np.array([0]))}]
    task.on_results(results(task, [root], Outcome.FAILED), 0)
    (_, offs), = task.retries(10_000).items()
    again = task.on_records(1, offs, [b"msg 6"], ["payload 6"], 10_000, rewind=False)
    assert [t.origin for _, _, b in again.tuples for t in b.tuples()] == [("sentences:3", 6)]


def test_ack_completes_and_the_prefix_commits() -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    feed(task, [0, 1, 2], 0)
    r0, r1, r2 = roots_of(task)
    st = task.on_results(results(task, [r1, r2], Outcome.ACKED), 50)
    assert st.acked == 2
    assert st.latencies_ms.tolist() == [50, 50]
    assert task.commits() == {}  # offset 0 still pending
    task.on_results(results(task, [r0], Outcome.ACKED), 60)
    assert task.commits() == {0: 3}
    task.committed(0, 3)
    assert task.commits() == {}


def test_fail_retries_with_a_new_root_then_dead_letters() -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    feed(task, [0, 1], 0)
    r0, _ = roots_of(task)
    st = task.on_results(results(task, [r0], Outcome.FAILED), 10)
    assert st.failed == {"failed": 1}
    assert st.retries == 1
    assert task.retries(50) == {}
    assert task.retries(110) == {0: [0]}  # due when the backoff is over
    assert task.take_seeks(110) == {}  # re-emitted from the kept message: no re-read
    again = feed(task, [0], 110)
    assert again.emitted == 1
    assert again.replayed == 1
    new_root = int(again.inits.roots[0])
    assert new_root != r0
    task.on_results(results(task, [new_root], Outcome.TIMED_OUT), 120)
    assert task.retries(320) == {0: [0]}
    third = feed(task, [0], 320)
    st = task.on_results(results(task, [int(third.inits.roots[0])], Outcome.FAILED), 330)
    (letter,) = st.letters
    assert letter.reason == "failed after 3 attempts"
    assert letter.attempts == 3
    assert task.commits() == {}  # not done until the dead letter is confirmed
    task.dead_lettered(letter)
    assert task.commits() == {0: 1}


def test_a_dead_letter_says_why_the_bolt_failed_its_last_attempt() -> None:
    task = SpoutTask(cfg(retry=RetrySchedule(100, 2, 1000, 0)), [0], salt=7)
    feed(task, [0], 0)
    (r0,) = roots_of(task)
    why = "killed the bolt's Python process (exit 17) (in bolt 'split' task 0)"
    st = task.on_results(results(task, [r0], Outcome.FAILED), 10, reasons={r0: why})
    (letter,) = st.letters
    assert letter.reason == f"failed after 1 attempts: {why}"
    assert letter.attempts == 1


def test_stale_and_duplicate_results_are_ignored() -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    feed(task, [0], 0)
    (r0,) = roots_of(task)
    task.on_results(results(task, [r0], Outcome.ACKED), 1)
    st = task.on_results(results(task, [r0, 12345], Outcome.ACKED), 2)
    assert st.stale == 2
    assert st.acked == 0


def test_undecodable_record_is_dead_lettered_at_once() -> None:
    task = SpoutTask(cfg(scheme=JsonScheme(["n"])), [0], salt=7)
    e = feed(task, [0, 1], 0, values=[b'{"n": 1}', b"{nope"])
    assert e.emitted == 1
    (letter,) = e.letters
    assert letter.offset == 1
    assert letter.payload == "payload 1"
    assert letter.reason.startswith("undecodable: not JSON")
    task.dead_lettered(letter)
    task.on_results(results(task, roots_of(task), Outcome.ACKED), 1)
    assert task.commits() == {0: 2}


def test_backstop_fails_trees_the_acker_never_answered() -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    feed(task, [0], 0)
    feed(task, [1], 500)
    assert task.expire(2 * T - 1).failed == {}
    st = task.expire(2 * T)
    assert st.failed == {"backstop": 1}
    assert task.pending == 1


def test_reset_restarts_the_backstop_timer() -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    feed(task, [0], 0)
    (r0,) = roots_of(task)
    task.on_results(results(task, [r0], Outcome.RESET), 1500)
    assert task.expire(2 * T + 100).failed == {}
    assert task.expire(1500 + 2 * T).failed != {}


def test_max_spout_pending_stops_emission_and_rewinds() -> None:
    task = SpoutTask(cfg(max_pending=3), [0], salt=7)
    e = feed(task, [0, 1, 2, 3, 4], 0)
    assert e.emitted == 3
    assert task.blocked(0) == {0}
    assert task.take_seeks(0) == {}  # blocked: the rewind waits
    task.on_results(results(task, roots_of(task)[:1], Outcome.ACKED), 1)
    assert task.blocked(1) == set()
    assert task.take_seeks(1) == {0: 3}  # re-read from the first offset not emitted
    assert feed(task, [3, 4], 2).emitted == 1


def test_a_partition_ending_in_offsets_without_records_commits_to_the_readers_position(
        ) -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    feed(task, [0, 1], 0)
    task.on_results(results(task, roots_of(task), Outcome.ACKED), 10)
    task.passed(0, 3)  # 2: a transaction's commit marker, never delivered
    assert task.commits() == {0: 3}


def test_a_position_past_records_left_for_a_re_read_is_not_passed() -> None:
    task = SpoutTask(cfg(max_pending=2), [0], salt=7)
    feed(task, [0, 1, 2, 3], 0)  # 2 and 3 read, not emitted: to be read again
    task.on_results(results(task, roots_of(task), Outcome.ACKED), 10)
    task.passed(0, 4)  # the consumer's position is past them
    assert task.commits() == {0: 2}
    assert task.take_seeks(10) == {0: 2}
    assert feed(task, [2, 3], 11).emitted == 2


def test_max_uncommitted_offsets_blocks_new_offsets_but_not_retries() -> None:
    task = SpoutTask(cfg(max_uncommitted=2), [0], salt=7)
    feed(task, [0, 1, 2], 0)
    assert task.offsets[0].num_uncommitted == 2
    r0, _r1 = roots_of(task)
    task.on_results(results(task, [r0], Outcome.FAILED), 0)
    assert task.blocked(100) == {0}  # no new offsets: the cap holds...
    assert task.retries(100) == {0: [0]}  # ...but the retry goes out, from the kept message
    out = task.on_records(0, [0], [b"msg 0"], ["payload 0"], 100, rewind=False)
    assert (out.emitted, out.replayed) == (1, 1)
    assert task.take_seeks(100) == {}


def test_restart_recognises_offsets_acked_before_the_crash() -> None:
    old_salt = 11
    acked = derive_roots(old_salt, 0, np.array([1, 2]), np.zeros(2, np.int64)).tolist()
    retried = derive_roots(old_salt, 0, np.array([4]), np.ones(1, np.int64)).tolist()
    task = SpoutTask(cfg(), [0], salt=12, old_salts=[old_salt],
                     recovered_roots=set(acked + retried))
    e = feed(task, [0, 1, 2, 3, 4, 5], 0)
    assert e.recovered == 3
    assert e.emitted == 3  # 0, 3 and 5 were not acked before the crash
    task.on_results(results(task, roots_of(task), Outcome.ACKED), 1)
    assert task.commits() == {0: 6}


def test_tuples_go_to_the_partition_their_fields_hash_to() -> None:
    edge = Edge("count", "t", 4, Grouping.FIELDS, ("n",))
    task = SpoutTask(cfg(scheme=JsonScheme(["n"]), edges=(edge,)), [0], salt=7)
    vals = [b'{"n": "a"}', b'{"n": "b"}', b'{"n": "a"}']
    e = feed(task, [0, 1, 2], 0, values=vals)
    by_part = {p: b.data.column("n").to_pylist() for _, p, b in e.tuples}
    assert sorted(functools.reduce(operator.iadd, by_part.values(), [])) == ["a", "a", "b"]
    assert all(len(set(v)) == 1 for v in by_part.values())  # one word, one partition


def test_all_grouping_sends_a_copy_to_every_partition_under_one_root() -> None:
    edge = Edge("log", "t", 3, Grouping.ALL)
    task = SpoutTask(cfg(edges=(edge,)), [0], salt=7)
    e = feed(task, [0], 0)
    assert sorted(p for _, p, _ in e.tuples) == [0, 1, 2]
    xor = 0
    for _, _, b in e.tuples:
        ((root, edge_id),) = b.anchors()[0].items()
        assert root == int(e.inits.roots[0])
        xor ^= edge_id
    assert xor == int(e.inits.values[0])


@pytest.mark.parametrize("kw", [{"num_ackers": 0}, {"guarantee": Guarantee.AT_MOST_ONCE},
                                {"guarantee": Guarantee.NO_GUARANTEE}])
def test_untracked_modes_emit_without_anchors_and_commit_at_once(kw: dict[str, object]) -> None:
    task = SpoutTask(cfg(**kw), [0], salt=7)
    e = feed(task, [0, 1], 0)
    assert len(e.inits) == 0
    assert all(a == {} for _, _, b in e.tuples for a in b.anchors())
    assert task.commits() == {0: 2}
    assert task.pending == 0


def test_bad_utf8_in_a_bulk_of_text_dead_letters_just_that_record() -> None:
    task = SpoutTask(cfg(), [0], salt=7)
    e = task.on_records(0, [0, 1, 2], [b"ok", b"\xff\xfe", None], ["p0", "p1", "p2"], 0)
    assert e.emitted == 2
    assert [(le.offset, le.payload) for le in e.letters] == [(1, "p1")]
    assert e.letters[0].reason.startswith("undecodable: not UTF-8")
    words = sorted(v for _, _, b in e.tuples for v in b.data.column("str").to_pylist())
    assert words == ["", "ok"]  # a null message is empty text


def test_a_result_of_an_earlier_incarnation_is_stale() -> None:
    old = SpoutTask(cfg(), [0], salt=11)
    feed(old, [0, 1], 0)
    task = SpoutTask(cfg(), [0], salt=99)
    feed(task, [0, 1], 0)
    st = task.on_results(results(task, roots_of(old), Outcome.ACKED), 5)
    assert (st.acked, st.stale) == (0, 2)
    assert task.pending == 2


def test_the_backstop_runs_on_the_ackers_clock_not_the_wall_clock() -> None:
    task = SpoutTask(cfg(), [0], salt=7, ids=IdBatcher(seed=1))
    feed(task, [0, 1], 0)
    # Wall time far past 2T, but the ackers' clock (held back by slow bolts) is not.
    assert task.expire(10 * T, clock_ms=2 * T - 1).failed == {}
    out = task.expire(10 * T, clock_ms=2 * T)
    assert out.failed == {"backstop": 2} and out.retries == 2


def test_restart_does_not_dead_letter_again_what_was_dead_lettered_before_the_crash() -> None:
    bad = [b"\xff bad 1", b"fine", b"\xff bad 2"]
    first = SpoutTask(cfg(), [0], salt=1)
    out = feed(first, [0, 1, 2], 0, values=bad)
    assert [letter.offset for letter in out.letters] == [0, 2]
    for letter, marker in zip(out.letters, (40, 41), strict=True):
        first.dead_lettered(letter, marker)
    assert first.results_position(99) == 40  # the markers stay in the scanned window
    # The crash: nothing committed. The markers the restart finds make both offsets done.
    again = SpoutTask(cfg(), [0], salt=2, lettered={(0, 0), (0, 2), (0, 7)})
    out = feed(again, [0, 1, 2], 0, values=bad)
    assert out.letters == [] and out.recovered == 2 and out.emitted == 1
    again.on_results(results(again, roots_of(again), Outcome.ACKED), 1)
    assert again.commits() == {0: 3}
