"""What the bolt deadline costs a healthy micro-batch: a per-tuple bolt's executor run over
micro-batches of word tuples, without a watch and with the guardian's (a call counter in
shared memory, bumped per call: services/bolts/guardian.py), alternating, on one core.

Workload: the word count's ``WordCount`` (a stateful ``Bolt``: state, emit anchored, ack)
over micro-batches of 2,000 word tuples with one anchor each, as the count task gets them.

Last line: one JSON object, ``{"us_per_tuple", "us_per_tuple_watched", "watch_us_per_call",
"watch_share"}`` (medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import mmap
import random
import statistics
import sys
import time

from examples.wordcount import WordCount
from services.bolts.guardian import Calls
from squall.core.bolt_api.bolt import TaskContext
from squall.core.tasks.exec_result import CallWatch
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.tuple_batch import TupleBatch
from squall.wallclock import SystemClock


def batches(n: int, size: int, seed: int) -> list[TupleBatch]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [f"w{rng.randrange(1000):03d}" for _ in range(size)]
        anchors = [{rng.getrandbits(63) + 1: rng.getrandbits(63) + 1} for _ in range(size)]
        out.append(TupleBatch.from_columns({"word": words}, anchors))
    return out


def run(ex: BoltExecutor, work: list[TupleBatch], watch: CallWatch | None) -> float:
    """Seconds per tuple over ``work``."""
    t0 = time.perf_counter()
    for b in work:
        ex.run([b], watch)
    return (time.perf_counter() - t0) / sum(len(b) for b in work)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bolt_calls", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=50, help="micro-batches a round")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    ex = BoltExecutor(WordCount(), TaskContext("wc", "count", 0, 1),
                      [Edge("report", "t", 1, Grouping.GLOBAL)], clock=SystemClock())
    work = batches(a.batches, 2_000, 1)
    calls = Calls(memoryview(mmap.mmap(-1, 16)).cast("q"))
    run(ex, work[:5], None)  # warm
    plain, watched = [], []
    for _ in range(a.rounds):
        plain.append(run(ex, work, None))
        watched.append(run(ex, work, calls))
    p, w = statistics.median(plain) * 1e6, statistics.median(watched) * 1e6
    print(f"per tuple: {p:.2f} us without a watch, {w:.2f} us with the guardian's",
          file=sys.stderr)
    print(json.dumps({"us_per_tuple": round(p, 3), "us_per_tuple_watched": round(w, 3),
                      "watch_us_per_call": round(w - p, 3), "watch_share": round((w - p) / p, 4)
                      }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
