"""Client settings against the defaults, on Apache Kafka: the vectorized word count
(``benchmarks/wordcount.py``, its burst and its p99 at half rate) run with the defaults and
with each candidate, alternated round by round (the order flips each round, so that a
machine slowing down over the run does not favour one side).

A candidate is a set of the services' environment settings, e.g.
``--try SQUALL_SPOUT_READ_AHEAD_RECORDS=1000,SQUALL_SPOUT_FETCH_BACKOFF_MS=40``; the
processes the benchmark starts read them as they read any setting (services/common.py).

Last line: one JSON object, ``{"rounds", "sentences", "configs": {name: {"env",
"sentences_per_s": [...], "p99_s": [...], "median_sentences_per_s", "median_p99_s",
"x_defaults"}}}``; ``x_defaults`` is the candidate's median rate over the defaults'.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

DEFAULTS = "defaults"


def parse_try(text: str) -> dict[str, str]:
    """``K=V,K=V`` -> ``{K: V}``: settings of the services, by their environment names."""
    env: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("SQUALL_"):
            raise argparse.ArgumentTypeError(
                f"--try {text!r}: each item must be SQUALL_NAME=value, not {item!r}")
        env[key] = value
    if not env:
        raise argparse.ArgumentTypeError(f"--try {text!r} names no setting")
    return env


def one(env: dict[str, str], sentences: int) -> dict[str, Any]:
    """One run of the word count with ``env`` added; its JSON figures."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.wordcount", "--api", "vectorized",
         "--skip-baseline", "--variants", "", "--sentences", str(sentences)],
        env={**os.environ, **env}, capture_output=True,
        timeout=1800)
    lines = out.stdout.decode().strip().splitlines()
    if out.returncode != 0 or not lines:
        raise SystemExit(f"the word count with {env} exited {out.returncode}:\n"
                         f"{out.stderr.decode()[-2000:]}")
    got: dict[str, Any] = json.loads(lines[-1])
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--try", dest="tries", type=parse_try, action="append", required=True,
                    metavar="K=V,...", help="a candidate: settings by environment name")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=100_000)
    args = ap.parse_args()
    configs: dict[str, dict[str, str]] = {DEFAULTS: {}}
    for env in args.tries:
        configs[",".join(f"{k}={v}" for k, v in env.items())] = env
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            got = one(configs[name], args.sentences)
            runs[name].append(got)
            print(f"round {r + 1} {name}: {got['sentences_per_s']:,} sentences/s, p99 at "
                  f"half rate {got['complete_latency_p99_s']} s", file=sys.stderr, flush=True)
    base = statistics.median(g["sentences_per_s"] for g in runs[DEFAULTS])
    summary: dict[str, Any] = {}
    for name, done in runs.items():
        rates = [g["sentences_per_s"] for g in done]
        p99s = [g["complete_latency_p99_s"] for g in done]
        summary[name] = {"env": configs[name], "sentences_per_s": rates, "p99_s": p99s,
                         "median_sentences_per_s": statistics.median(rates),
                         "median_p99_s": statistics.median(p99s),
                         "x_defaults": round(statistics.median(rates) / base, 3)}
    print(json.dumps({"rounds": args.rounds, "sentences": args.sentences,
                      "configs": summary}))


if __name__ == "__main__":
    main()
