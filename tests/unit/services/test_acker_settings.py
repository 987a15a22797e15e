from __future__ import annotations

import pytest

from services.acker.settings import parse_args
from squall.core.errors import ConfigError
from squall.kafka import FETCH_WAIT_MS

BASE = ["--topology", "wordcount", "--tasks", "0,1", "--num-ackers", "2"]


def test_the_fetch_wait_defaults_to_the_brokers_safe_wait() -> None:
    assert parse_args(BASE).fetch_wait_max_ms == FETCH_WAIT_MS


def test_the_fetch_wait_is_a_flag_and_an_env_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_args([*BASE, "--fetch-wait-max-ms", "20"]).fetch_wait_max_ms == 20
    monkeypatch.setenv("SQUALL_ACKER_FETCH_WAIT_MAX_MS", "35")
    assert parse_args(BASE).fetch_wait_max_ms == 35


@pytest.mark.parametrize("bad", ["0", "10001"])
def test_a_fetch_wait_out_of_range_is_named(bad: str) -> None:
    with pytest.raises(ConfigError, match="fetch_wait_max_ms"):
        parse_args([*BASE, "--fetch-wait-max-ms", bad])


def test_the_topology_file_gives_the_ackers_what_the_topology_decides(
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["--topology-file", "examples/wordcount.yaml", "--tasks", "1"]
    s = parse_args(base)
    assert (s.topology, s.num_ackers, s.message_timeout_s, s.tasks) == (
        "wordcount", 2, 30.0, (1,))
    # The spout's and the ackers' message timeouts cannot disagree: only the file sets it.
    monkeypatch.setenv("SQUALL_ACKER_MESSAGE_TIMEOUT_S", "12")
    with pytest.raises(ConfigError, match=r"message_timeout_s is the topology's .* "
                                          r"SQUALL_ACKER_MESSAGE_TIMEOUT_S \('12'\)"):
        parse_args(base)
    monkeypatch.delenv("SQUALL_ACKER_MESSAGE_TIMEOUT_S")
    with pytest.raises(ConfigError, match="num_ackers is the topology's"):
        parse_args([*base, "--num-ackers", "3"])
