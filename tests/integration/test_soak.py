"""The soak, short (benchmarks/soak.py): the word count fed at a steady rate, its memory
sampled; the long run is its own command (``python -m benchmarks.soak``, 10 minutes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from squall.processes import die_with_parent

pytestmark = [pytest.mark.integration]


def test_a_steady_feed_is_all_committed_with_no_queue_growing(tmp_path: Path) -> None:
    log, work = tmp_path / "soak.log", tmp_path / "work"
    with open(log, "wb") as err:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.soak", "--minutes", "1", "--rate", "500",
             "--settle-s", "30", "--sample-s", "10", "--workdir", str(work)],
            stdout=subprocess.PIPE, stderr=err, timeout=900, preexec_fn=die_with_parent,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    lines = out.stdout.decode().strip().splitlines()
    assert out.returncode == 0 and lines, log.read_text()[-3000:]
    s = json.loads(lines[-1])
    assert s["committed"] >= 5_000 + 500 * 50, s  # the feed kept its rate, all committed
    # What was in flight, not a backlog; if not, how the lag went, and why.
    assert s["lag_at_stop"] <= s["lag_bound"], (
        f"lag {s['lag_at_stop']} at the stop > {s['lag_bound']}; by sample "
        f"{[(x['t'], x['lag']) for x in s['samples']]}; trees replayed {s['replayed']}, timed "
        f"out {s['timed_out']}\n" + _warnings(work))
    # Nothing failed or dead-lettered, and the commits never stood still for long.
    assert s["failed"] == 0 and s["dead_lettered"] == 0, s
    assert s["longest_commit_stall_s"] <= 15, s["stalls"]
    assert set(s["rss_mb_end"]) == {"acker", "bolts", "spout"}, s
    assert all(v > 10 for v in s["rss_mb_end"].values()), s  # the trees were really measured
    # A short run on a loaded machine: memory may still be settling; a leak of the size
    # the long run looks for (a queue or cache growing with the input) shows even here.
    assert s["max_rss_growth"] <= 0.5, s


def _warnings(work: Path) -> str:
    """The processes' warnings and errors (the log lines that say what held the trees)."""
    out = []
    for name in ("spout", "acker", "bolts"):
        lines = (work / f"{name}.log").read_text(errors="replace").splitlines()
        out += [f"{name}: {ln[:300]}" for ln in lines
                if ("WARN" in ln or "ERROR" in ln or ln.startswith("%"))
                and "falling behind" not in ln][-15:]
    return "\n".join(out)
