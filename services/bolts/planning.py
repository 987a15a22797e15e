"""Planning a micro-batch: which edge records each bolt task runs.

Spark's streaming engine asks the edge source (services/bolts/source.py) where the next
micro-batch ends (:func:`next_offsets`) and writes that to its offset log before the batch
runs. Each Spark task of the batch's job (services/bolts/tasks.py) reads its bolt tasks'
ranges from that log (:func:`logged_partitions`), so nothing of a batch passes through a
Python callback on the driver. A batch run again after a crash reads the same entries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql.datasource import InputPartition


def edge_key(topic: str, partition: int) -> str:
    """An edge partition as the source's offsets name it: ``"topic:partition"``."""
    return f"{topic}:{partition}"


def next_offsets(start: Mapping[str, int], ends: Mapping[str, int], budget: int | None
                 ) -> dict[str, int]:
    """The next micro-batch's end: up to the edges' ``ends``, at most ``budget`` records
    in all (None: no limit) shared over the partitions with data, round robin, so none
    starves."""
    out = dict(start)
    if budget is None:
        out.update({k: max(v, ends.get(k, v)) for k, v in start.items()})
        return out
    waiting = {k: ends.get(k, v) - v for k, v in start.items() if ends.get(k, v) > v}
    while budget > 0 and waiting:
        share = max(1, budget // len(waiting))
        for k in list(waiting):
            take = min(share, waiting[k], budget)
            out[k] += take
            waiting[k] -= take
            budget -= take
            if not waiting[k]:
                del waiting[k]
            if budget <= 0:
                break
    return out


@dataclass
class TaskPartition(InputPartition):
    """One bolt task's ranges of a micro-batch (``read`` gets a pickled copy)."""

    task: int
    ranges: list[tuple[str, int, int, int]]  # topic, partition, start, end (exclusive)


def plan_partitions(topics: Sequence[str], tasks: Sequence[int], start: Mapping[str, int],
                    end: Mapping[str, int]) -> list[TaskPartition]:
    """A micro-batch from ``start`` to ``end``: per task with data, its ranges."""
    parts = []
    for task in tasks:
        bounds = [(t, start.get(edge_key(t, task), 0), end.get(edge_key(t, task), 0))
                  for t in topics]
        ranges = [(t, task, a, b) for t, a, b in bounds if b > a]
        if ranges:
            parts.append(TaskPartition(task, ranges))
    return parts


def logged_partitions(checkpoint: Path, batch_id: int, topics: Sequence[str],
                      tasks: Sequence[int]) -> list[TaskPartition] | None:
    """Micro-batch ``batch_id``'s partitions as Spark's offset log has them (the log is
    written before the batch runs, and a batch run again after a crash reads the same
    entries): its end is the batch's entry, its start the previous batch's (or the topic
    start). None if the log cannot be read here."""
    def entry(bid: int) -> dict[str, int] | None:
        try:
            lines = (checkpoint / "offsets" / str(bid)).read_text().splitlines()
            doc = json.loads(lines[2])  # "v1", the batch's metadata, then our one source
        except (OSError, IndexError, ValueError):
            return None
        if not isinstance(doc, dict) or not all(isinstance(v, int) for v in doc.values()):
            return None
        return {str(k): int(v) for k, v in doc.items()}

    end = entry(batch_id)
    start = {} if batch_id == 0 else entry(batch_id - 1)
    if end is None or start is None:
        return None
    return plan_partitions(topics, tasks, start, end)



