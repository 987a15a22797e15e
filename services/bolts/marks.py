"""The bolts job's progress marks: how far its queries have processed, told to the ackers.

On the driver, twice a second: the edges' ends (:class:`EdgeEnds`) and each
query's processed offsets (its last progress report; before the first one,
its checkpoint's last committed batch) feed :class:`squall.core.reliability.progress.Processed`;
its watermark goes into every acker partition as a progress mark. The acks of
the micro-batches it covers were flushed before those batches ended, so each
acker reads them first. The ackers time trees out on that clock: a queue or a
stopped job never makes a tree time out (see squall/core/reliability/progress.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from services.bolts.source import EdgeEnds
from squall.core.reliability.progress import Processed
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.topics import acker_topic
from squall.core.wire.internal import encode_progress
from squall.kafka import produce
from squall.kafka_clients import from_environment

log = logging.getLogger("squall.bolts.marks")

#: A mark is sent at least this often, moved or not (a restarted acker learns it soon).
HEARTBEAT_MS = 1_000


class ProgressMarks:
    def __init__(self, spec: TopologySpec, heads: Sequence[BoltSpec], query_names: Sequence[str],
                 checkpoints: Sequence[Path], bootstrap: str, job: str) -> None:
        self.job = job
        self.topic = acker_topic(spec.name)
        self.ackers = spec.ackers
        keys = {q: [f"{t}:{p}" for t in spec.input_topics(h.name) for p in range(h.parallelism)]
                for q, h in zip(query_names, heads, strict=True)}
        self.processed = Processed(keys)
        self.ends = EdgeEnds(bootstrap, [(k.rpartition(":")[0], int(k.rpartition(":")[2]))
                                         for ks in keys.values() for k in ks])
        for q, ckpt in zip(query_names, checkpoints, strict=True):
            done = committed_offsets(ckpt)
            if done is not None:
                self.processed.processed(q, done)
        self.producer = from_environment(bootstrap).producer({"linger.ms": 5})
        self._sent: tuple[int, int] | None = None  # (watermark, when)

    def step(self, now_ms: int, progress: Mapping[str, Any]) -> int | None:
        """Observe, learn the queries' last progress reports, send a mark if due."""
        self.processed.observe(now_ms, self.ends.poll())
        for q, p in progress.items():
            done = end_offsets(p)
            if done is not None:
                self.processed.processed(q, done)
        w = self.processed.watermark()
        if w is None or not self.ackers:
            return w
        if self._sent is None or w > self._sent[0] or now_ms - self._sent[1] >= HEARTBEAT_MS:
            mark = encode_progress(self.job, w)
            for part in range(self.ackers):
                produce(self.producer, self.topic, mark, partition=part)
            self.producer.poll(0)
            self._sent = (w, now_ms)
        return w

    def close(self) -> None:
        self.producer.flush(5)
        self.ends.close()


def end_offsets(progress: Any) -> dict[str, int] | None:
    """The offsets a query's last progress report says it processed (our source's)."""
    if progress is None:
        return None
    if not isinstance(progress, dict):
        progress = json.loads(progress.json)  # PySpark 4: a StreamingQueryProgress
    sources = progress.get("sources") or []
    if not sources:
        return None
    end = sources[0].get("endOffset")
    if isinstance(end, str):
        try:
            end = json.loads(end)
        except ValueError:
            return None
    if not isinstance(end, dict):
        return None
    return {str(k): int(v) for k, v in end.items() if isinstance(v, int)}


def committed_offsets(checkpoint: Path) -> dict[str, int] | None:
    """The source offsets of the last batch a checkpoint marks committed (Spark's layout:
    ``commits/<id>`` exists, ``offsets/<id>`` holds a version line, the batch's metadata and
    one line per source)."""
    try:
        ids = [int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()]
        if not ids:
            return None
        lines = (checkpoint / "offsets" / str(max(ids))).read_text().splitlines()
        end = json.loads(lines[2])
    except (OSError, ValueError, IndexError) as e:
        if not isinstance(e, FileNotFoundError):
            log.warning("checkpoint %s: last committed offsets not readable: %s", checkpoint, e)
        return None
    if not isinstance(end, dict):
        return None
    return {str(k): int(v) for k, v in end.items() if isinstance(v, int)}
