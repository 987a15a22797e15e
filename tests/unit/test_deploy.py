"""Deployment checks that need no Docker engine: the compose file against the compose
schema, the dashboards and alert rules against the metrics the code registers, the
Dockerfile against the documented install steps (docs/operations.md)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from prometheus_client import CollectorRegistry

from deploy.grafana.generate import render
from services.acker.metrics import AckerMetrics
from services.api.lag import LagMonitor
from services.api.metrics import ApiMetrics
from services.bolts.metrics import BoltMetrics
from services.spout.metrics import SpoutMetrics
from services.worker.settings import WorkerSettings
from services.worker.supervisor import WorkerService
from squall.kafka_clients import KafkaClients

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
METRIC = re.compile(r"\b(squall_[a-z0-9_]+)")


class _NoZooKeeper:
    """The API metrics read the cluster at scrape time; here there is no cluster."""

    state = "CONNECTED"
    leading = threading.Event()

    class store:
        @staticmethod
        def list() -> list[Any]:
            return []

    @staticmethod
    def workers() -> list[Any]:
        return []


def registered_metric_names() -> set[str]:
    """Every sample name the services can expose (counters' _total, histograms' series)."""
    reg = CollectorRegistry()
    SpoutMetrics(reg, "t", "c")
    AckerMetrics(reg, "t")
    BoltMetrics(reg, "t")
    WorkerService(WorkerSettings.model_validate({"kind": "spout"}), reg)
    ApiMetrics(reg, _NoZooKeeper())  # type: ignore[arg-type]
    reg.register(LagMonitor(KafkaClients("nowhere:9092"), list, lambda: True, lambda: 0))
    names = set()
    for fam in reg.collect():
        names.add(fam.name)
        if fam.type == "counter":
            names.add(f"{fam.name}_total")
        if fam.type == "histogram":
            names |= {f"{fam.name}_{s}" for s in ("bucket", "sum", "count")}
    return names


def dashboard_exprs() -> dict[str, list[str]]:
    out = {}
    for path in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        d = json.loads(path.read_text())
        exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
        exprs += [v["definition"] for v in d["templating"]["list"]]
        out[path.name] = exprs
    return out


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_every_dashboard_is_valid_json_and_up_to_date() -> None:
    committed = {p.name: p.read_text() for p in (DEPLOY / "grafana" / "dashboards").glob("*.json")}
    assert committed == render(), "run: python deploy/grafana/generate.py"
    for name, text in committed.items():
        d = json.loads(text)
        assert d["uid"] and d["title"] and d["panels"], name
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), f"{name}: panel ids repeat"
        for p in d["panels"]:
            assert p["targets"] and all(t["expr"] for t in p["targets"]), (name, p["title"])
            assert p["datasource"]["uid"] == "squall-prometheus"


def test_the_dashboard_datasource_is_the_provisioned_one() -> None:
    ds = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert [d["uid"] for d in ds["datasources"]] == ["squall-prometheus"]
    prov = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/squall.yml").read_text())
    assert prov["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_every_metric_in_a_dashboard_exists_in_the_registry() -> None:
    names = registered_metric_names()
    for dash, exprs in dashboard_exprs().items():
        used = {m for e in exprs for m in METRIC.findall(e)}
        assert used, dash
        assert used <= names, f"{dash} uses unknown metrics {sorted(used - names)}"


def test_every_metric_in_an_alert_exists_in_the_registry() -> None:
    names = registered_metric_names()
    rules = alert_rules()
    assert {r["alert"] for r in rules} >= {"SquallPartitionStuck", "SquallFailureRate",
                                           "SquallAckerPendingGrowing"}
    for r in rules:
        used = set(METRIC.findall(r["expr"]))
        if not used:  # Prometheus' own series about its targets
            assert r["expr"].startswith("up{"), r["alert"]
        assert used <= names, f"{r['alert']} uses unknown {sorted(used - names)}"
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]


def test_every_alert_has_a_rule_test_that_fires_it_and_one_that_does_not() -> None:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts_test.yml").read_text())
    cases = [c for t in doc["tests"] for c in t["alert_rule_test"]]
    for r in alert_rules():
        mine = [c for c in cases if c["alertname"] == r["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"nothing fires {r['alert']}"
        assert any(not c["exp_alerts"] for c in mine), f"nothing keeps {r['alert']} quiet"
        for c in mine:
            for a in c["exp_alerts"]:  # the text is pinned, as Prometheus renders it
                assert a["exp_annotations"]["summary"], r["alert"]


def test_the_overview_dashboard_shows_what_the_issue_asks_for() -> None:
    exprs = " ".join(dashboard_exprs()["topology-overview.json"])
    for metric in ("squall_spout_acked_total", "squall_spout_failed_total",
                   "squall_spout_complete_latency_seconds_bucket", "squall_acker_records_total",
                   "squall_acker_pending_trees", "squall_source_lag_messages",
                   "squall_source_lag_seconds", "squall_spout_replayed_total",
                   "squall_spout_dead_lettered_total"):
        assert metric in exprs, metric
    assert "histogram_quantile(0.99" in exprs and "histogram_quantile(0.5" in exprs


def test_metric_scrape_config_covers_every_service() -> None:
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert prom["rule_files"] == ["/etc/prometheus/alerts.yml"]
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    assert jobs["squall-api"]["static_configs"][0]["targets"] == ["api:8080"]
    # The workers and their task processes come from the API's service discovery only, so
    # that each is scraped once (the workers publish their own endpoint there).
    assert set(jobs) == {"squall-api", "squall-tasks"}
    assert jobs["squall-tasks"]["http_sd_configs"][0]["url"] == "http://api:8080/sd/prometheus"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


def test_compose_file_matches_the_compose_schema(compose: dict[str, Any]) -> None:
    # The Compose Specification schema, as shipped in docker-compose 1.29.2 (Apache-2.0).
    schema = json.loads((ROOT / "tests/data/compose_spec.json").read_text())
    validator = jsonschema.Draft201909Validator(schema)
    validator.validate(compose)
    # The check can fail: a misspelt condition or an unknown key is caught.
    broken = json.loads(json.dumps(compose))
    broken["services"]["api"]["depends_on"]["kafka"]["condition"] = "service_up"
    broken["services"]["spout"]["helthcheck"] = {}
    assert len(list(validator.iter_errors(broken))) == 2


def test_compose_has_every_part_with_healthchecks_and_conditions(
        compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"zookeeper", "kafka", "topics", "postgres", "spark-master",
                             "spark-worker", "api", "spout", "acker", "bolts", "prometheus",
                             "grafana"}
    one_shot = {n for n, svc in services.items() if svc.get("restart") == "no"}
    assert one_shot == {"topics"}
    for name, svc in services.items():
        assert name in one_shot or "healthcheck" in svc, f"{name} has no healthcheck"
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            want = "service_completed_successfully" if dep in one_shot else "service_healthy"
            assert cond["condition"] == want, (name, dep)
    for worker in ("spout", "acker", "bolts"):
        assert services[worker]["command"][:3] == ["worker", "--kind", worker]
        assert services[worker]["depends_on"]["api"]["condition"] == "service_healthy"
        # /metrics listens at the worker's --metrics-host: its health is asked there.
        host = services[worker]["command"][services[worker]["command"].index(
            "--metrics-host") + 1]
        assert f"http://{host}:9100/metrics" in services[worker]["healthcheck"]["test"][1]
    # A spout refuses a source topic that is not there: it starts once they are made.
    assert "topics" in services["spout"]["depends_on"]
    assert services["bolts"]["environment"]["SQUALL_WORKER_MASTER"] == \
        "spark://spark-master:7077"
    # Trident state lives in the compose file's PostgreSQL, reached from the bolts.
    assert services["bolts"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "@postgres:5432/squall" in services["bolts"]["environment"]["SQUALL_STATE_URL"]


def test_compose_keeps_its_data_in_volumes_and_shares_the_checkpoints(
        compose: dict[str, Any]) -> None:
    services = compose["services"]

    def mounts(name: str) -> dict[str, str]:
        return dict(v.split(":")[:2][::-1] for v in services[name].get("volumes", []))

    assert set(mounts("zookeeper")) == {"/data", "/datalog"}
    assert mounts("kafka") == {services["kafka"]["environment"]["KAFKA_LOG_DIRS"]:
                               "kafka-data"}
    # The Spark worker's executors read the offset logs where the bolts' drivers write them.
    where = services["bolts"]["environment"]["SQUALL_WORKER_CHECKPOINT_DIR"]
    assert mounts("bolts")[where] == mounts("spark-worker")[where] == "checkpoints"
    named = {v.split(":")[0] for s in services.values() for v in s.get("volumes", [])
             if not v.startswith(".")}
    assert named == set(compose["volumes"])


def test_compose_requires_its_secrets_from_the_environment() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert "${SQUALL_API_TOKEN:?" in text and "${SQUALL_GRAFANA_PASSWORD:?" in text
    assert "${SQUALL_POSTGRES_PASSWORD:?" in text and "${SQUALL_POSTGRES_PASSWORD:-" not in text
    assert "${SQUALL_SPARK_SECRET:?" in text and "${SQUALL_SPARK_SECRET:-" not in text


def test_compose_mounts_the_deploy_folders(compose: dict[str, Any]) -> None:
    vols = compose["services"]["prometheus"]["volumes"] + compose["services"]["grafana"]["volumes"]
    for v in vols:
        host = v.split(":")[0]
        assert (ROOT / host).exists(), f"{host} is mounted but does not exist"


def test_compose_dockerfile_steps_are_the_documented_install() -> None:
    docker = (ROOT / "Dockerfile").read_text()
    guide = (ROOT / "docs/operations.md").read_text()
    section = guide.split("### Install by hand", 1)[1].split("\n## ", 1)[0]
    runs = " ".join(line for line in docker.splitlines() if line.startswith(("RUN", " &&")))
    assert "ARG BASE=python:3.11" in docker and "FROM ${BASE}" in docker
    assert "Python 3.11" in section
    for step in ("openjdk-17-jdk-headless", "pip install --no-cache-dir ."):
        assert step in runs, step
        assert step.replace("--no-cache-dir ", "") in section, step
    setup = (ROOT / "scripts/setup.sh").read_text()
    assert "openjdk-17-jdk-headless" in setup and 'pip install' in setup
    # The Spark driver's class archive: made by the image, the documented steps and setup.
    assert all("-m services.bolts.cds" in text for text in (runs, section, setup))


def test_compose_publishes_only_the_api_and_grafana_beyond_the_host(
        compose: dict[str, Any]) -> None:
    """ZooKeeper is open on a laptop, and Kafka, Spark and Prometheus answer anyone who
    reaches them: published on loopback alone."""
    beyond = {name for name, svc in compose["services"].items()
              for port in svc.get("ports", []) if not str(port).startswith("127.0.0.1:")}
    assert beyond == {"api", "grafana"}
