"""services.bolts.runtime.heap: what lives long is frozen once, not after every task; the memory a
task frees is kept, and touched once, so that the next tasks take no page faults."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from services.bolts.runtime import heap


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_settle_freezes_what_lives_after_growth_and_only_then() -> None:
    gc.unfreeze()
    heap.grew()
    state = [{"word": i} for i in range(1000)]  # long-lived, as a bolt task's counts
    heap.settle()
    frozen = gc.get_freeze_count()
    assert frozen >= len(state)
    garbage = [{"tmp": i} for i in range(1000)]
    heap.settle()  # no growth since: no collection, no freeze (the 1,000 dicts stay out)
    # Frozen objects freed meanwhile (the test runner's own threads) only lower the count.
    assert gc.get_freeze_count() <= frozen
    del garbage


def test_a_frozen_heap_makes_the_collection_after_a_task_cheap() -> None:
    gc.unfreeze()
    heap.grew()
    heap.settle()
    assert gc.get_freeze_count() > 0
    # What a later collection walks: only objects made since, not the frozen heap.
    assert sum(gc.get_count()) < gc.get_freeze_count()


_TASK = """
import resource, sys
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from services.bolts.runtime import heap
pc.add(pa.array(np.arange(10)), 1)  # Arrow's one-off start (its threads and their stacks)
if sys.argv[1] == "pretouch":
    heap.pretouch()
faults = []
for _ in range(3):  # a task's arrays, as micro-batches make and drop them
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones(1 << 17) for _ in range(16)]  # 16 MiB of numpy arrays
    out = pc.add(pa.array(np.arange(1 << 20)), 1)  # 8 MiB more, an Arrow kernel's output
    del arrays, out
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(pa.default_memory_pool().backend_name, *faults)
"""


def _faults(mode: str, env: dict[str, str]) -> tuple[str, list[int]]:
    base = {k: v for k, v in os.environ.items() if k not in heap.WORKER_ENV}
    out = subprocess.run([sys.executable, "-c", _TASK, mode], check=True, text=True,
                         capture_output=True, env={**base, **env}).stdout.split()
    return out[0], [int(n) for n in out[1:]]


def test_a_pretouched_worker_takes_no_page_faults_for_its_tasks_memory() -> None:
    """By default every task's ~24 MiB is faulted in page by page again (mimalloc and
    malloc give freed memory back); in the workers' environment, after :func:`heap.pretouch`,
    no task's is."""
    pool, default = _faults("cold", {})
    assert pool == "mimalloc"
    assert min(default) > 2_000  # every time, not only the first
    pool, kept = _faults("pretouch", heap.WORKER_ENV)
    assert pool == "system"
    assert max(kept) < 100
