#!/usr/bin/env bash
# Set up from nothing: a virtualenv in .venv with Squall and its dev tools.
# Re-running is cheap: pip runs again only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1; then PY=$c; break; fi
  done
fi
[ -n "$PY" ] || { echo "setup: no python3.11 or python3 on PATH" >&2; exit 1; }
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "setup: Python 3.11+ is needed, $PY is $("$PY" --version 2>&1)" >&2; exit 1; }

if ! command -v javac >/dev/null 2>&1 && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/javac" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing a JDK (ZooKeeper and Spark need Java 17, the bolts driver javac)" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
  else
    echo "setup: a JDK 17 is needed (ZooKeeper, Spark, the bolts driver's classes): install it or set JAVA_HOME" >&2
    exit 1
  fi
fi

if ! command -v mvn >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Maven (it fetches Apache Kafka's broker from Maven Central, once)" >&2
    apt-get update -qq && apt-get install -y -qq maven >/dev/null
  else
    echo "setup: Maven (mvn) is needed once, to fetch Apache Kafka's broker: install it" >&2
    exit 1
  fi
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.squall-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Squall and its dependencies into .venv (first time: a few minutes)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
  touch "$stamp"
fi

# Apache Kafka's broker for the development stack, once per machine: its jars from Maven
# Central into ~/.cache/squall/kafka-<version> (squall/dev/broker.py).
.venv/bin/python -m squall.dev.broker >/dev/null

# The Spark driver's class archive (services/bolts/cds.py), once per machine (JDK, PySpark):
# kept in ~/.cache/squall (or $XDG_CACHE_HOME/squall); it halves a bolts job's Spark start.
# Without it the jobs start as before.
if ! .venv/bin/python -c 'import sys; from services.bolts.cds import archive_path as a; p = a(); sys.exit(0 if p is None or p.exists() else 1)'; then
  echo "setup: writing the Spark driver's class archive into ~/.cache/squall (once, ~30 s)" >&2
  .venv/bin/python -m services.bolts.cds >.venv/squall-cds.log 2>&1 \
    || echo "setup: the class archive failed (see .venv/squall-cds.log); bolts jobs start without it" >&2
fi
