"""Records that kill or hang the process running a bolt: found, failed with what they did,
retried, dead-lettered once; every other record processed (docs/poison.md).

The real stack: Apache Kafka, the spout and acker services, the bolts on Spark. The split bolt
(examples/faults.py) exits, segfaults or blocks for ever on sentences that start with
``crash``, ``segv`` or ``hang``, at every attempt.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from examples.faults import CountOrDie, SplitOrDie, SplitOrDieArrow
from examples.wordcount import SplitSentence, WordCount
from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import dlq_topic
from squall.core.trident.codec import MapKind
from tests.integration.helpers import consume, wait_for
from tests.integration.test_topology_e2e import Run, highest_counts

pytestmark = pytest.mark.integration
DEADLINE_S = 3.0


def topology(name: str, source: str, split: type) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", split, 2).shuffle_grouping("sentences")
    b.set_bolt("count", WordCount, 2).fields_grouping("split", ["word"])
    b.set_bolt("report", "examples.wordcount:WordCount", 1,
               outputs={"default": ["word", "count"]}).global_grouping("count")
    return b.build(name, ackers=2, message_timeout_s=30, bolt_deadline_s=DEADLINE_S)


def lines(n: int, poison: dict[int, str]) -> list[bytes]:
    return [(f"{poison[i]} {i} the end" if i in poison else
             f"the quick brown fox {i % 7} jumps over the lazy dog {i}").encode()
            for i in range(n)]


@pytest.mark.parametrize("split", [SplitOrDie, SplitOrDieArrow], ids=["tuple", "vectorized"])
def test_records_that_kill_or_hang_the_bolt_are_dead_lettered_once_and_the_rest_complete(
        bootstrap: str, tmp_path: Path, split: type) -> None:
    name = f"poison{uuid.uuid4().hex[:6]}"
    run = Run(bootstrap, tmp_path, topology(name, f"src-{name}", split), f"src-{name}")
    run.spout.args += ["--max-retries", "1"]
    poison = {17: "crash", 90: "segv", 155: "hang"}
    feed = lines(240, poison)
    with run.acker.start(), run.report() as report, run.bolts() as bolts:
        run.feed_and_wait(feed, bolts)
        log = bolts.log_tail(400)
        # Each attempt of each poison message counted where it was found (two attempts).
        culprits = f"squall_bolt_culprits_total{{component=split,topology={name}}}"
        wait_for(lambda: bolts.metrics().get(culprits, 0) >= 2 * len(poison), 30,
                 "the culprits counted")
        assert bolts.metrics()[culprits] == 2 * len(poison)
        assert bolts.metrics()[f"squall_bolt_sandboxes_total{{component=split,topology={name}}}"] \
            >= 2 * len(poison)
    letters = consume(bootstrap, dlq_topic(name), len(poison) + 1, timeout_s=10)
    got = Counter(m.value() for m in letters)
    want = {feed[i] for i in poison}
    assert set(got) == want and all(n == 1 for n in got.values()), (got, log[-3000:])
    said = {"crash": "killed the bolt's Python process (exit 17)",
            "segv": "killed the bolt's Python process (SIGSEGV)",
            "hang": f"did not return within {DEADLINE_S:g} s"}
    for m in letters:
        h = DeadLetterHeaders.from_headers(m.headers() or [])
        assert h.component == "sentences" and h.attempts == 2, h
        kind = (m.value() or b"").split()[0].decode()
        assert h.reason.startswith(f"failed after 2 attempts: {said[kind]} (in bolt 'split'"), h
    # Every healthy sentence's words counted: their trees completed around the poison.
    healthy = [s for i, s in enumerate(feed) if i not in poison]
    want_words = Counter(w for s in healthy for w in s.decode().split())
    top = highest_counts(report.values)
    assert all(top[w] >= n for w, n in want_words.items()), log[-3000:]


def test_a_bolt_that_hangs_is_killed_at_the_deadline_and_its_record_dead_lettered(
        bootstrap: str, tmp_path: Path) -> None:
    """No other poison around it: the guardian kills the worker whose bolt outran the
    deadline, and the micro-batch's second attempt names the record. Its replay runs in a
    sandbox from the start: no worker is killed for it again."""
    name = f"hang{uuid.uuid4().hex[:6]}"
    run = Run(bootstrap, tmp_path, topology(name, f"src-{name}", SplitOrDie), f"src-{name}")
    run.spout.args += ["--max-retries", "1"]
    feed = lines(120, {60: "hang"})
    with run.acker.start(), run.report(), run.bolts() as bolts:
        m = run.feed_and_wait(feed, bolts)
        log = bolts.log_tail(400)
    assert log.count(f"the bolt did not return within {DEADLINE_S:g} s; its Python worker") \
        == 1, log
    assert "(1 under suspicion); 1 records failed as culprits" in log, log
    # The guardian named the call's input: the first isolation failed it without waiting
    # the deadline again; only the replay (its suspect) ran into the deadline in a sandbox.
    assert log.count(f"did not return within {DEADLINE_S:g} s; its record is failed") == 1, log
    (letter,) = consume(bootstrap, dlq_topic(name), 2, timeout_s=10)
    assert letter.value() == feed[60]
    h = DeadLetterHeaders.from_headers(letter.headers() or [])
    assert h.reason.startswith(f"failed after 2 attempts: did not return within "
                               f"{DEADLINE_S:g} s (in bolt 'split'"), h
    assert m.get(f"squall_spout_replayed_total{{component=sentences,topology={name}}}") == 1


def test_a_record_that_kills_a_fused_stateful_bolt_fails_alone(
        bootstrap: str, tmp_path: Path) -> None:
    """The count runs in the split's query and keeps state: its record is found among the
    words, the head's other sentences are not replayed, and the counts go on."""
    name = f"fused{uuid.uuid4().hex[:6]}"
    b = TopologyBuilder()
    b.set_spout("sentences", f"src-{name}")
    b.set_bolt("split", SplitSentence, 2).shuffle_grouping("sentences")
    b.set_bolt("count", CountOrDie, 2).fields_grouping("split", ["word"])
    b.set_bolt("report", "examples.wordcount:WordCount", 1,
               outputs={"default": ["word", "count"]}).global_grouping("count")
    spec = b.build(name, ackers=2, message_timeout_s=30, bolt_deadline_s=DEADLINE_S)
    run = Run(bootstrap, tmp_path, spec, f"src-{name}")
    run.spout.args += ["--max-retries", "1"]
    poison = {33: "crash", 101: "segv"}
    feed = [(f"one {poison[i]} {i}" if i in poison else f"the lazy dog {i % 5}").encode()
            for i in range(150)]
    with run.acker.start(), run.report() as report, run.bolts() as bolts:
        m = run.feed_and_wait(feed, bolts)
        log = bolts.log_tail(400)
    assert "(chains: ['split -> count'])" in log
    got = Counter(m.value() for m in consume(bootstrap, dlq_topic(name), 3, timeout_s=10))
    assert got == Counter(feed[i] for i in poison), log[-3000:]
    # Only the poison was replayed (once each): their neighbours completed the first time.
    assert m[f"squall_spout_replayed_total{{component=sentences,topology={name}}}"] == 2
    top = highest_counts(report.values)
    assert top["dog"] == 148 and top["lazy"] == 148, log[-3000:]
    assert "crash" not in top and "segv" not in top


def test_exact_counts_stay_exact_when_a_micro_batch_runs_in_parts(
        bootstrap: str, tmp_path: Path) -> None:
    """Trident state downstream of a bolt whose records kill it: every healthy word counted
    exactly once, though the micro-batches around the poison ran more than once."""
    name = f"exact{uuid.uuid4().hex[:6]}"
    b = TopologyBuilder()
    b.set_spout("sentences", f"src-{name}")
    b.set_bolt("split", SplitOrDie, 2).shuffle_grouping("sentences")
    b.persistent_aggregate("count", ["word"], "count", 2, kind="opaque"
                           ).fields_grouping("split", ["word"])
    spec = b.build(name, ackers=2, message_timeout_s=30, bolt_deadline_s=DEADLINE_S)
    run = Run(bootstrap, tmp_path, spec, f"src-{name}")
    run.spout.args += ["--max-retries", "1"]
    poison = {10: "crash", 75: "segv", 140: "crash"}
    feed = lines(200, poison)
    with run.acker.start(), run.bolts() as bolts:
        run.feed_and_wait(feed, bolts)
    store = open_store(f"sqlite://{tmp_path / 'ckpt' / name / 'state.db'}",
                       StoreName(f"{name}.count", 0, MapKind.OPAQUE))
    try:
        counted = Counter({str(w): int(v.curr) for (w,), v in store.items()})
    finally:
        store.close()
    healthy = [s for i, s in enumerate(feed) if i not in poison]
    assert counted == Counter(w for s in healthy for w in s.decode().split())


def test_a_record_whose_micro_batch_took_the_whole_job_down_is_isolated_after_the_restart(
        bootstrap: str, tmp_path: Path) -> None:
    """The bolts job (its driver's JVM, which in local mode is the executor too) dies while
    a bolt is in a call that would hang: the restarted job's first attempt at that
    micro-batch is its second, and runs it in sandboxes (the marks count a job's attempts,
    Spark only a task's)."""
    import signal

    from services.bolts.batch_marks import DIRECTORY
    from tests.integration.helpers import produce_source

    name = f"jvm{uuid.uuid4().hex[:6]}"
    spec = topology(name, f"src-{name}", SplitOrDie)
    # A retry: the kill may find another task producing, whose roots the restarted job
    # fails (services/bolts/tasks.py, _fail_roots) to be replayed. The message timeout
    # outlasts the restart on a loaded machine.
    spec = TopologySpec.from_dict({**spec.to_dict(), "bolt_deadline_s": 8,
                                   "message_timeout_s": 600})
    run = Run(bootstrap, tmp_path, spec, f"src-{name}")
    run.spout.args += ["--max-retries", "1"]
    feed = lines(60, {30: "hang"})
    marks = tmp_path / "ckpt" / name / "split" / DIRECTORY

    def mark(kind: str, task: str) -> int:
        f = marks / f"{kind}-{task}"
        return int(f.read_text().split()[0]) if f.exists() else -1

    def hanging() -> bool:
        """A task in the hanging call: it started a batch that the other task finished, and
        neither finished it nor began to send it (a task merely slow to start its first
        batch is not taken for it)."""
        started = {f.name.removeprefix("started-"): mark("started", f.name.removeprefix(
            "started-")) for f in marks.glob("started-*")}
        return any(mark("task", t) < bid and mark("producing", t) < bid
                   and any(mark("task", o) >= bid for o in started if o != t)
                   for t, bid in started.items())

    with run.acker.start(), run.report(), run.spout.start():
        first = run.bolts().start()
        wait_for(lambda: "bolt queries running" in first.log_tail(200) or not first.alive(),
                 120, "the bolt queries")
        produce_source(bootstrap, run.source, feed, 2)
        wait_for(hanging, 60, "a task in the hanging call")
        first.signal(signal.SIGKILL)
        first.wait()
        with run.bolts() as second:
            wait_for(lambda: run.committed() >= len(feed) or not second.alive(), 240,
                     "every sentence committed after the restart")
            log = second.log_tail(400)
    assert "squall guardian" not in first.log_tail(400) + log  # the job's death, not a kill
    assert "micro-batch run in" in log and "1 records failed as culprits" in log, log
    letters = consume(bootstrap, dlq_topic(name), 2, timeout_s=10)
    reasons = [(m.value(), DeadLetterHeaders.from_headers(m.headers() or []).reason)
               for m in letters]
    assert [v for v, _ in reasons] == [feed[30]], reasons
    assert reasons[0][1].startswith("failed after 2 attempts: did not return within 8 s"), \
        reasons
