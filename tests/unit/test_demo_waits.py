"""Which fetch waits the demo's workers get: a bounded burst's short ones, else none."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall.demo import BURST_FETCH_WAIT_MS, DemoSettings, fetch_wait_ms, worker_env
from squall.kafka import FETCH_WAIT_MS


def settings(sentences: int | None, rate: float) -> DemoSettings:
    return DemoSettings(Path("unused"), sentences, rate, 60.0)


def test_a_bounded_burst_gives_its_spout_and_acker_the_short_wait() -> None:
    env = worker_env(settings(20_000, 0.0))
    assert env == {"SQUALL_SPOUT_FETCH_WAIT_MAX_MS": str(BURST_FETCH_WAIT_MS),
                   "SQUALL_ACKER_FETCH_WAIT_MAX_MS": str(BURST_FETCH_WAIT_MS)}
    assert fetch_wait_ms(settings(20_000, 0.0)) == BURST_FETCH_WAIT_MS < FETCH_WAIT_MS


@pytest.mark.parametrize(("sentences", "rate"), [(None, 0.0), (None, 2_000.0), (20_000, 500.0)])
def test_an_open_ended_or_paced_run_keeps_the_services_waits(sentences: int | None,
                                                             rate: float) -> None:
    # Its partitions grow for as long as it runs: only the services' wait outlasts the
    # broker's look at them.
    assert worker_env(settings(sentences, rate)) == {}
    assert fetch_wait_ms(settings(sentences, rate)) == FETCH_WAIT_MS
