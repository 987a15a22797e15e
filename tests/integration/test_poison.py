"""Records that kill or hang the process running a bolt: found, failed with what they did,
retried, dead-lettered once; every other record processed (docs/poison.md).

The real stack: Tansu, the spout and acker services, the bolts on Spark. The split bolt
(examples/faults.py) exits, segfaults or blocks for ever on sentences that start with
``crash``, ``segv`` or ``hang``, at every attempt.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from examples.faults import SplitOrDie, SplitOrDieArrow
from examples.wordcount import WordCount
from squall.core.dead_letters import DeadLetterHeaders
from squall.core.topics import dlq_topic
from squall.core.topology import TopologyBuilder, TopologySpec
from tests.integration.helpers import consume
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
