"""The chaos suite, short (benchmarks/chaos.py): kills under load, and poison input.

The long runs are their own command (``python -m benchmarks.chaos``, defaults:
100,000 sentences); these check the same properties on a few thousand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from squall.processes import die_with_parent

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def chaos(tmp_path: Path, *args: str) -> dict[str, Any]:
    log = tmp_path / "chaos.log"
    with open(log, "wb") as err:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.chaos", "--workdir", str(tmp_path / "run"),
             "--recovery-timeout-s", "240", "--drain-timeout-s", "300", *args],
            stdout=subprocess.PIPE, stderr=err, timeout=1200, preexec_fn=die_with_parent,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    lines = out.stdout.decode().strip().splitlines()
    assert lines, f"no summary; exit {out.returncode}:\n{log.read_text()[-3000:]}"
    summary: dict[str, Any] = json.loads(lines[-1])
    summary["exit"] = out.returncode
    summary["log"] = log.read_text()[-3000:]
    return summary


def brief(s: dict[str, Any]) -> str:
    """What a failed assertion shows: the figures, then the run's log as it ended (pytest
    would cut the summary's repr short)."""
    figures = {k: v for k, v in s.items() if k != "log"}
    return f"{json.dumps(figures, sort_keys=True)}\n--- the run's log, its end ---\n{s['log']}"


def test_chaos_kills_under_load_lose_nothing_and_dead_letter_nothing(tmp_path: Path) -> None:
    # A message timeout shorter than a bolts job's recovery: waiting for it is not a timeout.
    s = chaos(tmp_path, "--sentences", "6000", "--rate", "300", "--message-timeout-s", "5")
    assert s["lost"] == 0, brief(s)
    assert s["dead_lettered"] == 0, brief(s)
    assert s["processes_back"], brief(s)
    # Every fault was recovered from (the acks flowed again), and replays stayed within what
    # was in flight (max spout pending per fault), not multiplied by timeouts.
    assert s["max_recovery_s"] is not None, brief(s)
    assert set(s["recovery_s"]) == {"spout", "acker", "bolts-driver", "api", "zookeeper"}
    assert s["replays"] <= s["replay_bound"], brief(s)
    # The bolts were away longer than the timeout while ~300 sentences/s kept coming: on
    # Storm's clock each of those would have timed out and replayed, again every 5 s.
    # Waiting is not a timeout here: what was replayed had been fed before a fault struck
    # (a killed spout re-emits its uncommitted trees; a re-run batch fails its roots).
    assert s["replays"] <= s["outstanding_at_faults"], brief(s)
    assert s["missing_words"] == 0, brief(s)
    assert s["exit"] == 0, brief(s)


def test_chaos_kills_with_exact_state_count_every_word_once(tmp_path: Path) -> None:
    """The same faults with the counts in Trident state: every word counted exactly once,
    whatever was replayed."""
    s = chaos(tmp_path, "--sentences", "6000", "--rate", "300", "--message-timeout-s", "5",
              "--exact")
    assert s["lost"] == 0 and s["dead_lettered"] == 0 and s["processes_back"], brief(s)
    assert set(s["recovery_s"]) == {"spout", "acker", "bolts-driver", "api", "zookeeper"}
    # The faults hit trees in flight (whether the spout replayed them or, acked before the
    # kill, recovered them from the results: a fast pipeline leaves few to replay) ...
    assert s["exact"] and s["outstanding_at_faults"] > 0, brief(s)
    # The driver was killed while a task produced (acks half sent): the re-run batch failed
    # its roots and the spout replayed them, exactly (counts_delta below).
    assert s["driver_killed_while_producing"], brief(s)
    assert s["counts_delta"] == 0 and s["missing_words"] == 0, brief(s)  # none counted twice
    # Replays stay within max spout pending per fault; the tighter bound (what was
    # outstanding as each fault struck) is the test above's, on the plain word count.
    assert s["replays"] <= s["replay_bound"], brief(s)
    assert s["exit"] == 0, brief(s)


def test_chaos_poison_is_dead_lettered_once_each_and_nothing_else(tmp_path: Path) -> None:
    s = chaos(tmp_path, "--poison", "--no-kills", "--sentences", "4000", "--rate", "400")
    assert s["poison"] > 0, brief(s)
    assert s["poison_dead_lettered_once"] == s["poison"], brief(s)
    assert s["healthy_dead_lettered"] == 0, brief(s)
    assert s["dead_lettered"] == s["poison"], brief(s)
    assert s["lost"] == 0 and s["missing_words"] == 0, brief(s)
    assert {"undecodable", "failed after 6 attempts"} <= set(s["poison_reasons"]), brief(s)
    assert s["exit"] == 0, brief(s)


def test_chaos_records_that_kill_or_hang_the_bolt_stall_nothing_for_long(
        tmp_path: Path) -> None:
    """Messages on which the split bolt exits its process or never returns: each found,
    retried and dead-lettered once with what it did; the rest complete, and the commits
    never stand still for more than a minute while behind."""
    s = chaos(tmp_path, "--poison-crash", "--poison-hang", "--no-kills", "--sentences", "6000",
              "--rate", "500")
    assert s["killing_poison"] > 0, brief(s)
    assert s["poison_dead_lettered_once"] == s["poison"] == s["dead_lettered"], brief(s)
    assert s["healthy_dead_lettered"] == 0 and s["lost"] == 0, brief(s)
    assert s["missing_words"] == 0, brief(s)
    assert s["max_stall_s"] <= 60, brief(s)
    assert s["exit"] == 0, brief(s)


def test_a_killed_broker_of_three_replicated_loses_nothing_and_counts_and_writes_once(
        tmp_path: Path) -> None:
    """Three Apache Kafka brokers, every topic at RF 3 with min.insync.replicas 2: the broker
    leading most partitions killed under the exact word count, whose every word the Kafka
    bolt also writes to a topic exactly once (its idempotent producer riding the leader
    change). Nothing lost or dead-lettered, every count exact, every word written once, no
    committed offset ever moves back. (The rolling restart and the freeze are the long
    run's, ``--broker-faults``; how fast commits move again is the benchmark's figure, not
    asserted here.)"""
    s = chaos(tmp_path, "--broker-faults", "broker-kill", "--exact", "--sink",
              "--sentences", "6000", "--rate", "300")
    assert [r["fault"] for r in s["faults"]] == ["broker-kill"], brief(s)
    assert all(r["recovery_s"] is not None for r in s["faults"]), brief(s)
    assert s["lost"] == 0 and s["dead_lettered"] == 0 and s["processes_back"], brief(s)
    assert s["counts_delta"] == 0 and s["missing_words"] == 0, brief(s)
    assert s["offset_regressions"] == 0, brief(s)
    assert s["sink_written"] > 0 and s["sink_delta"] == 0, brief(s)
    assert s["sink_repeated_ids"] == 0, brief(s)
