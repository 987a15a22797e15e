"""The acker service's settings: env (``SQUALL_ACKER_*``) and flags, validated once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.common import TaskIds, from_topology_file, load_settings, settings_parser
from services.telemetry import TelemetryAccess
from squall.core.control.client_properties import ClientProperties
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import check_name
from squall.kafka import FETCH_WAIT_MS
from squall.kafka_clients import KafkaClients


class AckerSettings(TelemetryAccess):
    """One acker process: which tasks (partitions of ``squall.<topo>.acker``) it runs. Each
    field is a flag (``--field-name``) and a variable (``SQUALL_ACKER_FIELD_NAME``)."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_ACKER_", frozen=True, extra="forbid")

    topology_file: Path | None = Field(None, description=(
        "the topology, JSON or YAML: gives its id, its number of ackers and its message "
        "timeout, which a flag or variable may then not set again"))
    topology: str = Field(description="topology id")
    tasks: TaskIds = Field(description="acker task ids this process runs, e.g. 0,1 (the "
                           "acker topic's partitions)")
    num_ackers: int = Field(ge=1, description="acker tasks in the topology: the acker "
                            "topic's partitions")
    message_timeout_s: float = Field(30.0, gt=0, le=86_400, description=(
        "a tree not complete after this many seconds fails (Storm's "
        "topology.message.timeout.secs)"))
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka brokers")
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    metrics_port: int = Field(0, ge=0, le=65535, description="serve /metrics and /errors "
                              "here (0: no server)")
    metrics_host: str = Field("127.0.0.1", description=(
        "the address /metrics listens on (its worker gives its own)"))
    dlq_topic: str | None = Field(None, description="where malformed messages go (default "
                                  "squall.<topology>.dlq)")
    commit_interval_s: float = Field(1.0, gt=0, description="how often the watermark is "
                                     "committed")
    max_poll_messages: int = Field(500, ge=1, description="acker messages taken per poll")
    create_topics: bool = Field(True, description="create the acker and dead-letter topics "
                                "if they are missing")
    # "bolts": a message timeout counts only time the bolts could have processed the tree's
    # tuples (squall/core/reliability/progress.py: no replay storms when they are slow);
    # "wall": Storm's.
    timeout_clock: Literal["bolts", "wall"] = Field("bolts", description=(
        "bolts: timeouts count only time the bolts could have processed a tree; wall: "
        "Storm's, from emit"))
    heartbeat_interval_s: float = Field(1.0, gt=0, description=(
        "how often each acker task tells each spout task its timeout clock"))
    # A parked fetch returns as soon as records come; shorter waits only answer sooner when
    # the topology is idle between bursts (squall/kafka.py, FETCH_WAIT_MS).
    fetch_wait_max_ms: int = Field(FETCH_WAIT_MS, ge=1, le=10_000, description=(
        "how long a fetch of the acker topic waits for records (Kafka's fetch.wait.max.ms)"))

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        return from_topology_file(data, from_topology, "SQUALL_ACKER_")

    @field_validator("topology")
    @classmethod
    def _topology(cls, v: str) -> str:
        return check_name("topology", v)

    @model_validator(mode="after")
    def _tasks_in_range(self) -> AckerSettings:
        if not self.tasks:
            raise ValueError("at least one acker task is needed")
        bad = [t for t in self.tasks if not 0 <= t < self.num_ackers]
        if bad:
            raise ValueError(f"acker tasks {bad} are outside 0..{self.num_ackers - 1}")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"acker tasks {list(self.tasks)} repeat")
        return self

    @property
    def timeout_ms(self) -> int:
        return int(self.message_timeout_s * 1000)

    @property
    def clients(self) -> KafkaClients:
        """This service's Kafka clients: its brokers and the user's properties."""
        return KafkaClients(self.bootstrap_servers, self.kafka)


def from_topology(spec: TopologySpec) -> dict[str, Any]:
    """The settings a topology gives its ackers."""
    return {"topology": spec.name, "num_ackers": spec.ackers,
            "message_timeout_s": spec.message_timeout_s}


def parse_args(argv: Sequence[str] | None = None) -> AckerSettings:
    p = settings_parser(
        AckerSettings, "squall acker",
        "Run acker tasks: track tuple trees, send ack / fail results to the spouts. Every "
        "flag can also be set as SQUALL_ACKER_<NAME> in the environment.")
    return load_settings(AckerSettings, p, argv, "acker")
