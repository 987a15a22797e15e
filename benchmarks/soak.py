"""Soak: the word count at half its measured rate for a long time; memory per process.

The vectorized word count (``benchmarks/wordcount.py``'s processes on Apache Kafka)
first runs ``--burst`` sentences as fast as it can, which gives its rate (or ``--rate``
is given); then sentences are fed at half that rate for ``--minutes``. The resident memory
(RSS) of each process tree (acker; spout; bolts job: driver, JVM and Python workers) is
sampled every ``--sample-s``. The growth compares like with like under the same feed: the
median of the samples in the first ``--window-s`` after ``--settle-s`` (caches and the JVM's
heap warmed) with the median of those in the last ``--window-s``: a leak raises the
second, a lag peak at one sample does not (a process's memory follows its in-flight work:
the acker's pending trees, say). The single samples are printed too (``*_point``: the one
at ``--settle-s`` and the one when the feed stopped). Each process is followed on its own
too: a tree's sum moves with the number of Python workers Spark keeps, so the growth of
every process that lived through both windows is given (``process_rss_mb``: per
``tag/role/pid``, its start and end medians and growth), and the count of Python workers
with each sample. At the end, the feed stops and every
sentence must be committed; the lag when it stopped says whether a queue grew.

The broker's share of a core since the last sample is printed with each sample
(``broker_cpu``). The source's committed offsets are watched all along: the longest time
they stood still while something fed was not committed (``longest_commit_stall_s``, and
every stall over 5 s in ``stalls``: when it began and how long it lasted). The spout's
failed trees (``failed``, timeouts included) and dead letters (``dead_lettered``) are
counted at the end.

Targets: RSS growth at most 5 % per process, no unbounded queue, no commit stall over
15 s, nothing failed or dead-lettered.

Last line: one JSON object: ``{"minutes", "rate", "rss_mb_start": {...}, "rss_mb_end":
{...}, "rss_growth": {...}, "max_rss_growth", "rss_mb_start_point", "rss_mb_end_point",
"rss_growth_points", "process_rss_mb", "max_process_rss_growth", "lag_at_stop",
"lag_bound", "committed", "replayed", "timed_out", "failed", "dead_lettered",
"longest_commit_stall_s", "stalls", "samples": [{"t", "lag", "broker_cpu", <RSS per
process tree>, "python_workers"}, ...]}``: a lag that grew with no trees timed out or
replayed was a slow pipeline; with them, trees that were lost on the way and waited out
their timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer

from benchmarks.measure import sample_sums, tree_cpu, tree_rss_mb
from benchmarks.pipeline import (
    PARTS,
    Pipeline,
    committed,
    launch,
    make_sentences,
    produce,
    say,
    wait_committed,
)
from squall import process_tree
from squall.dev.stack import EmbeddedStack, StackSettings


def sample(pipe: Pipeline) -> dict[str, float]:
    return {tag: round(tree_rss_mb(p.pid), 1) for tag, p in pipe.procs.items()}


def members(pipe: Pipeline) -> dict[str, float]:
    """Each process of the word count on its own, keyed ``tag/role/pid`` (the bolts job's
    role: its driver, Spark's JVM, a Python worker), its RSS in MiB."""
    procs = process_tree.snapshot()
    return {f"{tag}/{p.role if tag == 'bolts' else tag}/{p.pid}": round(p.rss_bytes / 2**20, 1)
            for tag, top in pipe.procs.items() for p in process_tree.tree(top.pid, procs)}


def lived_growth(samples: list[tuple[float, dict[str, float]]], start: tuple[float, float],
                 end: tuple[float, float]) -> dict[str, list[float]]:
    """Per process seen in every sample of both windows: its median RSS in the first, in
    the second, and the growth between them. A process that came or went in between (a
    Python worker Spark started or retired) is no one process's growth."""
    first = [m for t, m in samples if start[0] <= t < start[1]]
    last = [m for t, m in samples if end[0] <= t < end[1]]
    if not first or not last:
        return {}
    keys = set.intersection(*(set(m) for m in first + last))
    out: dict[str, list[float]] = {}
    for k in sorted(keys):
        a, b = statistics.median(m[k] for m in first), statistics.median(m[k] for m in last)
        out[k] = [round(a, 1), round(b, 1), round(b / a - 1, 3) if a else 0.0]
    return out


class CommitWatch(threading.Thread):
    """The source's committed total every ``every_s``: how long it stood still while
    ``fed()`` was ahead of it (a caught-up pipeline waiting for the feed is no stall)."""

    #: Stalls longer than this are listed one by one.
    LISTED_S = 5.0

    def __init__(self, bootstrap: str, group: str, topic: str, fed: Callable[[], int],
                 every_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False})
        self.topic, self.fed, self.every_s = topic, fed, every_s
        self.longest_s = 0.0
        self.stalls: list[tuple[float, float]] = []  # (began, seconds), over LISTED_S
        self.stop = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        last, since = -1, time.monotonic()
        stalled = False
        try:
            while not self.stop.wait(self.every_s):
                fed = self.fed()  # before the commits: what is behind them was fed before
                done, now = committed(self.consumer, self.topic), time.monotonic()
                if done > last or done >= fed:
                    if stalled and now - since > self.LISTED_S:
                        self.stalls.append((round(since - self._t0, 1), round(now - since, 1)))
                    last, since, stalled = done, now, False
                else:
                    stalled = True
                    self.longest_s = max(self.longest_s, now - since)
        finally:
            self.consumer.close()


class PacedFeed(threading.Thread):
    """Sentences at ``rate``/s until stopped; counts what it produced."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.sent = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            chunk = max(int(self.rate), 100)  # a second of sentences at a time
            seed = 100
            while not self.stop.is_set():
                produce(self.bootstrap, self.topic, make_sentences(chunk, seed), rate=self.rate)
                self.sent += chunk
                seed += 1
        except BaseException as e:  # surfaced by the main thread
            self.error = e


def window_median(samples: list[tuple[float, int, dict[str, float]]], lo: float,
                  hi: float) -> dict[str, float]:
    """Per process, the median RSS of the samples taken at ``lo <= t < hi`` ({}: none)."""
    inside = [s for t, _, s in samples if lo <= t < hi]
    return {k: round(statistics.median(s[k] for s in inside), 1)
            for k in (inside[0] if inside else {})}


def _growth(start: dict[str, float], end: dict[str, float]) -> dict[str, float | None]:
    return {k: round(end[k] / start[k] - 1, 3) if start.get(k) else None for k in end}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="paced phase length")
    ap.add_argument("--rate", type=float, default=None,
                    help="sentences/s to feed (default: half the rate of a burst)")
    ap.add_argument("--burst", type=int, default=50_000, help="sentences to measure the rate")
    ap.add_argument("--settle-s", type=float, default=60.0,
                    help="seconds into the paced phase the start sample is taken")
    ap.add_argument("--sample-s", type=float, default=15.0, help="seconds between samples")
    ap.add_argument("--window-s", type=float, default=120.0,
                    help="the start's and the end's RSS: medians over this long (at most a "
                         "third of the paced phase after --settle-s)")
    ap.add_argument("--exact", action="store_true", help="count into Trident state")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keep the stack and the processes' logs here (default: a temporary "
                         "directory, deleted at the end)")
    a = ap.parse_args()
    with contextlib.ExitStack() as scope:
        if a.workdir is None:
            tmp = Path(scope.enter_context(tempfile.TemporaryDirectory()))
        else:
            tmp = a.workdir.resolve()
            tmp.mkdir(parents=True, exist_ok=True)
        info = scope.enter_context(EmbeddedStack(StackSettings(home=tmp / "stack")))
        b = info.bootstrap_servers
        pipe = launch(b, tmp, exact=a.exact)
        watch = Consumer({"bootstrap.servers": b, "group.id": f"squall.{pipe.name}.sentences",
                          "enable.auto.commit": False})
        try:
            say("soak: warming up ...")
            produce(b, pipe.source, make_sentences(5_000, 1))
            wait_committed(watch, pipe.source, 5_000, procs=pipe.procs)
            done = 5_000
            rate = a.rate
            if rate is None:
                say(f"soak: {a.burst:,} sentences as fast as possible, for the rate ...")
                t0 = time.perf_counter()
                produce(b, pipe.source, make_sentences(a.burst, 2))
                done += a.burst
                t1 = wait_committed(watch, pipe.source, done, procs=pipe.procs)
                rate = a.burst / (t1 - t0) / 2
            say(f"soak: {rate:,.0f} sentences/s for {a.minutes:g} minutes ...")
            feed = PacedFeed(b, pipe.source, rate)
            base = done
            commits = CommitWatch(b, f"squall.{pipe.name}.sentences", pipe.source,
                                  lambda: base + feed.sent)
            t_start = time.monotonic()
            feed.start()
            commits.start()
            samples: list[tuple[float, int, dict[str, float]]] = []
            each: list[tuple[float, dict[str, float]]] = []
            broker = next(p.pid for p in info.processes if p.name == "kafka")
            cpu_at = (time.monotonic(), tree_cpu(broker))
            broker_cpu: list[float] = []  # the broker's share of a core since the last sample
            while (elapsed := time.monotonic() - t_start) < a.minutes * 60:
                if feed.error is not None:
                    raise RuntimeError(f"the feed failed: {feed.error}")
                if any(p.poll() is not None for p in pipe.procs.values()):
                    raise RuntimeError("a process of the word count exited")
                lag_now = max(0, done + feed.sent - committed(watch, pipe.source))
                samples.append((elapsed, lag_now, sample(pipe)))
                each.append((elapsed, members(pipe)))
                now_cpu = (time.monotonic(), tree_cpu(broker))
                broker_cpu.append(round((now_cpu[1] - cpu_at[1]) / (now_cpu[0] - cpu_at[0]), 2))
                cpu_at = now_cpu
                say(f"soak: {elapsed:5.0f} s  RSS MiB {samples[-1][2]}  lag {lag_now:,}  "
                    f"broker CPU {broker_cpu[-1]:.0%}")
                time.sleep(min(a.sample_s, max(a.minutes * 60 - elapsed, 0.1)))
            feed.stop.set()
            feed.join()
            end = sample(pipe)
            total = done + feed.sent
            lag = total - committed(watch, pipe.source)
            wait_committed(watch, pipe.source, total, procs=pipe.procs)
            commits.stop.set()
            commits.join()
            spout = sample_sums(pipe.spout_port, {"squall_spout_replayed_total": "replayed",
                                                  "squall_spout_failed_total": "failed",
                                                  "squall_spout_dead_lettered_total":
                                                      "dead_lettered"})
            timeouts = sample_sums(pipe.acker_port, {"squall_acker_trees_total": "timed_out"},
                                   outcome="timed_out")
        except RuntimeError:
            pipe.log_tails(tmp)
            raise
        finally:
            watch.close()
            pipe.stop()
    start_point = next((s for t, _, s in samples if t >= a.settle_s), samples[-1][2])
    window = min(a.window_s, max(a.minutes * 60 - a.settle_s, 0) / 3)
    last_t = samples[-1][0]
    start = window_median(samples, a.settle_s, a.settle_s + window) or start_point
    median_end = window_median(samples, last_t - window, last_t + 1) or end
    growth = _growth(start, median_end)
    lived = lived_growth(each, (a.settle_s, a.settle_s + window), (last_t - window, last_t + 1))
    print(json.dumps({
        "minutes": a.minutes, "rate": round(rate), "partitions": PARTS,
        "rss_mb_start": start, "rss_mb_end": median_end, "rss_growth": growth,
        "max_rss_growth": max(g for g in growth.values() if g is not None),
        "window_s": round(window), "rss_mb_start_point": start_point, "rss_mb_end_point": end,
        "rss_growth_points": _growth(start_point, end),
        "process_rss_mb": lived,
        "max_process_rss_growth": max((g for _, _, g in lived.values()), default=None),
        "lag_at_stop": lag, "lag_bound": round(rate * 10), "committed": total,
        "replayed": round(spout["replayed"]), "timed_out": round(timeouts["timed_out"]),
        "failed": round(spout["failed"]), "dead_lettered": round(spout["dead_lettered"]),
        "longest_commit_stall_s": round(commits.longest_s, 1), "stalls": commits.stalls,
        "samples": [{"t": round(t), "lag": lag_t, "broker_cpu": c, **s,
                     "python_workers": sum("/python_worker/" in k for k in m)}
                    for (t, lag_t, s), c, (_, m) in zip(samples, broker_cpu, each,
                                                        strict=True)]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
