"""The bolts job's settings: env (``SQUALL_BOLTS_*``) and flags, validated once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.common import load_settings, settings_parser
from services.telemetry import TelemetryAccess
from squall.core.control.client_properties import ClientProperties
from squall.core.control.spark_security import SparkSecurity
from squall.core.errors import ConfigError
from squall.core.reliability.linger import Linger
from squall.core.topology.model import TopologySpec
from squall.kafka_clients import KafkaClients

#: C1 only: Spark plans every micro-batch anew, and C2 kept compiling what that planning
#: ran for minutes (docs/performance.md, "The bolts job's JVM and start").
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


class SparkSettings(TelemetryAccess):
    """What shapes a bolts process's Spark session, and where it serves its metrics: shared
    by a bolts job and a spare (services/bolts/spare.py), which must start the same
    session for a job to take it over."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_BOLTS_", frozen=True, extra="forbid")

    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka brokers")
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    # Spark's authentication and encryption on a cluster (SQUALL_SPARK_*; load_settings).
    spark_security: SparkSecurity = Field(default_factory=SparkSecurity, exclude=True)
    master: str = Field("local[*]", description="Spark master (or spark://host:7077)")
    metrics_port: int = Field(0, description="serve /metrics and /errors here (0: any free "
                              "port)")
    metrics_host: str = Field("127.0.0.1", description=(
        "the address /metrics listens on (its worker gives its own)"))
    # Checkpoint files written without Hadoop's forked chmod/readlink
    # (services/bolts/runtime/driver_classes.py).
    checkpoint_fs: Literal["no-fork", "hadoop"] = Field("no-fork", description=(
        "local checkpoints without Hadoop's forked chmod/readlink (no-fork, compiled once "
        "with javac) or Hadoop's own"))
    # JVM flags of the Spark driver and executors (spark-submit's --driver-java-options).
    java_options: str = Field(JAVA_OPTIONS, description=(
        "JVM flags of the Spark driver and executors, as one string (--java-options='-Xmx2g')"))
    # Any other Spark setting, as spark-submit's --conf KEY=VALUE (applied last).
    spark_conf: tuple[str, ...] = Field((), description=(
        "any other Spark setting, as spark-submit's (repeatable; applied last)"))

    # services/bolts/kafka_fence.py: on a cluster, a task whose executor is cut off from Kafka
    # moves to another, and the executor leaves the application for a while.
    executor_kafka_fence_s: float = Field(20.0, ge=15, le=600, description=(
        "on a Spark cluster, how long a waiting task's executor goes without a write "
        "acknowledged by Kafka before the task moves and the executor is removed (at least "
        "15: a broker's failover must not move tasks)"))
    executor_rejoin_s: float = Field(60.0, gt=0, le=3600, description=(
        "how long after removing an executor cut off from Kafka the job asks for executors "
        "again (doubled for each removal on the same host in a row)"))

    @field_validator("spark_conf")
    @classmethod
    def _conf(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for kv in v:
            key, eq, _ = kv.partition("=")
            if not eq or not key.strip().startswith("spark."):
                raise ValueError(f"{kv!r} is not a Spark setting KEY=VALUE with KEY spark.*")
        return v

    def conf(self) -> dict[str, str]:
        return dict((k.strip(), val) for k, _, val in (kv.partition("=") for kv in self.spark_conf))

    def session_shape(self) -> tuple[object, ...]:
        """Everything the Spark session is started with: a session started with one shape
        serves a job of the same shape."""
        return (self.master, self.checkpoint_fs, self.java_options, self.spark_conf,
                self.executor_kafka_fence_s, self.executor_rejoin_s)

    @property
    def clients(self) -> KafkaClients:
        """This service's Kafka clients: its brokers and the user's properties."""
        return KafkaClients(self.bootstrap_servers, self.kafka)


    @model_validator(mode="after")
    def _secured(self) -> SparkSettings:
        self.spark_security.session(self.master)  # a cluster without its secret: refused
        return self


class BoltSettings(SparkSettings):
    topology_file: Path = Field(description="the topology, JSON or YAML")
    components: tuple[str, ...] = Field((), description="bolts to run, comma separated "
                                        "(default: all)")

    @field_validator("components", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        return tuple(x for x in v.split(",") if x) if isinstance(v, str) else v

    checkpoint_dir: Path = Field(Path(".squall/checkpoints"), description=(
        "Spark's checkpoints and the default state database (shared storage on a cluster)"))
    # The job's lock (services/bolts/runtime/standby.py) excludes its standby, on the same
    # host: on a host's own disk, a process that froze or was cut off holding it cannot keep
    # another host's job from its checkpoints; ZooKeeper's assignment and the lease exclude
    # the jobs of two hosts (docs/decisions.md).
    lock_dir: Path | None = Field(None, description=(
        "where the job's lock is taken, on the host's own disk (default: the checkpoint "
        "folder)"))
    max_rows_per_batch: int = Field(2_000, ge=1, description="edge messages per task and "
                                    "micro-batch")
    trigger_ms: int = Field(50, ge=0, description="how often a query looks for input")
    # After an idle spell a micro-batch waits for its burst to land: until the edges stood
    # still for quiet_ms, at most linger_ms (0: never waits); squall/core/reliability/linger.py.
    quiet_ms: int = Field(Linger.quiet_ms, ge=0, description=(
        "after an idle spell, a micro-batch starts once its input stood still this long"))
    linger_ms: int = Field(Linger.linger_ms, ge=0, description=(
        "... or this long after its first record was seen, whichever is first (0: no "
        "waiting)"))
    # A warm standby (services/bolts/runtime/standby.py): start Spark once the active job runs.
    standby: bool = Field(False, description=(
        "be a warm standby: start Spark once the active job's queries run, then wait to "
        "take over (the worker starts one beside each bolts job)"))
    # Run a bolt whose only input is another bolt of this job in that bolt's query
    # (squall/core/topology/chains.py): one micro-batch per tree instead of two.
    fuse: bool = Field(True, description=(
        "run a bolt whose only input is another bolt of this job in that bolt's query"))
    # Where stateful bolts and persistent aggregates keep their state (postgresql://...,
    # sqlite:///path), unless an aggregate's spec names a database. Also read from
    # SQUALL_STATE_URL, as the compose file and `squall dev up --postgres` set it.
    # Default: SQLite beside the checkpoints.
    state_url: str | None = Field(None, validation_alias=AliasChoices(
        "state_url", "SQUALL_BOLTS_STATE_URL", "SQUALL_STATE_URL"), description=(
        "stateful bolts' and persistent aggregates' database: postgresql://... or "
        "sqlite:///path (or SQUALL_STATE_URL; default: SQLite beside the checkpoints)"))

    def spec(self) -> TopologySpec:
        try:
            text = self.topology_file.read_text()
        except OSError as e:
            raise ConfigError(f"cannot read topology file {self.topology_file}: {e}") from None
        return TopologySpec.from_text(text)


class SpareSettings(SparkSettings):
    #: where the worker writes the flags of the job this spare is to run
    handoff_file: Path = Field(description="where the job's flags will be written")


#: The flags whose name is not the field's.
_FLAGS = {"spark_conf": ("--conf", {"action": "append", "metavar": "KEY=VALUE"})}


def parse_args(argv: Sequence[str] | None = None) -> BoltSettings:
    p = settings_parser(
        BoltSettings, "squall bolts",
        "Run a topology's bolts as Spark Structured Streaming queries. Every flag can also "
        "be set as SQUALL_BOLTS_<NAME>.", _FLAGS)
    return load_settings(BoltSettings, p, argv, "bolts")


def parse_spare_args(argv: Sequence[str] | None = None) -> SpareSettings:
    p = settings_parser(
        SpareSettings, "python -m services.bolts.spare",
        "A spare bolts process: start Spark and warm its Python workers, then wait for the "
        "worker to hand it a bolts job (the job's flags, as a JSON list, in the handoff "
        "file). Every flag can also be set as SQUALL_BOLTS_<NAME>.", _FLAGS)
    return load_settings(SpareSettings, p, argv, "spare bolts")
