"""The Kubernetes manifests (deploy/kustomization.yaml) as kustomize renders them: every
resource valid against the Kubernetes schemas (offline, strict: no unknown field), and
what the schemas cannot see: each Squall variable is a setting of the service that reads
it, each reference (config keys, secrets, volumes, ports) points at something that exists,
and the API runs as two replicas behind its Service."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from services.api.settings import ApiSettings
from services.worker.settings import WorkerSettings

pytestmark = pytest.mark.containers

ROOT = Path(__file__).resolve().parents[2]
#: The oldest Kubernetes the manifests are checked against (its schemas ship with
#: kubernetes-validate).
KUBERNETES = "1.30"
#: What a Squall container runs (its first argument), and the settings it reads.
SETTINGS: dict[str, type[BaseSettings]] = {"api": ApiSettings, "worker": WorkerSettings}
#: Read by every service besides its own prefix: the Kafka client properties and the
#: Spark cluster's secret.
SHARED_PREFIXES = ("SQUALL_KAFKA_", "SQUALL_SPARK_")


@pytest.fixture(scope="module")
def resources() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "the containers tests need kubectl (its kustomize renders the manifests)"
    out = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy")], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert docs, "kustomize rendered nothing"
    return docs


def of_kind(resources: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def containers(resources: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any],
                                                                  dict[str, Any]]]:
    for name, d in of_kind(resources, "Deployment").items():
        pod = d["spec"]["template"]["spec"]
        for c in pod["containers"]:
            yield name, pod, c


def test_every_resource_is_valid_against_the_kubernetes_schemas(
        resources: list[dict[str, Any]]) -> None:
    import kubernetes_validate

    problems = []
    for r in resources:
        try:
            kubernetes_validate.validate(r, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{r['kind']}/{r['metadata']['name']}: {e.message} at "
                            f"{'.'.join(map(str, e.path))}")
    assert not problems, problems


def test_each_squall_variable_is_a_setting_of_the_service_that_reads_it(
        resources: list[dict[str, Any]]) -> None:
    checked = 0
    for name, _, c in containers(resources):
        if c["image"].split(":")[0] != "squall" or not c.get("args"):
            continue
        model = SETTINGS.get(c["args"][0])
        if model is None:
            continue
        prefix = str(model.model_config.get("env_prefix", ""))
        known = {prefix + f.upper() for f in model.model_fields}
        for f in model.model_fields.values():  # aliases such as SQUALL_STATE_URL
            choices = getattr(f.validation_alias, "choices", ())
            known |= {a.upper() for a in choices if isinstance(a, str)}
        for env in c.get("env", []):
            var = env["name"]
            if var.startswith("SQUALL_") and not var.startswith(SHARED_PREFIXES):
                assert var in known, f"{name}: {var} is no setting of {model.__name__}"
                checked += 1
    assert checked >= 20  # the API's and the three workers' variables were looked at


def test_every_reference_points_at_something_that_exists(
        resources: list[dict[str, Any]]) -> None:
    maps = of_kind(resources, "ConfigMap")
    claims = of_kind(resources, "PersistentVolumeClaim")
    accounts = of_kind(resources, "ServiceAccount")
    for name, pod, c in containers(resources):
        for env in c.get("env", []):
            ref = env.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                assert ref["key"] in maps[ref["name"]]["data"], f"{name}: {ref}"
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for m in c.get("volumeMounts", []):
            v = volumes[m["name"]]
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in claims
            if "configMap" in v:
                assert v["configMap"]["name"] in maps
        ports = {p["name"] for p in c.get("ports", [])}
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in c:
                assert c[probe]["httpGet"]["port"] in ports, f"{name}: {probe}"
        assert "readinessProbe" in c, f"{name} has no readiness probe"
        if "serviceAccountName" in pod:
            assert pod["serviceAccountName"] in accounts
    # Spark's executors read the queries' offset logs where the bolts drivers write them.
    mounts = {name: {m["mountPath"] for m in c.get("volumeMounts", [])}
              for name, _, c in containers(resources)}
    assert "/var/lib/squall/checkpoints" in mounts["squall-bolts"]
    assert mounts["squall-bolts"] & mounts["squall-spark-worker"] == {
        "/var/lib/squall/checkpoints"}


def test_the_api_runs_twice_behind_its_service_and_prometheus_finds_every_process(
        resources: list[dict[str, Any]]) -> None:
    api = of_kind(resources, "Deployment")["squall-api"]
    assert api["spec"]["replicas"] == 2
    service = of_kind(resources, "Service")["squall-api"]
    assert service["spec"]["selector"] == api["spec"]["selector"]["matchLabels"]
    (config,) = [m for n, m in of_kind(resources, "ConfigMap").items()
                 if n.startswith("squall-prometheus")]
    prom = yaml.safe_load(config["data"]["prometheus.yml"])
    urls = [sd["url"] for job in prom["scrape_configs"] for sd in job.get("http_sd_configs", [])]
    port = service["spec"]["ports"][0]["port"]
    assert urls == [f"http://squall-api:{port}/sd/prometheus"]
    assert yaml.safe_load(config["data"]["alerts.yml"])["groups"]
