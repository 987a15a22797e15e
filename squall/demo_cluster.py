"""The demo's cluster, as users deploy Squall on one machine: the embedded stack
(Apache Kafka + ZooKeeper), the REST API and one worker of each kind, kept running by a
supervisor. ``squall demo`` and the chaos suite run on it."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squall.client import ApiClient
from squall.core.errors import ApiError, SquallError
from squall.dev.stack import EmbeddedStack, StackInfo, StackSettings
from squall.processes import free_port
from squall.supervision import Command, Supervisor


@dataclass
class Cluster:
    """The demo's cluster as it runs: the stack, the API and one worker of each kind, kept
    running by a supervisor (a process that dies is restarted, as in production)."""

    info: StackInfo
    stack: EmbeddedStack
    client: ApiClient
    workdir: Path
    supervisor: Supervisor
    #: the bolts' Trident state (SQUALL_STATE_URL of the bolts worker)
    state_url: str
    #: when the workers were started (time.monotonic())
    workers_started: float


#: Stopped first, alone: the spout worker drains its trees through the others, which then
#: stop at once.
_DRAIN_FIRST = ("worker-spout",)


@contextlib.contextmanager
def cluster(workdir: Path, stop: threading.Event, standby: bool = True,
            env: Mapping[str, str] | None = None, brokers: int = 1) -> Iterator[Cluster]:
    """Stack, API and workers; on exit they stop in order (spouts drain first).
    ``standby``: the bolts worker keeps a warm standby of each bolts job; ``env``: more
    environment for the workers (and the services they start); ``brokers``: Kafka's."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    say(f"starting Apache Kafka ({brokers} broker{'s' if brokers > 1 else ''}) and "
        "ZooKeeper ...")
    stack = EmbeddedStack(StackSettings(home=workdir / "stack", brokers=brokers))
    with stack as info:
        token = secrets.token_urlsafe(32)
        port = free_port()
        sup = Supervisor(workdir)
        common = ("--zookeeper", info.zookeeper, "--bootstrap-servers", info.bootstrap_servers)
        watching = threading.Event()
        state_url = f"sqlite://{workdir / 'state.db'}"

        def start_worker(kind: str) -> None:
            no_standby = ("--no-bolts-standby",) if kind == "bolts" and not standby else ()
            sup.start(f"worker-{kind}", Command("services.worker", (
                "--kind", kind, *common, "--worker-id", f"demo-{kind}",
                "--workdir", str(workdir / f"worker-{kind}"),
                "--checkpoint-dir", str(workdir / "checkpoints"), *no_standby),
                {"SQUALL_STATE_URL": state_url, **(env or {})}, metrics=False))

        try:
            # The bolts worker first, beside the API only: its Spark start is the longest
            # of the cluster's, and the other workers starting at the same moment delay
            # it on a small machine. It registers
            # once it has started its spare Spark process; then the others start.
            workers_started = time.monotonic()
            start_worker("bolts")
            # Statistics every 0.25 s: the demo shows them as they change (and sees the
            # bolt queries running when they do).
            sup.start("api", Command("services.api", (*common, "--port", str(port),
                                                      "--stats-interval-s", "0.25"),
                                     {"SQUALL_API_TOKEN": token}, metrics=False))
            client = ApiClient(f"http://127.0.0.1:{port}", token)
            say(f"API on {client.url} (OpenAPI at {client.url}/docs); waiting for 3 workers")
            await_until(lambda: [w["id"] for w in client.workers()] == ["demo-bolts"], 60,
                        stop, sup, workdir)
            for kind in ("acker", "spout"):
                start_worker(kind)
            await_until(lambda: len(client.workers()) == 3 and _ready(client), 60, stop, sup,
                        workdir)
            sup.watch(watching, lambda line: say(f"\n{line}"))
            yield Cluster(info, stack, client, workdir, sup, state_url, workers_started)
        finally:
            watching.set()
            say("stopping: spout worker (drains), then bolts, ackers and API, then the stack")
            sup.stop(_DRAIN_FIRST, 40)


def _ready(client: ApiClient) -> bool:
    return bool(client.request("GET", "/healthz")["status"] == "ok")


def await_until(cond: Any, timeout_s: float, stop: threading.Event, sup: Supervisor | None,
           workdir: Path, every_s: float = 0.3) -> None:
    """Until ``cond()``, asked every ``every_s``; a child of ``sup`` that exits while
    waiting fails the start-up."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        for c in list(sup.children.values()) if sup else []:
            if not c.alive():
                raise SquallError(f"{c.name} exited with {c.proc.returncode}; see {c.log}")
        with contextlib.suppress(ApiError):
            if cond():
                return
        if time.monotonic() > deadline:
            raise SquallError(f"the demo cluster did not come up in {timeout_s}s; see {workdir}")
        stop.wait(every_s)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
