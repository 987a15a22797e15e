#!/usr/bin/env bash
# Set up from nothing and run the main job on the embedded stack.
# Until the word-count demo lands (issue #6) this starts Tansu + ZooKeeper, sends
# word-count-shaped tuple trees through a real acker topic and the XOR ledger,
# checks that every tree completed, and stops the stack.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/squall dev smoke "$@"
