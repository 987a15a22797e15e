"""The worker's crash-loop threshold: a flag bounded like every setting, its bad values told."""

from __future__ import annotations

import pytest

from services.worker.settings import parse_args
from squall.core.errors import ConfigError

BASE = ["--kind", "bolts"]


def test_the_crash_loop_threshold_defaults_to_three_and_takes_a_flag() -> None:
    assert parse_args(BASE).crash_loop_after == 3
    assert parse_args([*BASE, "--crash-loop-after", "2"]).crash_loop_after == 2


@pytest.mark.parametrize("bad", ["0", "-1", "101", "many"])
def test_a_hostile_threshold_is_refused_and_named(bad: str) -> None:
    with pytest.raises((ConfigError, SystemExit)) as got:
        parse_args([*BASE, "--crash-loop-after", bad])
    if got.type is ConfigError:
        assert "crash_loop_after" in str(got.value)
