from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import ConfigError
from squall.core.reliability.ids import (
    MAX_ID,
    MIN_ID,
    IdBatcher,
    acker_partition,
    acker_partitions,
    derive_roots,
    full_offsets,
    new_id,
    root_keys,
)
from squall.core.reliability.retry import RetrySchedule


def test_backoff_doubles_then_caps() -> None:
    r = RetrySchedule(initial_delay_ms=100, multiplier=2.0, max_delay_ms=1000, max_retries=10)
    assert [r.delay_ms(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    assert r.delay_ms(10_000) == 1000


def test_retries_are_finite_by_default_and_infinite_on_request() -> None:
    r = RetrySchedule(max_retries=2)
    assert not r.exhausted(1)
    assert not r.exhausted(2)
    assert r.exhausted(3)
    assert not RetrySchedule(max_retries=None).exhausted(10**9)
    assert RetrySchedule().max_retries is not None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"initial_delay_ms": -1}, "initial_delay_ms must be >= 0, got -1"),
        ({"multiplier": 0.5}, "multiplier must be >= 1, got 0.5"),
        ({"initial_delay_ms": 50, "max_delay_ms": 10}, "max_delay_ms (10) is below"),
        ({"max_retries": -2}, "max_retries must be >= 0 or None, got -2"),
    ],
)
def test_bad_retry_settings_name_the_value(kwargs: dict[str, float], needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        RetrySchedule(**kwargs)  # type: ignore[arg-type]
    assert needle in str(e.value)


def test_ids_are_in_range_and_distinct() -> None:
    rng = random.Random(3)
    ids = [new_id(rng) for _ in range(10_000)]
    assert all(MIN_ID <= i <= MAX_ID for i in ids)
    assert len(set(ids)) == len(ids)
    batch = IdBatcher(seed=5).ids(10_000)
    assert batch.dtype == np.uint64
    assert int(batch.min()) >= MIN_ID
    assert int(batch.max()) <= MAX_ID
    assert len(np.unique(batch)) == 10_000


def test_new_id_skips_reserved_values() -> None:
    class Stub(random.Random):
        def __init__(self) -> None:
            super().__init__()
            self.vals = [0, (1 << 64) - 1, 42]

        def getrandbits(self, k: int) -> int:
            return self.vals.pop(0)

    assert new_id(Stub()) == 42


def test_root_to_acker_is_root_mod_n() -> None:
    roots = np.array([0, 1, 5, 2**64 - 2], np.uint64)
    assert acker_partitions(roots, 3).tolist() == [int(r) % 3 for r in roots]
    assert acker_partition(2**64 - 2, 3) == (2**64 - 2) % 3
    with pytest.raises(ValueError, match="got 0"):
        acker_partition(1, 0)


@settings(max_examples=200, deadline=None)
@given(salt=st.integers(0, 2**64 - 1), source=st.integers(0, 2**16 - 1),
       offsets=st.lists(st.integers(0, 2**40 - 1), min_size=1, max_size=50),
       attempt=st.integers(0, 255))
def test_root_keys_invert_derive_roots(salt: int, source: int, offsets: list[int],
                                       attempt: int) -> None:
    roots = derive_roots(salt, source, offsets, [attempt] * len(offsets))
    src, att, off = root_keys(salt, roots)
    assert src.tolist() == [source] * len(offsets)
    assert att.tolist() == [attempt] * len(offsets)
    assert off.tolist() == offsets


def test_a_root_of_another_incarnation_decodes_to_no_key_in_flight() -> None:
    rng = random.Random(4)
    old, new = rng.getrandbits(64), rng.getrandbits(64)
    roots = derive_roots(old, 0, np.arange(100_000), np.zeros(100_000, np.int64))
    src, att, off = root_keys(new, roots)
    assert not ((src < 4) & (att == 0) & (off < 1_000_000)).any()


@given(st.integers(0, 1 << 50), st.lists(st.integers(-(1 << 39) + 1, (1 << 39) - 1),
                                        min_size=1, max_size=50))
def test_full_offsets_recover_offsets_near_the_committed_one(committed: int,
                                                             deltas: list[int]) -> None:
    offs = np.array([max(0, committed + d) for d in deltas], np.int64)
    low = offs & np.int64((1 << 40) - 1)
    assert full_offsets(low, committed).tolist() == offs.tolist()
