"""The acker service's settings: env (``SQUALL_ACKER_*``) and flags, validated once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.common import TaskIds, from_topology_file, load_settings
from squall.core.client_properties import ClientProperties
from squall.core.topics import check_name
from squall.core.topology import TopologySpec
from squall.kafka import FETCH_WAIT_MS
from squall.kafka_clients import KafkaClients


class AckerSettings(BaseSettings):
    """One acker process: which tasks (partitions of ``squall.<topo>.acker``) it runs."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_ACKER_", frozen=True, extra="forbid")

    # The topology, JSON or YAML: gives what the topology decides (from_topology).
    topology_file: Path | None = None
    topology: str
    tasks: TaskIds = Field(description="acker task ids = acker topic partitions")
    num_ackers: int = Field(ge=1, description="partitions of the acker topic")
    message_timeout_s: float = Field(30.0, gt=0, le=86_400)
    bootstrap_servers: str = "127.0.0.1:9092"
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    metrics_port: int = Field(0, ge=0, le=65535, description="0: no metrics server")
    metrics_host: str = "0.0.0.0"
    dlq_topic: str | None = None
    commit_interval_s: float = Field(1.0, gt=0)
    max_poll_messages: int = Field(500, ge=1)
    create_topics: bool = True
    # "bolts": a message timeout counts only time the bolts could have processed the tree's
    # tuples (squall/core/progress.py: no replay storms when they are slow); "wall": Storm's.
    timeout_clock: Literal["bolts", "wall"] = "bolts"
    # How often an acker task tells each spout task its timeout clock (an empty result batch).
    heartbeat_interval_s: float = Field(1.0, gt=0)
    # After a fetch brought records, the next waits until they are taken and this long has
    # passed (librdkafka's fetch.queue.backoff.ms over a queue of one fetch); each ack
    # waits up to this long more. 0: fetch again at once. For a broker that charges each
    # fetch (the development stack sets 10: squall/dev/profile.py).
    fetch_backoff_ms: int = Field(0, ge=0, le=1_000)
    # How long a fetch of the acker topic waits for records (Kafka's fetch.wait.max.ms): a
    # parked fetch returns as soon as records come; shorter waits only answer sooner when
    # the topology is idle between bursts (squall/kafka.py, FETCH_WAIT_MS).
    fetch_wait_max_ms: int = Field(FETCH_WAIT_MS, ge=1, le=10_000)

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
    p = argparse.ArgumentParser(
        prog="squall acker",
        description="Run acker tasks: track tuple trees, send ack / fail results to the spouts. "
        "Every flag can also be set as SQUALL_ACKER_<NAME> in the environment.",
    )
    p.add_argument("--topology-file", help="the topology, JSON or YAML: gives its id, its "
                   "number of ackers and its message timeout, which a flag or variable may "
                   "then not set again")
    p.add_argument("--topology", help="topology id")
    p.add_argument("--tasks", help="acker task ids this process runs, e.g. 0,1")
    p.add_argument("--num-ackers", type=int, help="number of acker tasks in the topology")
    p.add_argument("--message-timeout-s", type=float, help="topology.message.timeout.secs")
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers")
    p.add_argument("--metrics-port", type=int, help="Prometheus /metrics port (0: off)")
    p.add_argument("--dlq-topic", help="dead-letter topic (default squall.<topology>.dlq)")
    p.add_argument("--commit-interval-s", type=float, help="how often the watermark is committed")
    p.add_argument("--fetch-backoff-ms", type=int,
                   help="after a fetch that brought records, the next waits until they are "
                   "taken and this long has passed (default 0: at once)")
    p.add_argument("--fetch-wait-max-ms", type=int,
                   help="how long a fetch of the acker topic waits for records (Kafka's "
                   f"fetch.wait.max.ms; default {FETCH_WAIT_MS})")
    p.add_argument("--timeout-clock", choices=["bolts", "wall"],
                   help="bolts (default): timeouts count only time the bolts could have "
                   "processed a tree; wall: Storm's, from emit")
    return load_settings(AckerSettings, p, argv, "acker")
