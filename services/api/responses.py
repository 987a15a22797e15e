"""The response bodies of Squall's own routes as pydantic models (Storm UI's are in
services/api/storm_responses.py): what OpenAPI shows, and what the routes' answers are
checked against."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.api.storm_responses import PlacementRow


class View(BaseModel):
    # A field a route returns and the model lacks fails the answer, rather than vanish.
    model_config = ConfigDict(extra="forbid")


class Liveness(View):
    status: str = Field(description="``ok`` while the process serves")


class Readiness(View):
    ready: bool
    leader: bool = Field(description="whether this replica leads the control plane")
    checks: dict[str, str] = Field(description="per dependency: ``ok`` or ``unavailable``")


class TargetGroup(View):
    """A Prometheus HTTP service discovery target group."""

    targets: list[str]
    labels: dict[str, str]


class TopologyItem(View):
    id: str
    name: str
    status: str
    version: int = Field(description="the record's version: the ETag of its writes")
    uptime_s: float


class TopologyView(TopologyItem):
    submitted_ms: int
    deadline_ms: int | None = Field(description="when a kill's or rebalance's wait ends")
    pending_parallelism: dict[str, int] = Field(
        description="a rebalance's new parallelism, applied when its wait ends")
    spec: dict[str, Any] = Field(description="the spec as submitted (POST /topologies)")
    state_of: str | None = Field(description="the killed submission whose state it keeps")
    assignment: list[PlacementRow] = Field(description="where its tasks run")
    links: dict[str, str | None] = Field(description="spark_ui: its bolts job's Spark UI; "
                                         "grafana: its dashboard (with --grafana-url)")
    stats: dict[str, dict[str, float]] = Field(
        description="per component, its processes' numbers summed over their lifetime")


class MessageTrace(View):
    """Where one source message is (squall/message_trace.py)."""

    topology: str
    topic: str
    partition: int
    offset: int
    spout: str = Field(description="the spout that reads its topic")
    state: str = Field(description="dead_lettered, committed, done, pending, failed, "
                       "dead_lettering, unread, not_in_topic or unknown")
    summary: str = Field(description="the state in a sentence")
    committed_offset: int = Field(description="where the spout's group committed (-1: never)")
    dead_letter: dict[str, Any] | None = Field(
        description="its dead letter: reason, attempts, component, dlq_offset, time_ms")
    where: dict[str, Any] | None = Field(
        description="what the spout task reading its partition knows: state, failures, "
                    "since_ms, retry_ms, root, last_failure")
    tree: dict[str, Any] | None = Field(
        description="its tree in the acker (pending only): open, acker_task, failed")


class LetterRow(View):
    dlq_offset: int = Field(description="its offset in the dead-letter topic: its id")
    time_ms: int
    reason: str
    attempts: int
    component: str
    topic: str = Field(description="where it came from")
    partition: int
    offset: int
    size: int = Field(description="payload bytes")
    replayed_to: str | None = Field(description="where its replay landed, if replayed")


class DeadLetters(View):
    total: int
    by_reason: dict[str, int] = Field(description="how many, by reason up to its first colon")
    letters: list[LetterRow]
    scanned_from: int = Field(description="the first offset of the dead-letter topic read")
    scanned_to: int = Field(description="the offset after the last one read")
    older: int = Field(description="how many older letters were not read (see before=)")


class DeadLetter(LetterRow):
    payload_text: str | None = Field(description="the payload, if it is UTF-8")
    payload_base64: str
    key_base64: str | None
    headers: dict[str, str]


class Replayed(View):
    replayed: list[LetterRow]
    already: list[LetterRow] = Field(description="replayed before: not sent again")
    refused: list[dict[str, Any]] = Field(description="not replayed, and why")
    would_replay: list[LetterRow] = Field(description="a dry run: what would have been sent")


class TeardownView(View):
    """A killed topology's teardown: what it removed and what it kept."""

    id: str
    name: str
    since_ms: int
    done_ms: int | None
    done: bool
    topics: list[str] = Field(description="topics removed")
    groups: list[str] = Field(description="consumer groups removed")
    kept: list[str] = Field(description="topics kept (the dead letters, unless purged)")
    error: str = Field(description="the last attempt's trouble; tried again")
    purge_state: bool
    spec: dict[str, Any] | None = Field(description="the killed spec")
    offsets: dict[str, dict[str, dict[int, int]]] = Field(
        description="per spout, topic and partition: where its group had committed")
    summary: str


class EndpointView(BaseModel):
    """A process a worker runs, at its metrics endpoint (what a worker of another version
    publishes besides is left out)."""

    topology: str
    kind: str
    component: str
    url: str
    startedMs: int | None = None
    restarts: int | None = None
    crashLooping: bool | None = None
    lastExit: str | None = None
    tasks: list[int] | None = None
    #: being stopped (a spout draining): its tasks move once it exited
    stopping: bool | None = None


class WorkerPlacement(View):
    topology: str
    kind: str
    component: str
    tasks: list[int]


class WorkerView(View):
    id: str
    kind: str
    capacity: int
    host: str
    pid: int
    started_ms: int
    running: list[EndpointView]
    placements: list[WorkerPlacement]


class ErrorRow(View):
    component: str
    task: int = Field(description="the task that raised (-1: not one task's)")
    time_ms: int
    error: str
    host: str
    port: int
    lapsed_s: int = Field(description="seconds since")


class TopologyErrors(View):
    """The last errors the topology's processes reported, newest first."""

    errors: list[ErrorRow]


class LogChunk(View):
    worker: str
    process: str = Field(description="the task process's name on its worker")
    tasks: list[int]
    size: int = Field(description="the log's size in bytes")
    offset: int = Field(description="where this chunk starts")
    next: int = Field(description="where the next chunk starts (follow with ?offset=)")
    text: str


class ComponentLogs(View):
    component: str
    processes: list[LogChunk]


class HistoryPoint(View):
    t_ms: int
    emitted_per_s: float
    acked_per_s: float
    failed_per_s: float
    replayed_per_s: float
    dead_lettered_per_s: float
    latency_p50_ms: float | None = Field(description="complete latency (None: no tree "
                                         "completed in the interval)")
    latency_p99_ms: float | None


class LagHistoryPoint(View):
    t_ms: int
    messages: int = Field(description="over all the spouts' partitions")
    seconds: float = Field(description="the oldest waiting message's age")


class TopologyHistory(View):
    """The topology's spouts' numbers over a window, for charts."""

    window: str
    points: list[HistoryPoint]
    lag: list[LagHistoryPoint]
