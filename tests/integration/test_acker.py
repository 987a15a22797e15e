"""The acker service on the real broker: results, timeouts, crash recovery, bad input, drain."""

from __future__ import annotations

import math
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.reliability.records import AckerRecord, Outcome, RecordKind
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.topology.topics import acker_topic, dlq_topic, results_topic
from squall.core.wire.internal import encode_progress
from squall.kafka import ensure_topics
from tests.integration.helpers import (
    ResultReader,
    ServiceProcess,
    clients,
    committed_offsets,
    consume,
    produce_acker_records,
    shuffled,
    wait_for,
)

pytestmark = pytest.mark.integration

SPOUT_TASKS = 3
F = ("v",)


def new_topology(bootstrap: str, n_ackers: int) -> str:
    topo = f"t{uuid.uuid4().hex[:8]}"
    ensure_topics(clients(bootstrap), {acker_topic(topo): n_ackers,
                                       results_topic(topo): SPOUT_TASKS, dlq_topic(topo): 1})
    return topo


def acker(bootstrap: str, topo: str, tmp: Path, tasks: str, n: int, timeout_s: float = 60,
          name: str = "acker", clock: str = "wall") -> ServiceProcess:
    """An acker alone: no bolts job tells it their progress, so its timeouts run on the wall
    clock (Storm's) unless a test sends progress marks itself (``clock="bolts"``)."""
    return ServiceProcess("services.acker", [
        "--topology", topo, "--tasks", tasks, "--num-ackers", str(n),
        "--message-timeout-s", str(timeout_s), "--bootstrap-servers", bootstrap,
        "--commit-interval-s", "0.2", "--timeout-clock", clock,
    ], tmp / f"{name}.log")


def random_trees(n: int, seed: int, fail_rate: float = 0.0) -> tuple[
        list[list[AckerRecord]], dict[int, Outcome]]:
    """Random tuple DAGs (fan-out, multi-anchoring across trees); records per tree in emit order."""
    rng = random.Random(seed)
    anch = Anchoring(lambda: rng.getrandbits(64) or 1)
    per_root: dict[int, list[AckerRecord]] = {}
    expected: dict[int, Outcome] = {}
    for _ in range(n // 4):
        live: list[Tuple] = []
        for _ in range(4):
            e = anch.spout_emit(rng.randrange(SPOUT_TASKS), rng.randint(1, 3))
            per_root[e.root] = [e.init]
            expected[e.root] = Outcome.ACKED
            live += [Tuple([0], F, a) for a in e.anchors]
        while live:
            t = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5 and len(live) < 12:
                parents = [t, *rng.sample(live, min(len(live), rng.randint(0, 1)))]
                live += [Tuple([0], F, a) for a in anch.emit(parents, rng.randint(1, 2))]
            recs = anch.fail(t) if rng.random() < fail_rate else anch.ack(t)
            for r in recs:
                per_root[r.root].append(r)
                if r.kind is RecordKind.FAIL:
                    expected[r.root] = Outcome.FAILED
    return list(per_root.values()), expected


@pytest.fixture
def reader(bootstrap: str) -> Iterator[list[ResultReader]]:
    made: list[ResultReader] = []
    yield made
    for r in made:
        r.close()


def read_results(bootstrap: str, topo: str, holder: list[ResultReader]) -> ResultReader:
    r = ResultReader(bootstrap, results_topic(topo), SPOUT_TASKS)
    holder.append(r)
    return r


def test_random_dags_out_of_order_complete_with_the_right_result(
        bootstrap: str, tmp_path: Path, reader: list[ResultReader]) -> None:
    topo = new_topology(bootstrap, 2)
    trees, expected = random_trees(2_000, seed=1, fail_rate=0.05)
    records = shuffled([r for t in trees for r in t], seed=2)  # acks before inits, interleaved
    results = read_results(bootstrap, topo, reader)
    with acker(bootstrap, topo, tmp_path, "0,1", 2) as proc:
        produce_acker_records(bootstrap, acker_topic(topo), 2, records, batch=64)
        wait_for(lambda: bool(results.poll() or True) and expected.keys() <= results.roots().keys(),
                 60, "a result for every root")
        m = proc.metrics()
    got = results.roots()
    for root, outcome in expected.items():
        outs = [r.outcome for r in got[root]]
        assert outs == [outcome], f"root {root}: {outs}, expected {outcome}"
    # Each result went to its spout task's partition.
    spout_of = {r.root: r.task for t in trees for r in t if r.kind is RecordKind.INIT}
    assert all(part == spout_of[r.root] == r.task for part, r in results.results)
    n_failed = sum(o is Outcome.FAILED for o in expected.values())
    assert m[f"squall_acker_trees_total{{outcome=acked,topology={topo}}}"] == \
        len(expected) - n_failed
    assert m[f"squall_acker_trees_total{{outcome=failed,topology={topo}}}"] == n_failed
    assert m[f"squall_acker_records_total{{kind=init,topology={topo}}}"] == len(expected)
    assert m[f"squall_acker_complete_latency_seconds_count{{topology={topo}}}"] == len(expected)


def test_unfinished_trees_time_out_as_fail_results(
        bootstrap: str, tmp_path: Path, reader: list[ResultReader]) -> None:
    topo = new_topology(bootstrap, 1)
    trees, _ = random_trees(200, seed=3)
    # Storm's testTimeout: every other tree misses its last ack.
    records = [r for i, t in enumerate(trees) for r in (t if i % 2 else t[:-1])]
    roots = [t[0].root for t in trees]
    results = read_results(bootstrap, topo, reader)
    with acker(bootstrap, topo, tmp_path, "0", 1, timeout_s=1.0) as proc:
        produce_acker_records(bootstrap, acker_topic(topo), 1, records)
        wait_for(lambda: bool(results.poll() or True) and len(results.roots()) == len(roots),
                 30, "every tree decided")
        # The pending gauge is refreshed at the next watermark commit (every 0.2 s here).
        pending = f"squall_acker_pending_trees{{task=0,topology={topo}}}"
        wait_for(lambda: proc.metrics().get(pending) == 0, 10, "the pending gauge refreshed")
        m = proc.metrics()
    got = {root: [r.outcome for r in rs] for root, rs in results.roots().items()}
    for i, root in enumerate(roots):
        assert got[root] == [Outcome.ACKED if i % 2 else Outcome.TIMED_OUT]
    assert m[f"squall_acker_trees_total{{outcome=timed_out,topology={topo}}}"] == 100
    assert m[pending] == 0


def test_on_the_bolts_clock_only_processed_time_counts(
        bootstrap: str, tmp_path: Path, reader: list[ResultReader]) -> None:
    """Trees whose bolts have not said how far they got never time out (they are queued,
    not lost); once a progress mark says the bolts processed past emit + T, they do."""
    topo = new_topology(bootstrap, 1)
    trees, _ = random_trees(40, seed=5)
    records = [r for i, t in enumerate(trees) for r in (t if i % 2 else t[:-1])]
    results = read_results(bootstrap, topo, reader)
    with acker(bootstrap, topo, tmp_path, "0", 1, timeout_s=1.0, clock="bolts") as proc:
        produce_acker_records(bootstrap, acker_topic(topo), 1, records)
        wait_for(lambda: bool(results.poll() or True) and len(results.roots()) == 20, 30,
                 "the complete trees acked")
        started = time.monotonic()
        while time.monotonic() - started < 3.0:  # three timeouts of wall time go by...
            results.poll()
            assert len(results.roots()) == 20  # ...and nothing times out
        assert math.isnan(proc.metrics()[
            f"squall_acker_timeout_clock_delay_seconds{{task=0,topology={topo}}}"])
        p = Producer({"bootstrap.servers": bootstrap})
        p.produce(acker_topic(topo), encode_progress("bolts:", int(time.time() * 1000)),
                  partition=0)
        p.flush(10)
        wait_for(lambda: bool(results.poll() or True) and len(results.roots()) == 40, 30,
                 "the unfinished trees timed out")
    outcomes = [rs[0].outcome for rs in results.roots().values()]
    assert outcomes.count(Outcome.TIMED_OUT) == 20


def test_sigkill_and_restart_loses_no_completion(
        bootstrap: str, tmp_path: Path, reader: list[ResultReader]) -> None:
    topo = new_topology(bootstrap, 2)
    trees, expected = random_trees(4_000, seed=4)
    # Causal order per tree (its init first); trees start in order and interleave
    # with the ~200 trees around them, as a live stream does.
    rng = random.Random(5)
    waiting = [list(t) for t in trees]
    active: list[list[AckerRecord]] = []
    records: list[AckerRecord] = []
    while waiting or active:
        while waiting and len(active) < 200:
            active.append(waiting.pop(0))
        q = active[rng.randrange(len(active))]
        records.append(q.pop(0))
        if not q:
            active.remove(q)
    cut = int(len(records) * 0.6)
    results = read_results(bootstrap, topo, reader)
    group, atopic = f"squall.{topo}.acker", acker_topic(topo)

    first = acker(bootstrap, topo, tmp_path, "0,1", 2, name="acker-1").start()
    try:
        produce_acker_records(bootstrap, atopic, 2, records[:cut], batch=50)
        # Mid-stream: some trees completed, a watermark committed, most trees pending.
        wait_for(lambda: bool(results.poll() or True) and len(results.roots()) > 100
                 and min(committed_offsets(bootstrap, group, atopic, 2)) > 0,
                 30, "first results and a committed watermark")
        m1 = first.metrics()
        pending_at_kill = sum(v for k, v in m1.items()
                              if k.startswith("squall_acker_pending_trees"))
        first.signal(signal.SIGKILL)
        first.wait()
    finally:
        first.stop()
    # every completion the first acker published, however far behind the reader was
    wait_for(results.caught_up, 30, "the results published before the kill")
    done_before = len(results.roots())
    assert pending_at_kill > 50, "the kill must hit trees in flight"
    produce_acker_records(bootstrap, atopic, 2, records[cut:], batch=50)
    with acker(bootstrap, topo, tmp_path, "0,1", 2, name="acker-2") as second:
        wait_for(lambda: bool(results.poll() or True) and expected.keys() <= results.roots().keys(),
                 60, "every tree completed after the restart")
        m = second.metrics()
    outcomes = {r.outcome for rs in results.roots().values() for r in rs}
    assert outcomes == {Outcome.ACKED}, "no tree may fail or time out because of the crash"
    duplicates = sum(len(rs) - 1 for rs in results.roots().values())
    assert duplicates <= done_before  # at most the trees finished before the crash, again
    # The restarted acker rebuilt from its watermark, not from offset 0.
    assert m[f"squall_acker_records_total{{kind=init,topology={topo}}}"] < len(expected)


def test_bad_records_are_skipped_dead_lettered_and_counted(
        bootstrap: str, tmp_path: Path, reader: list[ResultReader]) -> None:
    topo = new_topology(bootstrap, 1)
    trees, expected = random_trees(400, seed=6)
    records = [r for t in trees for r in t]
    garbage = [b"", b"not a batch", b"SQAK" + b"\x01" * 30]
    results = read_results(bootstrap, topo, reader)
    with acker(bootstrap, topo, tmp_path, "0", 1) as proc:
        p = Producer({"bootstrap.servers": bootstrap})
        half = len(records) // 2
        produce_acker_records(bootstrap, acker_topic(topo), 1, records[:half])
        for g in garbage:
            p.produce(acker_topic(topo), g, partition=0)
        p.produce(acker_topic(topo), None, partition=0)  # a tombstone-like empty message
        assert p.flush(10) == 0
        produce_acker_records(bootstrap, acker_topic(topo), 1, records[half:])
        wait_for(lambda: bool(results.poll() or True) and expected.keys() <= results.roots().keys(),
                 30, "every tree completed despite bad records")
        assert proc.alive()
        m = proc.metrics()
    assert m[f"squall_acker_bad_records_total{{topology={topo}}}"] == len(garbage) + 1
    letters = consume(bootstrap, dlq_topic(topo), len(garbage) + 1)
    reasons = [DeadLetterHeaders.from_headers(m.headers() or []) for m in letters]
    assert [m.value() or b"" for m in letters] == [*garbage, b""]
    assert all(d.topic == acker_topic(topo) and d.component == "__acker" for d in reasons)
    assert "shorter than the header" in reasons[1].reason
    assert "empty message" in reasons[3].reason
    assert len({d.offset for d in reasons}) == len(reasons)


def test_sigterm_flushes_commits_and_exits_zero(
        bootstrap: str, tmp_path: Path, reader: list[ResultReader]) -> None:
    topo = new_topology(bootstrap, 1)
    trees, expected = random_trees(200, seed=7)
    results = read_results(bootstrap, topo, reader)
    proc = acker(bootstrap, topo, tmp_path, "0", 1).start()
    sent = produce_acker_records(bootstrap, acker_topic(topo), 1, [r for t in trees for r in t])
    wait_for(lambda: bool(results.poll() or True) and expected.keys() <= results.roots().keys(),
             30, "every tree completed")
    proc.signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    # Nothing pending: the committed watermark is the end of the partition.
    assert committed_offsets(bootstrap, f"squall.{topo}.acker", acker_topic(topo), 1) == [sent]
    assert "committing watermarks" in proc.log_tail()


def test_bad_settings_are_a_clear_error(tmp_path: Path) -> None:
    proc = ServiceProcess("services.acker", ["--topology", "bad name!", "--tasks", "0",
                                             "--num-ackers", "1"], tmp_path / "bad.log")
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "services.acker", *proc.args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert "topology name 'bad name!' must be letters" in r.stderr
    assert "Traceback" not in r.stderr
