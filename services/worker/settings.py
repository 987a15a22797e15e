"""A worker's settings: env (``SQUALL_WORKER_*``) and flags, validated once."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from services.common import CodePolicy, load_settings, settings_parser
from services.telemetry import TelemetryAccess
from squall.core.control.assignment import Kind
from squall.core.control.client_properties import ClientProperties
from squall.core.control.fencing import check_grace
from squall.core.control.spark_security import SparkSecurity
from squall.core.control.zookeeper_access import ZooKeeperAccess
from squall.core.errors import ConfigError
from squall.kafka_clients import KafkaClients
from squall.processes import free_port


class WorkerSettings(CodePolicy, TelemetryAccess):
    """A worker process. Each field is a flag (``--field-name``) and a variable
    (``SQUALL_WORKER_FIELD_NAME``)."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_WORKER_", frozen=True, extra="forbid")

    kind: Kind = Field(description="spout, acker or bolts")
    zookeeper: str = Field("127.0.0.1:2181", description="ZooKeeper connect string (a "
                           "chroot after the hosts: several clusters on one ZooKeeper)")
    # Who may use Squall's tree in ZooKeeper (SQUALL_ZOOKEEPER_*; load_settings fills it).
    zookeeper_access: ZooKeeperAccess = Field(default_factory=ZooKeeperAccess, exclude=True)
    # What its bolts jobs' Spark sessions need on a cluster (SQUALL_SPARK_*; load_settings).
    spark_security: SparkSecurity = Field(default_factory=SparkSecurity, exclude=True)
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka brokers")
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    worker_id: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
                           pattern=r"^[A-Za-z0-9._-]{1,200}$",
                           description="a stable id (default: host-pid)")
    capacity: int = Field(16, ge=1, le=4096, description="units (tasks) it runs at once")
    workdir: Path = Field(Path(".squall/worker"), description="logs and topology files")
    checkpoint_dir: Path | None = Field(
        None, description="Spark checkpoints (bolts); shared storage lets bolts move between "
        "workers without replaying their edges. Default: <workdir>/checkpoints")
    master: str = Field("local[*]", description="Spark master for the bolts")
    # For a kill that purges a topology's state (as the bolts': SQUALL_STATE_URL).
    state_url: str | None = Field(None, validation_alias=AliasChoices(
        "state_url", "SQUALL_WORKER_STATE_URL", "SQUALL_STATE_URL"), description=(
        "the bolts' state database (default: SQLite beside each topology's checkpoints)"))
    session_timeout_s: float = Field(6.0, ge=2, le=120, description=(
        "ZooKeeper session timeout: how long a lost worker keeps its tasks"))
    # squall/core/control/fencing.py: on a ZooKeeper ensemble, a worker cut off from it pauses
    # its tasks before its session can end and another worker be given them.
    fence_after_s: float | None = Field(None, ge=0, description=(
        "cut off from ZooKeeper this long, pause every task process: resumed if the "
        "session holds, killed if it ends (under a third of the session timeout; default: "
        "the tasks run on while ZooKeeper is away, as suits a single ZooKeeper server)"))
    # services/worker/kafka_watch.py: a worker that reaches ZooKeeper but no broker gives
    # its tasks up, for workers that still reach Kafka to run them.
    kafka_fence_after_s: float | None = Field(None, ge=15, le=600, description=(
        "unable to get a write acknowledged by Kafka this long, stop every task process and "
        "leave the cluster until Kafka acknowledges one again (15 s at least: a lost broker "
        "holds every write it replicates until Kafka fences it, broker.session.timeout.ms "
        "9 s, after electing a controller if it was the active one; default: the tasks wait "
        "for Kafka, as suits a single broker)"))
    # squall/core/control/fencing.py: no broker's failover holds one worker's writes alone.
    kafka_fence_alone_s: float = Field(8.0, ge=4, le=600, description=(
        "with --kafka-fence-after-s: unable to get a write acknowledged this long while other "
        "workers' writes are, give the tasks up (the cut is this worker's alone)"))
    metrics_host: str = Field("127.0.0.1", description=(
        "the host others reach its processes' /metrics at"))
    # Published in ZooKeeper with its processes' endpoints, so the API's service discovery
    # lists it.
    metrics_port: int | None = Field(None, ge=0, le=65535, description=(
        "the worker's own /metrics port (default: any free port; 0: off)"))
    # In a container, the engine's log (`docker compose logs`, `kubectl logs`) is stdout.
    log_stdout: bool = Field(False, description=(
        "also write every task process's output to the worker's stdout, each line after "
        "the process's name (the logs stay in <workdir>/logs too)"))
    # squall/core/control/restarts.py: still restarted, but reported as a crash loop.
    crash_loop_after: int = Field(3, ge=1, le=100, description=(
        "exits in a row, each within a minute of the task process's start, that make a "
        "crash loop"))
    stop_timeout_s: float = Field(30.0, gt=0, description=(
        "how long a stopping process may take before it is killed"))
    # Local masters only: on a cluster a standby application would hold executors.
    bolts_standby: bool = Field(True, description=(
        "keep a warm standby of each bolts job that takes over in seconds when it dies "
        "(with a local master)"))
    # Local masters only, as the standby (services/bolts/spare.py).
    bolts_spare: bool = Field(True, description=(
        "while no bolts job runs here, keep a bolts process with Spark started for the next "
        "job (with a local master)"))

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
    p = settings_parser(
        WorkerSettings, "squall worker",
        "Run a worker: register in ZooKeeper, run the tasks the leader assigns. Every flag "
        "can also be set as SQUALL_WORKER_<NAME> in the environment.")
    s = load_settings(WorkerSettings, p, argv, "worker")
    check_grace(s.fence_after_s, s.session_timeout_s)
    if s.kafka_fence_after_s is not None and s.kafka_fence_alone_s > s.kafka_fence_after_s:
        raise ConfigError(f"invalid worker settings: kafka_fence_alone_s "
                          f"{s.kafka_fence_alone_s} must not exceed kafka_fence_after_s "
                          f"{s.kafka_fence_after_s}")
    if s.kind is Kind.BOLTS:  # its jobs would fail one by one: say it once, at start
        try:
            s.spark_security.session(s.master)
        except ConfigError as e:
            raise ConfigError(f"invalid worker settings: {e}") from None
    if s.metrics_port is None:
        s = s.model_copy(update={"metrics_port": free_port()})
    return s
