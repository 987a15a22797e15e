"""The spout service's settings: env (``SQUALL_SPOUT_*``) and flags, validated once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.common import TaskIds, from_topology_file, load_settings
from squall.core.client_properties import ClientProperties
from squall.core.errors import ConfigError, TopologyError
from squall.core.grouping import Edge, edge_flag, parse_edge
from squall.core.retry import RetrySchedule
from squall.core.spec_checks import check_start
from squall.core.topics import check_name
from squall.core.topology import Guarantee, SpoutSpec, TopologySpec
from squall.kafka import FETCH_WAIT_MS
from squall.kafka_clients import KafkaClients

#: What the worker gives a spout process of a topology: which component, how many tasks.
PLACEMENT = frozenset({"component", "num_tasks"})


class SpoutSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SQUALL_SPOUT_", frozen=True, extra="forbid")

    # The topology file gives every setting below that the topology decides (its name,
    # the spout's topics, scheme, edges, the guarantee, timeouts, retries); a flag or env
    # variable given as well wins.
    topology_file: Path | None = None
    topology: str
    component: str = "spout"
    topics: tuple[str, ...] = Field(description="source topics")
    tasks: TaskIds = Field(description="spout task ids this process runs")
    num_tasks: int = Field(ge=1, description="spout parallelism")
    num_ackers: int = Field(1, ge=0, description="0: every tuple is acked at once")
    edges: tuple[str, ...] = ()
    scheme: str = "text"
    # Where a partition starts when this spout's group committed nothing in it (a new
    # topology): earliest, latest, or group:<id> (where that consumer group got to).
    start: str = "earliest"
    fields: tuple[str, ...] = ()
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    message_timeout_s: float = Field(30.0, gt=0, le=86_400)
    max_spout_pending: int | None = Field(10_000, ge=1)
    max_uncommitted_offsets: int | None = Field(100_000, ge=1)
    retry_initial_ms: int = Field(100, ge=0)
    retry_multiplier: float = Field(2.0, ge=1)
    retry_max_ms: int = Field(10_000, ge=0)
    max_retries: int | None = Field(5, ge=0)
    bootstrap_servers: str = "127.0.0.1:9092"
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    metrics_port: int = Field(0, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"
    dlq_topic: str | None = None
    commit_interval_s: float = Field(1.0, gt=0)
    max_poll_records: int = Field(5_000, ge=1)
    # Source records the consumer keeps fetched ahead of the spout, per partition
    # (librdkafka's queued.min.messages; its 100,000 held a lag of a soak in the spout's
    # memory, ~350 bytes a record, not in the broker's).
    read_ahead_records: int = Field(10_000, ge=1)
    # How long a partition whose read-ahead is full waits before it is fetched again
    # (librdkafka's fetch.queue.backoff.ms; its second held the spout up). With a small
    # read-ahead, it paces the fetches: one a backoff while records keep coming.
    fetch_backoff_ms: int = Field(5, ge=0, le=10_000)
    # How long the broker may hold a fetch with nothing new. At max spout pending the
    # spout waits on its results partition alone: this bounds what the wait adds to a
    # tree's round trip (librdkafka's 500 ms default halved the spout's throughput).
    fetch_wait_max_ms: int = Field(FETCH_WAIT_MS, ge=0, le=10_000)
    # How much new source data a fetch waits for, up to fetch_wait_max_ms (Kafka's
    # fetch.min.bytes; 1, its default: a fetch returns with the first record). More: fewer,
    # larger answers for the spout to handle, and every tree waits up to fetch_wait_max_ms
    # more when the rate is low.
    fetch_min_bytes: int = Field(1, ge=1, le=64 << 20)
    # How long the producer holds what the spout emits (edge tuples, acker inits) to send
    # it as one batch per partition (Kafka's linger.ms; librdkafka's default). Longer:
    # fewer, larger batches, and every tree delayed by up to as much at low rates.
    producer_linger_ms: int = Field(5, ge=0, le=10_000)
    # How long a gap in a source partition's offsets is fetched again before the spout
    # moves past it (squall/core/contiguity.py). 0: at once, as Kafka's consumers do: on
    # Kafka a gap in a source is real (transaction markers, compaction). For a broker that
    # may show a record batch before an earlier one (the development stack sets 2000:
    # squall/dev/profile.py).
    source_gap_hold_ms: int = Field(0, ge=0, le=600_000)
    create_topics: bool = True
    # The backstop's clock: "bolts" (default) the ackers' timeout clock, which waits for
    # slow bolts (squall/core/progress.py); "wall" this process's own, Storm's.
    timeout_clock: Literal["bolts", "wall"] = "bolts"

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        component = data.get("component", "spout") if isinstance(data, dict) else "spout"
        return from_topology_file(data, lambda spec: from_topology(spec, component),
                                  "SQUALL_SPOUT_", PLACEMENT)

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
        return tuple(parse_edge(e, self.topology, self.component) for e in self.edges)

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
    p = argparse.ArgumentParser(
        prog="squall spout",
        description="Run spout tasks: read source partitions, emit tuples, commit offsets once "
        "their trees complete. Every flag can also be set as SQUALL_SPOUT_<NAME>.",
    )
    p.add_argument("--topology-file", help="the topology, JSON or YAML: gives every setting "
                   "the topology decides, which a flag or variable may then not set again")
    p.add_argument("--topology", help="topology id")
    p.add_argument("--component", help="spout component name (default spout)")
    p.add_argument("--topics", help="source topics, comma separated")
    p.add_argument("--tasks", help="spout task ids this process runs, e.g. 0,1")
    p.add_argument("--num-tasks", type=int, help="spout parallelism")
    p.add_argument("--num-ackers", type=int, help="acker tasks (0: ack at once)")
    p.add_argument("--edge", dest="edges", action="append",
                   help="subscriber target:partitions[:grouping[:fields]][@stream] (repeatable)")
    p.add_argument("--scheme", help="raw, text, json or module:Class")
    p.add_argument("--start", help="where a partition starts when the spout's group "
                   "committed nothing in it: earliest (default), latest, or group:<id> (where "
                   "that consumer group got to)")
    p.add_argument("--fields", help="declared output fields (json scheme)")
    p.add_argument("--guarantee", choices=[g.value for g in Guarantee],
                   help="at_least_once (default: trees tracked, replayed on failure), "
                   "at_most_once or no_guarantee")
    p.add_argument("--message-timeout-s", type=float,
                   help="a tree not complete after this many seconds fails (default 30)")
    p.add_argument("--max-spout-pending", type=int,
                   help="trees in flight per task before emitting pauses (default 10000)")
    p.add_argument("--max-uncommitted-offsets", type=int,
                   help="offsets ahead of the commit point per partition before fetching "
                   "pauses")
    p.add_argument("--max-retries", type=int,
                   help="replays of a failed message before it is dead-lettered")
    p.add_argument("--retry-initial-ms", type=int,
                   help="the first replay's delay (default 100; doubles each time)")
    p.add_argument("--retry-max-ms", type=int,
                   help="the longest replay delay (default 10000)")
    p.add_argument("--bootstrap-servers", help="Kafka brokers (default 127.0.0.1:9092)")
    p.add_argument("--metrics-port", type=int,
                   help="serve /metrics here (default 0: any free port)")
    p.add_argument("--dlq-topic", help="where dead letters go (default "
                   "squall.<topology>.dlq)")
    p.add_argument("--commit-interval-s", type=float,
                   help="how often completed offsets are committed (default 1.0)")
    p.add_argument("--fetch-wait-max-ms", type=int,
                   help="the longest a fetch waits for new records (Kafka's "
                   f"fetch.wait.max.ms; default {FETCH_WAIT_MS})")
    p.add_argument("--fetch-min-bytes", type=int,
                   help="new source data a fetch waits for, up to --fetch-wait-max-ms "
                        "(Kafka's fetch.min.bytes; default 1)")
    p.add_argument("--producer-linger-ms", type=int,
                   help="how long emitted tuples and acker inits are held to go out as one "
                        "batch per partition (Kafka's linger.ms; default 5)")
    p.add_argument("--read-ahead-records", type=int,
                   help="source records fetched ahead of the spout, per partition "
                        "(default 10000)")
    p.add_argument("--fetch-backoff-ms", type=int,
                   help="how long a partition whose read-ahead is full waits before it is "
                        "fetched again (librdkafka's fetch.queue.backoff.ms; default 5)")
    p.add_argument("--source-gap-hold-ms", type=int,
                   help="how long a gap in a source partition's offsets is fetched again "
                        "before the spout moves past it (default 0: at once, as Kafka's "
                        "consumers do)")
    p.add_argument("--timeout-clock", choices=["bolts", "wall"],
                   help="the backstop's clock: bolts (the ackers', default) or wall")
    return load_settings(SpoutSettings, p, argv, "spout")
