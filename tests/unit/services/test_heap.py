"""services.bolts.heap: what lives long is frozen once, not after every task."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.bolts import heap


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
    heap.settle()  # nothing new lives: no collection, no freeze
    assert gc.get_freeze_count() == frozen
    del garbage


def test_a_frozen_heap_makes_the_collection_after_a_task_cheap() -> None:
    gc.unfreeze()
    heap.grew()
    heap.settle()
    assert gc.get_freeze_count() > 0
    # What a later collection walks: only objects made since, not the frozen heap.
    assert sum(gc.get_count()) < gc.get_freeze_count()
