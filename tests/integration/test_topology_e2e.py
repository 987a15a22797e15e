"""A whole topology end to end: real spout, real acker, bolts as real Spark streaming queries."""

from __future__ import annotations

import signal
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples.wordcount import SplitSentence, WordCount
from services.spout.settings import edge_flag
from squall.kafka import ensure_topics
from squall.topics import acker_topic
from squall.topology import TopologyBuilder, TopologySpec
from tests.integration.helpers import (
    ScriptedBolt,
    ServiceProcess,
    committed_offsets,
    produce_source,
    wait_for,
)

pytestmark = pytest.mark.integration
SOURCE_PARTS = 2


def word_count(name: str, source: str) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", SplitSentence, 2).shuffle_grouping("sentences")
    b.set_bolt("count", WordCount, 2).fields_grouping("split", ["word"])
    # "report" is played by the test (a scripted bolt), so the counts can be read.
    b.set_bolt("report", "examples.wordcount:WordCount", 1,
               outputs={"default": ["word", "count"]}).global_grouping("count")
    return b.build(name, ackers=2, message_timeout_s=30)


class Run:
    def __init__(self, bootstrap: str, tmp: Path, spec: TopologySpec, source: str) -> None:
        self.bootstrap, self.tmp, self.spec, self.source = bootstrap, tmp, spec, source
        (tmp / "topology.json").write_text(spec.to_json())
        ensure_topics(bootstrap, {source: SOURCE_PARTS})
        self.acker = ServiceProcess("services.acker", [
            "--topology", spec.name, "--tasks", "0,1", "--num-ackers", "2",
            "--bootstrap-servers", bootstrap], tmp / "acker.log")
        edges = [a for e in spec.edges_from("sentences") for a in ("--edge", edge_flag(e))]
        self.spout = ServiceProcess("services.spout", [
            "--topology", spec.name, "--component", "sentences", "--topics", source,
            "--tasks", "0", "--num-tasks", "1", "--num-ackers", "2", *edges,
            "--bootstrap-servers", bootstrap, "--commit-interval-s", "0.5"], tmp / "spout.log")
        self.n_bolt_runs = 0

    def bolts(self) -> ServiceProcess:
        self.n_bolt_runs += 1
        return ServiceProcess("services.bolts", [
            "--topology-file", str(self.tmp / "topology.json"), "--components", "split,count",
            "--bootstrap-servers", self.bootstrap, "--checkpoint-dir", str(self.tmp / "ckpt"),
            "--master", "local[2]", "--trigger-ms", "100"],
            self.tmp / f"bolts-{self.n_bolt_runs}.log", env={"PYSPARK_PYTHON": sys.executable})

    def report(self) -> ScriptedBolt:
        (e,) = self.spec.edges_from("count")
        return ScriptedBolt(self.bootstrap, e.topic, 1, acker_topic(self.spec.name), 2,
                            lambda v, n: "ack", keep_values=True)

    def committed(self) -> int:
        return sum(max(o, 0) for o in committed_offsets(
            self.bootstrap, f"squall.{self.spec.name}.sentences", self.source, SOURCE_PARTS))


def sentences(n: int) -> list[bytes]:
    return [f"the quick brown fox {i % 7} jumps over the lazy dog".encode() for i in range(n)]


def expected_counts(lines: list[bytes]) -> Counter[str]:
    return Counter(w for s in lines for w in s.decode().split())


@pytest.fixture
def run(bootstrap: str, tmp_path: Path) -> Any:
    name = f"wc{uuid.uuid4().hex[:6]}"
    return Run(bootstrap, tmp_path, word_count(name, f"src-{name}"), f"src-{name}")


def test_word_count_completes_every_tree_and_counts_every_word(run: Run) -> None:
    lines = sentences(400)
    with run.acker.start(), run.report() as report, run.bolts() as bolts, run.spout.start() as sp:
        produce_source(run.bootstrap, run.source, lines, SOURCE_PARTS)
        wait_for(lambda: run.committed() >= len(lines) or not bolts.alive(), 240,
                 "every sentence committed")
        assert bolts.alive(), bolts.log_tail()
        m = sp.metrics()
    lab = f"component=sentences,topology={run.spec.name}"
    assert m[f"squall_spout_acked_total{{{lab}}}"] >= len(lines)
    replays = m[f"squall_spout_replayed_total{{{lab}}}"]
    # One (word, count) tuple per word occurrence; a replayed sentence counts its words again.
    seen = Counter(str(v[0]) for v in report.values)
    want = expected_counts(lines)
    assert set(seen) == set(want)
    assert all(seen[w] >= want[w] for w in want)
    assert sum(seen.values()) <= sum(want.values()) + 10 * replays


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
