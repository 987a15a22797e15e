"""What a Spark Python worker keeps between micro-batches: its bolt tasks (their executors,
persistent aggregates and state) and its queries' suspects, each built once and looked up
by the task or query; and the topology, parsed once.

Bolt tasks live as long as the Python worker, which Spark reuses: a task's Kafka clients,
database connections and prepared bolt serve its next micro-batch here. What must outlive
the worker is in the state database (services/bolts/task_state.py) or beside the checkpoint.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
from collections.abc import Callable, Sequence

from services.bolts import clients
from services.bolts.aggregate import AggregateTask
from services.bolts.kafka_sink import SinkTask
from services.bolts.runtime import heap
from services.bolts.suspects import Suspects
from services.bolts.task_state import TaskState
from squall.backends import answers, open_kv, unavailable
from squall.core.bolt_api.bolt import TaskContext
from squall.core.tasks.exec_result import ExecResult
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.topics import spout_group
from squall.core.topology.trident import QUERY_CLASS, QuerySpec, stored_state, trident_spec
from squall.core.wire.tuple_batch import TupleBatch
from squall.wallclock import SystemClock

log = logging.getLogger("squall.bolts")
_EXECUTORS: dict[tuple[str, str, int], BoltExecutor] = {}
_SPECS: dict[str, TopologySpec] = {}


def spec_of(spec_json: str) -> TopologySpec:
    """The topology of a JSON document, parsed once."""
    spec = _SPECS.get(spec_json)
    if spec is None:
        spec = _SPECS[spec_json] = TopologySpec.from_text(spec_json)
    return spec


def executor(spec: TopologySpec, bolt: BoltSpec, task: int, state_url: str = ""
             ) -> BoltExecutor:
    """The task's executor in this worker (built, and its bolt prepared, on first use)."""
    key = (spec.name, bolt.name, task)
    ex = _EXECUTORS.get(key)
    if ex is None:
        ex = _EXECUTORS[key] = new_executor(spec, bolt, task, state_url)
        heap.grew()
    return ex


def new_executor(spec: TopologySpec, bolt: BoltSpec, task: int, state_url: str = ""
                 ) -> BoltExecutor:
    """A task's executor, its bolt built and prepared."""
    module, _, cls = bolt.cls.partition(":")
    instance = getattr(importlib.import_module(module), cls)()
    ctx = TaskContext(spec.name, bolt.name, task, bolt.parallelism)
    conf = {**bolt.config, "squall.state_url": state_url}
    if bolt.cls == QUERY_CLASS:  # where the queried component keeps its state
        target = spec.component(bolt.config["state"])
        assert isinstance(target, BoltSpec)
        t = trident_spec(target.cls, target.config, f"bolt {target.name!r}")
        assert not isinstance(t, QuerySpec)
        conf["squall.queried"] = stored_state(spec.state_id, target.name, t)
    return BoltExecutor(instance, ctx, spec.edges_from(bolt.name), conf, clock=SystemClock(),
                        outputs=bolt.outputs,
                        inputs=[f"{i.component}/{i.stream}" for i in bolt.inputs],
                        message_timeout_s=spec.message_timeout_s)


_AGGREGATES: dict[tuple[str, str, int], AggregateTask] = {}


def aggregate(spec: TopologySpec, bolt: BoltSpec, task: int, url: str,
              bootstrap: str) -> AggregateTask:
    """A persistent aggregate's task lives as long as the Python worker (its connection)."""
    key = (spec.name, bolt.name, task)
    agg = _AGGREGATES.get(key)
    if agg is None:
        clock = SystemClock()
        agg = _AGGREGATES[key] = AggregateTask(spec, bolt, task, url, clock,
                                               _spouts_committed(spec, bootstrap, clock))
    return agg


def run_aggregate(spec: TopologySpec, bolt: BoltSpec, task: int, url: str, bootstrap: str,
                  batches: Sequence[TupleBatch], sleep: Callable[[float], None] = time.sleep
                  ) -> ExecResult:
    """The aggregate's task on ``batches``, waiting out a database that does not answer:
    the task is dropped with its connection, the database asked again (every 0.5 s to 2 s)
    until it answers, and the batch applied anew by a fresh task, as when Spark runs a task
    again (its txid and applied records make a first run that committed unseen harmless).
    The micro-batch waits meanwhile: its trees with it (their timeouts count processed
    time), none replayed or dead-lettered; the query watch bounds the wait."""
    key = (spec.name, bolt.name, task)
    waited_from: float | None = None
    while True:
        try:
            res = aggregate(spec, bolt, task, url, bootstrap).run(batches)
        except Exception as e:
            if not unavailable(e):
                raise
            gone = _AGGREGATES.pop(key, None)
            if gone is not None:
                gone.close()
            if waited_from is None:
                waited_from = time.monotonic()
                log.error("bolt %r task %d: the state database does not answer (%s); the "
                          "micro-batch waits for it", bolt.name, task, e)
            _wait_for(_aggregate_url(spec, bolt, url), f"bolt {bolt.name!r} task {task}",
                      sleep)
            continue
        if waited_from is not None:
            log.warning("bolt %r task %d: the state database answers again after %.1f s; "
                        "the micro-batch goes on", bolt.name, task,
                        time.monotonic() - waited_from)
        return res


def _aggregate_url(spec: TopologySpec, bolt: BoltSpec, default_url: str) -> str:
    """The database an aggregate's state is in: its spec's, else the job's."""
    t = trident_spec(bolt.cls, bolt.config, f"bolt {bolt.name!r}")
    assert not isinstance(t, QuerySpec)
    return stored_state(spec.state_id, bolt.name, t).url or default_url


_SINKS: dict[tuple[str, str, int], SinkTask] = {}


def kafka_sink(spec: TopologySpec, bolt: BoltSpec, task: int, url: str,
               bootstrap: str) -> SinkTask:
    """A Kafka sink's task lives as long as the Python worker (its clients)."""
    key = (spec.name, bolt.name, task)
    sink = _SINKS.get(key)
    if sink is None:
        clock = SystemClock()
        sink = _SINKS[key] = SinkTask(spec, bolt, task, url, bootstrap, clock,
                                      _spouts_committed(spec, bootstrap, clock))
    return sink


def _spouts_committed(spec: TopologySpec, bootstrap: str, clock: SystemClock
                      ) -> Callable[[], dict[str, int]]:
    """The topology's spouts' committed offsets, read when asked (cached a while): what
    lets a task forget the messages no replay can bring back."""
    groups = {spout_group(spec.name, s.name): s.topics for s in spec.spouts}
    return lambda: clients.spout_committed(bootstrap, groups, clock.now_ms() / 1000)


_TASK_STATES: dict[int, TaskState] = {}


def task_state(spec: TopologySpec, bolt: BoltSpec, ex: BoltExecutor, url: str, task: int
               ) -> TaskState | None:
    """What keeps a stateful task's state current in this worker (one per executor)."""
    if ex.state is None or not url:
        return None
    kv = _TASK_STATES.get(id(ex))
    if kv is None:
        _wait_for(url, f"bolt {bolt.name!r} task {task}")
        kv = _TASK_STATES[id(ex)] = TaskState(
            open_kv(url, f"{spec.state_id}.{bolt.name}", task, bolt.parallelism), ex.state)
    return kv


def task_state_lost(ex: BoltExecutor, e: BaseException) -> None:
    """A stateful task's turn raised: if its database stopped answering, its connection
    goes, and the micro-batch's next attempt (Spark runs the task again) waits for the
    database before it starts."""
    if unavailable(e):
        kv = _TASK_STATES.pop(id(ex), None)
        if kv is not None:
            with contextlib.suppress(Exception):  # dead already
                kv.store.close()


def _wait_for(url: str, who: str, sleep: Callable[[float], None] = time.sleep) -> None:
    """Until the database at ``url`` answers (asked every 0.5 s to 2 s), said once."""
    pause, said = 0.5, False
    while not answers(url):
        if not said:
            log.error("%s: the state database does not answer; waiting for it", who)
            said = True
        sleep(pause)
        pause = min(2 * pause, 2.0)
    if said:
        log.warning("%s: the state database answers again", who)


_SUSPECTS: dict[str, Suspects] = {}


def suspects(marks_dir: str) -> Suspects:
    """A query's suspects, read again only when they changed."""
    got = _SUSPECTS.get(marks_dir)
    if got is None:
        got = _SUSPECTS[marks_dir] = Suspects(marks_dir)
    return got
