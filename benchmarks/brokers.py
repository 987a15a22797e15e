"""The same build's word count on Apache Kafka and on Tansu, alternated in one run.

Each round starts a fresh development stack on each broker in turn (``kafka`` first,
then ``tansu`` with its profile, ``squall/dev/profile.py``) and measures the fully tracked
vectorized word count there as ``benchmarks.wordcount`` does (a warm-up, then a burst of
``--sentences``, then complete latency at half that rate). Alternating the two keeps the
machine's drift out of the comparison; the spread is in the per-round lists.

Last line: ``{"kafka_sentences_per_s": [...], "tansu_sentences_per_s": [...],
"kafka_p99_s": [...], "tansu_p99_s": [...], "kafka_median", "tansu_median",
"kafka_over_tansu"}`` (the ratio of the medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.wordcount import run_squall
from squall.dev.stack import Broker, EmbeddedStack, StackSettings


def one(broker: Broker, sentences: int, warmup: int) -> dict[str, float]:
    saved = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as tmpdir, \
                EmbeddedStack(StackSettings(home=Path(tmpdir) / "stack",
                                            broker=broker)) as info:
            return run_squall(info.bootstrap_servers, Path(tmpdir), sentences, warmup, 2_000,
                              pending=200_000)
    finally:  # Tansu's profile is applied to this process's environment: take it back
        for k in set(os.environ) - set(saved):
            del os.environ[k]
        os.environ.update(saved)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.brokers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--warmup", type=int, default=5_000)
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    got: dict[str, list[dict[str, float]]] = {"kafka": [], "tansu": []}
    for r in range(a.rounds):
        for broker in (Broker.KAFKA, Broker.TANSU):
            res = one(broker, a.sentences, a.warmup)
            got[broker.value].append(res)
            print(f"round {r + 1} {broker.value}: {res['sentences_per_s']:,.0f} sentences/s, "
                  f"p99 {res['p99']:.3f} s at half rate", file=sys.stderr, flush=True)
    out: dict[str, object] = {}
    medians = {name: statistics.median(x["sentences_per_s"] for x in runs)
               for name, runs in got.items()}
    for name, runs in got.items():
        out[f"{name}_sentences_per_s"] = [round(x["sentences_per_s"]) for x in runs]
        out[f"{name}_p99_s"] = [round(x["p99"], 3) for x in runs]
        out[f"{name}_median"] = round(medians[name])
    out["kafka_over_tansu"] = round(medians["kafka"] / medians["tansu"], 3)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
