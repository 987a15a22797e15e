"""ZooKeeper trouble, for real: freeze the ZooKeeper process (SIGSTOP) under a running
API and worker. Writes are refused with 503 and /readyz says why; the worker keeps its
task processes (a fenced one pauses them and resumes them in the same session); once
ZooKeeper is back, writes work again and the state is the same. And a
worker whose session ended runs its tasks again once the leader wrote it an assignment for
its new session."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from squall.coord import WORKERS
from squall.dev.stack import StackInfo
from squall.processes import child_pids
from tests.integration.cluster import ApiProcess, zk_client
from tests.integration.helpers import acker_worker, run_ackers_only, wait_for

pytestmark = pytest.mark.integration


def test_writes_refused_while_zookeeper_is_away_and_workers_keep_running(
        own_stack: StackInfo, tmp_path: Path) -> None:
    zk_pid = next(p.pid for p in own_stack.processes if p.name == "zookeeper")
    api = ApiProcess(own_stack.zookeeper, own_stack.bootstrap_servers,
                     tmp_path / "api.log").start()
    worker = acker_worker(own_stack, tmp_path, "acker-zk", "--session-timeout-s", "20")
    http = api.client()
    try:
        name = run_ackers_only(http, worker, "acker-zk")
        os.kill(zk_pid, signal.SIGSTOP)
        try:
            def refused() -> bool:
                r = http.post(f"/topologies/{name}/deactivate")
                return r.status_code == 503
            wait_for(refused, 30, "writes to be refused", every_s=0.5)
            r = http.post(f"/topologies/{name}/deactivate")
            assert "ZooKeeper" in r.json()["detail"]
            ready = httpx.get(f"{api.url}/readyz", timeout=10)
            assert ready.status_code == 503 and ready.json()["checks"]["zookeeper"] == \
                "unavailable"
            # The worker keeps its task process while ZooKeeper is away.
            assert worker.alive()
            assert worker.metrics()["squall_worker_processes{kind=acker,worker=acker-zk}"] == 1
        finally:
            os.kill(zk_pid, signal.SIGCONT)
        wait_for(lambda: http.post(f"/topologies/{name}/deactivate").status_code == 200, 60,
                 "writes to work again", every_s=0.5)
        assert http.get(f"/topologies/{name}").json()["status"] == "INACTIVE"
        assert httpx.get(f"{api.url}/readyz", timeout=10).status_code == 200
        assert worker.metrics()["squall_worker_processes{kind=acker,worker=acker-zk}"] == 1
    finally:
        http.close()
        worker.stop()
        api.stop()


def test_a_fenced_worker_pauses_its_tasks_while_cut_off_and_resumes_them_once_back(
        own_stack: StackInfo, tmp_path: Path) -> None:
    """With --fence-after-s, a worker that lost ZooKeeper pauses its task processes (SIGSTOP,
    their whole process group) before its session could end
    (squall/core/control/fencing.py); the session held, so the same processes go on once it
    is back: none restarted."""
    zk_pid = next(p.pid for p in own_stack.processes if p.name == "zookeeper")
    api = ApiProcess(own_stack.zookeeper, own_stack.bootstrap_servers,
                     tmp_path / "api.log").start()
    worker = acker_worker(own_stack, tmp_path, "acker-fenced", "--session-timeout-s", "20",
                          "--fence-after-s", "1")
    labels = "{kind=acker,worker=acker-fenced}"
    procs, paused = f"squall_worker_processes{labels}", f"squall_worker_paused_processes{labels}"
    http = api.client()
    try:
        run_ackers_only(http, worker, "acker-fenced")
        assert worker.proc is not None
        (task,) = child_pids(worker.proc.pid, "services.acker")
        os.kill(zk_pid, signal.SIGSTOP)
        try:
            # kazoo notices the lost connection after about 2/3 of the session timeout.
            wait_for(lambda: worker.metrics().get(paused) == 1, 40, "the task paused",
                     every_s=0.5)
            assert _state(task) == "T"  # stopped
            assert "paused its 1 task processes" in worker.log_tail(50)
        finally:
            os.kill(zk_pid, signal.SIGCONT)
        wait_for(lambda: worker.metrics().get(paused) == 0, 60, "the task resumed",
                 every_s=0.5)
        assert _state(task) != "T" and worker.metrics().get(procs) == 1
        assert child_pids(worker.proc.pid, "services.acker") == [task]  # the same process
        assert "resumed its 1 task processes" in worker.log_tail(50)
    finally:
        http.close()
        worker.stop()
        api.stop()


def _state(pid: int) -> str:
    """A process's state letter (``T``: stopped), from /proc."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_worker_whose_session_ended_runs_its_tasks_again_in_its_new_session(
        own_stack: StackInfo, tmp_path: Path) -> None:
    """The worker (frozen past its session timeout) loses its session and with it every
    task process; it registers again in a new session. The leader, frozen meanwhile, never
    saw it gone: only the new session in its record tells it to write the assignment anew,
    and the worker runs nothing but an assignment written for its session."""
    api = ApiProcess(own_stack.zookeeper, own_stack.bootstrap_servers,
                     tmp_path / "api.log").start()
    worker = acker_worker(own_stack, tmp_path, "acker-lost", "--session-timeout-s", "3")
    procs = "squall_worker_processes{kind=acker,worker=acker-lost}"
    zk = zk_client(own_stack.zookeeper)
    node = f"{WORKERS}/acker-lost"

    def session() -> int | None:  # the session that owns the worker's node
        got = zk.exists(node)
        return None if got is None else int(got.ephemeralOwner)

    http = api.client()
    try:
        run_ackers_only(http, worker, "acker-lost")
        first = session()
        assert first
        assert api.proc is not None and worker.proc is not None
        os.kill(api.proc.pid, signal.SIGSTOP)
        try:
            os.kill(worker.proc.pid, signal.SIGSTOP)
            try:
                wait_for(lambda: session() is None, 60, "the worker's session to end",
                         every_s=0.2)
            finally:
                os.kill(worker.proc.pid, signal.SIGCONT)
            wait_for(lambda: session() not in (None, first), 60,
                     "the worker registered in a new session", every_s=0.2)
            wait_for(lambda: worker.metrics().get(procs) == 0, 30, "its task killed",
                     every_s=0.2)
            assert "its ZooKeeper session ended" in worker.log_tail(80)
        finally:
            os.kill(api.proc.pid, signal.SIGCONT)
        wait_for(lambda: worker.metrics().get(procs) == 1, 60,
                 "the task started again in the new session", every_s=0.5)
    finally:
        zk.stop()
        zk.close()
        http.close()
        worker.stop()
        api.stop()
