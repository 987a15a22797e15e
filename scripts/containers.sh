#!/usr/bin/env bash
# The containers suite (pytest marker `containers`), apart from CI:
# - the Kubernetes manifests rendered with kubectl's kustomize and checked against the
#   Kubernetes schemas (offline);
# - docker-compose.yml brought up for real with podman (tests/containers/test_compose.py).
# Installs system-wide, with apt-get: podman, debootstrap and runc (needs root).
# Needs kubectl on PATH. The first run builds the images (about 15 minutes); podman keeps
# them for the next.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[containers]"
if ! command -v podman >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  echo "containers: installing podman, debootstrap and runc (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman debootstrap runc >/dev/null
fi
command -v kubectl >/dev/null 2>&1 || {
  echo "containers: kubectl is needed (https://kubernetes.io/docs/tasks/tools/)" >&2; exit 1; }
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/tests/containers/containers.conf}
exec .venv/bin/python -m pytest -m containers tests/containers "$@"
