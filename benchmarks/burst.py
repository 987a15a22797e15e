"""A burst after an idle spell, and what the bolts job costs while idle.

The demo's shape: the word count (``wordcount.launch``: acker, bolts job on Spark
``local[2]``, spout) sits idle, then ``--burst`` sentences arrive at once. For each
setting of the bolts job's trigger interval and linger (``squall bolts --trigger-ms
--linger-ms``; docs/performance.md, "The micro-batch") this measures, in one pipeline each:

- the bolts job's CPU while idle (process tree, percent of one core over ``--idle-s``);
- each burst's time from the first sentence produced to the last offset committed
  (``--bursts`` of them, idle ``--gap-s`` between), and its rate.

The first setting is the baseline: the workers' old default (200 ms, no linger).
``--fetch-waits 100,20`` measures instead the spout's and acker's fetch wait
(``--fetch-wait-max-ms``) at the bolts job's defaults, the first value the baseline, the
values alternated ``--rounds`` times. Last line: one JSON object, per setting
``idle_cpu_pct``, ``burst_s`` (each burst, in order), ``burst_s_median``,
``sentences_per_s`` (of the median); per fetch wait ``burst_s``, ``burst_s_median`` and
``round_medians_s``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import cast

from confluent_kafka import Consumer

from benchmarks.measure import tree_cpu
from benchmarks.pipeline import committed, launch, make_sentences, produce, say, wait_committed
from squall.dev.stack import EmbeddedStack, StackSettings

#: (name, bolts job flags): the baseline first.
SETTINGS = (("trigger_200_no_linger", ("--trigger-ms", "200", "--linger-ms", "0")),
            ("trigger_50_no_linger", ("--trigger-ms", "50", "--linger-ms", "0")),
            ("trigger_200_linger", ("--trigger-ms", "200")),
            ("trigger_50_linger", ("--trigger-ms", "50")),
            ("trigger_20_linger", ("--trigger-ms", "20")))


def measure(b: str, tmp: Path, flags: tuple[str, ...], a: argparse.Namespace,
            service_flags: tuple[str, ...] = ()) -> dict[str, object]:
    tmp.mkdir(parents=True, exist_ok=True)
    pipe = launch(b, tmp, bolt_flags=flags, service_flags=service_flags)
    watch = Consumer({"bootstrap.servers": b, "group.id": f"squall.{pipe.name}.sentences",
                      "enable.auto.commit": False})
    try:
        produce(b, pipe.source, make_sentences(a.warmup, 1))
        wait_committed(watch, pipe.source, a.warmup, procs=pipe.procs)
        done = a.warmup
        time.sleep(a.gap_s)  # the warm-up's last micro-batches and commits settle
        bolts = pipe.procs["bolts"].pid
        cpu0, t0 = tree_cpu(bolts), time.monotonic()
        time.sleep(a.idle_s)  # the figure is what an idle job does meanwhile
        idle_pct = 100 * (tree_cpu(bolts) - cpu0) / (time.monotonic() - t0)
        took = []
        for i in range(a.bursts):
            lines = make_sentences(a.burst, 10 + i)
            start = time.perf_counter()
            produce(b, pipe.source, lines)
            done += a.burst
            # Finer than wait_committed's 50 ms steps: the figure is a fraction of a second.
            deadline = time.monotonic() + 120
            while committed(watch, pipe.source) < done:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"burst {i} not committed in 120 s")
                time.sleep(0.005)
            took.append(time.perf_counter() - start)
            say(f"  burst {i}: {a.burst:,} sentences in {took[-1]:.3f} s")
            time.sleep(a.gap_s)
        med = statistics.median(took)
        return {"idle_cpu_pct": round(idle_pct, 1), "burst_s": [round(t, 3) for t in took],
                "burst_s_median": round(med, 3), "sentences_per_s": round(a.burst / med)}
    finally:
        watch.close()
        pipe.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burst", type=int, default=20_000, help="sentences per burst")
    ap.add_argument("--bursts", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5_000)
    ap.add_argument("--idle-s", type=float, default=20.0, help="idle CPU measured this long")
    ap.add_argument("--gap-s", type=float, default=3.0, help="idle between bursts")
    ap.add_argument("--fetch-waits", default="",
                    help="spout and acker fetch waits (ms, comma-separated) to compare")
    ap.add_argument("--rounds", type=int, default=2, help="with --fetch-waits")
    a = ap.parse_args()
    out: dict[str, object] = {"burst": a.burst}
    with tempfile.TemporaryDirectory() as tmpdir, \
            EmbeddedStack(StackSettings(home=Path(tmpdir) / "stack")) as info:
        if a.fetch_waits:
            out.update(fetch_waits(info.bootstrap_servers, Path(tmpdir), a))
        else:
            for name, flags in SETTINGS:
                say(f"{name}: {' '.join(flags)}")
                out[name] = measure(info.bootstrap_servers, Path(tmpdir) / name, flags, a)
                say(f"{name}: {json.dumps(out[name])}")
    print(json.dumps(out))


def fetch_waits(b: str, tmp: Path, a: argparse.Namespace) -> dict[str, object]:
    """Per wait: every round's bursts, their median, and the spread of the rounds' medians."""
    waits = [int(w) for w in a.fetch_waits.split(",")]
    bursts: dict[int, list[float]] = {w: [] for w in waits}
    medians: dict[int, list[float]] = {w: [] for w in waits}
    for r in range(a.rounds):
        for w in waits:
            say(f"round {r}: fetch wait {w} ms")
            got = measure(b, tmp / f"wait{w}-{r}", (), a, ("--fetch-wait-max-ms", str(w)))
            bursts[w] += cast(list[float], got["burst_s"])
            medians[w].append(cast(float, got["burst_s_median"]))
    return {f"fetch_wait_{w}ms": {"burst_s": bursts[w],
                                  "burst_s_median": round(statistics.median(bursts[w]), 3),
                                  "round_medians_s": medians[w]} for w in waits}


if __name__ == "__main__":
    main()
