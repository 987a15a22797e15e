"""A Spark job's fixed cost with Python tasks: over TCP and over a Unix socket.

Each micro-batch of the bolts job runs one small ``mapInArrow`` job (two tasks, one per
core, each a Python worker). This times that job with nothing in it, and splits it: until
the first task's function starts, from a task's start to its first input row, from the
last task's end until ``collect()`` returns. Over TCP the second part waited ~40 ms
(Nagle's algorithm against Linux's delayed ACK); the bolts job uses a Unix socket
(``spark.python.unix.domain.socket.enabled``). Both sessions run in this process, one
after the other (the baseline first), with the bolts job's other settings.

Then the same job collected as Arrow (``to_arrow``), an RDD job (``rdd_floor``:
PySpark's ``count``, Python workers without Spark SQL's plan or Arrow), and an RDD job
planned once that reads a local property and collects a row per task (``rdd_collect``).

Last line: one JSON object, each figure a median in milliseconds, ``unix_*`` and ``tcp_*``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

UDS = "spark.python.unix.domain.socket.enabled"


def _each(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    started = time.time()
    for rb in batches:
        got = time.time()
        yield pa.RecordBatch.from_pydict({"task": rb.column(0).to_pylist()[:1],
                                          "started": [started], "got": [got],
                                          "ended": [time.time()]})


def _each_row(part: Iterator[int]) -> Iterator[dict[str, Any]]:
    """The RDD job's task: what the bolts' tasks return, a report per task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch = ctx.getLocalProperty("squall.batch") if ctx is not None else None
    for i in part:
        yield {"task": i, "batch": batch, "started": time.time()}


def measure(unix: bool, jobs: int, warm: int) -> dict[str, float]:
    from services.bolts.runtime.session import spark_session

    spark = spark_session("local[2]", "squall-handoff", extra_conf={UDS: str(unix).lower()})
    try:
        df = spark.range(0, 2, numPartitions=2).mapInArrow(
            _each, "task long, started double, got double, ended double")
        for _ in range(warm):
            df.collect()
        parts: dict[str, list[float]] = {"job": [], "to_start": [], "to_input": [],
                                         "after": []}
        for i in range(jobs):
            t0 = time.time()
            rows = df.collect()
            t1 = time.time()
            parts["job"].append(t1 - t0)
            parts["to_start"].append(min(r.started for r in rows) - t0)
            parts["to_input"].append(max(r.got - r.started for r in rows))
            parts["after"].append(t1 - max(r.ended for r in rows))
            print(f"\r{'unix' if unix else 'tcp '} job {i + 1}/{jobs}", end="",
                  file=sys.stderr, flush=True)
        print(file=sys.stderr)
        # The same job's results as Arrow instead of pickled rows; and an RDD job (PySpark's
        # count: Python workers, no SQL plan, no Arrow), what is left without Spark SQL.
        # And an RDD job planned once, told its batch by a local property and collecting a
        # report per task, as the bolts' micro-batch job could run (``rdd_collect``).
        sc = spark.sparkContext
        rdd = sc.parallelize([0, 1], 2).mapPartitions(_each_row)
        sc.setLocalProperty("squall.batch", "1")
        for name, job in (("to_arrow", df.toArrow),
                          ("rdd_floor", sc.parallelize([0, 1], 2).count),
                          ("rdd_collect", rdd.collect)):
            for _ in range(warm):
                job()
            for _ in range(jobs):
                t0 = time.time()
                job()
                parts.setdefault(name, []).append(time.time() - t0)
        return {k: round(statistics.median(v) * 1000, 1) for k, v in parts.items()}
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=40, help="timed jobs per session")
    ap.add_argument("--warm", type=int, default=10, help="untimed jobs first")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    out: dict[str, Any] = {}
    for unix in (False, True):
        for k, v in measure(unix, args.jobs, args.warm).items():
            out[f"{'unix' if unix else 'tcp'}_{k}_ms"] = v
    out["jobs"] = args.jobs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
