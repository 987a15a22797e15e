#!/usr/bin/env bash
# The deployment manifests, rendered and checked: the Kubernetes ones with kubectl's
# kustomize against the Kubernetes schemas (offline), and the compose file's shape.
# Needs kubectl on PATH (its kustomize renders deploy/kustomization.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[containers]"
command -v kubectl >/dev/null 2>&1 || {
  echo "containers: kubectl is needed (https://kubernetes.io/docs/tasks/tools/)" >&2; exit 1; }
exec .venv/bin/python -m pytest -m containers tests/containers "$@"
