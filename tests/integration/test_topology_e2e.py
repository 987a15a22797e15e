"""A whole topology end to end: real spout, real acker, bolts as real Spark streaming queries."""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from examples.faults import FailEveryKth, ForgetEveryKth
from examples.wordcount import SplitSentence, WordCount
from services.bolts.batch_marks import DIRECTORY, last_done
from squall.core.control.scheduler import with_parallelism
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.grouping import edge_flag
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import acker_topic
from squall.kafka import ensure_topics
from squall.processes import child_pids, die_with_parent
from tests.integration.helpers import (
    ScriptedBolt,
    ServiceProcess,
    clients,
    committed_offsets,
    produce_source,
    wait_for,
)

pytestmark = pytest.mark.integration
SOURCE_PARTS = 2


def word_count(name: str, source: str, split: type = SplitSentence, timeout_s: float = 30,
               k: int = 5, state_dir: str = "") -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", split, 2, config={"k": k, "state_dir": state_dir}
               ).shuffle_grouping("sentences")
    b.set_bolt("count", WordCount, 2).fields_grouping("split", ["word"])
    # "report" is played by the test (a scripted bolt), so the counts can be read.
    b.set_bolt("report", "examples.wordcount:WordCount", 1,
               outputs={"default": ["word", "count"]}).global_grouping("count")
    return b.build(name, ackers=2, message_timeout_s=timeout_s)


class Run:
    def __init__(self, bootstrap: str, tmp: Path, spec: TopologySpec, source: str) -> None:
        self.bootstrap, self.tmp, self.spec, self.source = bootstrap, tmp, spec, source
        (tmp / "topology.json").write_text(spec.to_json())
        ensure_topics(clients(bootstrap), {source: SOURCE_PARTS})
        self.acker = ServiceProcess("services.acker", [
            "--topology", spec.name, "--tasks", "0,1", "--num-ackers", "2",
            "--bootstrap-servers", bootstrap, "--message-timeout-s", str(spec.message_timeout_s)],
            tmp / "acker.log")
        edges = [a for e in spec.edges_from("sentences") for a in ("--edge", edge_flag(e))]
        self.spout = ServiceProcess("services.spout", [
            "--topology", spec.name, "--component", "sentences", "--topics", source,
            "--tasks", "0", "--num-tasks", "1", "--num-ackers", "2", *edges,
            "--bootstrap-servers", bootstrap, "--commit-interval-s", "0.5", "--retry-initial-ms",
            "100", "--message-timeout-s", str(spec.message_timeout_s)], tmp / "spout.log")
        self.n_bolt_runs = 0

    def bolts(self, *extra: str) -> ServiceProcess:
        self.n_bolt_runs += 1
        return ServiceProcess("services.bolts", [
            "--topology-file", str(self.tmp / "topology.json"), "--components", "split,count",
            "--bootstrap-servers", self.bootstrap, "--checkpoint-dir", str(self.tmp / "ckpt"),
            "--master", "local[2]", "--trigger-ms", "100", *extra],
            self.tmp / f"bolts-{self.n_bolt_runs}.log", env={"PYSPARK_PYTHON": sys.executable})

    def report(self) -> ScriptedBolt:
        (e,) = self.spec.edges_from("count")
        return ScriptedBolt(self.bootstrap, e.topic, 1, acker_topic(self.spec.name), 2,
                            lambda v, n: "ack", keep_values=True)

    def feed_and_wait(self, lines: list[bytes], bolts: ServiceProcess) -> dict[str, float]:
        """Once the bolt queries run, feed ``lines`` and run the spout until all are committed.

        Trees must not wait for Spark to start: with a short message timeout that would
        time them all out (Storm's replay-storm trap). Returns the spout's metrics.
        """
        wait_for(lambda: "bolt queries running" in bolts.log_tail(200) or not bolts.alive(),
                 120, "the bolt queries")
        produce_source(self.bootstrap, self.source, lines, SOURCE_PARTS)
        with self.spout.start() as sp:
            wait_for(lambda: self.committed() >= len(lines) or not bolts.alive(), 240,
                     "every sentence committed")
            assert bolts.alive(), bolts.log_tail()
            return sp.metrics()

    def committed(self) -> int:
        return sum(max(o, 0) for o in committed_offsets(
            self.bootstrap, f"squall.{self.spec.name}.sentences", self.source, SOURCE_PARTS))


def _all_counted(bolts: ServiceProcess, lab: str, commits: Path) -> bool:
    done = len([f for f in commits.iterdir() if f.name.isdigit()])
    return done > 0 and bolts.metrics().get(f"squall_bolt_batches_total{{{lab}}}", 0) == done


def sentences(n: int) -> list[bytes]:
    return [f"the quick brown fox {i % 7} jumps over the lazy dog {i}".encode() for i in range(n)]


def highest_counts(values: Iterable[Sequence[Any]]) -> Counter[str]:
    top: Counter[str] = Counter()
    for word, n in values:
        top[str(word)] = max(top[str(word)], int(n))
    return top


def expected_counts(lines: list[bytes]) -> Counter[str]:
    return Counter(w for s in lines for w in s.decode().split())


@pytest.fixture
def run(bootstrap: str, tmp_path: Path) -> Any:
    name = f"wc{uuid.uuid4().hex[:6]}"
    return Run(bootstrap, tmp_path, word_count(name, f"src-{name}"), f"src-{name}")


@pytest.mark.parametrize("mode", ["fused", "unfused"])
def test_word_count_completes_every_tree_and_counts_every_word(run: Run, mode: str) -> None:
    """Fused: count runs in split's query (squall.core.topology.chains); unfused: a query each, the
    words through Kafka."""
    lines = sentences(400)
    extra = ["--no-fuse"] if mode == "unfused" else []
    # One Spark task runs both tasks of the query's head (its executors).
    head = "split" if mode == "fused" else "count"
    (run.tmp / "topology.json").write_text(with_parallelism(run.spec, {head: 1}).to_json())
    with run.acker.start(), run.report() as report, run.bolts(*extra) as bolts:
        m = run.feed_and_wait(lines, bolts)
        chains = "['split -> count']" if mode == "fused" else "['split', 'count']"
        assert f"(chains: {chains})" in bolts.log_tail(200)
        # The bolts job counts what its tasks did.
        split = f"component=split,topology={run.spec.name}"
        wait_for(lambda: bolts.metrics().get(f"squall_bolt_acked_total{{{split}}}", 0)
                 >= len(lines), 30, "the bolt reports")
        bm = bolts.metrics()
        assert bm[f"squall_bolt_executed_total{{{split}}}"] >= len(lines)
        assert bm[f"squall_bolt_emitted_total{{{split}}}"] >= sum(len(x.split()) for x in lines)
        count = f"component=count,topology={run.spec.name}"
        wait_for(lambda: bolts.metrics().get(f"squall_bolt_acked_total{{{count}}}", 0)
                 >= sum(len(x.split()) for x in lines), 30, "the count bolt's reports")
        assert bm[f"squall_bolt_query_active{{{split}}}"] == 1
        assert bm[f"squall_bolt_input_rows_total{{{split}}}"] > 0  # edge messages read
        # ... and where their time went, phase by phase, adding up to their whole time.
        phases = {p: bm.get("squall_bolt_task_phase_seconds_total{component=split,"
                            f"phase={p},topology={run.spec.name}}}", 0.0)
                  for p in ("input", "read", "execute", "produce", "flush")}
        assert all(v > 0 for v in phases.values()), phases
        total = bm[f"squall_bolt_execute_seconds_total{{{split}}}"]
        assert sum(phases.values()) == pytest.approx(total, rel=0.01)
        # Every micro-batch of each query counted (its commit log has one file a batch):
        # the listener is told of each, however close they come.
        for head in ("split", "count") if mode == "unfused" else ("split",):
            commits = run.tmp / "ckpt" / run.spec.name / head / "commits"
            lab = f"component={head},topology={run.spec.name}"
            wait_for(functools.partial(_all_counted, bolts, lab, commits), 30,
                     f"{head}'s micro-batches counted as its commit log has them")
    # Every way of running the tasks marks the micro-batches they finished (a re-run after
    # a crash is skipped, or its roots failed: services/bolts/batch_marks.py).
    marks = run.tmp / "ckpt" / run.spec.name / "split" / DIRECTORY
    assert max(last_done(str(marks), t) for t in range(2)) >= 0, sorted(marks.glob("*"))
    lab = f"component=sentences,topology={run.spec.name}"
    assert m[f"squall_spout_acked_total{{{lab}}}"] >= len(lines)
    replays = m[f"squall_spout_replayed_total{{{lab}}}"]
    # One (word, count) tuple per word occurrence; a replayed sentence counts its words again.
    seen = Counter(str(v[0]) for v in report.values)
    want = expected_counts(lines)
    assert set(seen) == set(want)
    assert all(seen[w] >= want[w] for w in want)
    words_per_sentence = max(len(line.split()) for line in lines)
    assert sum(seen.values()) <= sum(want.values()) + words_per_sentence * replays
    # The counts are the count tasks' state, which followed each task from one of Spark's
    # Python workers to the next: a word's highest count is its number of occurrences
    # (more only by replays). State split between workers would count short.
    top = highest_counts(report.values)
    assert all(top[w] >= want[w] for w in want), {w: (top[w], want[w]) for w in want
                                                  if top[w] < want[w]}
    assert sum(top.values()) <= sum(want.values()) + words_per_sentence * replays


def committed_or_dead(run: Run, bolts: ServiceProcess, n: int) -> bool:
    return run.committed() >= n or not bolts.alive()


def test_counts_follow_their_task_when_spark_runs_it_in_another_worker(run: Run) -> None:
    """Python workers not reused: each micro-batch of a task runs in a fresh process, so
    only the task's state in the database carries its counts from one micro-batch to the next."""
    lines, waves = sentences(300), 3
    size = len(lines) // waves
    with run.acker.start(), run.report() as report, \
            run.bolts("--conf", "spark.python.worker.reuse=false") as bolts:
        wait_for(lambda: "bolt queries running" in bolts.log_tail(200) or not bolts.alive(),
                 120, "the bolt queries")
        with run.spout.start():
            for k in range(waves):  # one wave at a time: several micro-batches per task
                produce_source(run.bootstrap, run.source, lines[k * size:(k + 1) * size],
                               SOURCE_PARTS)
                done = functools.partial(committed_or_dead, run, bolts, (k + 1) * size)
                wait_for(done, 240, f"wave {k + 1} committed")
                assert bolts.alive(), bolts.log_tail()
    want = expected_counts(lines)
    top = highest_counts(report.values)
    assert all(top[w] >= want[w] for w in want), {w: (top[w], want[w]) for w in want
                                                  if top[w] < want[w]}


def test_killing_the_spark_job_mid_stream_loses_nothing(run: Run) -> None:
    lines = sentences(600)
    with run.acker.start(), run.report() as report, run.spout.start():
        first = run.bolts().start()
        produce_source(run.bootstrap, run.source, lines, SOURCE_PARTS)
        wait_for(lambda: run.committed() > 0 or not first.alive(), 240, "the first commits")
        first.signal(signal.SIGKILL)
        first.wait()
        with run.bolts() as second:
            wait_for(lambda: run.committed() >= len(lines) or not second.alive(), 240,
                     "every sentence committed after the restart")
            assert second.alive(), second.log_tail()
    seen = Counter(str(v[0]) for v in report.values)
    want = expected_counts(lines)
    assert all(seen[w] >= want[w] for w in want), "a word was lost"
    # The second job went on from the first one's counts (the tasks' state in the database).
    top = highest_counts(report.values)
    assert all(top[w] >= want[w] for w in want), "a count started over"


def _fill(folder: Path) -> Path:
    """A file that takes every free byte of ``folder``'s file system; the file."""
    filler = folder / "filler"
    with filler.open("wb") as f:
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def test_a_full_checkpoint_folder_pauses_the_queries_in_place_and_loses_nothing(
        run: Run) -> None:
    """The checkpoint folder on a file system of its own (a small tmpfs) filled up mid-stream:
    the bolts job says which folder refuses writes, waits without exiting, and once the
    space is back starts its queries again from their checkpoints; every sentence is
    committed and counted."""
    ckpt = run.tmp / "ckpt"
    ckpt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "squall-test", str(ckpt)],
                   check=True, capture_output=True)
    try:
        lines = sentences(600)
        with run.acker.start(), run.report() as report, run.spout.start(), \
                run.bolts() as bolts:
            wait_for(lambda: "bolt queries running" in bolts.log_tail(200)
                     or not bolts.alive(), 180, "the bolt queries")
            produce_source(run.bootstrap, run.source, lines[:300], SOURCE_PARTS)
            wait_for(lambda: run.committed() >= 300 or not bolts.alive(), 240,
                     "the first half committed")
            filler = _fill(ckpt)
            produce_source(run.bootstrap, run.source, lines[300:], SOURCE_PARTS)
            wait_for(lambda: "the checkpoint folder refuses writes" in bolts.log_tail(400)
                     or not bolts.alive(), 120, "the job to see the full folder")
            assert bolts.alive(), bolts.log_tail()
            assert "No space left on device" in bolts.log_tail(400)
            filler.unlink()
            wait_for(lambda: run.committed() >= len(lines) or not bolts.alive(), 240,
                     "every sentence committed once the space is back")
            log = bolts.log_tail(400)
            assert bolts.alive() and "bolt queries started again from their checkpoints" in log
            assert run.n_bolt_runs == 1
        top = highest_counts(report.values)
        want = expected_counts(lines)
        assert top == want, "a word lost, counted twice or a count started over"
    finally:
        subprocess.run(["umount", "--lazy", str(ckpt)], check=False)


@pytest.mark.parametrize(("bolt", "reason", "timeout_s"), [
    (FailEveryKth, "failed", 30.0),  # an exception fails the input: fast replay
    (ForgetEveryKth, "timeout", 8.0),  # never acked: the acker times the tree out
])
def test_faulty_bolt_replays_exactly_the_affected_roots_which_then_complete(
        bootstrap: str, tmp_path: Path, bolt: type, reason: str, timeout_s: float) -> None:
    name = f"wc{uuid.uuid4().hex[:6]}"
    spec = word_count(name, f"src-{name}", bolt, timeout_s, k=5,
                      state_dir=str(tmp_path / "once"))
    run = Run(bootstrap, tmp_path, spec, f"src-{name}")
    lines = sentences(100)
    with run.acker.start(), run.report() as report, run.bolts() as bolts:
        m = run.feed_and_wait(lines, bolts)
        errors = bolts.metrics().get(f"squall_bolt_errors_total{{component=split,topology={name}}}",
                                     0.0)
    lab = f"component=sentences,topology={name}"
    multiples = len(range(0, 100, 5))
    # Every exception is counted (not only the last few of a micro-batch's).
    assert errors == (multiples if reason == "failed" else 0)
    assert m[f"squall_spout_failed_total{{component=sentences,reason={reason},topology={name}}}"] \
        >= multiples
    assert m[f"squall_spout_replayed_total{{{lab}}}"] >= multiples
    assert m[f"squall_spout_acked_total{{{lab}}}"] >= len(lines)
    assert m.get(f"squall_spout_dead_lettered_total{{{lab}}}", 0) == 0
    seen = Counter(str(v[0]) for v in report.values)
    assert seen["fox"] >= len(lines)


def test_squall_run_starts_and_stops_a_topology(bootstrap: str, tmp_path: Path) -> None:
    import subprocess

    import yaml

    doc = yaml.safe_load(Path("examples/join.yaml").read_text())
    name = f"tot{uuid.uuid4().hex[:6]}"
    doc["name"] = name
    doc["spouts"][0]["topics"] = f"numbers-{name}"
    topo = tmp_path / "join.yaml"
    topo.write_text(yaml.safe_dump(doc))
    log = open(tmp_path / "run.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "squall", "run", str(topo), "--bootstrap-servers", bootstrap,
         "--workdir", str(tmp_path / "run"), "--master", "local[2]"],
        stderr=log, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        preexec_fn=die_with_parent)
    try:
        wait_for(lambda: (tmp_path / "run" / "spout-numbers.log").exists(), 60, "the spout")
        ensure_topics(clients(bootstrap), {f"numbers-{name}": 1})
        produce_source(bootstrap, f"numbers-{name}", [str(i).encode() for i in range(31)], 1)
        # Every number is committed only once its total (anchored to three numbers) is acked;
        # the 31st, alone in its buffer, once a tick totals it.
        wait_for(lambda: committed_offsets(bootstrap, f"squall.{name}.numbers",
                                           f"numbers-{name}", 1) == [31] or proc.poll() is not None,
                 240, "every number committed")
        assert proc.poll() is None, (tmp_path / "run.log").read_text()[-2000:]
        # The bolts job dies: squall run restarts it (it no longer exits), nothing is lost.
        (bolts,) = child_pids(proc.pid, "services.bolts")
        os.kill(bolts, signal.SIGKILL)
        produce_source(bootstrap, f"numbers-{name}", [str(i).encode() for i in range(30)], 1)
        wait_for(lambda: committed_offsets(bootstrap, f"squall.{name}.numbers",
                                           f"numbers-{name}", 1) == [61] or proc.poll() is not None,
                 240, "every number committed after the restart")
        assert proc.poll() is None, (tmp_path / "run.log").read_text()[-2000:]
        assert re.search(r"bolts exited with -9 after [\d.]+ s; restarting in",
                         (tmp_path / "run.log").read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(90)
    assert code == 0, (tmp_path / "run.log").read_text()[-2000:]
    assert "stopping: the spouts drain" in (tmp_path / "run.log").read_text()
