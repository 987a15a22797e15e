"""Memory per pending tree: what a pipeline that falls behind costs the spout and the acker.

The vectorized word count (``benchmarks/wordcount.py``'s processes on the embedded stack)
is warmed up, then one of its processes is frozen (SIGSTOP, the whole process tree):
``--freeze acker`` (default), and no tree completes, so every sentence fed stays pending
in the spout; ``--freeze bolts``, and no word is acked, so every tree stays pending in the
spout and in the acker too. Sentences are fed up to the spout's max spout pending, and the
resident memory (RSS) of the spout and the acker is sampled at each ``--step`` pending
trees; the slope of a least-squares line through a process's samples is the memory one
pending tree costs it. At the end the process is thawed and every sentence must be
committed (nothing is lost for having waited).

Last line: one JSON object: ``{"frozen", "bytes_per_pending": {process: bytes},
"pending": [...], "rss_mb": {process: [...]}, "committed"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from statistics import linear_regression

from confluent_kafka import Consumer

from benchmarks.measure import sample_sums, tree_pids, tree_rss_mb
from benchmarks.pipeline import launch, make_sentences, produce, say, wait_committed
from squall.dev.stack import EmbeddedStack, StackSettings

MEASURED = ("spout", "acker")


def wait_pending(port: int, n: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sample_sums(port, {"squall_spout_pending": "p"})["p"] >= n:
            return
        time.sleep(0.1)  # polling a metric: nothing to await
    raise RuntimeError(f"the spout never held {n} pending trees")


def signal_tree(pid: int, sig: signal.Signals) -> None:
    for p in tree_pids(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--freeze", choices=("acker", "bolts"), default="acker",
                    help="the process frozen while trees pile up")
    ap.add_argument("--pending", type=int, default=100_000, help="max spout pending")
    ap.add_argument("--step", type=int, default=20_000, help="pending trees between samples")
    a = ap.parse_args()
    with contextlib.ExitStack() as scope:
        tmp = Path(scope.enter_context(tempfile.TemporaryDirectory()))
        b = scope.enter_context(EmbeddedStack(StackSettings(home=tmp / "stack"))
                                ).bootstrap_servers
        pipe = launch(b, tmp, pending=a.pending)
        watch = Consumer({"bootstrap.servers": b, "group.id": f"squall.{pipe.name}.sentences",
                          "enable.auto.commit": False})
        frozen = pipe.procs[a.freeze].pid
        xs: list[float] = []
        rss: dict[str, list[float]] = {tag: [] for tag in MEASURED}
        try:
            say("pending memory: warming up ...")
            produce(b, pipe.source, make_sentences(5_000, 1))
            wait_committed(watch, pipe.source, 5_000, procs=pipe.procs)
            signal_tree(frozen, signal.SIGSTOP)
            for k in range(a.step, a.pending + 1, a.step):
                produce(b, pipe.source, make_sentences(a.step, 10 + k))
                wait_pending(pipe.spout_port, k)
                xs.append(float(k))
                for tag in MEASURED:
                    rss[tag].append(tree_rss_mb(pipe.procs[tag].pid))
                say(f"pending memory: {k:,} pending, RSS MiB "
                    f"{ {tag: round(v[-1], 1) for tag, v in rss.items()} }")
            signal_tree(frozen, signal.SIGCONT)
            total = 5_000 + len(xs) * a.step
            wait_committed(watch, pipe.source, total, procs=pipe.procs)
        except BaseException:
            signal_tree(frozen, signal.SIGCONT)
            pipe.log_tails(tmp)
            raise
        finally:
            watch.close()
            pipe.stop()
    print(json.dumps({
        "frozen": a.freeze,
        "bytes_per_pending": {tag: round(linear_regression(xs, v).slope * 2**20)
                              for tag, v in rss.items()},
        "pending": [int(x) for x in xs],
        "rss_mb": {tag: [round(y, 1) for y in v] for tag, v in rss.items()},
        "committed": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
