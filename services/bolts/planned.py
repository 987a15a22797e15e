"""The job a chain's every micro-batch runs, planned once: one Spark task per executor,
each running its bolt tasks on the ranges it plans from Spark's offset log. The driver's
own sink runs it (services/bolts/tasks_sink.py); where no JDK compiled that sink,
foreachBatch does (:func:`foreach_batch_runner`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from services.bolts import batch_marks, tasks_sink
from services.bolts.metrics import BoltMetrics


def planned_job(sc: Any, spec_json: str, chain: tuple[str, ...], bootstrap: str,
                state_urls: Mapping[str, str], checkpoint: Path, topics: Sequence[str],
                tasks: int, executors: int) -> Any:
    """The one RDD job every micro-batch of a chain runs: one Spark task per executor,
    each running its bolt tasks on the ranges it plans from Spark's offset log (the batch
    id comes as a local property). Planned once: reading the ranges through the edge
    source would cost a Python worker's round trip per task and batch, planning a job
    per batch more, and a Spark SQL job (``mapInArrow``) more than the RDD job
    (``benchmarks/handoff.py`` measures it)."""
    from services.bolts.sink import logged_runner

    return sc.parallelize(range(executors), executors).mapPartitions(
        logged_runner(spec_json, chain, bootstrap, state_urls, str(checkpoint), topics, tasks,
                      executors))


def foreach_batch_runner(spec_json: str, chain: tuple[str, ...], bootstrap: str,
                  metrics: BoltMetrics | None, state_urls: Mapping[str, str],
                  checkpoint: Path, topics: Sequence[str], tasks: int,
                  executors: int) -> Any:
    """foreachBatch, where the driver has no classes of its own (no JDK to compile them):
    the chain's :func:`planned_job`, its reports collected and counted here. A batch a
    task finished before (a re-run after a crash) is skipped by the task. The source stays
    the record of progress (Spark asks it for offsets and checkpoints them), and its read
    is the fallback when the log cannot be read here."""
    from services.bolts.report import SPARK_SCHEMA, BatchReport
    from services.bolts.sink import BATCH_PROPERTY, task_runner
    from services.bolts.source import logged_partitions

    marks_dir = batch_marks.beside(checkpoint)
    task_ids = list(range(tasks))
    planned: list[Any] = []  # the job, once built
    first = tasks_sink.FirstBatches(chain[0])

    def batch(df: Any, batch_id: int) -> None:
        parts = logged_partitions(checkpoint, batch_id, topics, task_ids)
        reports: list[BatchReport]
        if parts is None:  # the log is not readable here: through the source
            run = task_runner(spec_json, chain, bootstrap, state_urls, marks_dir, batch_id)
            rows = df.mapInArrow(run, SPARK_SCHEMA).toArrow().to_pylist()
            reports = [BatchReport.from_row(r) for r in rows]
        elif parts:
            sc = df.sparkSession.sparkContext
            if not planned:
                planned.append(planned_job(sc, spec_json, chain, bootstrap, state_urls,
                                           checkpoint, topics, tasks, executors))
            sc.setLocalProperty(BATCH_PROPERTY, str(batch_id))
            reports = planned[0].collect()
        else:
            reports = []
        executed = tasks_sink.count_reports(chain, batch_id, reports, metrics)
        first.note(batch_id, executed, reports)

    return batch
