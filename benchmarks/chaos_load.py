"""The chaos suite's load and what it watches while faults strike: the feeder at a
steady rate, the committed offsets, the processes' CPU."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from benchmarks.chaos_targets import pids
from squall.core.errors import ApiError
from squall.demo import (
    SENTENCES,
    SOURCE,
    Progress,
)
from squall.kafka import produce
from squall.kafka_clients import KafkaClients, quiet_logger


class Feeder(threading.Thread):
    """Feeds sentences at a steady rate; poison among them when asked."""

    def __init__(self, bootstrap: str, total: int | None, rate: float, poison: bool,
                 seconds: float | None, crash: float = 0.0, hang: float = 0.0) -> None:
        super().__init__(daemon=True, name="feeder")
        # Idempotent: a retry across a leader change writes no second copy, so the source
        # holds exactly what was fed.
        self.p = KafkaClients(bootstrap).producer({
            "linger.ms": 5, "enable.idempotence": True, "logger": quiet_logger("chaos-feed")})
        self.total, self.rate, self.poison, self.seconds = total, rate, poison, seconds
        self.fed = 0
        self.words: Counter[str] = Counter()
        self.undecodable: set[bytes] = set()
        self.raising: set[bytes] = set()
        #: sentences on which the split bolt kills or hangs its process (examples/faults.py)
        self.crash, self.hang = crash, hang
        self.killing: set[bytes] = set()
        self.done = threading.Event()
        # Set: the feed goes on past ``total`` (while faults are still to strike: each
        # one under load, however long the ones before took to recover from).
        self.hold = threading.Event()
        self.rng = random.Random(11)

    def next_value(self, i: int) -> bytes:
        r = self.rng.random()
        if self.poison and r < 0.01:
            v = b"\xff\xfe undecodable " + str(i).encode()
            self.undecodable.add(v)
            return v
        if self.poison and r < 0.015:
            v = f"poison {i}".encode()
            self.raising.add(v)
            return v
        r -= 0.015
        if 0 <= r < self.crash + self.hang:
            v = f"{'crash' if r < self.crash else 'hang'} {i}".encode()
            self.killing.add(v)
            return v
        text = self.rng.choice(SENTENCES)
        self.words.update(text.split())
        return text.encode()

    def run(self) -> None:
        t0 = time.monotonic()
        while True:
            now = time.monotonic()
            if self.seconds is not None and now - t0 >= self.seconds:
                break
            target = int((now - t0) * self.rate)
            if self.total is not None and not self.hold.is_set():
                target = min(target, max(self.total, self.fed))
            while self.fed < target:
                produce(self.p, SOURCE, self.next_value(self.fed))
                self.fed += 1
            self.p.poll(0)
            if self.total is not None and self.fed >= self.total and not self.hold.is_set():
                break
            time.sleep(0.005)
        self.p.flush(60)
        self.done.set()


class Commits(threading.Thread):
    """Samples the committed source offsets: when they moved, the longest stall."""

    def __init__(self, prog: Progress, fed: Callable[[], int]) -> None:
        super().__init__(daemon=True, name="commits")
        self.prog = prog
        self.fed = fed
        self.value = 0
        self.moved_at = time.monotonic()
        self.max_gap_s = 0.0
        #: the longest the commits stood still while behind what was fed
        self.max_stall_s = 0.0
        #: the stalls of 5 s or more: (seconds into the run when each began, its length)
        self.stalls: list[tuple[float, float]] = []
        #: times a partition's committed offset was seen below what it was before
        self.regressions = 0
        self._highest: list[int] = []
        #: the longest one partition's commits stood still while the topology was behind
        self.max_partition_stall_s = 0.0
        self._part_moved: list[float] = []
        self.started = time.monotonic()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.25):
            fed = self.fed()
            try:
                parts = self.prog.committed_by_partition()
            except Exception:  # a broker may be down: nothing moved that can be seen
                self._stood(time.monotonic())
                continue
            self.regressions += sum(1 for new, old in zip(parts, self._highest, strict=False)
                                    if new < old)
            v, now = sum(parts), time.monotonic()
            self._part_moved = [now if new > old or v >= fed else moved for new, old, moved
                                in zip(parts, self._highest or parts,
                                       self._part_moved or [now] * len(parts), strict=True)]
            self._highest = [max(p) for p in zip(parts, self._highest or parts, strict=True)]
            stall = now - self.moved_at
            if v > self.value:
                self.max_gap_s = max(self.max_gap_s, now - self.moved_at)
                self.value, self.moved_at = v, now
            elif v >= fed:  # caught up: standing still is not a stall
                self.moved_at = now
            self._stood(now)
            if self.moved_at == now and stall >= 5:
                self.stalls.append((round(now - stall - self.started, 1), round(stall, 1)))

    def _stood(self, now: float) -> None:
        """The stalls so far, as of ``now``: a reading that failed moved nothing."""
        self.max_stall_s = max(self.max_stall_s, now - self.moved_at)
        if self._part_moved:
            self.max_partition_stall_s = max(self.max_partition_stall_s,
                                             *(now - m for m in self._part_moved))


class CpuSampler:
    """CPU share of each service since the last sample, from /proc (the soak's diagnosis:
    which process grows its cost with time)."""

    PATTERNS = (("broker", "kafka.Kafka "), ("spout", "-m services.spout"),
                ("acker", "-m services.acker"), ("bolts", "org.apache.spark.deploy.SparkSubmit"),
                ("python-workers", "pyspark.daemon"))

    def __init__(self) -> None:
        self.last: dict[int, float] = {}  # pid -> its CPU seconds at the last sample
        self.at = time.monotonic()
        self.tick = os.sysconf("SC_CLK_TCK")

    def _cpu_s(self, pid: int) -> float | None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self.tick
        except (OSError, IndexError, ValueError):
            return None

    def sample(self) -> dict[str, int]:
        """Percent of one core per service since the previous call (processes seen both
        times: one that started or died in between counts from its next sample)."""
        now, out, seen = time.monotonic(), {}, {}
        for name, pattern in self.PATTERNS:
            used = 0.0
            for pid in pids(pattern):
                cpu = self._cpu_s(pid)
                if cpu is None:
                    continue
                seen[pid] = cpu
                if pid in self.last:
                    used += max(0.0, cpu - self.last[pid])
            out[name] = round(100 * used / (now - self.at)) if now > self.at else 0
        self.last, self.at = seen, now
        return out


def wait(cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ApiError, OSError, KeyError, ValueError):
            if cond():
                return True
        time.sleep(0.2)
    return False
