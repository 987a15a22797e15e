"""The spout service on the real broker, with the real acker and a scripted bolt."""

from __future__ import annotations

import json
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from services.spout.settings import SpoutSettings
from services.spout.startup import read_ahead
from squall import lease as lease_file
from squall.core.control.lease import Lease
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.topology.topics import acker_topic, dlq_topic, edge_topic
from squall.kafka import ensure_topics
from squall.lease import LEASE_FILE_ENV
from tests.integration.helpers import (
    ScriptedBolt,
    ServiceProcess,
    clients,
    committed_offsets,
    consume,
    produce_source,
    wait_for,
)

pytestmark = pytest.mark.integration
PARTS = 2


class Rig:
    """A topology of one spout, the real acker and a scripted bolt."""

    def __init__(self, bootstrap: str, tmp: Path, n: int, **spout_flags: Any) -> None:
        self.bootstrap, self.tmp = bootstrap, tmp
        self.topo = f"s{uuid.uuid4().hex[:8]}"
        self.source = f"src-{self.topo}"
        ensure_topics(clients(bootstrap), {self.source: PARTS})
        self.values = [f"m-{i}".encode() for i in range(n)]
        self.where = dict(zip(self.values, produce_source(bootstrap, self.source, self.values,
                                                          PARTS), strict=True))
        self.edge = edge_topic(self.topo, "spout", "default", "bolt")
        # The scripted bolt sends no progress marks: timeouts on the wall clock (Storm's).
        flags = {"num-ackers": "2", "scheme": "raw", "message-timeout-s": "10",
                 "timeout-clock": "wall",
                 "commit-interval-s": "0.2", "retry-initial-ms": "50", "retry-max-ms": "200",
                 **{k.replace("_", "-"): str(v) for k, v in spout_flags.items()}}
        self.spout_args = ["--topology", self.topo, "--topics", self.source, "--tasks", "0",
                           "--num-tasks", "1", "--edge", "bolt:2:shuffle",
                           "--bootstrap-servers", bootstrap]
        for k, v in flags.items():
            self.spout_args += [f"--{k}", v]
        self.n_ackers = 0 if flags.get("num-ackers") == "0" else 2
        self.acker = ServiceProcess("services.acker", [
            "--topology", self.topo, "--tasks", "0,1", "--num-ackers", "2",
            "--message-timeout-s", flags["message-timeout-s"], "--bootstrap-servers", bootstrap,
            "--commit-interval-s", "0.2", "--timeout-clock", "wall"], tmp / "acker.log")

    def spout(self, name: str = "spout") -> ServiceProcess:
        return ServiceProcess("services.spout", self.spout_args, self.tmp / f"{name}.log")

    def bolt(self, rule: Any) -> ScriptedBolt:
        ensure_topics(clients(self.bootstrap), {self.edge: 2})
        return ScriptedBolt(self.bootstrap, self.edge, 2, acker_topic(self.topo), 2, rule)

    def committed(self) -> list[int]:
        return committed_offsets(self.bootstrap, f"squall.{self.topo}.spout", self.source, PARTS)

    def all_committed(self) -> bool:
        ends = [sum(1 for p, _ in self.where.values() if p == part) for part in range(PARTS)]
        return self.committed() == ends


@pytest.fixture
def rig_factory(bootstrap: str, tmp_path: Path) -> Iterator[Any]:
    made: list[Rig] = []

    def make(n: int, **flags: Any) -> Rig:
        r = Rig(bootstrap, tmp_path, n, **flags)
        made.append(r)
        return r

    yield make
    for r in made:
        r.acker.stop()


def test_every_message_is_committed_exactly_when_its_tree_completes(rig_factory: Any) -> None:
    rig = rig_factory(600)
    rng = random.Random(1)
    slow = set(rng.sample(rig.values, 120))
    violations: list[str] = []
    stop = threading.Event()

    def monitor(bolt: ScriptedBolt) -> None:
        # Committed offset C of a partition: every message below C must have been acked.
        while not stop.is_set():
            committed = rig.committed()
            acked = bolt.acked_snapshot()
            for v, (p, o) in rig.where.items():
                if o < committed[p] and v not in acked:
                    violations.append(f"{v!r} at {p}@{o} committed ({committed}) before its ack")
            stop.wait(0.05)

    with rig.acker.start(), rig.bolt(lambda v, n: 1.0 if v in slow else "ack") as bolt, \
            rig.spout() as spout:
        t = threading.Thread(target=monitor, args=(bolt,))
        t.start()
        try:
            wait_for(rig.all_committed, 60, "every offset committed")
        finally:
            stop.set()
            t.join()
        m = spout.metrics()
    assert not violations, violations[:5]
    assert set(bolt.seen) == set(rig.values)
    assert m[f"squall_spout_acked_total{{component=spout,topology={rig.topo}}}"] == 600
    assert m[f"squall_spout_emitted_total{{component=spout,topology={rig.topo}}}"] == 600
    lab = f"component=spout,topology={rig.topo}"
    assert m[f"squall_spout_complete_latency_seconds_count{{{lab}}}"] == 600


def test_failed_messages_replay_then_dead_letter_and_the_partition_moves_on(
        rig_factory: Any) -> None:
    rig = rig_factory(200, max_retries=2)
    flaky = set(rig.values[10:20])  # fail once, then succeed
    poison = set(rig.values[50:53])  # always fail

    def rule(v: bytes, delivery: int) -> str:
        if v in poison or (v in flaky and delivery == 1):
            return "fail"
        return "ack"

    with rig.acker.start(), rig.bolt(rule) as bolt, rig.spout() as spout:
        wait_for(rig.all_committed, 60, "every offset committed despite the poison messages")
        m = spout.metrics()
    assert all(bolt.seen[v] == 2 for v in flaky)
    assert all(bolt.seen[v] == 3 for v in poison)  # 1 delivery + 2 retries
    lab = f"component=spout,topology={rig.topo}"
    assert m[f"squall_spout_replayed_total{{{lab}}}"] == len(flaky) + 2 * len(poison)
    assert m[f"squall_spout_dead_lettered_total{{{lab}}}"] == len(poison)
    failed = f"squall_spout_failed_total{{component=spout,reason=failed,topology={rig.topo}}}"
    assert m[failed] == len(flaky) + 3 * len(poison)
    letters = consume(rig.bootstrap, dlq_topic(rig.topo), len(poison))
    assert sorted(m.value() for m in letters) == sorted(poison)
    for msg in letters:
        d = DeadLetterHeaders.from_headers(msg.headers() or [])
        assert (d.partition, d.offset) == rig.where[msg.value()]
        assert d.attempts == 3
        assert d.reason == "failed after 3 attempts"
        assert d.topic == rig.source


def test_a_dead_letter_carries_the_source_messages_key_and_headers(rig_factory: Any) -> None:
    # The spout keeps a pending message with neither key nor headers as its value only
    # (services/spout/kept.py); one with either is kept whole, for its dead letter.
    rig = rig_factory(0, max_retries=1)
    p = Producer({"bootstrap.servers": rig.bootstrap})
    poison: dict[bytes, tuple[bytes | None, list[tuple[str, str | bytes | None]] | None]] = {
        b"keyed": (b"k-1", None), b"headed": (None, [("trace", b"t-9")]),
        b"both": (b"k-2", [("trace", b"t-7")]), b"bare": (None, None)}
    for i, (v, (key, headers)) in enumerate(poison.items()):
        p.produce(rig.source, v, key=key, headers=headers, partition=i % PARTS)
    assert p.flush(30) == 0
    rig.values = list(poison)
    with rig.acker.start(), rig.bolt(lambda v, n: "fail"), rig.spout():
        letters = consume(rig.bootstrap, dlq_topic(rig.topo), len(poison))
    assert sorted(m.value() for m in letters) == sorted(poison)
    for msg in letters:
        key, headers = poison[msg.value()]
        assert msg.key() == key
        read = [(k, v) for k, v in msg.headers() or [] if not k.startswith("squall.")]
        assert read == (headers or [])
        assert DeadLetterHeaders.from_headers(msg.headers() or []).attempts == 2


def test_undecodable_message_is_dead_lettered_without_stalling(rig_factory: Any) -> None:
    rig = rig_factory(0, scheme="json", fields="n")
    values = [b'{"n": %d}' % i for i in range(100)]
    values[37] = b"not json at all"
    rig.values = values
    rig.where = dict(zip(values, produce_source(rig.bootstrap, rig.source, values, PARTS),
                         strict=True))
    with rig.acker.start(), rig.bolt(lambda v, n: "ack") as bolt, rig.spout() as spout:
        wait_for(rig.all_committed, 60, "every offset committed past the poison message")
        m = spout.metrics()
        assert spout.alive()
    assert len(bolt.seen) == 99
    lab = f"component=spout,topology={rig.topo}"
    assert m[f"squall_spout_bad_records_total{{{lab}}}"] == 1
    (letter,) = consume(rig.bootstrap, dlq_topic(rig.topo), 1)
    assert letter.value() == b"not json at all"
    reason = DeadLetterHeaders.from_headers(letter.headers() or []).reason
    assert reason.startswith("undecodable: not JSON")


def test_sigkill_and_restart_lose_nothing_and_repeat_little(rig_factory: Any) -> None:
    rig = rig_factory(3000, max_spout_pending=200, message_timeout_s=300)
    # The first message is held until the restart, so its partition cannot commit: what is
    # acked after it there is acked-but-uncommitted at the kill, which the restart recovers.
    held, (part, off) = b"m-0", rig.where[b"m-0"]
    rule = lambda v, n: 1e9 if v == held and n == 1 else 0.02  # noqa: E731

    def acked_behind_the_held() -> int:
        return sum(1 for v in bolt.acked_snapshot() if rig.where[v][0] == part
                   and rig.where[v][1] > off)

    with rig.acker.start(), rig.bolt(rule) as bolt:
        first = rig.spout("spout-1").start()
        try:
            wait_for(lambda: len(bolt.acked_snapshot()) > 1000 and acked_behind_the_held() > 100,
                     60, "a third acked")
            assert rig.committed()[part] <= off
            first.signal(signal.SIGKILL)
            first.wait()
        finally:
            first.stop()
        behind = acked_behind_the_held()
        seen_before = sum(bolt.seen.values())
        with rig.spout("spout-2") as second:
            wait_for(rig.all_committed, 90, "every offset committed after the restart")
            m = second.metrics()
    assert set(bolt.acked_snapshot()) == set(rig.values), "a source message was lost"
    duplicates = sum(bolt.seen.values()) - len(rig.values)
    lab = f"component=spout,topology={rig.topo}"
    recovered = m[f"squall_spout_recovered_total{{{lab}}}"]
    # Only what was in flight at the kill comes again; acked-but-uncommitted offsets do not.
    assert duplicates <= 200, f"{duplicates} duplicates (seen before the kill: {seen_before})"
    assert recovered >= behind, f"{recovered} recovered; {behind} acked behind the held one"


def test_max_spout_pending_bounds_the_trees_in_flight(rig_factory: Any) -> None:
    rig = rig_factory(400, max_spout_pending=20)
    peak = [0.0]
    with rig.acker.start(), rig.bolt(lambda v, n: 0.05) as bolt, rig.spout() as spout:
        def pending() -> bool:
            m = spout.metrics()
            peak[0] = max(peak[0], m.get(
                f"squall_spout_pending{{component=spout,task=0,topology={rig.topo}}}", 0))
            return bool(rig.all_committed())
        wait_for(pending, 60, "every offset committed", every_s=0.02)
        m = spout.metrics()
    assert 0 < peak[0] <= 20
    assert len(bolt.seen) == 400
    assert m[f"squall_spout_paused_seconds_total{{component=spout,task=0,topology={rig.topo}}}"] > 0


@pytest.mark.parametrize("flags", [{"num_ackers": 0}, {"guarantee": "at_most_once"},
                                   {"guarantee": "no_guarantee"}])
def test_untracked_modes_commit_without_acks_and_send_untracked_tuples(
        rig_factory: Any, flags: dict[str, Any]) -> None:
    # The spout's default (ackers') clock: untracked modes never wait for it.
    rig = rig_factory(100, timeout_clock="bolts", **flags)
    with rig.bolt(lambda v, n: "fail") as bolt, rig.spout():
        # The bolt fails everything: untracked tuples are committed anyway, never replayed.
        wait_for(rig.all_committed, 30, "every offset committed without acks")
        # Committed at emit: the bolt may still be reading them.
        wait_for(lambda: bolt.untracked >= 100, 30, "every tuple at the bolt")
    assert bolt.untracked == 100
    assert all(n == 1 for n in bolt.seen.values())


def test_sigterm_drains_in_flight_trees_and_commits(rig_factory: Any) -> None:
    rig = rig_factory(300)
    with rig.acker.start(), rig.bolt(lambda v, n: 0.3) as bolt:
        spout = rig.spout().start()
        wait_for(lambda: len(bolt.seen) == 300, 30, "every message emitted")
        spout.signal(signal.SIGTERM)
        assert spout.wait(30) == 0
    assert rig.all_committed(), "trees in flight at SIGTERM completed and were committed"
    assert "draining" in spout.log_tail()


def test_the_source_read_ahead_is_bounded(bootstrap: str) -> None:
    """A backlog stays in the broker: the spout's consumer fetches about ``read_ahead``
    records ahead per partition (and one fetch more), where librdkafka's defaults fetch
    the whole backlog into the process (~350 bytes of memory a record)."""
    topic, n, records, size = f"ahead-{uuid.uuid4().hex[:8]}", 60_000, 2_000, 200
    ensure_topics(clients(bootstrap), {topic: PARTS})
    produce_source(bootstrap, topic, [b"x" * size] * n, PARTS)

    def held(conf: dict[str, Any], at_least: int, then: int) -> list[int]:
        """Records fetched and not yet consumed, by librdkafka's statistics every 50 ms
        (its consumer queue): every report until one shows ``at_least``, and ``then``
        reports more. The consumer takes a record at most every 50 ms meanwhile."""
        seen: list[int] = []

        def stats(j: str) -> None:
            parts = [p for t in json.loads(j)["topics"].values()
                     for k, p in t["partitions"].items() if k != "-1"]
            seen.append(max((p["fetchq_cnt"] for p in parts), default=0))

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                      "enable.auto.commit": False, "statistics.interval.ms": 50,
                      "stats_cb": stats, **conf})
        try:
            c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])

            def after_poll(cond: Callable[[], bool]) -> Callable[[], bool]:
                def check() -> bool:
                    c.poll(0.05)  # serves the statistics callback
                    return cond()
                return check

            wait_for(after_poll(lambda: any(x >= at_least for x in seen)), 30,
                     f"{at_least} records fetched ahead")
            first = next(i for i, x in enumerate(seen) if x >= at_least)
            wait_for(after_poll(lambda: len(seen) >= first + then), 30,
                     f"{then} more statistics reports")
            return seen
        finally:
            c.close()

    # The control: without the bounds, the whole backlog comes into the process.
    held({}, n // 2, 0)
    # With them, a fetch (1 MiB) beyond the records asked for, at most.
    bound = PARTS * records + (1 << 20) // size
    ahead = held(read_ahead(records, SpoutSettings.model_fields["fetch_backoff_ms"].default),
                 records, 20)
    assert max(ahead) <= bound, (ahead, bound)


def produce_apart(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Each value in a record batch of its own, round-robin over the partitions: the embedded
    broker answers "the end of the log" with the base of its last batch plus one (Apache
    Kafka gives the end), so a batch of one makes the two agree."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % PARTS)
        assert p.flush(30) == 0


@pytest.mark.parametrize("start", ["latest", "group"])
def test_a_new_spout_starts_at_the_end_or_where_a_named_group_got_to(
        rig_factory: Any, bootstrap: str, start: str) -> None:
    """A topology's spout whose group committed nothing yet: with ``latest`` it reads only
    what comes after it started; with ``group:<id>``, from where that group got to (as a
    topology taking over from another consumer would)."""
    legacy = f"legacy-{uuid.uuid4().hex[:6]}"
    rig = rig_factory(0, start="latest" if start == "latest" else f"group:{legacy}")
    old = [f"old-{i}".encode() for i in range(20)]
    produce_apart(bootstrap, rig.source, old)  # offsets 0-9 on each partition
    if start == "group":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": legacy})
        c.commit(offsets=[TopicPartition(rig.source, p, 4) for p in range(PARTS)],
                 asynchronous=False)
        c.close()
    new = [f"new-{i}".encode() for i in range(20)]
    with rig.acker.start(), rig.bolt(lambda v, n: "ack") as bolt:
        with rig.spout("first") as first:
            wait_for(lambda: "where its group committed nothing" in first.log_tail(100), 60,
                     "the spout's start")
        # Stopped before anything new came: the start it chose was committed at once, so
        # the next spout resumes there (a later end would skip what comes meanwhile).
        produce_apart(bootstrap, rig.source, new)
        with rig.spout("second"):
            wait_for(lambda: rig.committed() == [20, 20], 60, "every new message committed")
    want = set(new) if start == "latest" else set(new) | set(old[8:])  # 4-9 of each partition
    assert set(bolt.seen) == want, sorted(set(bolt.seen) ^ want)[:5]


class Renewal(threading.Thread):
    """What a worker does for its tasks' lease (squall/core/control/lease.py): renew it
    every 0.1 s for 1 s ahead, while ``renewing`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.renewing, self.done = threading.Event(), threading.Event()
        self.deadline = 0
        self.renewing.set()

    def run(self) -> None:
        while not self.done.wait(0.1):
            if self.renewing.is_set():
                self.deadline = time.monotonic_ns() + 1_000_000_000
                lease_file.write(self.path, Lease(self.deadline))


def test_a_spout_that_wakes_with_its_lease_run_out_emits_and_commits_nothing(
        rig_factory: Any, tmp_path: Path) -> None:
    """The zombie: a spout frozen past its lease, woken with new messages waiting, sends no
    tuple and commits no offset until the lease is renewed; then it goes on."""
    rig = rig_factory(100)
    renewal = Renewal(tmp_path / "lease")
    renewal.start()
    spout = ServiceProcess("services.spout", rig.spout_args, tmp_path / "spout.log",
                           env={LEASE_FILE_ENV: str(renewal.path)})
    try:
        with rig.acker.start(), rig.bolt(lambda v, n: "ack") as bolt, spout.start():
            wait_for(rig.all_committed, 60, "the first messages committed")
            spout.signal(signal.SIGSTOP)
            renewal.renewing.clear()
            later = [f"late-{i}".encode() for i in range(50)]
            rig.where |= dict(zip(later, produce_source(rig.bootstrap, rig.source, later,
                                                        PARTS), strict=True))
            wait_for(lambda: time.monotonic_ns() > renewal.deadline, 10, "the lease ran out")
            before = rig.committed()
            spout.signal(signal.SIGCONT)
            wait_for(lambda: bool(spout.metrics()), 30, "the woken spout answering")
            seen = time.monotonic() + 3.0  # a held spout does nothing, however long it is
            while time.monotonic() < seen:
                assert rig.committed() == before, "a commit after the lease ran out"
                assert not set(later) & set(bolt.seen), "a tuple sent after it ran out"
                time.sleep(0.1)
            assert "lease ran out" in spout.log.read_text()
            renewal.renewing.set()
            rig.values += later
            wait_for(rig.all_committed, 60, "the late messages committed once renewed")
            assert set(later) <= set(bolt.seen)
    finally:
        renewal.done.set()
