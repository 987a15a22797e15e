#!/usr/bin/env bash
# Set up from nothing, then lint, type-check and run every test (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian packages some tests drive for real: headless Chromium (the topology page),
# Prometheus with promtool (the dashboards and alert rules against a live word count) and
# nftables (the cluster test's partial partition: one host cut off ZooKeeper alone).
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v nft >/dev/null 2>&1 || need+=(nftables)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing Debian's ${need[*]} (system-wide) for the page and monitoring tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "test: some tests need Debian's ${need[*]} (apt-get install ${need[*]})" >&2
  fi
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff" && ruff check .
echo "== mypy" && mypy
echo "== import contracts (pyproject.toml: services -> shell -> core)" && lint-imports
echo "== docs: no work-log language, every relative link resolves" && python scripts/check_docs.py
echo "== pytest"
# Two test processes, a file each at a time (a module's fixtures stay in one process): the
# integration tests mostly wait on services, so two at once take about half the time. Then
# the tests marked `alone` (the cluster's failovers, bounded in time as the cluster benchmark
# is) with no other test process beside them.
# pytest exits 5 when it collected nothing: that is a failure here, unless a filter given
# as arguments left nothing for the second run.
python -m pytest -n "${SQUALL_TEST_PROCESSES:-2}" --dist loadfile --durations=40 \
  -m "not alone" tests/unit tests/integration "$@"
rc=0
python -m pytest --durations=5 -m alone tests/integration "$@" || rc=$?
if [ "$rc" = 5 ] && [ $# -gt 0 ]; then rc=0; fi
exit "$rc"
