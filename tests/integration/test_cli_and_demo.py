"""The ``squall`` CLI as a client of the real API, and ``squall demo`` end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.demo import WARMUP_SENTENCES
from squall.kafka import FETCH_WAIT_MS
from squall.processes import die_with_parent
from tests.integration.cluster import TOKEN, ApiProcess, namespace
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(zookeeper: str, bootstrap: str, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiProcess]:
    log = tmp_path_factory.mktemp("cli") / "api.log"
    p = ApiProcess(namespace(zookeeper), bootstrap, log).start()
    yield p
    p.stop()


def squall(*args: str, token: str | None = TOKEN, timeout: float = 60
           ) -> subprocess.CompletedProcess[str]:
    env_args = ["--token", token] if token else []
    return subprocess.run([sys.executable, "-m", "squall.cli", *args, *env_args],
                          capture_output=True, text=True, timeout=timeout)


def test_cli_drives_a_topology_through_its_lifecycle(api: ApiProcess, tmp_path: Path) -> None:
    name = f"cli{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "t.yaml"
    spec.write_text(f"name: {name}\nackers: 1\nspouts: [{{name: src, topics: [x], "
                    "parallelism: 2}]\n")
    a = ["--api", api.url]
    r = squall("submit", str(spec), *a)
    said = re.fullmatch(rf"submitted {name} as ({name}-\d+-\d+) \(ACTIVE\)", r.stdout.strip())
    assert r.returncode == 0 and said, (r.stdout, r.stderr)
    tid = said.group(1)
    r = squall("list", *a)
    assert r.returncode == 0 and re.search(rf"{name}\s+{tid}\s+ACTIVE", r.stdout), r.stdout
    r = squall("status", name, *a)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].startswith(f"{tid}  ACTIVE")
    assert lines[1].split()[:4] == ["component", "kind", "tasks", "emitted"]
    assert [ln.split()[:3] for ln in lines[2:]] == [["src", "spout", "2"],
                                                    ["__acker", "acker", "1"]]
    assert squall("deactivate", name, *a).stdout.strip() == f"{tid}: INACTIVE"
    assert squall("activate", tid, *a).stdout.strip() == f"{tid}: ACTIVE"  # the id works too
    r = squall("rebalance", name, "--wait", "0", "-p", "src=1", *a)
    assert r.stdout.strip() == f"{tid}: REBALANCING", r.stderr
    r = squall("kill", name, "--wait", "0", *a)
    assert r.returncode == 0 and r.stdout.strip() == f"{tid}: KILLED"


def test_cli_errors_are_clear_and_exit_2(api: ApiProcess, tmp_path: Path) -> None:
    a = ["--api", api.url]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nspouts: []\n")
    r = squall("submit", str(bad), *a)
    assert r.returncode == 2 and "HTTP 422" in r.stderr and "has no spout" in r.stderr
    r = squall("activate", "ghost", *a)
    assert r.returncode == 2 and "HTTP 404" in r.stderr and "ghost" in r.stderr
    r = squall("kill", "ghost", *a, token=None)
    assert r.returncode == 2 and "HTTP 401" in r.stderr
    r = squall("list", "--api", "http://127.0.0.1:1")
    assert r.returncode == 2 and "cannot reach the API" in r.stderr
    r = squall("submit", str(tmp_path / "missing.yaml"), *a)
    assert r.returncode == 2 and "cannot read" in r.stderr
    r = squall("rebalance", "x", "-p", "src=many", *a)
    assert r.returncode == 2 and "component=N" in r.stderr
    assert squall("--help").returncode == 0


def test_demo_processes_every_sentence_and_loses_none(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "squall.cli", "demo", "--sentences", "3000",
                        "--workdir", str(tmp_path / "demo"), "--timeout", "300"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["sentences"] == 3000 and summary["processed"] == 3000
    # The pipeline warmed first, apart from the timed sentences (their words are counted).
    assert summary["warmup_sentences"] == WARMUP_SENTENCES and summary["warmup_s"] > 0
    assert f"warming up: {WARMUP_SENTENCES} sentences" in r.stderr
    assert summary["lost"] == 0 and summary["dead_lettered"] == 0
    assert summary["acked"] >= 3000 and summary["acker_records_per_s"] > 0
    top = dict(summary["top_words"])
    assert summary["top_words"][0][0] == "the"  # in three of Storm's five sentences
    assert "top words:" in r.stderr and "acker throughput" in r.stderr
    assert all(n > 0 for n in top.values())
    # The counts are Trident state: every word fed, counted exactly once.
    assert summary["counts_exact"] is True, summary
    # The bolts worker's spare (its Spark started before the topology came) ran the job.
    worker_log = (tmp_path / "demo" / "worker-bolts.log").read_text()
    assert "spare (pid" in worker_log and re.search(r"now runs wordcount-\d+-\d+\.bolts",
                                                    worker_log)
    spare_log = (tmp_path / "demo" / "worker-bolts" / "logs" / "spare.log").read_text()
    assert "bolt queries running" in spare_log
    assert 0 < summary["bolt_queries_running_s"] < summary["bolt_queries_after_workers_s"]
    # A bounded burst's spout and acker fetch with the services' own wait: Apache Kafka
    # answers a parked fetch as records come.
    assert _fetch_waits(tmp_path / "demo") == {"spout": {FETCH_WAIT_MS},
                                               "acker": {FETCH_WAIT_MS}}


def _fetch_waits(workdir: Path) -> dict[str, set[int]]:
    """The fetch waits the spout and acker tasks logged at their start."""
    return {kind: {int(w) for log in (workdir / f"worker-{kind}" / "logs").glob("*.log")
                   for w in re.findall(r"fetches wait up to (\d+) ms", log.read_text())}
            for kind in ("spout", "acker")}


def test_demo_without_a_count_runs_until_ctrl_c_and_stops_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "demo.err"

    def processed() -> int:
        counts = re.findall(r"processed ([\d,]+)", log.read_text())
        return int(counts[-1].replace(",", "")) if counts else 0

    with open(log, "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", "squall.cli", "demo", "--rate", "500",
                              "--workdir", str(tmp_path / "demo")], stdout=subprocess.PIPE,
                             stderr=err, preexec_fn=die_with_parent)
        try:
            wait_for(lambda: processed() > 0 or p.poll() is not None, 300,
                     "the demo to process sentences", every_s=0.5)
            assert p.poll() is None, log.read_text()[-3000:]
            api = re.search(r"API on (http://[\d.:]+)", log.read_text())
            assert api, log.read_text()[-3000:]
            operator_commands_answer(api.group(1))
            os.kill(p.pid, signal.SIGINT)  # Ctrl-C
            t0 = time.monotonic()
            out, _ = p.communicate(timeout=180)
        finally:
            if p.poll() is None:
                p.kill()
    assert p.returncode == 0, log.read_text()[-3000:]
    assert time.monotonic() - t0 < 120
    summary = json.loads(out.decode().strip().splitlines()[-1])
    assert summary["processed"] > 0 and summary["sentences"] >= summary["processed"]
    assert summary["lost"] is None  # stopped mid-stream: in flight is not lost
    assert summary["counts_exact"] is None  # nor yet counted
    assert summary["unfinished_at_stop"] == summary["sentences"] - summary["processed"]
    # The last progress line shows the final figures, the latency in whole milliseconds.
    last = [ln for ln in re.split(r"[\r\n]", log.read_text()) if "processed" in ln][-1]
    assert f"processed {summary['processed']:,} " in last, last
    assert re.search(r"latency [\d,]+ ms", last), last
    assert summary["lost"] is None  # stopped mid-stream: in flight is not lost
    assert summary["counts_exact"] is None  # nor yet counted
    assert summary["unfinished_at_stop"] == summary["sentences"] - summary["processed"]
    # The last progress line shows the final figures, the latency in whole milliseconds.
    assert processed() == summary["processed"]
    assert re.search(r"latency [\d,]+ ms", log.read_text().splitlines()[-1 - len(
        [ln for ln in log.read_text().splitlines() if ln.startswith(("  ", "top words",
                                                                      "acker throughput"))])]
                     ) or re.search(r"latency [\d,]+ ms\s*\n", log.read_text())
    assert "stopping: spout worker (drains)" in log.read_text()
    assert _fetch_waits(tmp_path / "demo") == {"spout": {FETCH_WAIT_MS},
                                               "acker": {FETCH_WAIT_MS}}


def operator_commands_answer(api: str) -> None:
    """``squall workers``, ``lag``, ``logs``, ``errors`` and ``status -o json`` against the
    running demo's API and workers."""
    a = ["--api", api]
    r = squall("workers", *a)
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()[1:]]
    assert {row[1] for row in rows} == {"spout", "acker", "bolts"}, r.stdout
    assert all("running" in row for row in rows if row[3].startswith("wordcount-")), r.stdout
    workers = json.loads(squall("workers", *a, "-o", "json").stdout)
    assert {w["kind"] for w in workers} == {"spout", "acker", "bolts"}

    def lag() -> dict[str, dict[str, int]]:
        r = squall("lag", "wordcount", *a, "-o", "json")
        assert r.returncode == 0, r.stderr
        return dict(json.loads(r.stdout)["sentences"]["spoutLagResult"].get("sentences", {}))

    wait_for(lambda: len(lag()) > 0, 60, "a committed offset in the lag", every_s=1)
    assert all(p["logHeadOffset"] >= p["consumerCommittedOffset"] >= 0 for p in lag().values())
    r = squall("lag", "wordcount", *a)
    assert r.returncode == 0 and r.stdout.split()[:3] == ["spout", "topic", "partition"]

    r = squall("logs", "wordcount", "sentences", "--tail", "4000", *a)
    assert r.returncode == 0 and "fetches wait up to" in r.stdout, (r.stdout[-2000:], r.stderr)
    r = squall("logs", "wordcount", "nothing", *a)
    assert r.returncode == 2 and "HTTP 404" in r.stderr and "nothing" in r.stderr

    r = squall("errors", "wordcount", *a)
    assert r.returncode == 0 and r.stdout.strip() == "no errors reported", r.stdout
    assert json.loads(squall("errors", "wordcount", *a, "-o", "json").stdout) == {"errors": []}
    st = json.loads(squall("status", "wordcount", *a, "-o", "json").stdout)
    assert [s["spoutId"] for s in st["spouts"]] == ["sentences"]


def test_validate_checks_a_spec_without_an_api(tmp_path: Path) -> None:
    r = squall("validate", "examples/wordcount.yaml", token=None)
    assert r.returncode == 0 and "topology 'wordcount' is valid" in r.stdout, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nspouts: [{name: s, topics: [t]}]\nbolts: [{name: b, class: "
                   "'nowhere.mod:X', inputs: [{component: s}], outputs: {default: [w]}}]\n")
    r = squall("validate", str(bad), token=None)
    assert r.returncode == 1 and "cannot import nowhere.mod:X" in r.stderr, r.stderr
    assert squall("validate", str(bad), "--no-import", token=None).returncode == 0
    bad.write_text("name: x\nspouts: [{name: s}]\n")
    r = squall("validate", str(bad), token=None)
    assert r.returncode == 2 and "'topics' is required" in r.stderr


def test_shell_completion_scripts_name_the_commands() -> None:
    for shell in ("bash", "zsh"):
        r = squall("completion", shell, token=None)
        assert r.returncode == 0, r.stderr
        for command in ("workers", "logs", "lag", "validate", "dead-letters"):
            assert command in r.stdout, (shell, command)
