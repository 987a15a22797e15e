"""Storm UI's response bodies (``/api/v1``) of the cluster and a topology as pydantic
models, for OpenAPI and for checking what the routes return; a component's are in
services/api/storm_component_responses.py. Storm's fields with Storm's types (its
``docs/STORM-UI-REST-API.md``), and Squall's own beside them (marked so). Storm's names
are kept as they are, camelCase and hyphens included; counts are integers and latencies
strings with three decimals, as Storm returns them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Body(BaseModel):
    # A field a route returns and the model lacks fails the answer (a test finds it), rather
    # than vanish from it unseen.
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


# ----- the cluster ------------------------------------------------------------------------

class Resources(Body):
    #: Squall schedules tasks, not memory or CPU (docs/storm-migration.md)
    schedulerDisplayResource: bool = False


class ClusterSummary(Resources):
    stormVersion: str
    squallVersion: str
    supervisors: int
    slotsTotal: int
    slotsUsed: int
    slotsFree: int
    topologies: int
    executorsTotal: int
    tasksTotal: int
    totalMem: float
    totalCpu: float
    availMem: float
    availCPU: float
    memAssignedPercentUtil: float
    cpuAssignedPercentUtil: float
    leader: str | None = Field(description="the leading API replica's URL (Squall)")
    thisReplicaLeads: bool = Field(description="whether this replica leads (Squall)")
    zookeeper: str = Field(description="this replica's ZooKeeper session state (Squall)")
    unassignedTasks: list[str] | None = Field(description=(
        "tasks no live worker of their kind has room for, as topology/component/task; "
        "known to the leader only, null elsewhere (Squall)"))


class Nimbus(Body):
    host: str
    port: int
    status: Literal["Leader", "Not a Leader"]
    version: str
    nimbusUpTime: str
    nimbusUpTimeSeconds: str
    nimbusLogLink: str


class NimbusSummary(Body):
    nimbuses: list[Nimbus]


class SupervisorRow(Body):
    id: str
    host: str
    kind: str = Field(description="the kind of processes the worker runs (Squall)")
    uptime: str
    uptimeSeconds: int
    slotsTotal: int
    slotsUsed: int
    totalMem: float
    totalCpu: float
    usedMem: float
    usedCPU: float
    version: str


class SupervisorSummary(Resources):
    supervisors: list[SupervisorRow]


class WorkerRow(Body):
    """Storm's worker, a process: here each process a worker runs for a topology."""

    supervisorId: str
    host: str
    port: int
    topologyId: str
    topologyName: str
    executorsTotal: int
    componentNumTasks: dict[str, int]
    uptime: str
    uptimeSeconds: int
    workerLogLink: str
    assignedMemOnHeap: float
    assignedMemOffHeap: float
    assignedCpu: float


class SupervisorPage(SupervisorSummary):
    workers: list[WorkerRow]


class HistorySummary(Body):
    topo_history: list[str] = Field(alias="topo-history")


#: ``/cluster/configuration``: the cluster's settings by Storm's (and Squall's) names.
ClusterConfiguration = dict[str, str | int | float | list[str]]


class HostPort(Body):
    host: str
    port: int


class TopologyWorkers(Body):
    hostPortList: list[HostPort]
    logviewerPort: int


class TopologyRow(Body):
    id: str
    name: str
    status: str
    uptime: str
    uptimeSeconds: int
    tasksTotal: int
    executorsTotal: int
    workersTotal: int
    replicationCount: int


class TopologySummary(Resources):
    topologies: list[TopologyRow]


class TopologyOperation(Body):
    topologyOperation: str
    topologyId: str
    status: Literal["success"]


# ----- a topology's numbers ------------------------------------------------------------------

class SpoutNumbers(Body):
    emitted: int
    transferred: int
    acked: int
    failed: int
    completeLatency: str


class BoltNumbers(Body):
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    executeLatency: str
    processLatency: str
    capacity: str


class Windowed(Body):
    windowPretty: str
    window: str


class SpoutWindow(SpoutNumbers, Windowed):
    pass


class BoltWindow(BoltNumbers, Windowed):
    pass


class LastError(Body):
    lastError: str
    errorHost: str
    errorPort: int | None
    errorWorkerLogLink: str
    errorTime: int | None = Field(description="seconds since the epoch")
    errorLapsedSecs: int | None


class ProcessHealth(Body):
    """A component's processes as their workers see them (Squall)."""

    restarts: int
    crashLooping: bool
    lastExit: str


class SpoutRow(SpoutNumbers, LastError, ProcessHealth):
    spoutId: str
    encodedSpoutId: str
    tasks: int
    executors: int
    replayed: int = Field(description="source messages emitted again (Squall)")
    deadLettered: int = Field(description="source messages dead-lettered (Squall)")
    pending: int = Field(description="source messages in flight (Squall)")
    lag: int = Field(description="source messages not yet read (Squall)")


class BoltRow(BoltNumbers, LastError, ProcessHealth):
    boltId: str
    encodedBoltId: str
    tasks: int
    executors: int
    errors: int = Field(description="exceptions raised by the bolt's code (Squall)")
    running: bool | None = Field(None, description=(
        "whether the bolt's query runs (Squall; null for __acker)"))
    microBatches: int | None = Field(None, description="micro-batches run (Squall)")
    inputRows: int | None = Field(None, description="edge messages read (Squall)")


class AckerRow(LastError, ProcessHealth):
    """The ackers (Squall; Storm shows them as the ``__acker`` bolt with ``?sys=1``)."""

    componentId: str
    tasks: int
    records: int
    pendingTrees: int
    treesAcked: int
    treesFailed: int
    treesTimedOut: int


class PlacementRow(Body):
    worker: str
    component: str
    kind: str
    tasks: list[int]


class EdgeRow(Body):
    from_: str = Field(alias="from")
    to: str
    stream: str
    grouping: str
    fields: list[str]


class TopologyPage(Body):
    id: str
    encodedId: str
    name: str
    status: str
    uptime: str
    uptimeSeconds: int
    msgTimeout: int
    tasksTotal: int
    workersTotal: int
    executorsTotal: int
    window: str
    windowHint: str
    schedulerDisplayResource: bool
    replicationCount: int
    debug: bool
    samplingPct: float
    topologyStats: list[SpoutWindow]
    workers: list[WorkerRow]
    spouts: list[SpoutRow]
    bolts: list[BoltRow]
    acker: AckerRow
    assignment: list[PlacementRow] = Field(description="where its tasks run (Squall)")
    edges: list[EdgeRow] = Field(description="the graph's edges (Squall)")
    configuration: dict[str, str | int | float]
