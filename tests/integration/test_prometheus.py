"""The monitoring, checked against a real Prometheus (Debian's ``prometheus`` package, which
``scripts/test.sh`` installs): its own tools accept the config and the rules, the alert
rules fire on a stuck partition and on a bolt that fails everything (``promtool test
rules``, Prometheus's engine on made-up series), and during a live word count every
dashboard panel's expression and every metric the alert rules read has data, found
through the API's service discovery."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from squall.processes import die_with_parent, free_port
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed: scripts/test.sh installs Debian's prometheus"
    return path


def run(*args: str) -> str:
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_promtool_accepts_the_config_and_the_rules_and_the_alerts_fire(tmp_path: Path) -> None:
    run(tool("promtool"), "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml"))
    # The shipped config, with its rule file where this checkout has it.
    config = (DEPLOY / "prometheus" / "prometheus.yml").read_text().replace(
        "/etc/prometheus/alerts.yml", str(DEPLOY / "prometheus" / "alerts.yml"))
    (tmp_path / "prometheus.yml").write_text(config)
    run(tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml"))
    out = run(tool("promtool"), "test", "rules", str(DEPLOY / "prometheus" / "alerts_test.yml"))
    assert "SUCCESS" in out, out


def dashboard_exprs() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []

    def walk(x: Any, where: str) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("expr"), str):
                out.append((where, x["expr"]))
            for v in x.values():
                walk(v, where)
        elif isinstance(x, list):
            for v in x:
                walk(v, where)

    for f in DASHBOARDS:
        walk(json.loads(f.read_text()), f.stem)
    return out


def alert_metrics() -> set[str]:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return {m for g in doc["groups"] for r in g["rules"]
            for m in re.findall(r"\bsquall_[a-z_]+", r["expr"])}


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    """The word count running (``squall demo``, 300 sentences/s): the API's URL."""
    log = tmp_path / "demo.err"
    with open(log, "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", "squall.cli", "demo", "--rate", "300",
                              "--workdir", str(tmp_path / "demo")], stdout=subprocess.DEVNULL,
                             stderr=err, preexec_fn=die_with_parent)
    try:
        def processed() -> bool:
            counts = re.findall(r"processed ([\d,]+)", log.read_text())
            return bool(counts) and int(counts[-1].replace(",", "")) > 0

        wait_for(lambda: processed() or p.poll() is not None, 300, "the demo to process",
                 every_s=0.5)
        assert p.poll() is None, log.read_text()[-3000:]
        url = re.search(r"API on (http://[\d.:]+)", log.read_text())
        assert url, log.read_text()[-3000:]
        yield url.group(1)
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(120)
        except subprocess.TimeoutExpired:
            p.kill()


def test_every_panel_and_alert_has_data_in_a_live_word_count(demo: str, tmp_path: Path
                                                             ) -> None:
    api = demo.removeprefix("http://")
    # The dashboards' $topology is the running submission's id (wordcount-N-seconds).
    (tid,) = [t["id"] for t in httpx.get(f"{demo}/topologies", timeout=10).json()
              if t["name"] == "wordcount"]
    port = free_port()
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(DEPLOY / "prometheus" / "alerts.yml")],
        "scrape_configs": [
            {"job_name": "squall-api", "static_configs": [{"targets": [api]}]},
            {"job_name": "squall-tasks",
             "http_sd_configs": [{"url": f"{demo}/sd/prometheus", "refresh_interval": "2s"}]},
        ]}))
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - the child owns it
    prom = subprocess.Popen(
        [tool("prometheus"), f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    base = f"http://127.0.0.1:{port}"
    try:
        def query(expr: str) -> list[Any]:
            r = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=10)
            r.raise_for_status()
            body = r.json()
            assert body["status"] == "success", body
            return list(body["data"]["result"])

        def up() -> bool:
            try:
                return bool(query('up{job="squall-tasks"} == 1'))
            except httpx.HTTPError:
                return False

        wait_for(up, 60, "Prometheus to scrape the task processes it discovered")
        targets = httpx.get(f"{base}/api/v1/targets", timeout=10).json()["data"]
        pools = {t["labels"]["job"] for t in targets["activeTargets"]}
        assert pools == {"squall-api", "squall-tasks"}, targets
        kinds = {t["labels"].get("worker_kind") for t in targets["activeTargets"]
                 if t["labels"]["job"] == "squall-tasks"}
        assert kinds == {"spout", "acker", "bolts"}, kinds
        urls = [t["scrapeUrl"] for t in targets["activeTargets"]]
        assert len(urls) == len(set(urls)), f"a target scraped twice: {sorted(urls)}"
        # Every kind of process says how much memory and CPU it uses; the bolts job its
        # JVM's heap and its Spark Python workers too.

        def by_process() -> set[str]:
            return {r["metric"].get("process", r["metric"]["job"]) for r in query(
                "count by (job, process) (process_resident_memory_bytes > 0)")}

        wait_for(lambda: by_process() >= {"squall-api", "worker", "spout", "acker", "bolts"},
                 60, "process metrics from every kind of process", every_s=1)
        wait_for(lambda: bool(query('jvm_memory_bytes_used{area="heap"} > 0'))
                 and bool(query('squall_bolt_processes{role="python_worker"} > 0')), 60,
                 "the bolts job's JVM heap and Python workers", every_s=1)
        empty: dict[str, str] = {}
        exprs = [(f"{where}: {e}", e.replace("$topology", tid).replace(
            "$component", c)) for where, e in dashboard_exprs()
            for c in (("split", "count") if "$component" in e else ("",))]
        exprs += [(f"alerts: {m}", m) for m in sorted(alert_metrics())]
        deadline = time.monotonic() + 120  # rates need two samples inside their window
        for name, e in exprs:
            while not query(e) and time.monotonic() < deadline:
                time.sleep(1)
            if not query(e):
                empty[name] = e
        assert not empty, f"no data for {len(empty)} expressions: {json.dumps(empty, indent=1)}"
    finally:
        prom.terminate()
        prom.wait(30)
