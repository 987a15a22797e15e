"""The per-tuple bolts' own cost: Storm-style bolts run by their executors over spout-like
batches, without Spark or Kafka, on one core (what ``benchmarks/wordcount.py --api tuple``
pays per word beyond the pipeline's fixed costs).

Two chains, as the word count benchmark runs them:

- ``count``: ``SplitSentence`` (a ``BasicBolt``) into ``WordCount`` (a stateful ``Bolt``:
  state, an emit anchored to the word, an ack), fields-grouped on two tasks;
- ``join``: ``SplitSentence`` into ``PairWords`` (a ``Bolt`` joining consecutive words,
  each pair anchored to both) into ``LogTotal`` (acks each pair).

Each run is a micro-batch of ``--sentences`` 10-word sentences with their source messages,
as the spout emits them, watched per call as the bolt deadline watches them
(services/bolts/guardian.py), with the Python workers' collector settings
(services/bolts/runtime/heap.py).

Each round also runs the two chains' bolts over bare stand-ins (benchmarks/python_floor.py):
the least Storm's API can cost in CPython, with nothing behind the collector. What an
executor costs beyond that floor is Squall's machinery.

Last line: one JSON object, ``{"count_us_per_word", "split_us_per_word",
"word_count_us_per_word", "join_chain_us_per_word", "floor_word_count_us_per_word",
"floor_join_chain_us_per_word", "word_count_over_floor", "join_chain_over_floor"}``: CPU
per word, and the chains' CPU over their floors (medians over ``--rounds``).
"""

from __future__ import annotations

import argparse
import gc
import json
import mmap
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from benchmarks import python_floor
from examples.join import LogTotal, PairWords
from examples.wordcount import SplitSentence, WordCount
from services.bolts.guardian import Calls
from services.bolts.runtime import heap
from squall.core.bolt_api.bolt import Bolt, TaskContext
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.tuple_batch import TupleBatch
from squall.wallclock import SystemClock

WORDS = 10
TASKS = 2


def spout_batches(n: int, size: int, seed: int) -> list[TupleBatch]:
    """``n`` batches of ``size`` sentences, one anchor each, with their offsets."""
    rng = random.Random(seed)
    vocab = [f"w{i:03d}" for i in range(1000)]
    out = []
    for k in range(n):
        roots = np.array([rng.getrandbits(63) + 1 for _ in range(size)], np.uint64)
        ids = np.array([rng.getrandbits(63) + 1 for _ in range(size)], np.uint64)
        src = pa.DictionaryArray.from_arrays(pa.array(np.zeros(size, np.int32)),
                                             pa.array(["sentences:0"]))
        out.append(TupleBatch.single_anchored(
            {"sentence": pa.array([" ".join(rng.choices(vocab, k=WORDS))
                                   for _ in range(size)])},
            roots, ids, source="sentences",
            origins=(src, np.arange(k * size, (k + 1) * size, dtype=np.int64))))
    return out


def executor(bolt: Bolt, component: str, edges: Sequence[Edge]) -> BoltExecutor:
    return BoltExecutor(bolt, TaskContext("bench", component, 0, TASKS), edges,
                        clock=SystemClock())


class Chain:
    """Bolts in a row, each stage's outputs to the next stage's task by partition; the
    CPU each stage took."""

    def __init__(self, stages: list[tuple[str, Callable[[], Bolt], list[Edge]]],
                 watch: Calls) -> None:
        self.stages = [(name, [executor(make(), name, edges) for _ in range(TASKS)])
                       for name, make, edges in stages]
        self.watch = watch
        self.cpu = {name: 0.0 for name, _ in self.stages}

    def run(self, batch: TupleBatch) -> None:
        inputs = {0: [batch]}
        for name, tasks in self.stages:
            out: dict[int, list[TupleBatch]] = {}
            for task, batches in inputs.items():
                t0 = time.process_time()
                res = tasks[task].run(batches, self.watch)
                self.cpu[name] += time.process_time() - t0
                for _, part, b in res.outputs:
                    out.setdefault(part, []).append(b)
            inputs = out


def measure(make: Callable[[Calls], Chain], batches: list[TupleBatch], warm: int,
            watch: Calls) -> dict[str, float]:
    """CPU seconds per stage over ``batches`` after ``warm`` of them."""
    chain = make(watch)
    for b in batches[:warm]:
        chain.run(b)
    gc.collect()
    gc.freeze()
    chain.cpu = dict.fromkeys(chain.cpu, 0.0)
    for b in batches[warm:]:
        chain.run(b)
    return chain.cpu


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.per_tuple",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=1_000, help="a micro-batch's sentences")
    ap.add_argument("--batches", type=int, default=20, help="micro-batches a round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    heap.tune()
    watch = Calls(memoryview(mmap.mmap(-1, 16)).cast("q"))
    to_count = [Edge("count", "c", TASKS, Grouping.FIELDS, ("word",))]
    to_join = [Edge("join", "j", TASKS, Grouping.FIELDS, ("word",))]

    def count(w: Calls) -> Chain:
        return Chain([("split", SplitSentence, to_count), ("count", WordCount, [])], w)

    def join(w: Calls) -> Chain:
        return Chain([("split", SplitSentence, to_join),
                      ("join", PairWords, [Edge("sink", "s", TASKS, Grouping.SHUFFLE)]),
                      ("sink", LogTotal, [])], w)

    warm = 3
    words = args.sentences * WORDS * args.batches
    rounds: dict[str, list[float]] = {k: [] for k in (
        "split", "count", "join_chain", "floor_count", "floor_join", "count_x", "join_x")}
    for r in range(args.rounds):
        batches = spout_batches(args.batches + warm, args.sentences, r)
        sentences = [s for b in batches[warm:] for s in b.data.column("sentence").to_pylist()]
        c = measure(count, batches, warm, watch)
        fc = python_floor.chain_cpu([WordCount], SplitSentence, sentences)
        j = measure(join, batches, warm, watch)
        fj = python_floor.chain_cpu([PairWords, LogTotal], SplitSentence, sentences)
        for k, v in (("split", c["split"]), ("count", c["count"]),
                     ("join_chain", sum(j.values())), ("floor_count", fc), ("floor_join", fj)):
            rounds[k].append(v / words * 1e6)
        # each chain against its floor measured beside it (the machine's pace drifts)
        rounds["count_x"].append((c["split"] + c["count"]) / fc)
        rounds["join_x"].append(sum(j.values()) / fj)
        print(f"round {r + 1}/{args.rounds}: split {rounds['split'][-1]:.2f}, count "
              f"{rounds['count'][-1]:.2f}, split+join+sink {rounds['join_chain'][-1]:.2f} "
              f"us of CPU per word; floors: split+count {rounds['floor_count'][-1]:.2f}, "
              f"split+join+sink {rounds['floor_join'][-1]:.2f}", file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    print(json.dumps({"count_us_per_word": round(med["count"], 2),
                      "split_us_per_word": round(med["split"], 2),
                      "word_count_us_per_word": round(med["split"] + med["count"], 2),
                      "join_chain_us_per_word": round(med["join_chain"], 2),
                      "floor_word_count_us_per_word": round(med["floor_count"], 2),
                      "floor_join_chain_us_per_word": round(med["floor_join"], 2),
                      "word_count_over_floor": round(med["count_x"], 2),
                      "join_chain_over_floor": round(med["join_x"], 2)}))


if __name__ == "__main__":
    main()
