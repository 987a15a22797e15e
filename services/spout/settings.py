"""The spout service's settings: env (``SQUALL_SPOUT_*``) and flags, validated once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.common import TaskIds, from_topology_file, load_settings, settings_parser
from services.telemetry import TelemetryAccess
from squall.core.control.client_properties import ClientProperties
from squall.core.errors import ConfigError, TopologyError
from squall.core.reliability.retry import RetrySchedule
from squall.core.topology.checks import check_start
from squall.core.topology.grouping import Edge, edge_flag, parse_edge
from squall.core.topology.model import Guarantee, SpoutSpec, TopologySpec
from squall.core.topology.topics import check_name
from squall.kafka import FETCH_WAIT_MS
from squall.kafka_clients import KafkaClients

#: What the worker gives a spout process of a topology: which component, how many tasks.
PLACEMENT = frozenset({"component", "num_tasks"})


class SpoutSettings(TelemetryAccess):
    """One spout process. Each field is a flag (``--field-name``) and a variable
    (``SQUALL_SPOUT_FIELD_NAME``)."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_SPOUT_", frozen=True, extra="forbid")

    topology_file: Path | None = Field(None, description=(
        "the topology, JSON or YAML: gives every setting the topology decides (its id, the "
        "spout's topics, scheme, start and edges, the guarantee, timeouts, retries), which "
        "a flag or variable may then not set again"))
    topology: str = Field(description="topology id")
    component: str = Field("spout", description="the spout's component name")
    topics: tuple[str, ...] = Field(description="source topics, comma separated")
    tasks: TaskIds = Field(description="spout task ids this process runs, e.g. 0,1")
    num_tasks: int = Field(ge=1, description="spout parallelism")
    num_ackers: int = Field(1, ge=0, description="acker tasks (0: every tuple is acked at "
                            "once)")
    edges: tuple[str, ...] = Field((), description=(
        "a subscriber, target:partitions[:grouping[:fields]][@stream] (repeatable)"))
    scheme: str = Field("text", description="raw, text, json or module:Class")
    start: str = Field("earliest", description=(
        "where a partition starts when the spout's group committed nothing in it: earliest, "
        "latest, or group:<id> (where that consumer group got to)"))
    fields: tuple[str, ...] = Field((), description="declared output fields (json scheme)")
    guarantee: Guarantee = Field(Guarantee.AT_LEAST_ONCE, description=(
        "at_least_once (trees tracked, replayed on failure), at_most_once or no_guarantee"))
    message_timeout_s: float = Field(30.0, gt=0, le=86_400, description=(
        "a tree not complete after this many seconds fails"))
    max_spout_pending: int | None = Field(10_000, ge=1, description=(
        "trees in flight per task before emitting pauses"))
    max_uncommitted_offsets: int | None = Field(100_000, ge=1, description=(
        "offsets ahead of the commit point per partition before fetching pauses"))
    retry_initial_ms: int = Field(100, ge=0, description="the first replay's delay")
    retry_multiplier: float = Field(2.0, ge=1, description="each replay's delay over the "
                                    "one before")
    retry_max_ms: int = Field(10_000, ge=0, description="the longest replay delay")
    max_retries: int | None = Field(5, ge=0, description=(
        "replays of a failed message before it is dead-lettered"))
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka brokers")
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    metrics_port: int = Field(0, ge=0, le=65535, description=(
        "serve /metrics and /errors here (0: no server)"))
    metrics_host: str = Field("127.0.0.1", description=(
        "the address /metrics listens on (its worker gives its own)"))
    dlq_topic: str | None = Field(None, description=(
        "where dead letters go (default squall.<topology>.dlq)"))
    commit_interval_s: float = Field(1.0, gt=0, description=(
        "how often completed offsets are committed"))
    max_poll_records: int = Field(5_000, ge=1, description="source records taken per poll")
    # librdkafka's queued.min.messages: its 100,000 held a soak's lag in the spout's memory,
    # ~350 bytes a record, not in the broker's. With the backoff below it paces the
    # fetches while records keep coming: on Apache Kafka the word count's p99 at half rate
    # was 0.47 s against 0.84 with 10,000 and 5 ms, its rate within the noise (0.93x;
    # docs/performance.md, "Client settings on Apache Kafka").
    read_ahead_records: int = Field(1_000, ge=1, description=(
        "source records fetched ahead of the spout, per partition"))
    # librdkafka's fetch.queue.backoff.ms (its second held the spout up).
    fetch_backoff_ms: int = Field(40, ge=0, le=10_000, description=(
        "how long a partition whose read-ahead is full waits before it is fetched again"))
    # At max spout pending the spout waits on its results partition alone: this bounds what
    # the wait adds to a tree's round trip.
    fetch_wait_max_ms: int = Field(FETCH_WAIT_MS, ge=0, le=10_000, description=(
        "the longest a fetch waits for new records (Kafka's fetch.wait.max.ms)"))
    # More: fewer, larger answers for the spout to handle, and every tree waits up to
    # fetch_wait_max_ms more when the rate is low.
    fetch_min_bytes: int = Field(1, ge=1, le=64 << 20, description=(
        "new source data a fetch waits for, up to the fetch wait (Kafka's fetch.min.bytes)"))
    # Longer: fewer, larger batches, and every tree delayed by up to as much at low rates.
    producer_linger_ms: int = Field(5, ge=0, le=10_000, description=(
        "how long emitted tuples and acker inits are held to go out as one batch per "
        "partition (Kafka's linger.ms)"))
    create_topics: bool = Field(True, description="create the internal topics if missing")
    # "bolts": the ackers' timeout clock, which waits for slow bolts
    # (squall/core/reliability/progress.py); "wall": this process's own, Storm's.
    timeout_clock: Literal["bolts", "wall"] = Field("bolts", description=(
        "the backstop's clock: bolts (the ackers') or wall"))

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        component = data.get("component", "spout") if isinstance(data, dict) else "spout"
        return from_topology_file(data, lambda spec: from_topology(spec, component),
                                  "SQUALL_SPOUT_", PLACEMENT, {"edges": "--edge"})

    @field_validator("topics", "fields", "edges", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        if isinstance(v, str):
            return tuple(x for x in v.replace(" ", ",").split(",") if x) if "," in v or " " in v \
                else (v,)
        return v

    @field_validator("topology", "component")
    @classmethod
    def _names(cls, v: str) -> str:
        return check_name("topology or component", v)

    @field_validator("start")
    @classmethod
    def _start(cls, v: str) -> str:
        try:
            check_start(v, "the spout")
        except TopologyError as e:
            raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _check(self) -> SpoutSettings:
        if not self.topics:
            raise ValueError("at least one source topic is needed")
        bad = [t for t in self.tasks if not 0 <= t < self.num_tasks]
        if not self.tasks or bad:
            raise ValueError(
                f"spout tasks {list(self.tasks)} must be within 0..{self.num_tasks - 1}")
        self.edge_list()
        self.retry()
        return self

    @property
    def timeout_ms(self) -> int:
        return int(self.message_timeout_s * 1000)

    def edge_list(self) -> tuple[Edge, ...]:
        return tuple(parse_edge(e, self.topology, self.component, self.num_tasks)
                     for e in self.edges)

    def retry(self) -> RetrySchedule:
        return RetrySchedule(self.retry_initial_ms, self.retry_multiplier, self.retry_max_ms,
                             self.max_retries)

    @property
    def clients(self) -> KafkaClients:
        """This service's Kafka clients: its brokers and the user's properties."""
        return KafkaClients(self.bootstrap_servers, self.kafka)


def from_topology(spec: TopologySpec, component: str) -> dict[str, Any]:
    """The settings a topology gives one of its spouts."""
    s = spec.component(component)
    if not isinstance(s, SpoutSpec):
        raise ConfigError(f"{component!r} is not a spout of topology {spec.name!r}")
    out: dict[str, Any] = {
        "topology": spec.name, "component": s.name, "topics": s.topics,
        "num_tasks": s.parallelism, "num_ackers": spec.ackers, "scheme": s.scheme,
        "start": s.start,
        "fields": s.fields, "guarantee": spec.guarantee,
        "edges": tuple(edge_flag(e) for e in spec.edges_from(s.name)),
        "message_timeout_s": spec.message_timeout_s, "max_retries": spec.retry.max_retries,
        "retry_initial_ms": spec.retry.initial_delay_ms,
        "retry_multiplier": spec.retry.multiplier, "retry_max_ms": spec.retry.max_delay_ms}
    if spec.max_spout_pending:
        out["max_spout_pending"] = spec.max_spout_pending
    return out


def parse_args(argv: Sequence[str] | None = None) -> SpoutSettings:
    p = settings_parser(
        SpoutSettings, "squall spout",
        "Run spout tasks: read source partitions, emit tuples, commit offsets once their "
        "trees complete. Every flag can also be set as SQUALL_SPOUT_<NAME>.",
        {"edges": ("--edge", {"action": "append"})})
    return load_settings(SpoutSettings, p, argv, "spout")
