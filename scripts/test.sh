#!/usr/bin/env bash
# Set up from nothing, then lint, type-check and run every test (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff" && ruff check .
echo "== mypy" && mypy
echo "== pytest"
# pytest exits 5 when it collected nothing: that is a failure here too.
exec python -m pytest tests/unit tests/integration "$@"
