#!/usr/bin/env bash
# Set up from nothing, then lint, type-check and run every test (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The topology page is tested in headless Chromium (Debian's package).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing Debian's chromium for the topology-page test" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "test: the topology-page test needs chromium (apt-get install chromium)" >&2
  fi
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff" && ruff check .
echo "== mypy" && mypy
echo "== import contracts (pyproject.toml: services -> shell -> core)" && lint-imports
echo "== pytest"
# pytest exits 5 when it collected nothing: that is a failure here too.
exec python -m pytest tests/unit tests/integration "$@"
