"""Storm UI's per-component response bodies (``/api/v1/topology/:id/...``) as pydantic
models: a component's page, the numbers by stream, the lag and the visualization. The
topology's and the cluster's are in services/api/storm_responses.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from services.api.storm_responses import (
    Body,
    BoltNumbers,
    BoltRow,
    BoltWindow,
    SpoutNumbers,
    SpoutRow,
    SpoutWindow,
)


class StreamValue(Body):
    stream_id: str
    value: int


class StreamLatency(Body):
    stream_id: str
    value: str


class InputValue(StreamValue):
    component_id: str


class InputLatency(StreamLatency):
    component_id: str


class SpoutStreams(Body):
    id: str
    emitted: list[StreamValue]
    transferred: list[StreamValue]
    acked: list[StreamValue]
    failed: list[StreamValue]
    complete_ms_avg: list[StreamLatency]


class BoltStreams(Body):
    id: str
    emitted: list[StreamValue]
    transferred: list[StreamValue]
    acked: list[InputValue]
    failed: list[InputValue]
    process_ms_avg: list[InputLatency]
    executed: list[InputValue]
    executed_ms_avg: list[InputLatency]


class TopologyMetrics(Body):
    window: str
    window_hint: str = Field(alias="window-hint")
    spouts: list[SpoutStreams]
    bolts: list[BoltStreams]


class PartitionLag(Body):
    consumerCommittedOffset: int
    logHeadOffset: int
    lag: int
    lagSeconds: float = Field(description="age of the oldest message not yet committed "
                              "(Squall)")


class SpoutLag(Body):
    spoutId: str
    spoutType: Literal["KAFKA"]
    #: per topic, per partition
    spoutLagResult: dict[str, dict[str, PartitionLag]]


#: ``/topology/:id/lag``: per spout.
TopologyLag = dict[str, SpoutLag]


class VisualizationInput(Body):
    component: str = Field(alias=":component")
    stream: str = Field(alias=":stream")
    sani_stream: str = Field(alias=":sani-stream")
    grouping: str = Field(alias=":grouping")


class VisualizationProcess(Body):
    host: str = Field(alias=":host")
    port: int = Field(alias=":port")
    uptime_secs: int = Field(alias=":uptime_secs")
    #: per window, per sanitized stream
    transferred: dict[str, dict[str, int]] = Field(alias=":transferred")


class VisualizationNode(Body):
    type: Literal["spout", "bolt"] = Field(alias=":type")
    capacity: float = Field(alias=":capacity")
    latency: float = Field(alias=":latency")
    transferred: int = Field(alias=":transferred")
    stats: list[VisualizationProcess] = Field(alias=":stats")
    link: str = Field(alias=":link")
    inputs: list[VisualizationInput] = Field(alias=":inputs")


#: ``/topology/:id/visualization``: per component (Storm's UI's undocumented shape).
Visualization = dict[str, VisualizationNode]


class ComponentError(Body):
    errorTime: int = Field(description="milliseconds since the epoch")
    errorHost: str
    errorPort: int | None
    error: str
    errorWorkerLogLink: str
    errorLapsedSecs: int


class ExecutorStats(Body):
    """Storm's executor is a thread; here a process running some of the component's tasks."""

    id: str
    host: str
    port: int
    uptime: str
    uptimeSeconds: int
    workerLogLink: str


class SpoutExecutorStats(ExecutorStats, SpoutNumbers):
    pass


class BoltExecutorStats(ExecutorStats, BoltNumbers):
    pass


class OutputStats(Body):
    stream: str
    emitted: int
    transferred: int


class SpoutOutputStats(OutputStats):
    completeLatency: str
    acked: int
    failed: int


class InputStats(Body):
    component: str
    encodedComponentId: str
    stream: str
    executeLatency: str
    processLatency: str
    executed: int
    acked: int
    failed: int


class Page(Body):
    user: str
    id: str
    encodedId: str
    name: str
    executors: int
    tasks: int
    topologyId: str
    encodedTopologyId: str
    topologyStatus: str
    window: str
    windowHint: str
    debug: bool
    samplingPct: float
    eventLogLink: str
    profilingAndDebuggingCapable: bool
    profileActionEnabled: bool
    profilerActive: list[str]
    schedulerDisplayResource: bool
    requestedMemOnHeap: float
    requestedMemOffHeap: float
    requestedCpu: float
    componentErrors: list[ComponentError]


class SpoutPage(SpoutRow, Page):
    componentType: Literal["spout"]
    outputStats: list[SpoutOutputStats]
    executorStats: list[SpoutExecutorStats]
    spoutSummary: list[SpoutWindow]


class BoltPage(BoltRow, Page):
    componentType: Literal["bolt"]
    outputStats: list[OutputStats]
    executorStats: list[BoltExecutorStats]
    boltStats: list[BoltWindow]
    inputStats: list[InputStats]


#: ``/topology/:id/component/:component``: a spout's page or a bolt's (``__acker`` too).
ComponentPage = Annotated[SpoutPage | BoltPage, Field(discriminator="componentType")]
