"""A Spark standalone cluster on loopback, from PySpark's own jars: a master and workers.

``spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker
spark://host:port``, each in its own directory with its log, dying with their parent; the
start waits until the master's status page lists every worker ALIVE. For tests and trying a
topology on a cluster on one machine (each worker is one executor: state that lives on one
worker's disk is not seen by the other).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.core.control.spark_security import SPARK_SECRET_ENV, daemon_options
from squall.core.errors import StackError
from squall.processes import HOST, die_with_parent, free_port, stop_pid


@dataclass
class SparkCluster:
    home: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    start_timeout_s: float = 120.0
    #: Spark's shared secret: with one, the master and workers authenticate every party and
    #: encrypt its RPC (squall/core/control/spark_security.py), and so must each driver
    secret: str | None = field(default=None, repr=False)
    master_url: str = ""
    _pids: list[int] = field(default_factory=list)

    def __enter__(self) -> SparkCluster:
        import pyspark

        spark_home = Path(pyspark.__file__).parent
        self.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "SPARK_HOME": str(spark_home),
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "SPARK_LOCAL_IP": HOST, "SPARK_NO_DAEMONIZE": "1"}
        if self.secret is not None:
            env |= {SPARK_SECRET_ENV: self.secret, "SPARK_MASTER_OPTS": daemon_options(),
                    "SPARK_WORKER_OPTS": daemon_options()}
        port, ui = free_port(), free_port()
        self.master_url = f"spark://{HOST}:{port}"
        cls = str(spark_home / "bin" / "spark-class")
        try:
            self._spawn("master", [cls, "org.apache.spark.deploy.master.Master", "--host",
                                   HOST, "--port", str(port), "--webui-port", str(ui)], env)
            for i in range(self.workers):
                d = self.home / f"worker-{i}"
                d.mkdir(exist_ok=True)
                self._spawn(f"worker-{i}", [
                    cls, "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                    "--webui-port", str(free_port()), "--work-dir", str(d)], env)
            self._await_workers(f"http://{HOST}:{ui}/json/")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in reversed(self._pids):
            stop_pid(pid, timeout_s=20)
        self._pids.clear()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with open(self.home / f"{name}.log", "ab") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, cwd=self.home,
                                 start_new_session=True, preexec_fn=die_with_parent)
        self._pids.append(p.pid)

    def _await_workers(self, status_url: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(status_url, timeout=2) as r:
                    last = json.load(r)
                alive = [w for w in last.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return
            except (OSError, ValueError) as e:  # ValueError: the UI's HTML page, served
                last = e  # for every path until the JSON view is mounted
            time.sleep(0.3)
        raise StackError(f"the Spark cluster at {self.master_url} did not get {self.workers} "
                         f"live workers in {self.start_timeout_s:.0f}s (last status: "
                         f"{str(last)[:300]}); logs in {self.home}")
