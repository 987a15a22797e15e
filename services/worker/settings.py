"""A worker's settings: env (``SQUALL_WORKER_*``) and flags, validated once."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Sequence
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.common import load_settings
from squall.core.assignment import Kind
from squall.core.client_properties import ClientProperties
from squall.kafka_clients import KafkaClients
from squall.processes import free_port


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SQUALL_WORKER_", frozen=True, extra="forbid")

    kind: Kind
    zookeeper: str = "127.0.0.1:2181"
    bootstrap_servers: str = "127.0.0.1:9092"
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    worker_id: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
                           pattern=r"^[A-Za-z0-9._-]{1,200}$")
    capacity: int = Field(16, ge=1, le=4096, description="units (tasks) it runs at once")
    workdir: Path = Path(".squall/worker")
    checkpoint_dir: Path | None = Field(
        None, description="Spark checkpoints (bolts); shared storage lets bolts move between "
        "workers without replaying their edges. Default: <workdir>/checkpoints")
    master: str = "local[*]"
    # The bolts' state database (as theirs: SQUALL_STATE_URL), for a kill that purges a
    # topology's state. None: SQLite beside each topology's checkpoints.
    state_url: str | None = Field(None, validation_alias=AliasChoices(
        "state_url", "SQUALL_WORKER_STATE_URL", "SQUALL_STATE_URL"))
    session_timeout_s: float = Field(6.0, ge=2, le=120)
    metrics_host: str = "127.0.0.1"
    # The worker's own /metrics (restarts, crash loops), published in ZooKeeper with its
    # processes' so the API's service discovery lists it. None: any free port; 0: off.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    stop_timeout_s: float = Field(30.0, gt=0)
    # A second copy of each bolts job, its Spark session and Python workers warm, waiting
    # on the job's lock to take over (services/bolts/standby.py). Local masters only: on a
    # cluster a standby application would hold executors.
    bolts_standby: bool = True
    # While it runs no bolts job, a bolts worker keeps a spare bolts process, its Spark
    # session started and Python workers warm; the next bolts job assigned takes it over
    # (services/bolts/spare.py). Local masters only, as the standby.
    bolts_spare: bool = True

    @property
    def standby(self) -> bool:
        return self.bolts_standby and self.master.startswith("local")

    @property
    def spare(self) -> bool:
        return (self.bolts_spare and self.kind is Kind.BOLTS
                and self.master.startswith("local"))

    @property
    def checkpoints(self) -> Path:
        return self.checkpoint_dir or self.workdir / "checkpoints"

    @property
    def clients(self) -> KafkaClients:
        """This service's Kafka clients: its brokers and the user's properties."""
        return KafkaClients(self.bootstrap_servers, self.kafka)


def parse_args(argv: Sequence[str] | None = None) -> WorkerSettings:
    p = argparse.ArgumentParser(
        prog="squall worker",
        description="Run a worker: register in ZooKeeper, run the tasks the leader assigns. "
        "Every flag can also be set as SQUALL_WORKER_<NAME> in the environment.")
    p.add_argument("--kind", choices=[k.value for k in Kind], help="spout, acker or bolts")
    p.add_argument("--zookeeper", help="ZooKeeper connect string")
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers")
    p.add_argument("--worker-id", help="stable id (default: host-pid)")
    p.add_argument("--capacity", type=int, help="tasks it can run at once")
    p.add_argument("--workdir", type=Path, help="logs and topology files")
    p.add_argument("--checkpoint-dir", type=Path, help="Spark checkpoint root (bolts)")
    p.add_argument("--master", help="Spark master for bolts (default local[*])")
    p.add_argument("--session-timeout-s", type=float, help="ZooKeeper session timeout")
    p.add_argument("--metrics-host", help="host others reach its processes' /metrics at")
    p.add_argument("--metrics-port", type=int, help="the worker's own /metrics port (default: "
                   "any free port, published for service discovery; 0: off)")
    p.add_argument("--bolts-standby", action=argparse.BooleanOptionalAction, default=None,
                   help="keep a warm standby of each bolts job that takes over in seconds "
                   "when it dies (default: on with a local master)")
    p.add_argument("--bolts-spare", action=argparse.BooleanOptionalAction, default=None,
                   help="while no bolts job runs here, keep a bolts process with Spark "
                   "started and its Python workers warm, for the next job assigned "
                   "(default: on with a local master)")
    s = load_settings(WorkerSettings, p, argv, "worker")
    if s.metrics_port is None:
        s = s.model_copy(update={"metrics_port": free_port()})
    return s
