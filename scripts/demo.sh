#!/usr/bin/env bash
# Set up from nothing and run the main job: the word-count demo on the embedded stack.
# `squall demo` starts Apache Kafka + ZooKeeper, the REST API and one worker of each kind,
# submits the word count over REST, feeds sentences with a progress line and prints the
# top counts, the acker throughput and (last line) a JSON summary. Extra flags go to
# `squall demo` (default: 20,000 sentences; `--sentences` omitted with `--rate R` feeds
# until Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
if [ "$#" -eq 0 ]; then set -- --sentences 20000; fi
exec .venv/bin/squall demo "$@"
