"""The bolts driver: a topology's bolts as Spark Structured Streaming queries, one per
chain of bolts (``squall.core.topology.chains``).

A micro-batch's walk: the query's trigger asks the edge source where the batch ends
(services/bolts/source.py) and Spark logs that; the driver's sink
(``runtime/java/BatchSink.java``) runs the chain's job, planned once (services/bolts/tasks.py);
each of its Spark tasks plans its bolt tasks' ranges from the offset log
(services/bolts/planning.py) and runs them: read their edges (services/bolts/edges.py),
execute, produce and flush; the sink hands the tasks' reports to a thread here for the metrics
(services/bolts/tasks_sink.py); Spark then writes its commit log.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from services.bolts import tasks_sink
from services.bolts.checkpoint_store import (
    CheckpointsUnwritable,
    refusal,
    refused_write,
    wait_writable,
)
from services.bolts.marks import ProgressMarks
from services.bolts.metrics import BoltMetrics
from services.bolts.query_watch import StallWatch, python_error
from services.bolts.query_watch import limit_s as stall_limit_s
from services.bolts.runtime.driver_classes import classes_loaded
from services.bolts.runtime.session import fencing, register_for_query, spark_session
from services.bolts.runtime.standby import (
    driver_alive,
    mark_running,
    take_lock,
    try_lock,
    wait_for_active,
)
from services.bolts.settings import BoltSettings
from services.bolts.ticks import Ticker
from services.bolts.warm import warm_up
from services.common import mark_ready
from squall.backends import answers, default_state_path
from squall.core.errors import BoltFault, ConfigError
from squall.core.topology.chains import chains
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.topics import acker_topic, dlq_topic
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.lease import LEASE_FILE_ENV

log = logging.getLogger("squall.bolts")


def ensure_bolt_topics(spec: TopologySpec, kafka: KafkaClients) -> None:
    topics = {dlq_topic(spec.name): 1}
    if spec.ackers:
        topics[acker_topic(spec.name)] = spec.ackers
    for c in spec.components():
        topics |= {e.topic: e.partitions for e in spec.edges_from(c.name)}
    ensure_topics(kafka, topics, 30)


def query_name(spec: TopologySpec, chain: Sequence[str]) -> str:
    """The Spark query of a chain of bolts: ``<topology>.<head bolt>``."""
    return f"{spec.name}.{chain[0]}"


def start_bolt(spark: Any, spec: TopologySpec, chain: Sequence[str], s: BoltSettings,
               metrics: BoltMetrics | None = None,
               stop: threading.Event | None = None) -> Any:
    """One query for a chain of bolts (``squall.core.topology.chains``): it reads the head's
    inputs."""
    return prepare_bolt(spark, spec, chain, s, metrics, stop).start()


def prepare_bolt(spark: Any, spec: TopologySpec, chain: Sequence[str], s: BoltSettings,
                 metrics: BoltMetrics | None = None,
                 stop: threading.Event | None = None) -> Any:
    """:func:`start_bolt` up to ``start()``: the writer, its source's schema resolved (Spark
    asks a Python process for it) and its job planned; it touches no checkpoint.
    ``stop``: when the tasks' reports are no longer read (default: with the driver)."""
    head = spec.component(chain[0])
    assert isinstance(head, BoltSpec)
    from services.bolts.source import EdgeSource
    from services.bolts.tasks import BATCH_PROPERTY, planned_job

    if not classes_loaded(spark.sparkContext):
        raise ConfigError("the bolts driver's Java classes are not on its class path: they "
                          "are compiled with the JDK's javac at start-up (install a JDK 17, "
                          "not only a JRE; the log says why compiling failed)")
    query = query_name(spec, chain)
    lease_path = os.environ.get(LEASE_FILE_ENV, "")  # set by a worker with a fence
    reader = (spark.readStream.format(register_for_query(spark, EdgeSource, query))
              .option("bootstrap", s.bootstrap_servers)
              .option("topics", ",".join(spec.input_topics(head.name)))
              .option("tasks", ",".join(str(t) for t in range(head.parallelism)))
              .option("max_rows", str(s.max_rows_per_batch))
              .option("quiet_ms", str(s.quiet_ms)).option("linger_ms", str(s.linger_ms))
              .option("lease", lease_path)
              .load())
    checkpoint = (s.checkpoint_dir / spec.name / head.name).resolve()
    # Stateful bolts' and persistent aggregates' state: the job's database, by default SQLite
    # beside the checkpoints (one machine only: on a cluster, give a PostgreSQL URL).
    state_url = s.state_url or \
        f"sqlite://{default_state_path(s.checkpoint_dir.resolve(), spec.state_id)}"
    if state_url.startswith("sqlite://"):
        Path(state_url.removeprefix("sqlite://")).parent.mkdir(parents=True, exist_ok=True)
    job = planned_job(spark.sparkContext, spec.to_json(), tuple(chain),
                               s.bootstrap_servers, {c: state_url for c in chain}, checkpoint,
                               spec.input_topics(head.name), head.parallelism,
                               head.num_executors)
    writer = tasks_sink.writer(reader, query, chain, job, BATCH_PROPERTY, metrics,
                               stop or threading.Event(), lease_path)
    return (writer.option("checkpointLocation", str(checkpoint))
            .trigger(processingTime=f"{s.trigger_ms} milliseconds")
            .queryName(query))


def job_lock(folder: Path, spec: TopologySpec, bolts: Sequence[str]) -> Path:
    """The lock of the job that runs ``bolts`` of ``spec``: one active job per set of bolts
    (its standby waits on it), apart from the jobs other workers run for the topology's
    other bolts."""
    return folder / spec.name / f"job.{'+'.join(sorted(bolts))}.lock"


def cluster_conf(master: str, spec: TopologySpec, plan: Sequence[Sequence[str]]
                 ) -> dict[str, str]:
    """On a cluster, a job takes the cores its queries run on at once (one per executor of
    each chain's head), not every core of the cluster, so that the next topology's job gets
    executors too. A ``--conf spark.cores.max`` of the user's wins."""
    if master.startswith("local"):
        return {}
    cores = 0
    for chain in plan:
        head = spec.component(chain[0])
        assert isinstance(head, BoltSpec)
        cores += head.num_executors
    return {"spark.cores.max": str(max(1, cores))}


class BoltJob:
    """``spark``: a session started already, with these settings' shape (a spare's,
    services/bolts/spare.py); else the job starts its own."""

    def __init__(self, settings: BoltSettings, metrics: BoltMetrics | None = None,
                 spark: Any = None) -> None:
        self.s = settings
        self.spark = spark
        self.spec = settings.spec()
        names = settings.components or tuple(b.name for b in self.spec.bolts)
        self.bolts = []
        for n in names:
            c = self.spec.component(n)
            if not isinstance(c, BoltSpec):
                raise ConfigError(f"component {n!r} is not a bolt")
            self.bolts.append(c)
        self.metrics = metrics

    def run(self, stop: threading.Event) -> None:
        t0 = time.monotonic()
        ensure_bolt_topics(self.spec, self.s.clients)
        lock_path = job_lock((self.s.lock_dir or self.s.checkpoint_dir).resolve(), self.spec,
                             [b.name for b in self.bolts])
        if self.s.standby and self.spark is None:
            log.info("standby: starting Spark once the active job's queries run")
            mark_ready()  # standing by is its work
            if not wait_for_active(lock_path, stop):
                log.info("standby: no active job is running yet; starting Spark anyway")
            if stop.is_set():
                return
            t0 = time.monotonic()
        plan = chains(self.spec, [b.name for b in self.bolts], self.s.fuse)
        spark = self.spark
        if spark is None:
            spark = spark_session(self.s.master, f"squall-{self.spec.name}",
                                  self.s.checkpoint_fs == "no-fork", self.s.java_options,
                                  cluster_conf(self.s.master, self.spec, plan) | self.s.conf(),
                                  fencing(self.s), self.s.spark_security)
            log.info("Spark session started (%.1f s)", time.monotonic() - t0)
        if self.metrics:
            self.metrics.processes.attach(spark)
        # The Python workers started, the bolts' modules imported, their Kafka clients open:
        # the active job (the lock free) does it while its queries start, which it does
        # not wait for; a standby (the lock held) before it waits, so that taking over costs
        # only starting the queries (services/bolts/runtime/standby.py).
        modules = [b.cls.partition(":")[0] for b in self.bolts]
        lock = try_lock(lock_path)
        if lock is None:
            warm_up(spark, modules, self.s.bootstrap_servers)
        else:
            threading.Thread(target=self._warm_up, args=(spark, modules), daemon=True,
                             name="bolts-warm-up").start()
        writers = [prepare_bolt(spark, self.spec, chain, self.s, self.metrics, stop)
                   for chain in plan]
        lock = lock or take_lock(lock_path, stop, lambda: driver_alive(spark))
        if lock is None:  # stopped while standing by
            spark.stop()
            return
        # Every micro-batch's progress counted as Spark reports it (services/bolts/metrics.py).
        if self.metrics:
            self.metrics.listen(spark, {query_name(self.spec, c): c for c in plan})
        url = self.s.state_url or ""
        if self.metrics and url.startswith(("postgresql://", "postgres://")):
            threading.Thread(target=_probe_state, args=(url, self.metrics, stop), daemon=True,
                             name="state-probe").start()
        try:
            queries = [w.start() for w in writers]
            mark_running(lock)
            mark_ready()
            log.info("bolt queries started %.1f s after the job", time.monotonic() - t0)
            while not self._run(spark, stop, plan, queries):
                queries = [prepare_bolt(spark, self.spec, chain, self.s, self.metrics, stop)
                           .start() for chain in plan]
                log.info("bolt queries started again from their checkpoints")
        finally:
            spark.stop()
            lock.close()

    def _warm_up(self, spark: Any, modules: list[str]) -> None:
        t0 = time.monotonic()
        try:
            warm_up(spark, modules, self.s.bootstrap_servers)
            log.info("Python workers warm (%.1f s)", time.monotonic() - t0)
        except Exception as e:  # the first micro-batch starts them instead
            log.warning("warming the Python workers failed: %s", e)

    def _run(self, spark: Any, stop: threading.Event, plan: list[tuple[str, ...]],
             queries: list[Any]) -> bool:
        """Watch the queries until ``stop`` (True), or until the checkpoint folder refused
        their writes and takes them again (False: start them again); raise if a query
        stopped otherwise."""
        try:
            self._watch(stop, plan, queries)
        except CheckpointsUnwritable as e:
            folder = (self.s.checkpoint_dir / self.spec.name).resolve()
            log.error("%s: waiting for it to take writes, then starting the queries again "
                      "from their checkpoints", e)
            waited = wait_writable(folder, stop)
            if waited is None:
                return True
            log.info("the checkpoint folder %s takes writes again after %.1f s", folder, waited)
            return False
        return True

    def _watch(self, stop: threading.Event, plan: list[tuple[str, ...]],
               queries: list[Any]) -> None:
        log.info("bolt queries running: %s (chains: %s)", [q.name for q in queries],
                 [" -> ".join(c) for c in plan])
        m = self.metrics
        if m:
            for b in self.bolts:
                m.started(b.name)
        heads = [self.spec.component(c[0]) for c in plan]
        marks = ProgressMarks(
            self.spec, [h for h in heads if isinstance(h, BoltSpec)], [q.name for q in queries],
            [(self.s.checkpoint_dir / self.spec.name / c[0]).resolve() for c in plan],
            self.s.bootstrap_servers, "bolts:" + ",".join(self.s.components))
        shown: set[int] = set()
        watches = {q.name: StallWatch() for q in queries}
        limit = stall_limit_s(self.spec.deadline_s)
        ticker = Ticker(self.spec, plan, self.s.clients)
        try:
            while not stop.wait(0.5):
                ticker.step(int(time.monotonic() * 1000))
                progress = {}
                for q, chain in zip(queries, plan, strict=True):
                    if not q.isActive:
                        self._stopped(q)
                    progress[q.name] = q.lastProgress
                    self._watch_stall(q, chain, watches[q.name], progress[q.name], limit)
                    early = len(shown) < tasks_sink.FIRST_BATCHES_LOGGED
                    for p in q.recentProgress if early else ():
                        if p["batchId"] not in shown:
                            shown.add(p["batchId"])
                            log.info("query %s, micro-batch %d: Spark's milliseconds %s",
                                     q.name, p["batchId"], p.get("durationMs"))
                marks.step(int(time.time() * 1000), progress)
        finally:
            ticker.close()
            marks.close()
            for q in queries:
                q.stop()
            if m:
                for b in self.bolts:
                    m.stopped(b.name)

    def _stopped(self, q: Any) -> None:
        """A query stopped by itself: why, as an error."""
        why = str(q.exception())
        folder = (self.s.checkpoint_dir / self.spec.name).resolve()
        refused = refusal(folder)
        if refused is not None or (refused_write(why) and str(folder) in why):
            raise CheckpointsUnwritable(
                f"bolt query {q.name} stopped: the checkpoint folder refuses writes: "
                f"{refused or python_error(why)}")
        log.error("bolt query %s stopped: %s", q.name, why)
        raise ConfigError(f"bolt query {q.name} stopped: {python_error(why)}")

    def _watch_stall(self, q: Any, chain: Sequence[str], watch: StallWatch,
                     last: Mapping[str, Any] | None, limit: float) -> None:
        """How long ``q``'s micro-batch has run, into the metrics; past ``limit``, the job
        stops (services/bolts/query_watch.py)."""
        running = bool(q.status.get("isTriggerActive"))
        ran = watch.observe(time.monotonic(), running, last["batchId"] if last else None)
        if self.metrics:
            for c in chain:
                self.metrics.batch_running.labels(self.spec.name, c).set(ran)
        if ran > limit:
            raise BoltFault(f"bolt query {q.name}: a micro-batch has run {ran:.0f} s (over "
                            f"{limit:.0f} s: ten bolt deadlines) without ending; the job "
                            "stops, to be started again")


def _probe_state(url: str, metrics: BoltMetrics, stop: threading.Event,
                 every_s: float = 5.0) -> None:
    """Whether the state database answers, every ``every_s``, into the metrics (the
    SquallStateDatabaseDown alert)."""
    up = True
    while True:
        now_up = answers(url)
        metrics.state_up.set(1.0 if now_up else 0.0)
        if now_up != up:
            (log.warning if now_up else log.error)(
                "the state database %s", "answers again" if now_up else
                "does not answer: stateful tasks wait for it")
            up = now_up
        if stop.wait(every_s):
            return
